"""Benchmark of the sequenced analytics (issue 19, SPEC §12) at 10M revisions, each beside a
baseline measured in the same run.

    .venv/bin/python benchmarks/bench_sequenced.py --revisions 1e7 --runs 3 --events 1e6 --work /tmp/seq-bench

The store is ``workload.py``'s (built into ``--work`` unless one of that size is there already).
Each class runs once untimed (warm-up), then ``--runs`` times, alternating with its baselines so
that a change in the load of this shared machine reaches both; the median, min and max wall
time and the median CPU seconds of the process are printed, with the ratio of medians.

- ``sequenced``: one year of daily bins, 2026-01-01 to 2027-01-01, every key of the current
  belief: the ``tm_sequenced`` macro (the rows of ``sequenced``, unordered) with every row made
  and its ``coverage`` summed in DuckDB (about 337M rows: no frame of them fits in memory), and
  the same rows per bin and predicate (``sequenced_per_day``: count and summed coverage).
  Baselines over the same Parquet files, in plain DuckDB: ``scan`` reads the rows still believed
  (the columns the macro reads) with no bins; ``interval_join`` joins them to the same 365 bins
  with the straightforward interval join a user writes by hand, counting the same rows;
  ``unnest_floor`` makes the same number of rows and nothing else (each row's run of day numbers
  unnested, counted and summed): what producing 337M rows costs DuckDB on this machine.
- ``coalesced``: ``mem.coalesced()``, every believed fact into a Polars frame of periods.
  Baseline ``sorted_scan``: the same rows' columns read from the files in the output's order into
  a Polars frame, with no merging (and ``scan``, the same unordered).
- ``at_events``: ``tm.probes.at_events`` of ``--events`` events (an id and a payload column
  beside the instant and key) against ``tm.probes.divergence`` of the same probes
  (``valid_at = believed_at`` = the event's instant).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import workload

import tempomem as tm

YEAR = (datetime(2026, 1, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC))
US = 1_000_000

_SEQUENCED = "SELECT count(*), sum(coverage) FROM tm_sequenced($lo, $hi, INTERVAL 1 DAY)"
_SEQUENCED_PER_DAY = """SELECT count(*) FROM (SELECT bin_from, predicate, count(*), sum(coverage)
                        FROM tm_sequenced($lo, $hi, INTERVAL 1 DAY) GROUP BY bin_from, predicate)"""
# The rows of `facts` that are believed, read from the files of a folded store directly.
_BELIEVED = "FROM raw WHERE folded_until IS NULL AND status NOT IN ('retracted', 'erased')"
_SCAN = f"""SELECT count(*), count(fact_id), count(scope), count(subject), count(predicate),
                   min(valid_from), max(valid_to) {_BELIEVED}"""
_INTERVAL_JOIN = f"""
WITH bins AS (SELECT $lo + i * INTERVAL 1 DAY AS lo, $lo + (i + 1) * INTERVAL 1 DAY AS hi FROM range(365) AS r(i)),
f AS (SELECT greatest(coalesce(valid_from, $lo), $lo) AS vf, least(coalesce(valid_to, $hi), $hi) AS vt {_BELIEVED})
SELECT count(*), sum((epoch(least(f.vt, b.hi)) - epoch(greatest(f.vf, b.lo))) / 86400)
FROM f JOIN bins AS b ON b.lo < f.vt AND f.vf < b.hi
"""
# The floor of making that many rows: each believed fact's run of day numbers in the year,
# unnested (the same 337M rows), counted and summed, with no bins, keys or coverage.
_UNNEST_FLOOR = f"""
WITH f AS (SELECT greatest(coalesce(epoch_us(valid_from), epoch_us($lo)), epoch_us($lo)) AS vf,
                  least(coalesce(epoch_us(valid_to), epoch_us($hi)), epoch_us($hi)) AS vt {_BELIEVED})
