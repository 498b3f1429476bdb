"""Writing a backfill as given: the revision rows derived in SQL, sorted, streamed into one
Parquet file in the table folder and committed as one Delta transaction (the clock stays)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from ..ids import CLAMPED_US, ID_US, generated_ids
from ..schema import EVENT_SCHEMA, PREVIOUS
from ..storage import BackgroundWriter, writer
from .report import Progress

if TYPE_CHECKING:
    from ..engine import Engine

# One revision per row from recorded_at; a row retracted later also gives a retracted revision
# at retracted_at (a row retracted at the instant it was recorded is one retracted revision).
# A large load is written in ranges of (scope, subject), [from, to), one statement each, in
# order (see _key_ranges). Sorting moves every column a row carries, so the rows are sorted
# while they are narrow: the columns the input lacks are left out until after it ({absent},
# put back as NULLs in `given`), and so are the columns computed from the row (a generated
# fact id, the default text, the constants, the prev_* of a retraction). When every fact is
# one row, the input rows are sorted ({row_order}) before they become revisions: a row's
# retraction shares its fact id and follows it. When rows share a fact_id, a fact's revisions
# interleave by belief time, so they are numbered by a window over the fact first and sorted
# after it ({revision_order}).
_REVISIONS_SQL = """
WITH ranged AS (
    SELECT r.* EXCLUDE (_fixed, _no_start{absent}) FROM _bf_rows r
    -- the key range being written: [from, to) in (scope, subject) order; NULL = unbounded
    WHERE ($from_scope IS NULL OR coalesce(r.scope, 'default') > $from_scope
           OR (coalesce(r.scope, 'default') = $from_scope AND r.subject >= $from_subject))
      AND ($to_scope IS NULL OR coalesce(r.scope, 'default') < $to_scope
           OR (coalesce(r.scope, 'default') = $to_scope AND r.subject < $to_subject))
    {row_order}
),
given AS (
    SELECT *{absent_nulls} FROM ranged
),
derived AS (
    SELECT r.* REPLACE ({early_fact_id} AS fact_id),
           coalesce(r.scope, 'default') AS scope_, r.retracted_at = r.recorded_at AS born_retracted,
           CASE WHEN r.status IN ('live', 'ended', 'superseded') THEN r.status
                WHEN r.superseded_by IS NOT NULL THEN 'superseded'
                WHEN r.valid_to IS NOT NULL THEN 'ended' ELSE 'live' END AS belief_status,
           -- part 0 is the row as recorded; part 1 its retraction, when that came later. One
           -- scan makes both (a UNION of two reads would materialise the rows first).
           unnest(CASE WHEN r.retracted_at > r.recorded_at THEN [0, 1] ELSE [0] END) AS part
    FROM given r
),
revs AS (
    SELECT * REPLACE (
               CASE WHEN part = 1 THEN retracted_at ELSE recorded_at END AS recorded_at,
               CASE WHEN part = 1 OR born_retracted THEN retracted_at END AS retracted_at,
               CASE WHEN part = 1 OR born_retracted THEN 'retracted' ELSE belief_status END AS status,
               CASE WHEN part = 1 OR born_retracted THEN coalesce(retraction_reason, reason) ELSE reason END
                   AS reason,
               -- superseded when the row was recorded, unless it says when: both parts agree
               coalesce(superseded_at, CASE WHEN superseded_by IS NOT NULL THEN recorded_at END) AS superseded_at),
           recorded_at AS first_recorded_at_,
           CASE WHEN part = 0 AND retracted_at > recorded_at THEN retracted_at END AS folded_until_
    FROM derived
),
numbered AS (
    SELECT *, CAST({revision} AS INTEGER) AS revision_, {first_recorded_at} AS first_recorded_at__,
           {folded_until} AS folded_until__{previous_window}
    FROM revs
),
sorted AS (
    SELECT * FROM numbered {revision_order}
)
SELECT {late_fact_id} AS fact_id, scope_ AS scope, subject, predicate, object,
       coalesce(text, subject || ' ' || predicate || ' ' || object) AS text,
       valid_from, valid_to, valid_from_inferred, recorded_at, retracted_at, superseded_at,
       superseded_by, status, reason, source, confidence,
       CAST($origin AS VARCHAR) AS origin, CAST($ingested_at AS TIMESTAMPTZ) AS ingested_at,
       coalesce(artifacts, CAST([] AS VARCHAR[])) AS artifacts, attributes, embedding,
       coalesce(link_type, 'entity') AS link_type, coalesce(weight, 1.0) AS weight,
       revision_ AS revision, {previous}, first_recorded_at__ AS first_recorded_at, true AS folded,
       folded_until__ AS folded_until{id_parts}
