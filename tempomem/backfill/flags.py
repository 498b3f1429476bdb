"""The report's counts and the red flags of SPEC §9, overlapping_values among them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import polars as pl
import pyarrow as pa

from .. import queries
from ..connection import sql_parts
from .report import FLAGS_SCHEMA, REJECTED_SCHEMA

if TYPE_CHECKING:
    from .checks import Loader

#: A share of the loaded rows (and a minimum count) above which one instant shared by many
#: rows looks like an export that stamped its own run time (SPEC §9).
SHARED_SHARE = 0.2
SHARED_MIN_ROWS = 100
#: Candidate revisions one pass of the overlap test pairs (see with_overlaps).
_OVERLAP_ROWS = 1_000_000
#: A key with more candidate revisions than this has its overlaps counted, not paired
#: (backfill_flags.sql, part_revs): its pairs would grow with its revisions squared.
_BUSY_FROM = 64
_SQL = sql_parts("backfill_flags.sql")


def report_parts(loader: Loader, settings: dict[str, Any], *, extra_flags: pl.DataFrame | None) -> dict[str, Any]:
    """Counts, rejected rows and flags of a checked load; all but overlapping_values (see :func:`with_overlaps`)."""
    con = loader.con
    rejected = queries.frame(con, """
        SELECT __row AS row, _bad_field AS field, _bad_value AS value, _bad_reason AS reason
        FROM _bf_checked WHERE _bad_field IS NOT NULL
        UNION ALL SELECT * FROM _bf_fact_rejects ORDER BY row""").cast(REJECTED_SCHEMA)  # type: ignore[arg-type]
    con.execute(_SQL["counts"], {
        "now": loader.now, "share": SHARED_SHARE, "min_rows": SHARED_MIN_ROWS, "deciles": [i / 10 for i in range(11)],
    })
    con.execute(_SQL["flags"])
    ok, loaded, fixed, fact_rejects = con.sql(
        "SELECT ok, loaded, fixed, (SELECT count(*) FROM _bf_fact_rejects) FROM _bf_counts").fetchall()[0]
    flags = queries.frame(con, "SELECT flag, count, example_row FROM _bf_flags WHERE count > 0")
    if extra_flags is not None and extra_flags.height:
        flags = pl.concat([flags.cast(FLAGS_SCHEMA), extra_flags.cast(FLAGS_SCHEMA)])  # type: ignore[arg-type]
    return {"rows_read": loader.rows_read, "loaded": loaded, "rejected": rejected, "fixed": fixed,
            "duplicates": ok - loaded - fact_rejects, "flags": flags.cast(FLAGS_SCHEMA).sort("flag")}  # type: ignore[arg-type]


def with_overlaps(con: duckdb.DuckDBPyConnection, flags: pl.DataFrame, settings: dict[str, Any],
                  written: list[Path], written_keys: pa.Table) -> pl.DataFrame:
    """``flags`` plus overlapping_values when raised, testing the revisions of the Parquet files
    ``written`` (the load's, as the write made them) of the single-valued keys in
    ``written_keys``: those whose value changes between adjacent written rows (see
    :class:`~tempomem.backfill.write.ValueChanges`)."""
    if written_keys.num_rows == 0:
        return flags  # no key changes value: nothing can overlap
    con.register("_bf_written_keys", written_keys)
    multi = [p for p, d in settings["predicates"].items() if d["arity"] == "multi"]
    tables = ("_bf_candidate_revs", "_bf_part_revs", "_bf_overlapping", "_bf_busy", "_bf_dom", "_bf_dom_counts",
              "_bf_bounded", "_bf_believed_together")
    try:
        con.execute(_SQL["candidates"], {"files": [str(f) for f in written], "multi": multi})
        con.execute(_SQL["overlapping"])
        # The test pairs every two revisions of a key: a part of the keys at a time keeps the
        # pairs of a large load within memory (one part up to _OVERLAP_ROWS revisions).
        revisions = con.sql("SELECT count(*) FROM _bf_candidate_revs").fetchall()[0][0]
        parts = max(1, -(-revisions // _OVERLAP_ROWS))
        for part in range(parts):
            overlaps_of_part(con, parts=parts, part=part)
        n, example = con.sql(_SQL["overlap_rows"]).fetchall()[0]
    finally:
        for table in tables:
            con.execute(f"DROP TABLE IF EXISTS {table}")
        con.unregister("_bf_written_keys")
    if not n:
        return flags
    found = pl.DataFrame({"flag": ["overlapping_values"], "count": [n], "example_row": [example]},
                         schema=FLAGS_SCHEMA)
    return pl.concat([flags, found]).sort("flag")


def overlaps_of_part(con: duckdb.DuckDBPyConnection, *, parts: int, part: int, busy_from: int = _BUSY_FROM) -> None:
    """Add to ``_bf_overlapping`` the overlapping revisions of one part of ``_bf_candidate_revs``
    (backfill_flags.sql): the keys of few revisions paired, the busy ones counted."""
    con.execute(_SQL["part_revs"], {"parts": parts, "part": part, "busy_from": busy_from})
    for statement in ("overlap", "overlap_open", "busy_revisions", "dominance"):
        con.execute(_SQL[statement])
    # the two-dimensional counts take a level per doubling of the largest group
    largest = con.sql("SELECT coalesce(max(pos), 0) FROM _bf_dom").fetchall()[0][0]
    for level in range(int(largest).bit_length()):
        con.execute(_SQL["dominance_level"], {"m": level})
    for statement in ("overlap_bounded_open", "overlap_bounded_pairs"):
        con.execute(_SQL[statement])
