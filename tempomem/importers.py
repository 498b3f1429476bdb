"""Importers: other memory systems' exports as thin mappings onto :meth:`tempomem.Memory.backfill` (SPEC §11).

The readers of the sources are in :mod:`tempomem.sources`; each importer here is
``mem.backfill(path, format=...)`` with the options a caller sets.

>>> report = tm.importers.graphiti(mem, "edges.json")  # doctest: +SKIP
>>> report = mem.backfill("history.db", format="mem0")    # doctest: +SKIP
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

    >>> tm.importers.graphiti(mem, "edges.json").loaded  # doctest: +SKIP
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

    >>> tm.importers.mem0(mem, "~/.mem0/history.db").loaded  # doctest: +SKIP
    """
    return mem.backfill(path, format="mem0", lenient=lenient, strict=strict, resolve=resolve, progress=progress)


def sqlite4ts(mem: Memory, path: str | os.PathLike[str], *, lenient: bool = False, strict: bool = False,
              resolve: bool = False, progress: ProgressLike = None) -> BackfillReport:
    """Import a four-timestamp SQLite store: table ``facts`` with epoch-second times (SPEC §11).

    ``asserted_at``→``recorded_at``; ``supersedes`` on a newer fact becomes the older fact's
    ``superseded_by`` (``superseded_at`` = the newer fact's ``asserted_at``); the rest by name.

    >>> tm.importers.sqlite4ts(mem, "facts.db").loaded  # doctest: +SKIP
    """
    return mem.backfill(path, format="sqlite4ts", lenient=lenient, strict=strict, resolve=resolve, progress=progress)


def generic(mem: Memory, path: str | os.PathLike[str], mapping: dict[str, str], *, format: str | None = None,
            lenient: bool = False, strict: bool = False, resolve: bool = False,
            progress: ProgressLike = None) -> BackfillReport:
    """Import a CSV/Parquet/JSON Lines file (or folder/glob) whose columns ``mapping`` renames.

    >>> tm.importers.generic(mem, "log.csv", {"entity": "subject", "ts": "recorded_at"})  # doctest: +SKIP
    """
    return mem.backfill(path, mapping=mapping, format=format, lenient=lenient, strict=strict, resolve=resolve,
                        progress=progress)


__all__ = ["FORMATS", "generic", "graphiti", "mem0", "sqlite4ts"]
