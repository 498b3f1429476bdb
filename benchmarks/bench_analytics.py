"""Benchmark of the analytics helpers on a generated store, against plain Python loops.

    .venv/bin/python benchmarks/bench_analytics.py                  # 10M revisions (slow to build)
    .venv/bin/python benchmarks/bench_analytics.py --revisions 1e6  # a quick run

The store is written as Arrow batches through ``Storage.append`` (one Delta commit per
batch): keys ≈ revisions / 9.25, each key five successive values 30 days apart, each learned
after a lag drawn log-uniformly from 1 s to 3 weeks (every value but the last closed by its
successor: two revisions), and the last value of a quarter of the keys retracted (5% of
facts). By default the rows are committed in belief-time order, 500k per commit, as a
store that grew by appends (``--layout key`` commits them key-major instead). Each helper
runs ``--runs`` times (median reported; divergence also reports its first, cold run: the
Parquet metadata is not cached yet). Its baseline is the same
question answered by a straightforward Python loop over the same rows already in memory as
Python tuples (loading them is not timed, in the baseline's favour); a loop over all rows
would take minutes, so it runs on a random sample of keys or probes and is extrapolated
linearly, which the output says. The divergence baseline is also given as a loop of
``mem.as_of`` + ``mem.as_believed`` calls, the way one would do it without the helper.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
from workload import HISTORY_SCHEMA, as_stored

import tempomem as tm
from tempomem.schema import SORT_KEYS

UTC = UTC
T0 = datetime(2026, 1, 1, tzinfo=UTC)
US = 1_000_000
T0_US = int(T0.timestamp()) * US
DAY_US = 86_400 * US
FACTS_PER_KEY = 5
PREDICATES = [f"p{i}" for i in range(10)]
SOURCES = ["user", "tool_verified", "agent", "inferred", "import"]


# -- the generated store ---------------------------------------------------------------------------


def _key_batch(rng: np.random.Generator, first: int, count: int) -> pa.Table:
    """All revisions of keys [first, first + count), as one Arrow table of EVENT_SCHEMA."""
    keys = np.arange(first, first + count)
    k = np.repeat(keys, FACTS_PER_KEY)
    i = np.tile(np.arange(FACTS_PER_KEY), count)
    start = T0_US + rng.integers(0, 30 * DAY_US, count)          # per key
    vf = np.repeat(start, FACTS_PER_KEY) + i * 30 * DAY_US                      # value i starts
    lag = np.exp(rng.uniform(np.log(US), np.log(21 * DAY_US), k.size)).astype(np.int64)
    rec = vf + lag                                                              # learned later
    last = i == FACTS_PER_KEY - 1
    retract = last & np.repeat(rng.random(count) < 0.25, FACTS_PER_KEY)
    vf_next = np.roll(vf, -1)
    rec_next = np.roll(rec, -1)
    fact_id = pc.binary_join_element_wise(
        pa.array(k.astype(str)), pa.array(i.astype(str)), "-")
    base = {
        "fact_id": fact_id, "subject": pa.array(np.char.add("s", k.astype(str))),
        "predicate": pa.array(np.array(PREDICATES)[k % 10]),
        "object": pc.binary_join_element_wise("v", fact_id, ""),
        "valid_from": vf, "source": pa.array(np.array(SOURCES)[(k + i) % 5]),
        "confidence": np.round(rng.uniform(0.5, 1.0, k.size), 2),
    }
    n = k.size
    # revision 1 of every fact: live
    first_rev = dict(base, valid_to=np.full(n, -1), recorded_at=rec, retracted_at=np.full(n, -1),
                     superseded_at=np.full(n, -1), superseded_by=pa.nulls(n, pa.string()),
                     status=pa.array(["live"] * n), reason=pa.nulls(n, pa.string()), revision=np.ones(n, np.int32))
    # revision 2: closed by the next value when it was recorded, or retracted 1..7 days later
    closed = ~last
    retract_at = rec + rng.integers(DAY_US, 7 * DAY_US, n)
    second = {name: (col.filter(pa.array(closed | retract)) if isinstance(col, pa.Array)
                     else col[closed | retract]) for name, col in base.items()}
    sel = closed | retract
    m = int(sel.sum())
    sup = closed[sel]
    next_id = pc.binary_join_element_wise(
        pa.array(k[sel].astype(str)), pa.array((i[sel] + 1).astype(str)), "-")
    second.update(
        valid_to=np.where(sup, vf_next[sel], -1),
        recorded_at=np.where(sup, rec_next[sel], retract_at[sel]),
        retracted_at=np.where(sup, -1, retract_at[sel]),
        superseded_at=np.where(sup, rec_next[sel], -1),
        superseded_by=pc.if_else(pa.array(sup), next_id, pa.nulls(m, pa.string())),
        status=pa.array(np.where(sup, "superseded", "retracted")),
        reason=pa.array(np.where(sup, "superseded by the next value", "wrong value")),
        revision=np.full(m, 2, np.int32),
    )
    return as_stored(pa.concat_tables([_as_events(first_rev), _as_events(second)]))


def _as_events(cols: dict) -> pa.Table:
    n = len(cols["recorded_at"])
    ts = pa.timestamp("us", tz="UTC")

    def times(values: np.ndarray) -> pa.Array:
        return pa.array(values, pa.int64(), mask=values < 0).cast(ts)

    return pa.table({
        "fact_id": cols["fact_id"], "scope": pa.array(["default"] * n), "subject": cols["subject"],
        "predicate": cols["predicate"], "object": cols["object"], "text": pa.nulls(n, pa.string()),
        "valid_from": times(np.asarray(cols["valid_from"])), "valid_to": times(cols["valid_to"]),
        "valid_from_inferred": pa.array(np.zeros(n, bool)), "recorded_at": times(cols["recorded_at"]),
        "retracted_at": times(cols["retracted_at"]), "superseded_at": times(cols["superseded_at"]),
        "superseded_by": cols["superseded_by"], "status": cols["status"], "reason": cols["reason"],
        "source": cols["source"], "confidence": pa.array(np.asarray(cols["confidence"]), pa.float64()),
        "origin": pa.array(["backfill"] * n), "ingested_at": pa.array([datetime.now(UTC)] * n, ts),
        "artifacts": pa.array([[]] * n, pa.list_(pa.string())), "attributes": pa.nulls(n, pa.string()),
        "embedding": pa.nulls(n, pa.list_(pa.float32())), "link_type": pa.array(["entity"] * n),
        "weight": pa.array(np.ones(n)), "revision": pa.array(cols["revision"], pa.int32()),
    }, schema=HISTORY_SCHEMA)


def build_store(path: Path, revisions: int, seed: int, layout: str) -> tm.Memory:
    """``layout="time"``: commits in belief-time order, as a store grows by appends (each
    commit's rows sorted by key, as the write path does); ``"key"``: key-major commits, every
    file spanning the whole belief history (the worst case for time windows)."""
    rng = np.random.default_rng(seed)
    keys = max(1, round(revisions / (2 * FACTS_PER_KEY - 1 + 0.25)))
    mem = tm.open(path, create=True)
    batches = [_key_batch(rng, first, min(250_000, keys - first)) for first in range(0, keys, 250_000)]
    if layout == "key":
        for batch in batches:
            mem._storage.append(batch)
        return mem
    rows = pa.concat_tables(batches).sort_by("recorded_at")
    del batches
    for start in range(0, rows.num_rows, 500_000):
        mem._storage.append(rows.slice(start, 500_000).sort_by(SORT_KEYS))
    return mem


# -- timing ------------------------------------------------------------------------------------


_cpu: list[float] = []


def timed(fn, runs: int) -> tuple[float, object]:
    """Median wall time of ``runs`` calls; the median CPU time (all threads) goes to ``_cpu``."""
    times, cpu, out = [], [], None
    for _ in range(runs):
        t, c = time.perf_counter(), time.process_time()
        out = fn()
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    _cpu[:] = [statistics.median(cpu)]
    return statistics.median(times), out


def report(name: str, seconds: float, budget: float, loop_seconds: float, how: str) -> None:
    """One line: wall time against the budget, CPU time (load-independent), and the loop ratio."""
    verdict = "ok" if seconds <= budget else "OVER BUDGET"
    print(f"{name:<28} {seconds:8.3f} s wall, {_cpu[0]:7.3f} s cpu  (budget {budget:g} s: {verdict})"
          f"   python loop {loop_seconds:10.1f} s  ratio {loop_seconds / seconds:8.1f}x   [{how}]")


# -- the Python-loop baselines -------------------------------------------------------------------


def _rows_of(mem: tm.Memory, where: str, params: dict) -> list[tuple]:
    q = f"""SELECT fact_id, scope, subject, predicate, object, revision, recorded_at, believed_until,
                   valid_from, valid_to, valid_from_inferred, retracted_at, superseded_by, superseded_at,
                   status, source
            FROM revisions WHERE {where}"""
    return mem.sql(q, params).fetchall()


def loop_diff(rows: list[tuple], lo: datetime, hi: datetime) -> dict[str, int]:
    """memory_diff's buckets, one revision at a time."""
    by_rev = {(r[0], r[5]): r for r in rows}
    first_seen: dict[tuple, datetime] = {}
    for r in rows:
        key = (r[1], r[2])
        if key not in first_seen or r[6] < first_seen[key]:
            first_seen[key] = r[6]
    counts = defaultdict(int)
    new_in_commit = {(r[0], r[6]) for r in rows if r[5] == 1}
    for r in rows:
        if not (lo <= r[6] < hi) or r[14] == "erased":
            continue
        prev = by_rev.get((r[0], r[5] - 1))
        if prev is None:
            counts["created_or_changed_a"] += 1
        elif r[11] is not None and prev[11] is None:
            counts["retracted"] += 1
        elif r[12] is not None and (r[12], r[6]) in new_in_commit:
            counts["closing"] += 1
        elif (prev[8], prev[9], prev[14]) != (r[8], r[9], r[14]):
            counts["changed_b"] += 1
    counts["new_entities"] = sum(1 for t in first_seen.values() if lo <= t < hi)
    return counts


def _contains(lo, hi, t) -> bool:
    return (lo is None or lo <= t) and (hi is None or t < hi)


def loop_divergence(index: dict, probes: list[tuple]) -> list[tuple]:
    """as_of / as_believed / kind for each probe, scanning the key's revisions."""
    out = []
    for subject, predicate, valid_at, believed_at in probes:
        known, believed, retracted_believed = set(), set(), False
        retracted_ids = {r[0] for r in index.get((subject, predicate), ()) if r[7] is None and r[14] == "retracted"}
        for r in index.get((subject, predicate), ()):
            if not _contains(r[8], r[9], valid_at):
                continue
            if r[7] is None and r[14] not in ("retracted", "erased"):
                known.add(r[4])
            if _contains(r[6], r[7], believed_at) and r[11] is None and r[14] != "erased":
                believed.add(r[4])
                retracted_believed |= r[0] in retracted_ids
        a = " | ".join(sorted(known)) or None
        b = " | ".join(sorted(believed)) or None
        kind = "same" if a == b else "not_yet_known" if b is None else "corrected" if retracted_believed \
            else "learned_late"
        out.append((a, b, kind))
    return out


def loop_lag(rows: list[tuple], threshold_us: int) -> dict:
    groups: dict[str, list[int]] = defaultdict(list)
    first: dict[str, datetime] = {}
    for r in rows:
        if r[5] == 1:
            first[r[0]] = r[6]
    for r in rows:
        if r[7] is None and r[14] not in ("retracted", "erased") and r[8] is not None and not r[10]:
            groups[r[3]].append((first[r[0]] - r[8]) // timedelta(microseconds=1))
    out = {}
    for g, lags in groups.items():
        lags.sort()
        n = len(lags)
        out[g] = [lags[max(0, -(-n * q // 100) - 1)] for q in (50, 90, 99)] + [
            lags[-1], sum(1 for x in lags if x > threshold_us) / n]
    return out


def loop_audit(index: dict, decisions: list[tuple]) -> list[str]:
    verdicts = []
    for subject, predicate, at, used in decisions:
        a, b, _ = loop_divergence(index, [(subject, predicate, at, at)])[0]
        believed = set(b.split(" | ")) if b else set()
        known = set(a.split(" | ")) if a else set()
        retracted = {r[4] for r in index.get((subject, predicate), ()) if r[7] is None and r[14] == "retracted"}
        verdicts.append("unknown" if not believed else "mismatch" if used not in believed
                        else "wrong" if used in retracted else "stale" if used not in known else "ok")
    return verdicts


# -- main ----------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--revisions", type=float, default=10e6, help="revisions to generate (default 10M)")
    parser.add_argument("--probes", type=float, default=1e6, help="probes and decisions (default 1M)")
    parser.add_argument("--runs", type=int, default=3, help="runs per helper; the median is reported")
    parser.add_argument("--sample", type=float, default=0.01, help="share of keys/probes the Python loops see")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--layout", choices=["time", "key"], default="time",
                        help="commit order of the generated rows (see build_store)")
    parser.add_argument("--keep", type=Path, default=None, help="build (or reuse) the store here")
    args = parser.parse_args()

    folder = args.keep or Path(tempfile.mkdtemp(prefix="tm-bench-"))
    path = folder / "store"
    t = time.perf_counter()
    if tm.store.Storage.exists(path):
        mem = tm.open(path)
    else:
        mem = build_store(path, int(args.revisions), args.seed, args.layout)
    n_rev, n_keys = mem.sql("SELECT count(*), count(DISTINCT subject) FROM revisions").fetchall()[0]
    print(f"store: {n_rev:,} revisions, {n_keys:,} keys, {len(mem._storage.snapshot().files)} files "
          f"(ready in {time.perf_counter() - t:.1f} s) at {path}")
    rng = np.random.default_rng(args.seed + 1)
    n_probes = int(args.probes)

    # a sample of keys for the loops over revisions
    sample_subjects = [f"s{k}" for k in rng.choice(n_keys, max(1, int(n_keys * args.sample)), replace=False)]
    sample_rows = _rows_of(mem, "list_contains($s, subject)", {"s": sample_subjects})
    scale_rows = n_rev / max(1, len(sample_rows))

    # 1. memory_diff over one week
    lo, hi = T0 + timedelta(days=60), T0 + timedelta(days=67)
    seconds, d = timed(lambda: mem.diff(lo, hi), args.runs)
    events = sum(getattr(d, f).height for f in ("created", "changed", "retracted", "new_entities"))
    t = time.perf_counter()
    loop_diff(sample_rows, lo, hi)
    loop_s = (time.perf_counter() - t) * scale_rows
    report(f"memory_diff 1 week ({events:,} ev)", seconds, 1.0, loop_s,
           f"loop over {len(sample_rows):,} revisions x{scale_rows:.0f}")

    # 2. divergence of n probes on random keys and times
    span_us = 180 * DAY_US
    keys = rng.integers(0, n_keys, n_probes)
    probes = pl.DataFrame({
        "subject": np.char.add("s", keys.astype(str)),
        "predicate": np.array(PREDICATES)[keys % 10],
        "valid_at": pl.Series(T0_US + rng.integers(0, span_us, n_probes)).cast(pl.Datetime("us", "UTC")),
        "believed_at": pl.Series(T0_US + rng.integers(0, span_us, n_probes)).cast(
            pl.Datetime("us", "UTC")),
    })
    t = time.perf_counter()
    tm.probes.divergence(mem, probes)
    print(f"{'divergence, first (cold) run':<28} {time.perf_counter() - t:8.3f} s")
    seconds, result = timed(lambda: tm.probes.divergence(mem, probes), args.runs)
    sample_n = max(1, int(n_probes * args.sample))
    sample_probes = probes.head(sample_n)
    index: dict = defaultdict(list)
    for r in _rows_of(mem, "list_contains($s, subject)", {"s": sample_probes["subject"].unique().to_list()}):
        index[(r[2], r[3])].append(r)
    t = time.perf_counter()
    looped = loop_divergence(index, sample_probes.rows())
    loop_s = (time.perf_counter() - t) * n_probes / sample_n
    assert [x[2] for x in looped] == result["kind"].head(sample_n).to_list(), "loop and helper disagree"
    report(f"divergence {n_probes:,} probes", seconds, 10.0, loop_s,
           f"loop over {sample_n:,} probes x{n_probes / sample_n:.0f}; same kinds")
    api_n = 50
    t = time.perf_counter()
    for s, p, v, b in probes.head(api_n).rows():
        mem.as_of(v, s, p), mem.as_believed(v, b, s, p)
    api_s = (time.perf_counter() - t) * n_probes / api_n
    print(f"{'':<28} {'':>10}    mem.as_of+as_believed loop {api_s:10.1f} s  ratio {api_s / seconds:8.1f}x"
          f"   [{api_n} probes x{n_probes / api_n:.0f}]")

    # 3. ingestion lag
    seconds, _ = timed(lambda: tm.reports.ingestion_lag(mem), args.runs)
    t = time.perf_counter()
    loop_lag(sample_rows, DAY_US)
    loop_s = (time.perf_counter() - t) * scale_rows
    report("ingestion_lag by predicate", seconds, 2.0, loop_s,
           f"loop over {len(sample_rows):,} revisions x{scale_rows:.0f}")

    # 4. decision audit: the probes' keys at their valid times, using the value believed or a random one
    decisions = pl.DataFrame({
        "decision_id": pl.int_range(0, n_probes, eager=True).cast(pl.String),
        "decided_at": probes["valid_at"], "subject": probes["subject"], "predicate": probes["predicate"],
        "object_used": result["as_believed_object"].fill_null("v-unknown"),
    })
    seconds, audited = timed(lambda: tm.reports.decision_audit(mem, decisions), args.runs)
    t = time.perf_counter()
    verdicts = loop_audit(index, decisions.head(sample_n).select("subject", "predicate", "decided_at",
                                                                    "object_used").rows())
    loop_s = (time.perf_counter() - t) * n_probes / sample_n
    assert verdicts == audited["verdict"].head(sample_n).to_list(), "loop and helper disagree"
    counts = dict(audited["verdict"].value_counts().rows())
    report(f"decision_audit {n_probes:,}", seconds, 10.0, loop_s,
           f"loop over {sample_n:,} decisions x{n_probes / sample_n:.0f}; same verdicts; {counts}")

    if args.keep is None:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
