"""Benchmark of tempomem on Spark (issue 16, SPEC §13): each query on Spark with 1 and then 2
executors (a real local-cluster: separate executor JVMs), beside DuckDB in the same run.

    .venv/bin/python benchmarks/bench_spark.py --revisions 1e7 --runs 3 --work /tmp/spark-bench

The store is ``workload.py``'s (built into ``--work`` unless one of that size is there already).
Every query is the same SQL text on both engines (the Spark side registered by
``tempomem.spark.register``), except the two analytics, which are the Python calls
(``tm.probes.divergence`` / ``tm.reports.ingestion_lag`` against ``tempomem.spark.divergence`` /
``ingestion_lag``). Each runs once untimed (warm-up: Spark plans and JIT-compiles, DuckDB reads
footers), then ``--runs`` times; the median wall time is printed, with the ratio to DuckDB's
median beside each Spark figure. A Spark answer is collected to the driver (``count()`` of an
analytics frame), a DuckDB one fetched: both engines do all the work.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent))

from workload import build

import tempomem as tm
import tempomem.spark as tms

#: (name, SQL run as is on both engines). Times fall inside the workload's history (2026).
QUERIES: list[tuple[str, str]] = [
    ("facts (count)", "SELECT count(*) FROM facts"),
    ("as_of snapshot", "SELECT count(*), count(DISTINCT subject) FROM as_of(TIMESTAMP '2026-06-01')"),
    ("as_believed snapshot", "SELECT count(*) FROM as_believed(TIMESTAMP '2026-06-01', TIMESTAMP '2026-05-01')"),
    ("history (one key)", "SELECT * FROM history('e0000042', 'p1')"),
    ("timeline (one subject)", "SELECT * FROM timeline('e0000042')"),
    ("memory_diff (one week)", "SELECT bucket, count(*) FROM memory_diff(TIMESTAMP '2026-03-01', "
                               "TIMESTAMP '2026-03-08') GROUP BY bucket ORDER BY bucket"),
    ("coalesced (now)", "SELECT count(*), sum(facts) FROM coalesced()"),
    ("sequenced (7 daily bins)", "SELECT count(*), sum(coverage) FROM sequenced(TIMESTAMP '2026-06-01', "
                                 "TIMESTAMP '2026-06-08', INTERVAL '1' DAY)"),
]


def median_time(fn: Callable[[], Any], runs: int, label: str = "") -> float:
    """The median of ``runs`` timed calls after one untimed; with ``label``, printed as it comes
    (a 10M run takes hours: what it measured survives an interrupted run)."""
    fn()  # warm-up, untimed
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    median = statistics.median(times)
    if label:
        print(f"  {label}: {median:.2f} s (runs {', '.join(f'{t:.2f}' for t in times)})", flush=True)
    return median


def probes_of(mem: tm.Memory, n: int) -> pl.DataFrame:
    """``n`` probes over the workload's keys and times (deterministic)."""
    keys = mem.sql("SELECT DISTINCT subject, predicate FROM facts ORDER BY ALL LIMIT $n", params={"n": n}).pl()
    reps = -(-n // max(1, keys.height))
    return (pl.concat([keys] * reps).head(n).with_row_index("i")
            .with_columns(valid_at=pl.datetime(2026, 3, 1, time_zone="UTC") + pl.duration(hours=pl.col("i") % 2000),
                          believed_at=pl.datetime(2026, 4, 1, time_zone="UTC") + pl.duration(hours=pl.col("i") % 3000))
            .drop("i"))


def duckdb_runs(mem: tm.Memory, probes: pl.DataFrame, runs: int) -> dict[str, float]:
    out = {name: median_time(lambda q=q: mem.sql(q).fetchall(), runs, f"duckdb {name}") for name, q in QUERIES}
    name = f"divergence ({probes.height:,} probes)"
    out[name] = median_time(lambda: tm.probes.divergence(mem, probes), runs, f"duckdb {name}")
    out["ingestion_lag"] = median_time(lambda: tm.reports.ingestion_lag(mem), runs, "duckdb ingestion_lag")
    return out


def spark_runs(store: Path, probes: pl.DataFrame, executors: int, memory: str, runs: int) -> dict[str, float]:
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master(f"local-cluster[{executors},1,{int(memory[:-1]) + 512}]")
             .appName(f"bench-spark-{executors}").config("spark.ui.enabled", "false")
             .config("spark.executor.memory", memory).config("spark.driver.memory", "2g")
             .config("spark.sql.shuffle.partitions", str(4 * executors)).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        tms.register(spark, str(store))
        at = f"spark x{executors}"
        out = {name: median_time(lambda q=q: spark.sql(q).collect(), runs, f"{at} {name}") for name, q in QUERIES}
        frame = spark.createDataFrame(probes.to_arrow()).cache()
        frame.count()
        name = f"divergence ({probes.height:,} probes)"
        out[name] = median_time(lambda: tms.divergence(spark, frame).count(), runs, f"{at} {name}")
        out["ingestion_lag"] = median_time(lambda: tms.ingestion_lag(spark).collect(), runs, f"{at} ingestion_lag")
        return out
    finally:
        spark.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--revisions", type=float, default=1e7)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--probes", type=float, default=1e5)
    parser.add_argument("--executor-memory", default="1536m")
    parser.add_argument("--work", type=Path, required=True, help="where the store is built (reused if there)")
    args = parser.parse_args()
    revisions = int(args.revisions)
    out = args.work / f"r{revisions}"
    if not (out / "store" / "_delta_log").is_dir():
        t0 = time.perf_counter()
        build(out, revisions)
        print(f"built {revisions:,} revisions in {time.perf_counter() - t0:.0f} s", flush=True)
    mem = tm.open(out / "store")
    count = mem.sql("SELECT count(*) FROM revisions").fetchall()[0][0]
    probes = probes_of(mem, int(args.probes))
    print(f"{count:,} revisions; median of {args.runs} runs after one warm-up", flush=True)
    duck = duckdb_runs(mem, probes, args.runs)
    results = {"duckdb": duck}
    for executors in (1, 2):
        results[f"spark x{executors}"] = spark_runs(out / "store", probes, executors, args.executor_memory, args.runs)
        print(f"spark x{executors} done", flush=True)
    print("\n| query | DuckDB | Spark, 1 executor | Spark, 2 executors |\n|---|---:|---:|---:|")
    for name, base in duck.items():
        cells = [f"{results[k][name]:.2f} s ({results[k][name] / base:.1f}×)" for k in ("spark x1", "spark x2")]
        print(f"| {name} | {base:.2f} s | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()
