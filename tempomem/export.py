"""Export a store's revisions as Parquet or CSV, in the shape :func:`tempomem.backfill` reads.

Every revision row is written (the ``revisions`` columns, ``believed_until`` included), so a
backfill of the file into a new store rebuilds the same facts and revisions to the
microsecond: ``status`` and ``superseded_at`` are read back as given, ``origin``,
``ingested_at``, ``revision`` and ``believed_until`` describe the old store and are ignored.
The tombstones of erased facts are written too (the file is the store's whole record), and
backfill refuses them, naming each in its report: their content is gone.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import duckdb

from .backfill.source import format_of
from .errors import TempomemError
from .queries import QUERIES

if TYPE_CHECKING:
    from .store import Memory

EXPORT_FORMATS = ("parquet", "csv")


def export(mem: Memory, out: str | os.PathLike[str], format: str | None = None) -> int:
    """Write every revision of ``mem`` to the file ``out``; returns the number of rows.

    ``format`` is ``parquet`` or ``csv``; by default the one ``out``'s extension names (as
    backfill reads it back), Parquet for a name without one. A format other than the one the
    extension names is refused: backfill would read the file as another format.

    >>> _ = mem.assert_fact("checkout-api", "instance_type", "m5.xlarge")
    >>> tm.export.export(mem, folder / "memory.csv")
    1
    >>> tm.open(folder / "copy.tm", create=True).backfill(folder / "memory.csv").loaded
    1
    """
    chosen = format_for(out, format)
    con = mem.connect()
    try:
        rel = con.sql(QUERIES[f"export_{chosen}"])
        count = con.sql("SELECT count(*) FROM revisions").fetchall()[0][0]
        try:
            if chosen == "parquet":
                rel.write_parquet(os.fspath(out), compression="zstd")
            else:
                rel.write_csv(os.fspath(out), header=True)
        except duckdb.IOException as exc:  # a missing folder, no permission
            reason = str(exc).splitlines()[0].removeprefix("IO Error: ")
            raise TempomemError(f"out: cannot write {os.fspath(out)}: {reason}") from None
        return int(count)
    finally:
        con.close()


def format_for(out: str | os.PathLike[str], format: str | None) -> str:
    """The format :func:`export` writes ``out`` in (see there), or the error it raises.

    >>> format_for("memory.csv", None), format_for("memory", None), format_for("memory.pq", "parquet")
    ('csv', 'parquet', 'parquet')
    """
    if format is not None and format not in EXPORT_FORMATS:
        raise TempomemError(f"format: must be one of {', '.join(EXPORT_FORMATS)}, got {format!r}")
    read_as = format_of(out)
    chosen = format or (read_as if read_as in EXPORT_FORMATS else "parquet")
    if read_as not in (None, chosen):
        other = f" or export it as {read_as}" if read_as in EXPORT_FORMATS else ""
        raise TempomemError(f"out: backfill would read {os.fspath(out)} back as {read_as} (its extension), "
                            f"not {chosen}; name it .{chosen}{other}")
    return chosen
