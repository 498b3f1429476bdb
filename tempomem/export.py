"""Export a store's revisions as Parquet or CSV, in the shape :func:`tempomem.backfill` reads.

Every revision row is written (the ``revisions`` columns, ``believed_until`` included), so a
backfill of the file into a new store rebuilds the same facts and revisions to the
microsecond: ``status`` and ``superseded_at`` are read back as given, ``origin``,
``ingested_at``, ``revision`` and ``believed_until`` describe the old store and are ignored.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from .errors import TempomemError
from .queries import QUERIES

if TYPE_CHECKING:
    from .store import Memory

EXPORT_FORMATS = ("parquet", "csv")


def export(mem: Memory, out: str | os.PathLike[str], format: str = "parquet") -> int:
    """Write every revision of ``mem`` to the file ``out``; returns the number of rows.

    >>> _ = mem.assert_fact("checkout-api", "instance_type", "m5.xlarge")
    >>> tm.export.export(mem, folder / "memory.parquet")
    1
    >>> tm.open(folder / "copy.tm", create=True).backfill(folder / "memory.parquet").loaded
    1
    """
    if format not in EXPORT_FORMATS:
        raise TempomemError(f"format: must be one of {', '.join(EXPORT_FORMATS)}, got {format!r}")
    con = mem.connect()
    try:
        rel = con.sql(QUERIES[f"export_{format}"])
        count = con.sql("SELECT count(*) FROM revisions").fetchall()[0][0]
        if format == "parquet":
            rel.write_parquet(os.fspath(out), compression="zstd")
        else:
            rel.write_csv(os.fspath(out), header=True)
        return int(count)
    finally:
        con.close()
