"""Read figures (issue 20): point reads and snapshots, each beside a baseline from the same run.

    python benchmarks/workload.py --revisions 1e7 --out /tmp/wl10m          # once: a folded store
    python benchmarks/bench_reads.py --store /tmp/wl10m/store --runs 25
    python benchmarks/bench_reads.py --revisions 1e6 --runs 25             # builds a store in a temp folder

Baselines, measured in the same process:
- point forms (``mem.as_of(t, s, p)``, ``as_believed``, ``history``): the same calls as main made
  them, the point path off (``mem.reader.point_reads = False``: the query over the whole
  version) and the views of ``revisions.sql``;
- point through SQL on a ``connect()``ed connection: DuckDB reading the same Parquet files with
  the key filter and no bitemporal logic (the floor);
- snapshots (``mem.as_of(t)``, ``mem.as_believed(t, b)``, full frames): the same calls with the
  views of ``revisions.sql`` (union and anti-join) in place of ``folded.sql``'s, the floor
  fetching every column of the rows its plain predicate keeps, and the scan floor: DuckDB reading
  exactly the answer's rows and columns by the equivalent plain predicate, unsorted, as Arrow;
- a snapshot of two columns (``mem.as_of(t, columns=["subject", "object"])``): the full frame,
  then the two columns selected from it;
- ``count(*)`` of ``as_of``: DuckDB counting the same files with the equivalent plain predicate
  (the latest revisions, not retracted or erased, valid at t).
Point forms are timed twice: on keys not read before, and on 8 keys asked again in turn (a point
reader keeps the row groups it decoded). Each figure is the median of ``--runs`` (points) or
``--snapshots`` (scans) timed runs after one warm-up, with min and max, and the median CPU time
of the process; the load averages are printed before and after each section.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import workload

import tempomem as tm
from tempomem.connection import use_views
from tempomem.schema import PREVIOUS_COLUMNS

T_VALID = datetime(2026, 3, 17, tzinfo=UTC)   # as compare.py
T_BELIEF = datetime(2026, 3, 20, tzinfo=UTC)
_VALID = "(valid_from IS NULL OR valid_from <= $t) AND (valid_to IS NULL OR $t < valid_to)"
#: In a folded store, the rows of ``as_of``: each fact's latest revision, believed; of
#: ``as_believed``: the revisions believed at $b (as recorded), neither retracted nor erased.
_LATEST = "folded_until IS NULL AND status NOT IN ('retracted', 'erased')"
_BELIEVED = ("recorded_at <= $b AND (folded_until IS NULL OR $b < folded_until) AND retracted_at IS NULL "
             "AND status <> 'erased'")
#: Stored columns neither frame has.
_NOT_ANSWERED = [*PREVIOUS_COLUMNS, "folded"]


def timed(fn: Callable[[], object], runs: int) -> tuple[float, float, float, float]:
    """Median, min and max wall time of ``runs`` calls after a warm-up, and the median CPU time of
    this process (all its threads): on a shared machine the CPU time moves less with the load."""
    fn()  # warm-up
    wall, cpu = [], []
    for _ in range(runs):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
    return statistics.median(wall), min(wall), max(wall), statistics.median(cpu)


def line(label: str, ours: tuple[float, ...], base: tuple[float, ...], base_label: str) -> None:
    print(f"{label:<26} {ours[0]:9.2f} ms ({ours[1]:.2f}-{ours[2]:.2f}, cpu {ours[3]:.2f})   {base_label}: "
          f"{base[0]:9.2f} ms ({base[1]:.2f}-{base[2]:.2f}, cpu {base[3]:.2f})   ratio {ours[0] / base[0]:.2f}x "
          f"(cpu {ours[3] / base[3]:.2f}x)", flush=True)


def load() -> str:
    return "load " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


@contextlib.contextmanager
def main_views(mem: tm.Memory) -> Iterator[None]:
    """The reader's connection on the views of revisions.sql (union, anti-join), as before folded.sql,
    and the point path off: each query over the whole version, as main read it."""
    con = mem.reader.connection()
    use_views(con, folded=False, first=False)
    mem.reader.point_reads = False
    try:
        yield
    finally:
        mem.reader.point_reads = True
        use_views(con, folded=True, first=False)  # the store is folded: its own views again


def points(mem: tm.Memory, runs: int) -> None:
    subjects = mem.sql("SELECT count(DISTINCT subject) FROM facts").fetchall()[0][0]
    keys = [(f"e{i * 7919 % subjects:07d}", workload.PREDICATES[i % len(workload.PREDICATES)]) for i in range(runs + 1)]
    forms = {
        "point as_of": lambda k: mem.as_of(T_VALID, *k),
        "point as_believed": lambda k: mem.as_believed(T_VALID, T_BELIEF, *k),
        "point history": lambda k: mem.history(*k),
    }
    # each form its own keys, which no query read before: a point reader keeps row groups it read
    # twice (keyindex._Groups), so a form asking the keys another asked would not read them cold
    own = {label: [(f"e{i * 7919 % subjects:07d}", workload.PREDICATES[i % len(workload.PREDICATES)])
                   for i in range(1000 * n, 1000 * n + runs + 1)] for n, label in enumerate(forms, start=1)}
    for label, form in forms.items():
        it = iter(own[label] * 2)
        ours = timed(lambda form=form, it=it: form(next(it)), runs)
        with main_views(mem):
            it = iter(own[label] * 2)
            base = timed(lambda form=form, it=it: form(next(it)), runs)
        line(label, ours, base, "as main read it")
    # 8 of those keys cycled, each asked again (a group is kept from its second read on)
    for label, form in forms.items():
        again = own[label][1:9] * (runs // 8 + 2)
        it = iter(again)
        ours = timed(lambda form=form, it=it: form(next(it)), runs)
        with main_views(mem):
            it = iter(again)
            base = timed(lambda form=form, it=it: form(next(it)), runs)
        line(f"{label}, again", ours, base, "as main read it")
    con = mem.connect()
    floor = duckdb.connect()
    floor.execute("SET TimeZone = 'UTC'")
    floor.read_parquet(list(mem._storage.snapshot().files)).create_view("raw")
    it, it2 = iter(keys * 2), iter(keys * 2)
    ours = timed(lambda: con.sql("SELECT * FROM as_of($t) WHERE subject = $s AND predicate = $p",
                                 params={"t": T_VALID, "s": (k := next(it))[0], "p": k[1]}).to_arrow_table(), runs)
    base = timed(lambda: floor.sql(f"SELECT * FROM raw WHERE subject = $s AND predicate = $p AND {_VALID}",
                                   params={"t": T_VALID, "s": (k := next(it2))[0], "p": k[1]}).to_arrow_table(), runs)
    line("point as_of through SQL", ours, base, "floor")


def snapshots(mem: tm.Memory, runs: int) -> None:
    forms = {"snapshot as_of": lambda: mem.as_of(T_VALID),
             "snapshot as_believed": lambda: mem.as_believed(T_VALID, T_BELIEF)}
    for label, form in forms.items():
        ours = timed(form, runs)
        with main_views(mem):
            base = timed(form, runs)
        line(label, ours, base, "as main read it")
    floor = duckdb.connect()
    floor.execute("SET TimeZone = 'UTC'")
    floor.read_parquet(list(mem._storage.snapshot().files)).create_view("raw")
    ours = timed(lambda: mem.as_of(T_VALID), runs)
    base = timed(lambda: floor.sql(f"SELECT * FROM raw WHERE {_VALID} ORDER BY scope, subject, predicate",
                                   params={"t": T_VALID}).to_arrow_table(), runs)
    line("snapshot as_of", ours, base, "floor (every revision valid at t)")
    # The scan floor of a folded store: DuckDB reading the answer's own rows, their columns, by
    # the plain predicate, unsorted, as Arrow. What a snapshot adds to it is its order and the frame.
    for label, form, where, params in (
            ("snapshot as_of", lambda: mem.as_of(T_VALID), _LATEST, {"t": T_VALID}),
            ("snapshot as_believed", lambda: mem.as_believed(T_VALID, T_BELIEF), _BELIEVED,
             {"t": T_VALID, "b": T_BELIEF})):
        ours = timed(form, runs)
        base = timed(lambda where=where, params=params: floor.sql(
            f"SELECT * EXCLUDE ({', '.join(_NOT_ANSWERED)}) FROM raw WHERE {where} AND {_VALID}",
            params=params).to_arrow_table(), runs)
        line(label, ours, base, "scan floor (the answer's rows, unsorted Arrow)")
    # the frame an analyst often wants: who holds what, two of the 24 columns
    ours = timed(lambda: mem.as_of(T_VALID, columns=["subject", "object"]), runs)
    base = timed(lambda: mem.as_of(T_VALID).select("subject", "object"), runs)
    line("snapshot as_of, columns=[subject, object]", ours, base, "every column, then the two")
    con = mem.connect()
    ours = timed(lambda: con.sql("SELECT count(*) FROM as_of($t)", params={"t": T_VALID}).fetchall(), runs)
    base = timed(lambda: floor.sql("SELECT count(*) FROM raw WHERE folded_until IS NULL AND status NOT IN "
                                   f"('retracted', 'erased') AND {_VALID}", params={"t": T_VALID}).fetchall(), runs)
    line("count(*) of as_of", ours, base, "floor count")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, help="a store made by workload.py (its `store` folder)")
    parser.add_argument("--revisions", type=float, default=1e6, help="without --store: build one of this size")
    parser.add_argument("--runs", type=int, default=25, help="timed runs of each point form (one key each)")
    parser.add_argument("--snapshots", type=int, default=3, help="timed runs of each scan (0: none)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.store or workload.build(Path(tmp) / "wl", int(args.revisions)).store
        mem = tm.open(path)
        print(f"store {path}: {mem.sql('SELECT count(*) FROM _tm_events').fetchall()[0][0]:,} revisions, "
              f"{len(mem._storage.snapshot().files)} files; {load()}", flush=True)
        points(mem, args.runs)
        print(load(), flush=True)
        if args.snapshots:
            snapshots(mem, args.snapshots)
            print(load(), flush=True)


if __name__ == "__main__":
    main()