SELECT count(*), sum(day) FROM (
    SELECT unnest(range((vf - epoch_us($lo)) // 86400000000, (vt - 1 - epoch_us($lo)) // 86400000000 + 1)) AS day
    FROM f WHERE vf < vt)
"""
_COALESCE_COLUMNS = f"SELECT scope, subject, predicate, object, valid_from, valid_to, fact_id {_BELIEVED}"


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def timed(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    c0, t0 = cpu_seconds(), time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, cpu_seconds() - c0, out


def measure(label: str, candidates: dict[str, Callable[[], Any]], runs: int) -> list[dict[str, Any]]:
    """One warm-up run of each, then ``runs`` rounds in which each runs once, in turn."""
    answers = {name: fn() for name, fn in candidates.items()}
    walls: dict[str, list[float]] = {name: [] for name in candidates}
    cpus: dict[str, list[float]] = {name: [] for name in candidates}
    for _ in range(runs):
        for name, fn in candidates.items():
            wall, cpu, _ = timed(fn)
            walls[name].append(wall)
            cpus[name].append(cpu)
    first = next(iter(candidates))
    out = []
    for name in candidates:
        row = {"class": label, "what": name, "median_s": statistics.median(walls[name]), "min_s": min(walls[name]),
               "max_s": max(walls[name]), "cpu_s": statistics.median(cpus[name]), "answer": _shape(answers[name]),
               "x_first": statistics.median(walls[first]) / statistics.median(walls[name])}
        out.append(row)
        print(f"{label:<11} {name:<18} median {row['median_s']:6.2f} s "
              f"(min {row['min_s']:.2f}, max {row['max_s']:.2f}) "
              f"CPU {row['cpu_s']:6.2f} s   {row['answer']}", flush=True)
    return out


def _shape(answer: Any) -> str:
    if isinstance(answer, pl.DataFrame):
        return f"{answer.height:,} rows"
    if isinstance(answer, list) and answer and isinstance(answer[0], tuple):
        return ", ".join(f"{v:,.0f}" if isinstance(v, int | float) else str(v) for v in answer[0][:2])
    return str(answer)


def events_and_probes(wl: workload.Workload, n: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``n`` events over the workload's keys and first 200 days, and the same as probes."""
    rng = np.random.default_rng(19)
    subjects = rng.integers(0, wl.subjects, n)
    at = int(YEAR[0].timestamp()) * US + rng.integers(0, 200 * 86400 * US, n)
    events = pl.DataFrame({
        "event_id": pl.int_range(n, eager=True),
        "at": pl.Series(at).cast(pl.Datetime("us", "UTC")),
        "subject": [f"e{s:07d}" for s in subjects],
        "predicate": np.array(workload.PREDICATES)[rng.integers(0, len(workload.PREDICATES), n)],
        "payload": rng.random(n),
    })
    probes = events.select("subject", "predicate", valid_at="at", believed_at="at")
    return events, probes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--revisions", type=float, default=1e7)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--events", type=float, default=1e6)
    parser.add_argument("--work", type=Path, default=Path("/tmp/tempomem-bench-sequenced"))
    parser.add_argument("--only", default="sequenced,coalesced,at_events", help="classes to run, comma-separated")
    args = parser.parse_args()
    out = args.work / f"wl{int(args.revisions)}"
    if (out / "flat.parquet").exists():  # written last: the build finished
        wl = workload.Workload(out, revisions=int(args.revisions), subjects=workload.subjects_for(int(args.revisions)))
        print(f"reusing the store at {wl.store}")
    else:
        t0 = time.perf_counter()
        wl = workload.build(out, int(args.revisions))
        print(f"built {wl.store} in {time.perf_counter() - t0:.0f} s")
    mem = wl.open()
    con = mem.connect()
    raw = mem.connect()
    raw.read_parquet(list(mem._storage.snapshot().files)).create_view("raw")
    revisions = con.sql("SELECT count(*) FROM _tm_events").fetchall()[0][0]
    print(f"{revisions:,} revisions, {wl.subjects:,} subjects; load average {os.getloadavg()[0]:.2f}; "
          f"{args.runs} timed runs after one warm-up, alternating")
    year = {"lo": YEAR[0], "hi": YEAR[1]}
    only = set(args.only.split(","))
    results: list[dict[str, Any]] = []
    if "sequenced" in only:
        results += measure("sequenced", {
            "tm_sequenced": lambda: con.sql(_SEQUENCED, params=year).fetchall(),
            "scan": lambda: raw.sql(_SCAN).fetchall(),
            "interval_join": lambda: raw.sql(_INTERVAL_JOIN, params=year).fetchall(),
            "unnest_floor": lambda: raw.sql(_UNNEST_FLOOR, params=year).fetchall(),
        }, args.runs)
        results += measure("sequenced", {
            "per_day": lambda: con.sql(_SEQUENCED_PER_DAY, params=year).fetchall(),
        }, args.runs)
    if "coalesced" in only:
        results += measure("coalesced", {
            "mem.coalesced": lambda: mem.coalesced(),
            "sorted_scan": lambda: raw.sql(_COALESCE_COLUMNS + " ORDER BY scope, subject, predicate, "
                                           "valid_from NULLS FIRST, object").pl(),
            "scan": lambda: raw.sql(_COALESCE_COLUMNS).pl(),
        }, args.runs)
    if "at_events" in only:
        events, probes = events_and_probes(wl, int(args.events))
        results += measure("at_events", {
            "at_events": lambda: tm.probes.at_events(mem, events),
            "divergence": lambda: tm.probes.divergence(mem, probes),
        }, args.runs)
    print(f"load average after: {os.getloadavg()[0]:.2f}\n")
    print("| class | what | median | min–max | CPU | answer | first row ÷ this |")
    print("| --- | --- | ---: | ---: | ---: | --- | ---: |")
    for r in results:
        print(f"| {r['class']} | {r['what']} | {r['median_s']:.2f} s | {r['min_s']:.2f}–{r['max_s']:.2f} s | "
              f"{r['cpu_s']:.2f} s | {r['answer']} | {r['x_first']:.2f}× |")


if __name__ == "__main__":
    main()