FROM sorted
"""
# How revision number, first recorded time and belief end are derived: over every row of a
# fact when rows share a fact_id, from the row itself otherwise (no window to compute).
# So are the previous revision's columns (prev_*): the revision before in belief time, or, for
# the retraction (part 1) of a fact of one row, the row as recorded (part 0), whose columns the
# row still holds; those need no window, and are made after the sort.
_BY_ROW = {"revision": "row_number() OVER (PARTITION BY fact_id ORDER BY recorded_at, part)",
           "first_recorded_at": "min(recorded_at) OVER (PARTITION BY fact_id)",
           "folded_until": "lead(recorded_at) OVER (PARTITION BY fact_id ORDER BY recorded_at, part)",
           "previous_window": "".join(f", lag({n}) OVER (PARTITION BY fact_id ORDER BY recorded_at, part) AS prev_{n}_"
                                      for n in PREVIOUS),
           "previous": ", ".join(f"prev_{n}_ AS prev_{n}" for n in PREVIOUS),
           "row_order": "", "revision_order": "ORDER BY scope_, subject, predicate, {fact_order}, revision_"}
_PART_0 = {"recorded_at": "first_recorded_at_", "retracted_at": "CAST(NULL AS TIMESTAMPTZ)", "status": "belief_status"}
_ONE_ROW_PER_FACT = {"revision": "1 + part", "first_recorded_at": "first_recorded_at_",
                     "folded_until": "folded_until_", "previous_window": "",
                     "previous": ", ".join(f"CASE WHEN part = 1 THEN {_PART_0.get(n, n)} END AS prev_{n}"
                                           for n in PREVIOUS),
                     "row_order": "ORDER BY coalesce(r.scope, 'default'), r.subject, r.predicate, {row_fact_order}",
                     "revision_order": ""}
#: Columns the input may lack that _bf_rows still gives values (see candidates and merged in
#: backfill_checks.sql): they are not NULL throughout, so they stay in the sort.
_RECOMPUTED = ("valid_from_inferred", "artifacts")
# Where the fact id is made and what the sort compares. With ids in the input, the id (given
# or generated) is a sort key, so it is made first. Without, every id is generated and sorts
# like (recorded_at clamped as in tm__fact_id, row): the sort compares those two integers,
# which leave the query as the columns _id_us and _id_serial; the id text is made from them
# by generated_ids while the batch is written (a quarter of the write query's CPU in SQL).
# ``row_fact_order`` is the same order over an input row, before it becomes revisions.
_GIVEN_IDS = {"early_fact_id": "tm__fact_id(r.fact_id, r.recorded_at, r.__row, r.nonce)",
              "fact_order": "fact_id", "row_fact_order": "tm__fact_id(r.fact_id, r.recorded_at, r.__row, r.nonce)",
              "late_fact_id": "fact_id", "id_parts": ""}
_GENERATED_IDS = {"early_fact_id": "r.fact_id", "fact_order": f"{ID_US}, __row",
                  "row_fact_order": f"{CLAMPED_US.format('r.recorded_at')}, r.__row",
                  "late_fact_id": "CAST(NULL AS VARCHAR)",
                  "id_parts": f", {ID_US} AS _id_us, nonce + __row AS _id_serial"}


#: Rows one sort handles: a load with more is written as several sorted key ranges, so that
#: each sort fits in DuckDB's memory instead of spilling (a range's rows are held once).
_SORT_ROWS = 2_000_000
#: Rows sampled to place the range bounds (only the balance of the ranges depends on it).
_BOUND_SAMPLE = 100_000

# Bounds of about equal key ranges: the (scope, subject) starting each range but the first,
# from a sample. All rows of a subject share a range, so do all revisions of a fact. The sample
# takes whole vectors of the stage-1 table (SYSTEM): a quarter of the CPU of a row sample of
# the _bf_rows view, which reads every row. {percent} is a number computed from the row count
# (TABLESAMPLE takes no parameter), never input.
_BOUNDS_SQL = """
SELECT DISTINCT ON (tile) s, j FROM (
    SELECT s, j, ntile($ranges) OVER (ORDER BY s, j) AS tile
    FROM (SELECT coalesce(c.scope, 'default') AS s, c.subject AS j
          FROM _bf_checked c TABLESAMPLE SYSTEM ({percent} PERCENT) REPEATABLE (7) WHERE c._h IS NOT NULL)
) WHERE tile > 1 ORDER BY tile, s, j
"""


def _key_ranges(con: duckdb.DuckDBPyConnection, loaded: int) -> list[dict[str, str | None]]:
    """Parameters of the write's key ranges: [from, to) in (scope, subject) order, tiling all keys.

    One unbounded range when the load fits one sort. The sample only places the bounds:
    every row falls in exactly one range whatever they are (a subject too large for one
    range just makes a large range).
    """
    ranges = -(-loaded // _SORT_ROWS)
    percent = min(100.0, 100.0 * _BOUND_SAMPLE / loaded)
    sampled = con.sql(_BOUNDS_SQL.format(percent=float(percent)),
                      params={"ranges": ranges}).fetchall() if ranges > 1 else []
    bounds = sorted({tuple(b) for b in sampled})
    edges: list[tuple[str, str] | tuple[None, None]] = [(None, None), *bounds, (None, None)]
    return [{"from_scope": lo[0], "from_subject": lo[1], "to_scope": hi[0], "to_subject": hi[1]}
            for lo, hi in itertools.pairwise(edges)]


def write_as_given(engine: Engine, con: duckdb.DuckDBPyConnection, *, loaded: int, has_fact_id: bool,
                    absent: dict[str, str], origin: str, ingested_at: datetime, notify: Progress,
                    finish: Callable[[pa.Table], None]) -> int:
    """Write the revision rows as one Delta commit; keep the store clock where it was.

    DuckDB computes them sorted by the store's SORT_KEYS (a large load range by range of
    keys, in order); they stream out as Arrow batches of the store's row-group size (so that
    point queries prune row groups) into one Parquet file in the table folder, which is
    committed in one transaction (:meth:`Storage.add_files`). No row becomes a Python object:
    Arrow's Parquet writer encodes each batch (a third of the CPU DuckDB's COPY takes for them).
    Once the file is written and before it is committed, ``finish`` gets the keys whose value
    changes between adjacent rows (:class:`ValueChanges`): the report's overlap test.
    ``absent`` names the columns the input lacks (name: SQL type), kept out of the sort.
    """
    if loaded == 0:
        return 0
    # Rows sharing a given fact_id are revisions numbered by belief time; otherwise a fact
    # has one revision (two when retracted later).
    has_ids = has_fact_id and con.sql(
        "SELECT count(fact_id) > count(DISTINCT fact_id) FROM _bf_rows").fetchall()[0][0]
    ids = _GIVEN_IDS if has_fact_id else _GENERATED_IDS
    order = _BY_ROW if has_ids else _ONE_ROW_PER_FACT
    nulls = {name: sql_type for name, sql_type in absent.items() if name not in _RECOMPUTED}
    query = _REVISIONS_SQL.format(**{
        **order, **ids, "row_order": order["row_order"].format(**ids),
        "revision_order": order["revision_order"].format(**ids), "absent": "".join(f", {name}" for name in nulls),
        "absent_nulls": "".join(f", CAST(NULL AS {sql_type}) AS {name}" for name, sql_type in nulls.items())})
    last_api_us = engine.last_api_us()
    target = engine.storage.new_file_path()
    written = 0
    changes = ValueChanges()
    try:
        with BackgroundWriter(target) as out:
            for key_range in _key_ranges(con, loaded):
                rows = con.sql(query, params={"origin": origin, "ingested_at": ingested_at, **key_range})
                for batch in rows.to_arrow_reader(writer.ROW_GROUP_ROWS):
                    if not has_fact_id:
                        ids = generated_ids(batch.column("_id_us"), batch.column("_id_serial"))
                        batch = pa.RecordBatch.from_arrays([ids, *batch.columns[1:len(EVENT_SCHEMA)]],
                                                           names=EVENT_SCHEMA.names)
                    out.write(batch.cast(EVENT_SCHEMA))
                    changes.see(batch)
                    written += batch.num_rows
                notify("write", written)
        finish(changes.keys())
    except BaseException:
        target.unlink(missing_ok=True)
        raise
    engine.add_files([target], last_api_us)
    return written


class ValueChanges:
    """The keys (scope, subject, predicate) whose object differs between two adjacent rows of
    the written stream. The stream is sorted by key, so a key's rows are adjacent and a key
    holds more than one value exactly when it appears here: the candidates of the overlap
    test, found with a few vectorised comparisons per batch instead of a group per key.
    """

    _KEY = ("scope", "subject", "predicate")

    def __init__(self) -> None:
        self._found: list[pa.Table] = []
        self._last: pa.RecordBatch | None = None  # the previous batch's last row

    def see(self, batch: pa.RecordBatch) -> None:
        """Note the changes inside ``batch`` and between the previous batch and it."""
        if batch.num_rows == 0:
            return
        cols = batch.select([*self._KEY, "object"])
        # The boundary: the previous batch's last row before this one (a two-row batch).
        pairs = [cols] if self._last is None else [pa.concat_batches([self._last, cols.slice(0, 1)]), cols]
        for part in pairs:
            before, after = part.slice(0, part.num_rows - 1), part.slice(1)
            same_key = pc.and_(pc.and_(pc.equal(before["scope"], after["scope"]),
                                       pc.equal(before["subject"], after["subject"])),
                               pc.equal(before["predicate"], after["predicate"]))
            changed = pc.and_(same_key, pc.not_equal(before["object"], after["object"]))
            if pc.any(changed).as_py():
                self._found.append(pa.Table.from_batches([after.select(list(self._KEY)).filter(changed)]))
        self._last = cols.slice(cols.num_rows - 1)

    def keys(self) -> pa.Table:
        """The keys seen changing value, each once."""
        if not self._found:
            return pa.table({k: pa.array([], pa.string()) for k in self._KEY})
        return pa.concat_tables(self._found).group_by(list(self._KEY)).aggregate([])
