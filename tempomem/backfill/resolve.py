"""``backfill(resolve=True)``: replay checked rows through the write path (SPEC §5, §9).

Every input row is an assertion at its ``recorded_at``, and a row's ``retracted_at`` a
correction, at that time, of the fact the assertion landed on. The operations are ordered by
time (assertions before corrections at one instant, then by input row) and applied set-based
by :mod:`tempomem.rounds`, each at its own time, so supersession, duplicates and unknown starts
are derived exactly as the write path derives them. Every resulting revision row is written in
one Delta commit, and the store clock does not move.

An assertion the write path refuses (a conflict under a ``reject`` policy, a belief time not
after the fact's latest revision) is left out and its row reported as rejected; the other rows
load. A refused correction (its fact is no longer believed) fails the whole load.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import duckdb
import polars as pl
import pyarrow as pa

from .. import rounds
from ..errors import TempomemError

if TYPE_CHECKING:
    from .report import Progress

# The operations of a replay, in the columns rounds.OP_COLUMNS and rounds.PAYLOAD_COLUMNS, with
# the defaults of writepath.new_assertion for what a row leaves out; `__row` stays for reports.
_OPS_SQL = """
CREATE OR REPLACE TEMP TABLE _tm_ops_in AS
WITH events AS (
    SELECT r.*, 0 AS part, r.recorded_at AS commit_time FROM _bf_rows AS r
    UNION ALL
    SELECT r.*, 1 AS part, r.retracted_at AS commit_time FROM _bf_rows AS r WHERE r.retracted_at IS NOT NULL
),
ordered AS (
    SELECT e.*, row_number() OVER (ORDER BY e.commit_time, e.part, e.__row) AS op FROM events AS e
)
SELECT o.op, CASE WHEN o.part = 0 THEN 'assert' ELSE 'correct' END AS kind, o.commit_time,
       coalesce(o.scope, 'default') AS scope, o.subject, o.predicate, o.object, o.valid_from, o.valid_to,
       coalesce(o.valid_from_inferred, false) AS valid_from_inferred, CAST(NULL AS TIMESTAMPTZ) AS reference_time,
       list_filter(coalesce(o.artifacts, []),
                   lambda a, i: list_position(coalesce(o.artifacts, []), a) = i) AS artifacts,
       CASE WHEN o.part = 1 THEN coalesce(o.retraction_reason, o.reason, 'retracted (backfill)')
            WHEN o.valid_to IS NOT NULL THEN o.reason END AS reason,
       CASE WHEN o.part = 1 THEN min(o.op) OVER (PARTITION BY o.__row) END AS target_op,
       coalesce(o.text, concat_ws(' ', o.subject, o.predicate, o.object)) AS text,
       coalesce(o.source, 'user') AS source, coalesce(o.confidence, 0.9) AS confidence,
       CAST(NULL AS VARCHAR) AS origin, o.attributes, o.embedding,
       coalesce(o.link_type, 'entity') AS link_type, coalesce(o.weight, 1.0) AS weight, o.__row
FROM ordered AS o
"""


@dataclass
class Replay:
    """The outcome of a replay before anything is written: revision rows and refused rows."""

    rows: pa.Table
    #: One row per refused input row: ``row``, ``field``, ``value``, ``reason`` (as ``BackfillReport.rejected``).
    rejected: pl.DataFrame


def replay(con: duckdb.DuckDBPyConnection, settings: dict[str, Any], *, origin: str, ingested_at: datetime,
           notify: Progress) -> Replay:
    """Apply ``_bf_rows`` through the write path; return the revisions to write and the refused rows.

    A refused assertion rejects its row (field ``object`` for a conflict, ``recorded_at`` for a
    belief time not after the fact's latest revision). A refused retraction (the fact it
    would retract is no longer believed) raises :class:`TempomemError` naming the input row.
    """
    con.execute(_OPS_SQL)
    try:
        rounds.load_stored(con)
        rules = {p: (d["arity"], d["policy"]) for p, d in settings["predicates"].items()}
        applied = rounds.apply(con, rules, settings["policy"], ingested_at=ingested_at, origin=origin)
        notify("write", applied.rows.num_rows)
        con.register("_tm_refused_ops", applied.refused)
        refused = con.sql("""
            SELECT o.__row AS "row", o.kind AS op_kind, f.kind, f.fact_id, o.object, o.recorded_at_text,
                   f.conflict_ids, f.conflict_objects
            FROM _tm_refused_ops AS f
            JOIN (SELECT i.op, i.__row, i.kind, i.object, i.reason,
                         strftime(i.commit_time, '%Y-%m-%dT%H:%M:%S.%f+00:00') AS recorded_at_text
                  FROM _tm_ops_in AS i) AS o ON o.op = f.op
            ORDER BY o.__row""").fetchall()
        con.unregister("_tm_refused_ops")
    finally:
        con.execute("DROP TABLE IF EXISTS _tm_ops_in")
        rounds.drop_stored(con)
    return Replay(applied.rows, _rejected(refused))


def _rejected(refused: list[tuple[Any, ...]]) -> pl.DataFrame:
    """The report's rows for the refused assertions; a refused correction is an error."""
    out = []
    for row, op_kind, kind, fact_id, obj, recorded_at, conflict_ids, conflict_objects in refused:
        if op_kind == "correct":
            why = ("its latest revision was recorded at or after this retraction" if kind == "clock"
                   else "it is no longer believed; it can no longer be changed")
            raise TempomemError(f"backfill (resolve=True), row {row}: fact_id: fact {fact_id}: {why}")
        if kind == "conflict":
            out.append({"row": row, "field": "object", "value": obj,
                        "reason": f"refused by the write path: overlapping value: {obj!r} overlaps "
                                  f"{conflict_objects} (fact {conflict_ids}) and the predicate's policy is reject"})
        else:
            out.append({"row": row, "field": "recorded_at", "value": recorded_at,
                        "reason": f"refused by the write path: fact {fact_id}: its latest revision was recorded "
                                  f"at or after {recorded_at}; the store clock is behind it"})
    return pl.DataFrame(out, schema={"row": pl.Int64, "field": pl.String, "value": pl.String, "reason": pl.String})
