"""The report's counts and the red flags of SPEC §9, overlapping_values among them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import duckdb
import polars as pl
import pyarrow as pa

from .. import queries
from .report import FLAGS_SCHEMA, REJECTED_SCHEMA

if TYPE_CHECKING:
    from .checks import Loader

#: A share of the loaded rows (and a minimum count) above which one instant shared by many
#: rows looks like an export that stamped its own run time (SPEC §9).
SHARED_SHARE = 0.2
SHARED_MIN_ROWS = 100


def report_parts(loader: Loader, settings: dict[str, Any], *, extra_flags: pl.DataFrame | None) -> dict[str, Any]:
    """Counts, rejected rows and flags of a checked load; all but overlapping_values (see :func:`with_overlaps`)."""
    con = loader.con
    rejected = queries.frame(con, """
        SELECT __row AS row, _bad_field AS field, _bad_value AS value, _bad_reason AS reason
        FROM _bf_checked WHERE _bad_field IS NOT NULL
        UNION ALL SELECT * FROM _bf_fact_rejects ORDER BY row""").cast(REJECTED_SCHEMA)  # type: ignore[arg-type]
    con.execute(_COUNTS_SQL, {
        "now": loader.now, "share": SHARED_SHARE, "min_rows": SHARED_MIN_ROWS, "deciles": [i / 10 for i in range(11)],
    })
    con.execute(_FLAGS_SQL)
    ok, loaded, fixed, fact_rejects = con.sql(
        "SELECT ok, loaded, fixed, (SELECT count(*) FROM _bf_fact_rejects) FROM _bf_counts").fetchall()[0]
    flags = queries.frame(con, "SELECT flag, count, example_row FROM _bf_flags WHERE count > 0")
    if extra_flags is not None and extra_flags.height:
        flags = pl.concat([flags.cast(FLAGS_SCHEMA), extra_flags.cast(FLAGS_SCHEMA)])  # type: ignore[arg-type]
    return {"rows_read": loader.rows_read, "loaded": loaded, "rejected": rejected, "fixed": fixed,
            "duplicates": ok - loaded - fact_rejects, "flags": flags.cast(FLAGS_SCHEMA).sort("flag")}  # type: ignore[arg-type]

def with_overlaps(con: duckdb.DuckDBPyConnection, flags: pl.DataFrame, settings: dict[str, Any],
                  written_keys: pa.Table | None) -> pl.DataFrame:
    """``flags`` plus overlapping_values when raised, testing the single-valued keys with
    more than one value: those in ``written_keys`` (what the write saw, see
    :class:`ValueChanges`), or all of the load's keys when it is ``None``."""
    if written_keys is not None and written_keys.num_rows == 0:
        return flags  # no key changes value: nothing can overlap
    if written_keys is not None:
        con.register("_bf_written_keys", written_keys)
    multi = [p for p, d in settings["predicates"].items() if d["arity"] == "multi"]
    keys = _ALL_CHANGING_KEYS if written_keys is None else _WRITTEN_KEYS
    con.execute(_CANDIDATES_SQL.format(keys=keys), {"multi": multi})
    try:
        # The test pairs every two rows of a key: a part of the keys at a time keeps the pairs of
        # a large load within memory (one part up to _OVERLAP_ROWS candidate rows).
        rows = con.sql("SELECT count(*) FROM _bf_candidate_rows").fetchall()[0][0]
        parts = max(1, -(-rows // _OVERLAP_ROWS))
        per_part = [con.sql(_OVERLAP_SQL, params={"parts": parts, "part": part}).fetchall()[0]
                    for part in range(parts)]
    finally:
        con.execute("DROP TABLE IF EXISTS _bf_candidate_rows")
    n = sum(count for count, _ in per_part)
    if not n:
        return flags
    example = min(row for count, row in per_part if count)
    found = pl.DataFrame({"flag": ["overlapping_values"], "count": [n], "example_row": [example]},
                         schema=FLAGS_SCHEMA)
    return pl.concat([flags, found]).sort("flag")


# The red flags of SPEC §9 and the report's counts, as the tables _bf_counts (one row) and
# _bf_flags (flag, count, example_row; count 0 = not raised). Counts are of input rows.
_COUNTS_SQL = """
CREATE TEMP TABLE _bf_counts AS
WITH checked AS (
    SELECT count(*) FILTER (WHERE _bad_field IS NULL) AS ok,
           count(*) FILTER (WHERE recorded_at > $now OR retracted_at > $now) AS future_n,
           min(__row) FILTER (WHERE recorded_at > $now OR retracted_at > $now) AS future_row,
           count(*) FILTER (WHERE retracted_at < recorded_at) AS before_n,
           min(__row) FILTER (WHERE retracted_at < recorded_at) AS before_row,
           count(*) FILTER (WHERE _unreadable) AS unreadable_n, min(__row) FILTER (WHERE _unreadable) AS unreadable_row
    FROM _bf_checked
),
loaded AS (
    SELECT count(*) AS loaded, count(*) FILTER (WHERE _fixed) AS fixed, min(__row) FILTER (WHERE _fixed) AS fixed_row,
           count(*) FILTER (WHERE _no_start) AS no_start_n, min(__row) FILTER (WHERE _no_start) AS no_start_row,
           -- Candidates for an instant shared by more than a fifth of the rows: such an instant
           -- fills a run of more than n/5 of the n values sorted, and runs that long always
           -- hold one of the 11 values at the deciles (consecutive deciles are at most n/10 + 1
           -- apart, less than n/5 once n >= 10; a flag needs 100 rows). The deciles are a
           -- selection, not a sort or a group per instant; the candidates are counted exactly.
           quantile_disc(valid_from, $deciles) FILTER (WHERE valid_from IS NOT NULL AND NOT _fixed) AS from_candidates,
           quantile_disc(recorded_at, $deciles) AS recorded_candidates
    FROM _bf_rows
),
shared_from AS (
    SELECT r.valid_from AS t, count(*) AS c, min(r.__row) AS example FROM _bf_rows r
    WHERE list_contains((SELECT l.from_candidates FROM loaded l), r.valid_from) AND NOT r._fixed
    GROUP BY r.valid_from ORDER BY c DESC, t LIMIT 1
),
shared_recorded AS (
    SELECT r.recorded_at AS t, count(*) AS c, min(r.__row) AS example FROM _bf_rows r
    WHERE list_contains((SELECT l.recorded_candidates FROM loaded l), r.recorded_at)
    GROUP BY r.recorded_at ORDER BY c DESC, t LIMIT 1
),
shared AS (
    SELECT (SELECT CASE WHEN c > $share * loaded AND c >= $min_rows THEN c ELSE 0 END FROM shared_from) AS from_n,
           (SELECT example FROM shared_from) AS from_row,
           (SELECT CASE WHEN c > $share * loaded AND c >= $min_rows THEN c ELSE 0 END FROM shared_recorded)
               AS recorded_n,
           (SELECT example FROM shared_recorded) AS recorded_row
    FROM loaded
)
SELECT * EXCLUDE (from_candidates, recorded_candidates) FROM checked, loaded, shared
"""
#: Candidate rows one pass of the overlap test pairs (see with_overlaps).
_OVERLAP_ROWS = 1_000_000

# The overlapping_values flag (the same rule as check()): the revisions of the candidate keys
# with their belief intervals, and the rows whose value overlaps another fact's value of the
# same key in both valid and belief time. Candidates are the single-valued keys with more than
# one value in this load. Keys are matched by 64-bit hashes (integers compare far faster than
# text; a collision only adds a candidate, as the test compares the values). {keys} is a query
# of the candidates' hashes ``kh``: _WRITTEN_KEYS (the keys the write saw change value between
# adjacent sorted rows) or, when nothing is written, _ALL_CHANGING_KEYS.
_CANDIDATES_SQL = """
CREATE OR REPLACE TEMP TABLE _bf_candidate_rows AS
SELECT * FROM (
    SELECT r.__row, hash(coalesce(r.scope, 'default'), r.subject, r.predicate) AS kh,
           coalesce(r.scope, 'default') AS scope, r.subject, r.predicate,
           tm__fact_id(r.fact_id, r.recorded_at, r.__row, r.nonce) AS fact_id, r.object,
           r.valid_from, r.valid_to, r.recorded_at, r.retracted_at
    FROM _bf_rows r
    WHERE NOT list_contains($multi, r.predicate)
) AS c
WHERE c.kh IN (SELECT k.kh FROM ({keys}) k)
"""
# One part of the keys ($part of $parts, by key hash): the rows whose value overlaps another
# fact's value of the same key in both valid and belief time.
_OVERLAP_SQL = """
WITH revs AS (
    SELECT r.*, lead(r.recorded_at) OVER (PARTITION BY r.fact_id ORDER BY r.recorded_at) AS next_recorded_at
    FROM _bf_candidate_rows r
    WHERE r.kh % $parts = $part
),
believed AS (
    SELECT *, CASE WHEN retracted_at > recorded_at
                   THEN least(retracted_at, coalesce(next_recorded_at, retracted_at))
                   ELSE next_recorded_at END AS believed_until
    FROM revs WHERE retracted_at IS NULL OR retracted_at > recorded_at
)
SELECT count(*) AS n, min(__row) AS example FROM (
    SELECT a.__row FROM believed a JOIN believed b
      ON a.kh = b.kh AND a.scope = b.scope AND a.subject = b.subject AND a.predicate = b.predicate
     AND a.fact_id <> b.fact_id AND a.object IS DISTINCT FROM b.object
     AND tm_overlaps(a.recorded_at, a.believed_until, b.recorded_at, b.believed_until)
     AND tm_overlaps(a.valid_from, a.valid_to, b.valid_from, b.valid_to)
    GROUP BY a.__row)
"""
_ALL_CHANGING_KEYS = """
SELECT hash(coalesce(scope, 'default'), subject, predicate) AS kh FROM _bf_rows
WHERE NOT list_contains($multi, predicate)
GROUP BY kh HAVING min(hash(object)) <> max(hash(object))
"""
_WRITTEN_KEYS = "SELECT hash(w.scope, w.subject, w.predicate) AS kh FROM _bf_written_keys w"
_FLAGS_SQL = """
CREATE TEMP TABLE _bf_flags AS
SELECT unnest([
    {'flag': 'belief_from_future', 'count': future_n, 'example_row': future_row},
    {'flag': 'retracted_before_recorded', 'count': before_n, 'example_row': before_row},
    {'flag': 'fixed_span', 'count': fixed, 'example_row': fixed_row},
    {'flag': 'inferred_start', 'count': no_start_n, 'example_row': no_start_row},
    {'flag': 'shared_valid_from', 'count': coalesce(from_n, 0), 'example_row': from_row},
    {'flag': 'shared_recorded_at', 'count': coalesce(recorded_n, 0), 'example_row': recorded_row},
    {'flag': 'unreadable_time', 'count': unreadable_n, 'example_row': unreadable_row}
], recursive := true)
FROM _bf_counts
"""
