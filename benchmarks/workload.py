"""The side-by-side benchmark's workload: one logical history, written as a tempomem store and
exported flat for the other systems (``compare.py``).

    .venv/bin/python benchmarks/workload.py --revisions 1e6 --out /tmp/wl   # build one, print its shape

The history (deterministic: every random draw is a hash of the row's coordinates):
- subjects ``e0000000``…, each with the predicates ``p0``–``p3`` (single-valued) and ``m0``,
  ``m1`` (multi-valued): keys = subjects × 6;
- each key has ``FACTS_PER_KEY`` = 5 values, value i starting ``i × 30 days`` (+ up to 2 days)
  after a per-key start in 2026-01..02;
- each value is learned after an ingestion lag drawn log-uniformly from 1 s to 3 weeks;
- single-valued: value i is closed (``superseded``) by value i+1 when i+1 is recorded
  (two revisions); multi-valued: value i ends after 10–60 days and the end is learned after
  another lag (two revisions, ``ended``); the last value of every key stays open;
- corrections: the last value of ``correction_rate`` of the keys is retracted 1 h–2 weeks after
  it was learned (a third kind of revision).
So a key has 9 revisions, 10 when corrected (≈ 9.2 on average with the default 20%).

Outputs, under ``out/``:
- ``store/``: the tempomem store: one Parquet file per batch of subjects (about 1M rows, the
  store's row groups and compression), all committed as one Delta commit through ``Storage.add_files``
  under the writer lock, so 10M revisions never sit in memory at once; then folded
  (``Storage.fold``), which is the layout a store gives itself when it compacts: the rows still
  believed first, then the rest, each part sorted by ``schema.SORT_KEYS``;
- ``flat.parquet``: the same history in the four-timestamp design the other systems load:
  one row per *version* of a fact (``fact_id``, ``version``, ``subject``, ``predicate``,
  ``object``, ``valid_from``, ``valid_to``, ``asserted_at``, ``retracted_at``, ``single``), where a version's
  belief ends (``retracted_at``) when the next version is asserted or when it is corrected.
  A tempomem retraction revision is not a row there: it is the ``retracted_at`` of the version
  it retracts.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

import tempomem as tm
from tempomem.schema import EVENT_SCHEMA, PREVIOUS, PREVIOUS_COLUMNS, SORT_KEYS
from tempomem.storage import COMPRESSION, ROW_GROUP_ROWS

PREDICATES = ["p0", "p1", "p2", "p3", "m0", "m1"]
MULTI = {"m0": "multi", "m1": "multi"}
FACTS_PER_KEY = 5
CORRECTION_RATE = 0.2
T0 = "2026-01-01"
#: Rows per generated batch (a whole number of subjects each).
_BATCH_REVISIONS = 1_000_000

#: Columns of a generated revision row: the stored columns less those derived from the other
#: revisions of the fact (the previous revision's, first recorded time, belief end).
HISTORY_SCHEMA = pa.schema([f for f in EVENT_SCHEMA
                            if f.name not in (*PREVIOUS_COLUMNS, "first_recorded_at", "folded", "folded_until")])
_PREVIOUS_SQL = ", ".join(f"lag(h.{n}) OVER w AS prev_{n}" for n in PREVIOUS)


def as_stored(history: pa.Table) -> pa.Table:
    """Rows of complete fact histories (``HISTORY_SCHEMA``) as the store keeps them folded.

    What the write path and a fold store (``schema.PREVIOUS``, ``revisions.sql``): the previous
    revision's columns, first recorded time per fact and each revision's belief end, so the
    generated store needs no fold before it is read.
    """
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.register("history", history)
    return con.sql(f"""
        SELECT h.*, {_PREVIOUS_SQL}, min(h.recorded_at) OVER (PARTITION BY h.fact_id) AS first_recorded_at,
               true AS folded, lead(h.recorded_at) OVER w AS folded_until
        FROM history AS h
        WINDOW w AS (PARTITION BY h.fact_id ORDER BY h.revision)
        ORDER BY h.scope, h.subject, h.predicate, h.fact_id, h.revision
    """).to_arrow_table().cast(EVENT_SCHEMA)


# One batch of subjects [$lo, $hi): every revision row of their keys, in HISTORY_SCHEMA order.
# u(tag) is a uniform [0, 1) draw hashed from (subject, predicate, value, tag).
_EVENTS_SQL = f"""
WITH keys AS (
    SELECT s, printf('e%07d', s) AS subject, p.predicate, p.predicate LIKE 'm%' AS multi
    FROM range($lo, $hi) AS r(s), (SELECT unnest({PREDICATES}) AS predicate) AS p
),
v AS (
    SELECT k.*, i, printf('%s-%s-%d', k.subject, k.predicate, i) AS fact_id,
           (hash(k.subject, k.predicate, 0, 'start') % 1000000) / 1e6 AS u_start,
           (hash(k.subject, k.predicate, i, 'jit') % 1000000) / 1e6 AS u_jit,
           (hash(k.subject, k.predicate, i, 'lag') % 1000000) / 1e6 AS u_lag,
           (hash(k.subject, k.predicate, i, 'dur') % 1000000) / 1e6 AS u_dur,
           (hash(k.subject, k.predicate, i, 'end') % 1000000) / 1e6 AS u_end,
           (hash(k.subject, k.predicate, 0, 'fix') % 1000000) / 1e6 AS u_fix,
           (hash(k.subject, k.predicate, 0, 'fixlag') % 1000000) / 1e6 AS u_fixlag
    FROM keys AS k, range({FACTS_PER_KEY}) AS t(i)
),
f AS (          -- one row per value (fact), with its times in microseconds
    SELECT v.*,
           epoch_us(TIMESTAMPTZ '{T0}') + CAST(u_start * 40 * 86400e6 AS BIGINT)
               + i * 30 * 86400000000 + CAST(u_jit * 2 * 86400e6 AS BIGINT) AS vf,
           -- ingestion lag: log-uniform 1 s .. 21 days
           CAST(exp(ln(1e6) + u_lag * (ln(21 * 86400e6) - ln(1e6))) AS BIGINT) AS lag
    FROM v
),
g AS (
    SELECT f.*, vf + lag AS rec,
           lead(vf) OVER w AS next_vf, lead(vf + lag) OVER w AS next_rec, lead(fact_id) OVER w AS next_id,
           i = {FACTS_PER_KEY - 1} AS last,
           vf + CAST((10 + u_dur * 50) * 86400e6 AS BIGINT) AS end_vt,
           CAST(exp(ln(1e6) + u_end * (ln(21 * 86400e6) - ln(1e6))) AS BIGINT) AS end_lag,
           i = {FACTS_PER_KEY - 1} AND u_fix < $correction_rate AS corrected,
           CAST(exp(ln(3600e6) + u_fixlag * (ln(14 * 86400e6) - ln(3600e6))) AS BIGINT) AS fix_lag
    FROM f
    WINDOW w AS (PARTITION BY subject, predicate ORDER BY i)
),
r AS (          -- revision rows: (fact, revision, valid_to, recorded, retracted, superseded, status)
    SELECT g.*, 1 AS revision, NULL::BIGINT AS vt, rec AS rec_at, NULL::BIGINT AS retr,
           NULL::BIGINT AS sup_at, NULL AS sup_by, 'live' AS status, NULL AS reason
    FROM g
    UNION ALL   -- single-valued: closed by the next value when it is recorded
    SELECT g.*, 2, next_vf, next_rec, NULL, next_rec, next_id, 'superseded', 'superseded by ' || next_id
    FROM g WHERE NOT multi AND NOT last
    UNION ALL   -- multi-valued: the end is learned after a lag
    SELECT g.*, 2, end_vt, greatest(end_vt, rec) + end_lag, NULL, NULL, NULL, 'ended', 'ended'
    FROM g WHERE multi AND NOT last
    UNION ALL   -- corrections: the key's last value retracted
    SELECT g.*, 2, NULL, rec + fix_lag, rec + fix_lag, NULL, NULL, 'retracted', 'wrong value'
    FROM g WHERE corrected
)
SELECT fact_id, 'default' AS scope, subject, predicate, 'v' || i || '-' || (hash(fact_id) % 1000) AS object,
       subject || ' ' || predicate || ' v' || i AS text,
       make_timestamptz(vf) AS valid_from, make_timestamptz(vt) AS valid_to, false AS valid_from_inferred,
       make_timestamptz(rec_at) AS recorded_at, make_timestamptz(retr) AS retracted_at,
       make_timestamptz(sup_at) AS superseded_at, sup_by AS superseded_by, status, reason,
       'tool_verified' AS source, 0.9 AS confidence, 'backfill' AS origin, now() AS ingested_at,
       []::VARCHAR[] AS artifacts, NULL::VARCHAR AS attributes, NULL::FLOAT[] AS embedding,
       'entity' AS link_type, 1.0 AS weight, CAST(revision AS INTEGER) AS revision
