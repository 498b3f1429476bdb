"""Core store figures (issue 2): one assert_fact commit on a store of 100k facts, and a point
as_of for one subject on a store of 1M revisions, against DuckDB reading the same Parquet files
with the same key filter and no bitemporal logic (the floor), measured in the same process.

    python benchmarks/bench_core.py                  # 100k facts / 1M revisions
    python benchmarks/bench_core.py --facts 20000 --revisions 200000 --runs 5   # quick

Prints medians (min, max) of several warm runs in milliseconds.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import duckdb
from workload import HISTORY_SCHEMA, as_stored

import tempomem as tm

PREDICATES = 5


def generate(path: Path, revisions: int) -> tm.Memory:
    """A store of `revisions` rows: facts of 5 predicates per subject, half of them revised once.

    Revision 1 of each fact is live; the revised half gets an `ended` revision a week later.
    """
    facts = revisions * 2 // 3
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    table = con.sql(f"""
        WITH f AS (
            SELECT i, printf('f%010d', i) AS fact_id, printf('svc-%07d', i // {PREDICATES}) AS subject,
                   'p' || (i % {PREDICATES}) AS predicate,
                   TIMESTAMPTZ '2020-01-01' + to_minutes(i % 2000000) AS valid_from,
                   TIMESTAMPTZ '2020-01-01' + to_minutes(i % 2000000) + to_hours(1 + i % 500) AS recorded_at
            FROM range({facts}) t(i)
        ), r AS (
            SELECT *, 1 AS revision, NULL::TIMESTAMPTZ AS valid_to, 'live' AS status FROM f
            UNION ALL
            SELECT * REPLACE (recorded_at + to_days(7) AS recorded_at), 2, valid_from + to_days(30), 'ended'
            FROM f WHERE i % 2 = 0 AND i < {revisions - facts} * 2
        )
        SELECT fact_id, 'default' AS scope, subject, predicate, 'value-' || (i % 97) AS object,
               subject || ' ' || predicate AS text, valid_from, valid_to, false AS valid_from_inferred,
               recorded_at, NULL::TIMESTAMPTZ AS retracted_at, NULL::TIMESTAMPTZ AS superseded_at,
               NULL::VARCHAR AS superseded_by, status, NULL::VARCHAR AS reason, 'tool_verified' AS source,
               0.9 AS confidence, 'backfill' AS origin, TIMESTAMPTZ '2026-06-01' AS ingested_at,
               []::VARCHAR[] AS artifacts, NULL::VARCHAR AS attributes, NULL::FLOAT[] AS embedding,
               'entity' AS link_type, 1.0 AS weight, revision::INTEGER AS revision
        FROM r
    """).to_arrow_table().cast(HISTORY_SCHEMA)
    table = as_stored(table)
    mem = tm.open(path, create=True)
    with mem._engine.exclusive():
        mem._storage.append(table)
    return mem


def timed(fn, runs: int) -> tuple[float, float, float]:
    fn()  # warm-up
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1000)
    return statistics.median(samples), min(samples), max(samples)


def fmt(stats: tuple[float, float, float]) -> str:
    return f"{stats[0]:8.2f} ms  (min {stats[1]:.2f}, max {stats[2]:.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, default=100_000, help="store size for the commit figure")
    parser.add_argument("--revisions", type=int, default=1_000_000, help="store size for the point query")
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        small = generate(Path(tmp) / "small", args.facts * 3 // 2)
        n_facts = small.sql("SELECT count(*) FROM facts").fetchall()[0][0]
        counter = iter(range(10**9))

        def one_commit() -> None:
            i = next(counter)
            subject = f"svc-{i * 7919 % (n_facts // PREDICATES):07d}"
            small.assert_fact(subject, "p1", f"new-{i}", valid_from="2026-01-01")

        print(f"assert_fact, one commit, store of {n_facts:,} facts: {fmt(timed(one_commit, args.runs))}")

        big = generate(Path(tmp) / "big", args.revisions)
        n_rev = big.sql("SELECT count(*) FROM revisions").fetchall()[0][0]
        subjects = [f"svc-{i * 104729 % (n_rev // 3 // PREDICATES):07d}" for i in range(args.runs + 1)]
        it = iter(subjects * 3)
        answer = big.as_of("2021-06-01", subjects[0])

        def point_as_of() -> None:
            big.as_of("2021-06-01", next(it))

        files = list(big._storage.snapshot().files)
        floor_con = duckdb.connect()
        floor = floor_con.read_parquet(files)
        floor.create_view("raw")
        it2 = iter(subjects * 3)

        def floor_scan() -> None:
            floor_con.sql("SELECT * FROM raw WHERE subject = $s AND valid_from <= $t", params={
                "s": next(it2), "t": "2021-06-01"}).to_arrow_table()

        ours = timed(point_as_of, args.runs)
        base = timed(floor_scan, args.runs)
        print(f"as_of one subject, store of {n_rev:,} revisions: {fmt(ours)}  ({answer.height} rows)")
        print(f"floor: DuckDB scan of the same Parquet, same key:  {fmt(base)}")
        print(f"ratio tempomem / floor: {ours[0] / base[0]:.2f}x")


if __name__ == "__main__":
    main()
