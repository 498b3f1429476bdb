"""The write engine at the shapes users have, each figure beside a baseline from the same run.

    python benchmarks/bench_writes.py replay --keys 1000000          # 10M-row log, resolve=True vs False
    python benchmarks/bench_writes.py replay --keys 1000000 --heavy 100000   # one key holds 100k rows
    python benchmarks/bench_writes.py replay --keys 100000 --heavy 2000 --heavy-single  # a single-valued one
    python benchmarks/bench_writes.py replay --keys 100000 --heavy 2000 --heavy-reject  # one value, reject
    python benchmarks/bench_writes.py many --store 10000000          # assert_many of 100k rows (the store
                                                                     # replayed; --as-given: loaded as given)
    python benchmarks/bench_writes.py fact --store 10000000          # assert_fact p50 (and a new process's
                                                                     # first), bare Delta append; get, correct
                                                                     # and invalidate of facts never read
    python benchmarks/bench_writes.py writers                        # 8 threads, then 8 processes
    python benchmarks/bench_writes.py follow --count 90000           # an agent's assert_fact right after
                                                                     # another writer's batch, vs one row
    python benchmarks/bench_writes.py busykey --facts 100000         # assert_fact on a key of 100k facts
                                                                     # vs on a key of none, one store
    python benchmarks/bench_writes.py importers --rows 1000000       # mem0 / Graphiti vs generic backfill
    python benchmarks/bench_writes.py importers --rows 1000000 --heavy 100000   # and one memory of 100k events

The replayed log is generated: ``--keys`` keys of ``--per-key`` assertions each (a tenth of
the keys multi-valued), every row with its own belief time, the keys' assertions interleaved
in belief-time order, a start ~3 days (exponential) before the belief, 5 % arriving 30x late,
and five values a key. ``--heavy N`` gives key 0 N of the rows; key 0 is multi-valued (as every
tenth key is), unless ``--heavy-single`` makes it single-valued: its rows, hours apart or less and
each ~3 days late, then mostly arrive out of order of start, the replay's worst shape; with
``--heavy-reject`` key 0 is a ``reject`` predicate's, one value re-asserted (a fact an agent
extracts again and again, which no later row may contradict). The skewed log
is loaded both ways, each against the uniform log's same load. Every timed run is a fresh
spawned process, so its peak RSS is its own; figures are medians of ``--runs``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import shutil
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import tempomem as tm

_US = pa.timestamp("us", tz="UTC")
_YEAR_US = 365 * 86400 * 10**6
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def generate_log(path: Path, keys: int, per_key: int, heavy: int = 0, seed: int = 7,
                 heavy_single: bool = False, heavy_reject: bool = False) -> int:
    """Write the replay log (see the module doc) to ``path``; return its rows."""
    rng = np.random.default_rng(seed)
    n = keys * per_key
    key = np.repeat(np.arange(keys), per_key)
    if heavy:
        key[:heavy] = 0
    key = key[rng.permutation(n)]
    start = np.datetime64("2024-01-01T00:00:00", "us").astype(np.int64)
    recorded = start + np.sort(rng.choice(_YEAR_US, size=n, replace=False))
    lag = rng.exponential(3 * 86400 * 10**6, n).astype(np.int64)
    lag[rng.random(n) < 0.05] *= 30
    table = pa.table({
        "subject": pa.array(np.char.add("svc-", key.astype(str))),
        "predicate": pa.array(np.where(heavy_reject & (key == 0), "born_on",
                                       np.where((key % 10 == 0) & ~(heavy_single & (key == 0)), "works_on",
                                                "instance_type"))),
        "object": pa.array(np.char.add("v", np.where(heavy_reject & (key == 0), 0, rng.integers(0, 5, n)).astype(str))),
        "valid_from": pa.array((recorded - lag).astype("datetime64[us]")).cast(_US),
        "recorded_at": pa.array(recorded.astype("datetime64[us]")).cast(_US),
    })
    pq.write_table(table, path, compression="zstd")
    return n


def _open(folder: str) -> tm.Memory:
    mem = tm.open(folder, create=True, predicates={"works_on": "multi"})
    mem.declare("born_on", "single", policy="reject")
    return mem


def _timed(task: str, *args: object) -> dict[str, float]:
    """Run ``task`` in a fresh spawned process; its seconds and peak RSS (MB)."""
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        return pool.apply(_child, (task, *args))


def _child(task: str, *args: object) -> dict[str, float]:
    started = time.perf_counter()
    extra = _TASKS[task](*args)
    out = {"seconds": time.perf_counter() - started,
           "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    out.update(extra or {})
    return out


def _load(source: str, resolve: bool) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="bench-writes-") as folder:
        report = _open(folder).backfill(source, resolve=resolve)
        return {"revisions": report.revisions}


def _import(fmt: str, source: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="bench-writes-") as folder:
        report = _open(folder).backfill(source, format=fmt if fmt != "generic" else None)
        return {"revisions": report.revisions}


def _median(runs: list[dict[str, float]], name: str = "seconds") -> float:
    return statistics.median(r[name] for r in runs)


def _runs(runs: list[dict[str, float]], name: str, digits: int = 2) -> str:
    return ", ".join(f"{r[name]:.{digits}f}" for r in runs)


def _line(label: str, runs: list[dict[str, float]], rows: int, base: list[dict[str, float]] | None = None) -> None:
    median = _median(runs)
    ratio = f"  {median / _median(base):.2f}x the baseline" if base else ""
    print(f"{label:<44} {median:8.2f} s  {rows / median:>10,.0f} rows/s  peak {max(r['rss_mb'] for r in runs):6.0f} MB"
          f"  (runs: {_runs(runs, 'seconds')}){ratio}")


def replay(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-writes-log-") as tmp:
        uniform = Path(tmp, "uniform.parquet")
        rows = generate_log(uniform, args.keys, args.per_key)
        print(f"log: {rows:,} rows, {args.keys:,} keys x {args.per_key}, one belief time per row")
        given, resolved = [], []
        for _ in range(args.runs):  # alternated, so both see the same machine
            given.append(_timed("load", str(uniform), False))
            resolved.append(_timed("load", str(uniform), True))
        _line("backfill(resolve=False)  [baseline]", given, rows)
        _line("backfill(resolve=True)", resolved, rows, given)
        if args.heavy:
            skewed = Path(tmp, "skewed.parquet")
            generate_log(skewed, args.keys, args.per_key, heavy=args.heavy, heavy_single=args.heavy_single,
                         heavy_reject=args.heavy_reject)
            skewed_given = [_timed("load", str(skewed), False) for _ in range(args.runs)]
            _line(f"backfill(resolve=False), one key {args.heavy:,} rows", skewed_given, rows, given)
            runs = [_timed("load", str(skewed), True) for _ in range(args.runs)]
            _line(f"backfill(resolve=True), one key {args.heavy:,} rows", runs, rows, resolved)


def _fact_rows(count: int, keys: int, seed: int) -> list[dict[str, object]]:
    rng = np.random.default_rng(seed)
    picked = rng.integers(0, keys, count)
    return [{"subject": f"svc-{k}", "predicate": "instance_type", "object": f"w{rng.integers(0, 5)}",
             "valid_from": f"2025-{1 + i % 12:02d}-01"} for i, k in enumerate(picked)]


def _build_store(folder: str, revisions: int, as_given: bool = False) -> int:
    """A store from the replay log of ``revisions`` rows (its keys are returned): replayed by the
    rules of SPEC §5 (``resolve=True``), the memory an agent's log leaves, where a single-valued
    key holds one open fact; with ``as_given``, loaded as given (``resolve=False``), where each
    single-valued key holds some nine open facts at once, which a new value then all closes."""
    keys = max(revisions // 10, 1)
    with tempfile.TemporaryDirectory(prefix="bench-writes-log-") as tmp:
        log = Path(tmp, "log.parquet")
        generate_log(log, keys, 10)
        _open(folder).backfill(str(log), resolve=not as_given)
    return keys


def _assert_many(folder: str, keys: int, count: int) -> dict[str, float]:
    mem = _open(folder)
    half = _fact_rows(count // 2, keys, 1)  # on existing single-valued keys
    fresh = [dict(r, subject=f"new-{i}") for i, r in enumerate(_fact_rows(count - count // 2, keys, 2))]
    rows = [r for pair in zip(half, fresh, strict=False) for r in pair]
    started = time.perf_counter()
    mem.assert_many(rows)
    return {"call": time.perf_counter() - started}


def _bare_append(folder: str, count: int) -> dict[str, float]:
    """The floor: ``count`` stored rows appended as one Delta commit, no rule applied."""
    from deltalake import write_deltalake

    from tempomem.schema import EVENT_SCHEMA

    row = {n: None for n in EVENT_SCHEMA.names}
    row.update(fact_id="x", scope="default", subject="s", predicate="p", object="o", status="live", revision=1)
    table = pa.Table.from_pylist([row] * count, schema=EVENT_SCHEMA)
    started = time.perf_counter()
    write_deltalake(folder, table, mode="append")
    return {"call": time.perf_counter() - started}


@contextmanager
def _copy_of(built: str) -> Iterator[str]:
    """An untimed copy of the store ``built`` for one run, removed after it. A run commits: the
    next would otherwise meet a store it changed (its keys' states, more small files and the
    compactions they bring)."""
    store = built + "-run"
    shutil.copytree(built, store)
    try:
        yield store
    finally:
        shutil.rmtree(store)


def many(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-writes-store-") as root:
        built = os.path.join(root, "built")
        keys = _build_store(built, args.store, args.as_given)
        print(f"store: {args.store:,} log rows, {_shape(args)}; assert_many of {args.count:,} rows "
              "(half on existing keys), each run on its own copy of the built store")
        runs, floor = [], []
        for _ in range(args.runs):
            with _copy_of(built) as store:  # the baseline appends to the same copy, after the batch
                runs.append(_timed("many", store, keys, args.count))
                floor.append(_timed("bare", store, args.count))
        m, f = _median(runs, "call"), _median(floor, "call")
        print(f"assert_many: {m:.2f} s (runs {_runs(runs, 'call')}); bare Delta append of "
              f"as many rows: {f:.2f} s; {m / f:.1f}x")


def _fact_latency(folder: str, keys: int, calls: int) -> dict[str, float]:
    mem = _open(folder)
    rows = _fact_rows(calls, keys, 3)
    times = []
    for row in rows:
        started = time.perf_counter()
        mem.assert_fact(**row)
        times.append(time.perf_counter() - started)
    # then facts this writer never read, each read or changed by id (an agent correcting what
    # it was told): found by their fact_id's Bloom filters (the files are sorted by key)
    # (an open fact ended a second after its start, which never makes it overlap another)
    picked = mem.sql("SELECT fact_id, valid_from + INTERVAL 1 SECOND FROM facts WHERE status = 'live' "
                     "AND valid_from IS NOT NULL USING SAMPLE 60 ROWS (reservoir, 7)").fetchall()
    changes: dict[str, list[float]] = {"get": [], "correct": [], "invalidate": []}
    for n, (fact_id, end) in enumerate(picked):
        kind = ("get", "correct", "invalidate")[n % 3]
        started = time.perf_counter()
        if kind == "get":
            mem.get(fact_id)
        elif kind == "correct":
            mem.correct(fact_id, reason="wrong")
        else:
            mem.invalidate(fact_id, at=end, reason="ended")
        changes[kind].append(time.perf_counter() - started)
    # the first call of a process binds the engine's connection: what a CLI `assert` pays
    return {"p50_ms": statistics.median(times[1:]) * 1000, "p90_ms": sorted(times[1:])[int(calls * 0.9) - 1] * 1000,
            "first_ms": times[0] * 1000, **{f"{k}_ms": statistics.median(v) * 1000 for k, v in changes.items()}}


def _bare_latency(folder: str, calls: int) -> dict[str, float]:
    times = [_bare_append(folder, 1)["call"] for _ in range(calls)]
    return {"p50_ms": statistics.median(times) * 1000, "p90_ms": sorted(times)[int(calls * 0.9)] * 1000}


def fact(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-writes-store-") as root:
        built = os.path.join(root, "built")
        keys = _build_store(built, args.store, args.as_given)
        runs = []
        for _ in range(args.runs):
            with _copy_of(built) as store:
                runs.append(_timed("fact", store, keys, args.calls))
        with tempfile.TemporaryDirectory(prefix="bench-writes-bare-") as bare:
            tm.open(bare, create=True)
            floor = [_timed("bare_latency", bare, args.calls) for _ in range(args.runs)]
        print(f"store: {args.store:,} log rows, {_shape(args)}; {args.calls} assert_fact calls on random "
              "existing keys, per run")
        print(f"assert_fact p50 {_median(runs, 'p50_ms'):.1f} ms, p90 {_median(runs, 'p90_ms'):.1f} ms; "
              f"bare one-row Delta append p50 {_median(floor, 'p50_ms'):.1f} ms, p90 {_median(floor, 'p90_ms'):.1f} ms")
        print(f"a new process's first assert_fact: {_median(runs, 'first_ms'):.1f} ms "
              f"(runs {_runs(runs, 'first_ms', 1)}); its later calls' p50 above")
        for kind in ("get", "correct", "invalidate"):
            change = _median(runs, kind + "_ms")
            print(f"{kind} of a fact the writer never read, p50 {change:.1f} ms (runs {_runs(runs, kind + '_ms', 1)}): "
                  f"{change / _median(runs, 'p50_ms'):.1f}x its assert_fact")


def _shape(args: argparse.Namespace) -> str:
    return "loaded as given" if args.as_given else "replayed (resolve=True)"


def _threads(folder: str, threads: int, per: int) -> dict[str, float]:
    mem = _open(folder)

    def work(t: int) -> None:
        for i in range(per):
            mem.assert_fact(f"agent-{t}", "step", f"s{i}", valid_from=f"2025-01-01T00:{i // 60:02d}:{i % 60:02d}")

    pool = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    started = time.perf_counter()
    for p in pool:
        p.start()
    for p in pool:
        p.join()
    return {"writes_per_s": threads * per / (time.perf_counter() - started)}


def _process_writer(folder: str, t: int, per: int, start: float) -> None:
    mem = _open(folder)
    while time.time() < start:
        time.sleep(0.001)
    for i in range(per):
        mem.assert_fact(f"proc-{t}", "step", f"s{i}", valid_from=f"2025-01-01T00:{i // 60:02d}:{i % 60:02d}")


def _processes(folder: str, processes: int, per: int) -> dict[str, float]:
    ctx = multiprocessing.get_context("spawn")
    start = time.time() + 3
    procs = [ctx.Process(target=_process_writer, args=(folder, t, per, start)) for t in range(processes)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    return {"writes_per_s": processes * per / (time.time() - start)}


def writers(args: argparse.Namespace) -> None:
    results = {}
    for label, task, n in (("1 thread", "threads", 1), (f"{args.writers} threads", "threads", args.writers),
                           ("1 process", "processes", 1), (f"{args.writers} processes", "processes", args.writers)):
        runs = []
        for _ in range(args.runs):
            with tempfile.TemporaryDirectory(prefix="bench-writes-") as folder:
                tm.open(folder, create=True)
                # processes start their own children, which a pool's worker may not
                runs.append(_TASKS[task](folder, n, args.per_writer) if task == "processes"
                            else _timed(task, folder, n, args.per_writer))
        results[label] = _median(runs, "writes_per_s")
        print(f"{label:<14} x {args.per_writer} assert_fact: {results[label]:7.0f} acknowledged writes/s "
              f"(runs: {_runs(runs, 'writes_per_s', 0)})")


def _after_batch(folder: str, batch: int, calls: int) -> dict[str, float]:
    """p50 of an agent's assert_fact, each right after another writer (a second open store on the
    folder: its own engine and state cache) committed ``batch`` rows; the agent holds 20 keys."""
    agent, other = _open(folder), _open(folder)
    for k in range(20):
        agent.assert_fact(f"agent-{k}", "step", "s0")
    times = []
    for i in range(calls):
        other.assert_many([{"subject": f"bulk-{i}-{j}", "predicate": "zone", "object": "a"} for j in range(batch)])
        started = time.perf_counter()
        agent.assert_fact(f"agent-{i % 20}", "step", f"s{i + 1}")
        times.append(time.perf_counter() - started)
    return {"p50_ms": statistics.median(times) * 1000}


def follow(args: argparse.Namespace) -> None:
    results = {}
    for batch in (1, args.count):
        runs = []
        for _ in range(args.runs):
            with tempfile.TemporaryDirectory(prefix="bench-writes-") as folder:
                tm.open(folder, create=True)
                runs.append(_timed("after_batch", folder, batch, args.calls))
        results[batch] = _median(runs, "p50_ms")
        print(f"assert_fact right after another writer's batch of {batch:>7,} rows: p50 {results[batch]:7.1f} ms "
              f"(runs: {_runs(runs, 'p50_ms', 1)})")
    print(f"ratio: {results[args.count] / results[1]:.2f}x the one-row baseline")


def _busy_key(folder: str, facts: int, calls: int) -> dict[str, float]:
    """A status key of ``facts`` facts ten minutes apart (loaded as given), then ``calls``
    assert_facts on it and as many on a key of none, each continuing its timeline."""
    mem = _open(folder)
    starts = (np.datetime64("2020-01-01T00:00:00", "us") + np.arange(facts) * np.timedelta64(10, "m")).astype(np.int64)
    ends = np.append(starts[1:], starts[-1] + 600 * 10**6)
    mem.backfill(pa.table({"subject": ["svc"] * facts, "predicate": ["status"] * facts,
                           "object": [f"v{i % 3}" for i in range(facts)],
                           "valid_from": pa.array(starts.astype("datetime64[us]")).cast(_US),
                           "valid_to": pa.array(ends.astype("datetime64[us]")).cast(_US),
                           "recorded_at": pa.array((starts + 60 * 10**6).astype("datetime64[us]")).cast(_US)}))
    out = {}
    for subject in ("svc", "fresh"):
        times = []
        for i in range(calls):
            at = _EPOCH + timedelta(microseconds=int(ends[-1]) + i * 600 * 10**6)
            started = time.perf_counter()
            mem.assert_fact(subject, "status", f"w{i % 3}", valid_from=at)
            times.append(time.perf_counter() - started)
        out[f"{subject}_first_ms"] = times[0] * 1000
        out[f"{subject}_p50_ms"] = statistics.median(times[1:]) * 1000
    return out


def busykey(args: argparse.Namespace) -> None:
    runs = []
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="bench-writes-") as folder:
            tm.open(folder, create=True)
            runs.append(_timed("busy_key", folder, args.facts, args.calls))
    busy, fresh = _median(runs, "svc_p50_ms"), _median(runs, "fresh_p50_ms")
    print(f"assert_fact on a key of {args.facts:,} facts: first {_median(runs, 'svc_first_ms'):.1f} ms, then p50 "
          f"{busy:.1f} ms (runs: {_runs(runs, 'svc_p50_ms', 1)})")
    print(f"assert_fact on a key of none, same store: first {_median(runs, 'fresh_first_ms'):.1f} ms, then p50 "
          f"{fresh:.1f} ms (runs: {_runs(runs, 'fresh_p50_ms', 1)}); ratio {busy / fresh:.1f}x")


def _mem0_file(path: Path, rows: int, heavy: int = 0) -> None:
    """A mem0 history of ``rows`` events on ``rows // 5`` memories; ``heavy``: memory 0 has
    that many of them (a status memory updated all day), spread over the year."""
    rng = np.random.default_rng(5)
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE history (id TEXT, memory_id TEXT, old_memory TEXT, new_memory TEXT, event TEXT, "
                   "created_at TEXT, updated_at TEXT, is_deleted INTEGER, actor_id TEXT, role TEXT)")
        low = 1 if heavy else 0
        memories = rng.integers(low, max(rows // 5, low + 1), rows)
        if heavy:  # drawn only then: the uniform history stays the one earlier runs measured
            memories[rng.choice(rows, size=heavy, replace=False)] = 0
        base = np.datetime64("2025-01-01T00:00:00", "s")
        stamps = (base + np.sort(rng.choice(365 * 86400, rows, replace=False))).astype(str)
        seen: set[int] = set()
        out = []
        for i, (m, t) in enumerate(zip(memories.tolist(), stamps.tolist(), strict=True)):
            event = "UPDATE" if m in seen else "ADD"
            seen.add(m)
            out.append((f"h{i}", f"m{m}", None, f"memory {m} v{i}", event, t, t if event == "UPDATE" else None, 0,
                        None, None))
        db.executemany("INSERT INTO history VALUES (?,?,?,?,?,?,?,?,?,?)", out)


def _graphiti_file(path: Path, rows: int, expired: float = 0.0) -> None:
    """``rows`` Graphiti edges; ``expired``: the share of them expired 1 hour to 30 days after they
    were created (every second one of those also given an invalid_at), as a real export has."""
    rng = np.random.default_rng(6)
    base = np.datetime64("2025-01-01T00:00:00", "s")
    created = (base + np.sort(rng.choice(365 * 86400, rows, replace=False))).astype(str)
    edges = [{"uuid": f"e{i}", "group_id": "g", "source_node_uuid": f"n{i % 50000}", "target_node_uuid": f"t{i % 977}",
              "name": "RELATES_TO", "fact": f"fact {i}", "episodes": [f"ep{i}"], "created_at": c + "Z",
              "expired_at": None, "valid_at": c + "Z", "invalid_at": None}
             for i, c in enumerate(created.tolist())]
    later = np.random.default_rng(8)  # drawn apart: the file without expiries stays the one measured before
    for i in np.flatnonzero(later.random(rows) < expired).tolist():
        end = str(np.datetime64(created[i]) + np.timedelta64(int(later.integers(3600, 30 * 86400)), "s")) + "Z"
        edges[i]["expired_at"] = end
        if i % 2:
            edges[i]["invalid_at"] = end
    path.write_text(json.dumps(edges))


def importers(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-writes-src-") as tmp:
        generic = Path(tmp, "generic.parquet")
        generate_log(generic, max(args.rows // 10, 1), 10)
        mem0, graphiti = Path(tmp, "history.db"), Path(tmp, "edges.json")
        _mem0_file(mem0, args.rows)
        _graphiti_file(graphiti, args.rows)
        base = [_timed("import", "generic", str(generic)) for _ in range(args.runs)]
        _line("generic backfill of as many rows  [baseline]", base, args.rows)
        imported = {}
        for fmt, source in (("mem0", mem0), ("graphiti", graphiti)):
            imported[fmt] = [_timed("import", fmt, str(source)) for _ in range(args.runs)]
            _line(f"import {fmt}", imported[fmt], args.rows, base)
        expiring = Path(tmp, "expiring.json")
        _graphiti_file(expiring, args.rows, expired=args.expired)
        runs = [_timed("import", "graphiti", str(expiring)) for _ in range(args.runs)]
        _line(f"import graphiti, {args.expired:.0%} of edges expired", runs, args.rows, base)
        if args.heavy:
            skewed = Path(tmp, "skewed.db")
            _mem0_file(skewed, args.rows, heavy=args.heavy)
            runs = [_timed("import", "mem0", str(skewed)) for _ in range(args.runs)]
            _line(f"import mem0, one memory {args.heavy:,} events  [vs mem0]", runs, args.rows, imported["mem0"])


_TASKS = {"load": _load, "import": _import, "many": _assert_many, "bare": _bare_append, "fact": _fact_latency,
          "bare_latency": _bare_latency, "threads": _threads, "processes": _processes, "after_batch": _after_batch,
          "busy_key": _busy_key}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("replay")
    p.add_argument("--keys", type=int, default=1_000_000)
    p.add_argument("--per-key", type=int, default=10)
    p.add_argument("--heavy", type=int, default=0)
    p.add_argument("--heavy-single", action="store_true")
    p.add_argument("--heavy-reject", action="store_true")
    for name in ("many", "fact"):
        p = sub.add_parser(name)
        p.add_argument("--store", type=int, default=10_000_000)
        p.add_argument("--count", type=int, default=100_000)
        p.add_argument("--calls", type=int, default=200)
        p.add_argument("--as-given", action="store_true",
                       help="build the store with resolve=False (every single-valued key ~9 open facts)")
    p = sub.add_parser("writers")
    p.add_argument("--writers", type=int, default=8)
    p.add_argument("--per-writer", type=int, default=200)
    p = sub.add_parser("follow")
    p.add_argument("--count", type=int, default=90_000)
    p.add_argument("--calls", type=int, default=7)
    p = sub.add_parser("busykey")
    p.add_argument("--facts", type=int, default=100_000)
    p.add_argument("--calls", type=int, default=9)
    p = sub.add_parser("importers")
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--heavy", type=int, default=0, help="also a mem0 history with one memory this many events")
    p.add_argument("--expired", type=float, default=0.1, help="the share of expired edges of the second Graphiti file")
    args = parser.parse_args()
    print(f"{args.what}: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}, "
          f"python {sys.version.split()[0]}")
    {"replay": replay, "many": many, "fact": fact, "writers": writers, "follow": follow, "busykey": busykey,
     "importers": importers}[args.what](args)


if __name__ == "__main__":
    main()