FROM r
"""

# The four-timestamp export of one batch of events: one row per version, the retraction
# revisions folded into the `retracted_at` of the version they end.
_FLAT_SQL = """
SELECT fact_id, version, subject, predicate, object, valid_from, valid_to, asserted_at, retracted_at, single
FROM (
    SELECT e.fact_id, e.revision AS version, e.subject, e.predicate, e.object, e.valid_from, e.valid_to,
           e.recorded_at AS asserted_at,
           lead(e.recorded_at) OVER (PARTITION BY e.fact_id ORDER BY e.revision) AS retracted_at,
           e.predicate NOT LIKE 'm%' AS single, e.status
    FROM batch AS e
) AS x
WHERE x.status <> 'retracted'
ORDER BY subject, predicate, fact_id, version
"""


@dataclass(frozen=True)
class Workload:
    """A generated workload on disk: the store, the flat export and their shape."""

    out: Path
    revisions: int
    subjects: int

    @property
    def store(self) -> Path:
        return self.out / "store"

    @property
    def flat(self) -> Path:
        return self.out / "flat.parquet"

    def open(self) -> tm.Memory:
        return tm.open(self.store)


def subjects_for(revisions: int, correction_rate: float = CORRECTION_RATE) -> int:
    """How many subjects give about ``revisions`` revision rows."""
    per_key = 2 * FACTS_PER_KEY - 1 + correction_rate
    return max(1, round(revisions / per_key / len(PREDICATES)))


def build(out: Path, revisions: int, correction_rate: float = CORRECTION_RATE) -> Workload:
    """Generate the history of about ``revisions`` rows into ``out`` (store + flat export)."""
    out.mkdir(parents=True, exist_ok=True)
    subjects = subjects_for(revisions, correction_rate)
    per_batch = max(1, _BATCH_REVISIONS // (len(PREDICATES) * (2 * FACTS_PER_KEY)))
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    mem = tm.open(out / "store", create=True, predicates=MULTI)
    storage = mem._storage
    files: list[Path] = []
    flat_writer: pq.ParquetWriter | None = None
    with mem._engine.exclusive():
        for lo in range(0, subjects, per_batch):
            history = con.sql(_EVENTS_SQL, params={"lo": lo, "hi": min(subjects, lo + per_batch),
                                                   "correction_rate": correction_rate}).to_arrow_table()
            # whole histories, so stored folded as a backfill writes them
            events = as_stored(history.cast(HISTORY_SCHEMA))
            # the store's own layout: its row-group size and compression (as storage's writer properties)
            files.append(storage.new_file_path())
            pq.write_table(events, files[-1], row_group_size=ROW_GROUP_ROWS, compression=COMPRESSION)
            con.register("batch", events)
            flat = con.sql(_FLAT_SQL).to_arrow_table()
            con.unregister("batch")
            if flat_writer is None:
                flat_writer = pq.ParquetWriter(out / "flat.parquet", flat.schema, compression="zstd")
            flat_writer.write_table(flat, row_group_size=128 * 1024)
        storage.add_files(files)  # one atomic Delta commit of every batch file
        # then the layout the store gives itself when it compacts: a fold (believed rows first)
        storage.fold()
    if flat_writer is not None:
        flat_writer.close()
    return Workload(out, revisions=mem.sql("SELECT count(*) FROM _tm_events").fetchall()[0][0], subjects=subjects)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--revisions", type=float, default=1e5)
    parser.add_argument("--correction-rate", type=float, default=CORRECTION_RATE)
    parser.add_argument("--out", type=Path, required=True, help="an empty or new folder")
    args = parser.parse_args()
    t0 = time.perf_counter()
    wl = build(args.out, int(args.revisions), args.correction_rate)
    took = time.perf_counter() - t0
    mem = wl.open()
    shape = mem.sql("SELECT status, count(*) FROM _tm_events GROUP BY ALL ORDER BY ALL").fetchall()
    flat_rows = pq.ParquetFile(wl.flat).metadata.num_rows
    print(f"{wl.revisions:,} revisions, {wl.subjects:,} subjects, {flat_rows:,} flat versions, built in {took:.1f} s")
    print("revisions by status:", dict(shape))
    print("check:", mem.check())


# Sort order used for the store (the generator's ORDER BY follows it); kept here to fail loudly
# if the core's order changes and the generator is not updated.
assert [k for k, _ in SORT_KEYS] == ["scope", "subject", "predicate", "fact_id", "revision"]

if __name__ == "__main__":
    main()
