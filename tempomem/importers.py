"""Importers: other memory systems' exports as thin mappings onto :meth:`tempomem.Memory.backfill` (SPEC §11).

The readers of the sources are in :mod:`tempomem.sources`; each importer here is
``mem.backfill(path, format=...)`` with the options a caller sets.

>>> _ = (folder / "log.csv").write_text("entity,predicate,object,ts\\nsvc,owner,ana,2026-03-01\\n")
>>> tm.importers.generic(mem, folder / "log.csv", {"entity": "subject", "ts": "recorded_at"}).loaded
1
>>> again = mem.backfill(folder / "log.csv", mapping={"entity": "subject", "ts": "recorded_at"})  # the same call
>>> again.loaded, again.duplicates  # its one row is already stored
(0, 1)
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from .progress import ProgressLike
from .sources import FORMATS

if TYPE_CHECKING:
    from .backfill import BackfillReport
    from .store import Memory


def graphiti(mem: Memory, path: str | os.PathLike[str], *, lenient: bool = False, strict: bool = False,
             resolve: bool = False, progress: ProgressLike = None) -> BackfillReport:
    """Import Graphiti / Zep entity edges exported as JSON (SPEC §11).

    ``uuid``→``fact_id``, ``group_id``→``scope``, source name (else uuid)→``subject``,
    ``name``→``predicate``, target name (else uuid)→``object``, ``fact``→``text``,
    ``valid_at``/``invalid_at``→valid time, ``created_at``→``recorded_at``, episodes→
    ``artifacts``. An edge expired after it was created is two revisions. An edge whose
    ``valid_at`` equals its ``reference_time`` is flagged ``valid_at_is_reference_time``.

    >>> import json
    >>> edge = {"uuid": "e-1", "group_id": "acme", "source_name": "Alice", "target_name": "Acme",
    ...         "name": "WORKS_AT", "fact": "Alice works at Acme", "created_at": "2024-01-05T10:00:00Z",
    ...         "valid_at": "2023-01-10T00:00:00Z"}
    >>> _ = (folder / "edges.json").write_text(json.dumps([edge]))
    >>> tm.importers.graphiti(mem, folder / "edges.json").loaded
    1
    >>> mem.current("Alice", scope="acme").select("predicate", "object").rows()
    [('WORKS_AT', 'Acme')]
    """
    return mem.backfill(path, format="graphiti", lenient=lenient, strict=strict, resolve=resolve, progress=progress)


def mem0(mem: Memory, path: str | os.PathLike[str], *, lenient: bool = False, strict: bool = False,
         resolve: bool = False, progress: ProgressLike = None) -> BackfillReport:
    """Import mem0's ``history`` table from its SQLite file (SPEC §11).

    One lineage per ``memory_id`` (subject = memory_id, predicate ``memory``, object = the
    memory text). Events are ordered by event time, then ADD < UPDATE < DELETE. ADD and UPDATE
    open a belief; the next ADD/UPDATE supersedes it at its event time; DELETE retracts it.
    Valid time is unknown. An event with no readable time is rejected (SPEC §2); a DELETE
    with nothing to delete, or an unknown event, is flagged ``unmatched_mem0_event``.

    >>> import sqlite3
    >>> with sqlite3.connect(folder / "history.db") as db:
    ...     _ = db.execute("CREATE TABLE history (id TEXT, memory_id TEXT, old_memory TEXT, new_memory TEXT, "
    ...                    "event TEXT, created_at DATETIME, updated_at DATETIME, is_deleted INTEGER)")
    ...     _ = db.executemany("INSERT INTO history VALUES (?, ?, ?, ?, ?, ?, ?, ?)", [
    ...         ("h1", "m1", None, "Likes pizza", "ADD", "2024-05-01T09:00:00-07:00", None, 0),
    ...         ("h2", "m1", "Likes pizza", "Likes pasta", "UPDATE", "2024-05-01T09:00:00-07:00",
    ...          "2024-05-03T18:30:00-07:00", 0)])
    >>> db.close()
    >>> tm.importers.mem0(mem, folder / "history.db").loaded  # revisions: the UPDATE closes the ADD's
    3
    >>> mem.history("m1").select("object", "status").rows()
    [('Likes pizza', 'superseded'), ('Likes pasta', 'live')]
    """
    return mem.backfill(path, format="mem0", lenient=lenient, strict=strict, resolve=resolve, progress=progress)


def sqlite4ts(mem: Memory, path: str | os.PathLike[str], *, lenient: bool = False, strict: bool = False,
              resolve: bool = False, progress: ProgressLike = None) -> BackfillReport:
    """Import a four-timestamp SQLite store: table ``facts`` with epoch-second times (SPEC §11).

    ``asserted_at``→``recorded_at``; ``supersedes`` on a newer fact becomes the older fact's
    ``superseded_by`` (``superseded_at`` = the newer fact's ``asserted_at``); the rest by name.

    >>> import sqlite3
    >>> with sqlite3.connect(folder / "facts.db") as db:
    ...     _ = db.execute("CREATE TABLE facts (id INTEGER, subject TEXT, predicate TEXT, object TEXT, "
    ...                    "valid_from INTEGER, valid_to INTEGER, asserted_at INTEGER, supersedes INTEGER)")
    ...     _ = db.executemany("INSERT INTO facts VALUES (?, ?, ?, ?, ?, ?, ?, ?)", [
    ...         (1, "checkout-api", "instance_type", "m5.large", 1704067200, 1717200000, 1704153600, None),
    ...         (2, "checkout-api", "instance_type", "m5.xlarge", 1717200000, None, 1717286400, 1)])
    >>> db.close()
    >>> tm.importers.sqlite4ts(mem, folder / "facts.db").loaded
    2
    >>> mem.current("checkout-api")["object"].to_list()
    ['m5.xlarge']
    """
    return mem.backfill(path, format="sqlite4ts", lenient=lenient, strict=strict, resolve=resolve, progress=progress)


def generic(mem: Memory, path: str | os.PathLike[str], mapping: dict[str, str], *, format: str | None = None,
            lenient: bool = False, strict: bool = False, resolve: bool = False,
            progress: ProgressLike = None) -> BackfillReport:
    """Import a CSV/Parquet/JSON Lines file (or folder/glob) whose columns ``mapping`` renames.

    >>> _ = (folder / "log.csv").write_text("entity,predicate,object,ts\\nsvc,owner,ana,2026-03-01\\n")
    >>> report = tm.importers.generic(mem, folder / "log.csv", {"entity": "subject", "ts": "recorded_at"})
    >>> report.loaded, mem.current("svc")["object"].to_list()
    (1, ['ana'])
    """
    return mem.backfill(path, mapping=mapping, format=format, lenient=lenient, strict=strict, resolve=resolve,
                        progress=progress)


__all__ = ["FORMATS", "generic", "graphiti", "mem0", "sqlite4ts"]
