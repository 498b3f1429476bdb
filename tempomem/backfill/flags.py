"""The report's counts and the red flags of SPEC §9, overlapping_values among them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import duckdb
import polars as pl

from .. import overlaps, queries
from ..connection import sql_parts
from ..schema import positions
from .report import FLAGS_SCHEMA, REJECTED_SCHEMA

if TYPE_CHECKING:
    from .checks import Loader
    from .write import Written

#: A share of the loaded rows (and a minimum count) above which one instant shared by many
#: rows looks like an export that stamped its own run time (SPEC §9).
SHARED_SHARE = 0.2
SHARED_MIN_ROWS = 100
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
                  written: Written) -> pl.DataFrame:
    """``flags`` plus overlapping_values when raised, testing the revisions the load wrote
    (``written``, as the write made them) of the single-valued keys whose value changes between
    adjacent written rows (see :class:`~tempomem.backfill.write.ValueChanges`)."""
    if written.changed_keys.num_rows == 0:
        return flags  # no key changes value: nothing can overlap
    keys = written.changed_keys
    numbered = keys.append_column("k", positions(keys.num_rows))
    con.register("_bf_written_keys", numbered)  # the test compares keys by their number (overlaps.sql)
    con.register("_bf_written_rows", written.input_rows)
    multi = [p for p, d in settings["predicates"].items() if d["arity"] == "multi"]
    try:
        con.execute(_SQL["written_i"])
        con.execute(_SQL["candidates"], {"files": [str(f) for f in written.files], "multi": multi})
        overlaps.find(con)
        n, example = con.sql(_SQL["overlap_rows"], params={"files": len(written.files)}).fetchall()[0]
    finally:
        overlaps.drop(con)
        con.unregister("_bf_written_keys")
        con.unregister("_bf_written_rows")
    if not n:
        return flags
    found = pl.DataFrame({"flag": ["overlapping_values"], "count": [n], "example_row": [example]},
                         schema=FLAGS_SCHEMA)
    return pl.concat([flags, found]).sort("flag")
