"""Recall and traversal speed on large generated stores (issue 7).

    python benchmarks/bench_recall.py            # 1M facts / 1M edges (needs ~6 GB RAM, a few minutes)
    python benchmarks/bench_recall.py --facts 100000 --edges 100000   # quick look

Stores are generated as Arrow tables written with ``mem._storage.append`` (the commit path
minus the write-path logic), in a temporary folder. Every figure is the median of
``--runs`` warm calls; the first call after opening a store (which loads the in-memory vector
and index tables) is reported apart. The baseline, measured in the same process, is NumPy
brute force over all of the store's vectors (the arithmetic floor of exact cosine search).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from workload import HISTORY_SCHEMA, as_stored

import tempomem as tm

UTC = UTC
DIM = 384
CHUNK = 250_000
NOW = datetime(2026, 11, 1, tzinfo=UTC)
LINK_TYPES = np.array(["entity", "semantic", "temporal", "causal"])


def _ids(prefix: str, numbers: np.ndarray) -> pa.Array:
    return pc.binary_join_element_wise(prefix, pc.cast(pa.array(numbers), pa.string()), "")


def _ts(values: list[datetime | None] | np.ndarray) -> pa.Array:
    return pa.array(values, type=pa.timestamp("us", tz="UTC"))


def _rows(start: int, n: int, rng: np.random.Generator, *, live_share: float, entities: int,
          with_vectors: bool) -> pa.Table:
    """``n`` one-revision facts. A ``live_share`` of them hold from 2019 on; the others held for
    one year in 2016..2025 (closed). Objects are other entities, so every fact is also an edge."""
    numbers = np.arange(start, start + n)
    live = rng.random(n) < live_share
    year = rng.integers(2016, 2026, n)
    epoch_us = ((year - 1970) * 365.25 * 86400 * 1e6).astype("int64")
    valid_from = np.where(live, int((datetime(2019, 1, 1, tzinfo=UTC).timestamp()) * 1e6), epoch_us)
    valid_to = pa.array(np.where(live, 0, epoch_us + int(365 * 86400 * 1e6)), pa.int64())
    valid_to = pc.if_else(pa.array(live), pa.nulls(n, pa.int64()), valid_to)
    subjects = _ids("e", numbers % entities)
    objects = _ids("e", rng.integers(0, entities, n))
    recorded = pa.array(np.full(n, int(datetime(2026, 1, 1, tzinfo=UTC).timestamp() * 1e6)), pa.int64())
    if with_vectors:
        m = rng.standard_normal((n, DIM), dtype=np.float32)
        m /= np.linalg.norm(m, axis=1, keepdims=True)
        vectors = pa.FixedSizeListArray.from_arrays(pa.array(m.ravel()), DIM).cast(pa.list_(pa.float32()))
    else:
        vectors = pa.nulls(n, pa.list_(pa.float32()))
    ts_type = pa.timestamp("us", tz="UTC")
    columns = {
        "fact_id": _ids("f", numbers), "scope": pa.array(["default"] * n), "subject": subjects,
        "predicate": pa.array(np.array(["p0", "p1", "p2", "p3"])[numbers % 4]), "object": objects,
        "text": pa.nulls(n, pa.string()),
        "valid_from": pa.array(valid_from, pa.int64()).cast(ts_type), "valid_to": valid_to.cast(ts_type),
        "valid_from_inferred": pa.array(np.zeros(n, dtype=bool)),
        "recorded_at": recorded.cast(ts_type), "retracted_at": pa.nulls(n, ts_type),
        "superseded_at": pa.nulls(n, ts_type), "superseded_by": pa.nulls(n, pa.string()),
        "status": pc.if_else(pa.array(live), "live", "ended"), "reason": pa.nulls(n, pa.string()),
        "source": pa.array(["tool_verified"] * n), "confidence": pa.array(np.full(n, 0.9)),
        "origin": pa.array(["api"] * n), "ingested_at": recorded.cast(ts_type),
        "artifacts": pa.array([[]] * n, pa.list_(pa.string())), "attributes": pa.nulls(n, pa.string()),
        "embedding": vectors, "link_type": pa.array(LINK_TYPES[rng.integers(0, 4, n)]),
        "weight": pa.array(rng.uniform(0.5, 1.0, n)), "revision": pa.array(np.ones(n, dtype=np.int32)),
    }
    return as_stored(pa.table(columns).cast(HISTORY_SCHEMA))


def build(folder: Path, n: int, *, live_share: float, entities: int, with_vectors: bool, seed: int) -> tm.Memory:
    mem = tm.open(folder, create=True, clock=lambda: NOW)
    rng = np.random.default_rng(seed)
    for start in range(0, n, CHUNK):
        mem._storage.append(_rows(start, min(CHUNK, n - start), rng, live_share=live_share, entities=entities,
                                  with_vectors=with_vectors))
    return mem


def median_time(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def bench_recall(tmp: Path, facts: int, runs: int) -> None:
    rng = np.random.default_rng(7)
    query = rng.standard_normal(DIM).astype(np.float32)
    query /= np.linalg.norm(query)
    print(f"\n== recall, {DIM}-dim embeddings, k=10 (median of {runs} warm runs) ==")
    print(f"{'store':<34}{'in force':>10}{'first call':>12}{'warm':>9}{'numpy floor':>13}{'ratio':>7}")
    cases = [
        ("all live, total = N", facts, 1.0, None),
        ("10% live, total = N, at now", facts, 0.1, None),
        ("10% live, total = N, at 2021-06", facts, 0.1, "2021-06-01"),
        ("all live, total = N/10", facts // 10, 1.0, None),
    ]
    built: dict[tuple[int, float], tm.Memory] = {}
    for name, n, live, valid_at in cases:
        key = (n, live)
        if key not in built:
            built[key] = build(tmp / f"r{n}_{live}", n, live_share=live, entities=max(n // 5, 1),
                               with_vectors=True, seed=1)
        mem = tm.open(built[key].path, clock=lambda: NOW)  # a fresh process-level view: cold caches
        t = time.perf_counter()
        first = mem.recall(query, k=10, valid_at=valid_at)
        first_s = time.perf_counter() - t
        warm = median_time(lambda mem=mem, valid_at=valid_at: mem.recall(query, k=10, valid_at=valid_at), runs)
        in_force = mem.sql("SELECT count(*) FROM tm_slice($v, $b)",
                           {"v": valid_at or NOW, "b": NOW}).fetchall()[0][0]
        matrix = np.array(mem.sql("SELECT embedding FROM _tm_events").to_arrow_table().column(0)
                          .combine_chunks().flatten().to_numpy(), dtype=np.float32).reshape(-1, DIM)
        floor = median_time(lambda m=matrix: np.argpartition(-(m @ query), 10)[:10], runs)
        assert first.height == 10
        print(f"{name:<34}{in_force:>10,}{first_s:>11.2f}s{warm:>8.3f}s{floor:>12.3f}s{warm / floor:>7.1f}")
        del matrix


def bench_traverse(tmp: Path, edges: int, runs: int) -> None:
    entities = max(edges // 5, 1)
    mem = build(tmp / "edges", edges, live_share=0.8, entities=entities, with_vectors=False, seed=2)
    mem = tm.open(mem.path, clock=lambda: NOW)
    print(f"\n== traversal depth 3, {edges:,} edges over {entities:,} entities, ~5 out-links each "
          f"(80% in force) (median of {runs} warm runs) ==")
    t = time.perf_counter()
    tm.graph.traverse(mem, "e1", depth=3)
    print(f"first call (loads the in-memory index): {time.perf_counter() - t:.2f}s")
    starts = [f"e{i}" for i in range(2, 2 + runs)]
    times, reached = [], []
    for s in starts:
        t = time.perf_counter()
        out = tm.graph.traverse(mem, s, depth=3)
        times.append(time.perf_counter() - t)
        reached.append(out.height)
    rewound = median_time(lambda: tm.graph.traverse(mem, "e1", depth=3, valid_at="2021-06-01",
                                                    believed_at=NOW - timedelta(days=30)), runs)
    print(f"warm, now: median {statistics.median(times) * 1000:.0f} ms over {runs} start entities "
          f"(reached {min(reached)}..{max(reached)} entities)")
    print(f"warm, rewound to valid 2021-06 / believed 2026-10-02: median {rewound * 1000:.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--facts", type=int, default=1_000_000)
    parser.add_argument("--edges", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--only", choices=("recall", "traverse"), default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tm-bench-") as tmp:
        if args.only in (None, "recall"):
            bench_recall(Path(tmp), args.facts, args.runs)
        if args.only in (None, "traverse"):
            bench_traverse(Path(tmp), args.edges, args.runs)


if __name__ == "__main__":
    main()
