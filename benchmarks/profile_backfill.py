"""Where a backfill spends its time: wall and CPU seconds of every SQL statement it runs.

    python benchmarks/profile_backfill.py --rows 1000000          # the bench_backfill input
    python benchmarks/profile_backfill.py --rows 1000000 --explain # plus EXPLAIN ANALYZE per statement
    python benchmarks/profile_backfill.py --rows 1000000 --resolve # a replay of bench_writes' log
    python benchmarks/profile_backfill.py --rows 1000000 --format mem0     # bench_writes' mem0 import
    python benchmarks/profile_backfill.py --rows 1000000 --format graphiti # and its Graphiti import
    python benchmarks/profile_backfill.py --format graphiti --expired 0.1  # a tenth of the edges expired
    python benchmarks/profile_backfill.py --format mem0 --source history.db # a file of your own

Generates the same input as ``bench_backfill.py`` (with ``--resolve``, ``bench_writes.py``'s replay
log, 10 rows a key, replayed with ``resolve=True``), then runs one backfill in this process with
its DuckDB connection wrapped so that each statement's wall time and process CPU time (user +
system, all threads) are printed, slowest first; a statement run more than once (a replay's, in
each pass) is one line, its runs counted and their times summed. CPU seconds are the steadier
figure on a shared machine. ``--source`` profiles a file of your own in place of a generated one.
``--explain`` also prints DuckDB's per-operator profile (the ``EXPLAIN ANALYZE`` tree) of every
statement taking more than a tenth of the total CPU.
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb
from bench_backfill import _GENERATE
from bench_writes import _graphiti_file, _mem0_file, generate_log


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class _Timed:
    """A DuckDB connection whose statements are timed (``sql`` relations when fetched)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, log: list[tuple[str, float, float, str | None]],
                 explain_dir: str | None) -> None:
        self._con, self._log, self._explain_dir = con, log, explain_dir

    def __getattr__(self, name: str) -> Any:
        return getattr(self._con, name)

    def _timed(self, label: str, call: Any) -> Any:
        profile = None
        if self._explain_dir is not None:
            profile = str(Path(self._explain_dir) / f"{len(self._log)}.txt")
            self._con.execute("SET enable_profiling = 'query_tree'")
            self._con.execute("SET profiling_output = $p", {"p": profile})
        start, cpu = time.perf_counter(), _cpu()
        result = call()
        self._log.append((label, time.perf_counter() - start, _cpu() - cpu, profile))
        return result

    def execute(self, query: str, parameters: Any = None) -> Any:
        return self._timed(query, lambda: self._con.execute(query, parameters))

    def sql(self, query: str, *, params: Any = None) -> Any:
        relation = self._con.sql(query, params=params)
        outer = self

        class _Relation:
            def __getattr__(self, name: str) -> Any:
                attr = getattr(relation, name)
                if name in ("fetchall", "pl", "to_arrow_table", "arrow", "df"):
                    return lambda *a, **k: outer._timed(query, lambda: attr(*a, **k))
                return attr

        return _Relation() if relation is not None else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--explain", action="store_true")
    parser.add_argument("--resolve", action="store_true")
    parser.add_argument("--format", choices=("mem0", "graphiti"))
    parser.add_argument("--expired", type=float, default=0.0,
                        help="with --format graphiti: the share of edges expired (bench_writes' --expired)")
    parser.add_argument("--source", help="a file to load (with its --format) in place of a generated one")
    args = parser.parse_args()

    import tempomem as tm
    from tempomem.backfill import pipeline

    with tempfile.TemporaryDirectory(prefix="tm-profile-") as tmp:
        source = str(Path(tmp) / "input.parquet")
        if args.source:
            source = args.source
        elif args.format == "mem0":
            source = str(Path(tmp) / "history.db")
            _mem0_file(Path(source), int(args.rows))
        elif args.format == "graphiti":
            source = str(Path(tmp) / "edges.json")
            _graphiti_file(Path(source), int(args.rows), expired=args.expired)
        elif args.resolve:
            generate_log(Path(source), max(args.rows // 10, 1), 10)
        else:
            duckdb.connect().execute(_GENERATE.format(start=0, stop=int(args.rows), path=source))
        mem = tm.open(Path(tmp) / "store", create=True, predicates={"works_on": "multi"})
        log: list[tuple[str, float, float, str | None]] = []
        explain_dir = tmp if args.explain else None
        # the load's own connection (backfill/pipeline.py), wrapped
        connect = pipeline.new_connection
        pipeline.new_connection = lambda: _Timed(connect(), log, explain_dir)  # type: ignore[assignment]
        start, cpu = time.perf_counter(), _cpu()
        report = mem.backfill(source, format=args.format, resolve=args.resolve)
        total, total_cpu = time.perf_counter() - start, _cpu() - cpu
        pipeline.new_connection = connect
        print(f"{report.rows_read:,} rows read: {total:.2f}s wall, {total_cpu:.2f}s cpu, loaded {report.loaded:,}; "
              f"load average {os.getloadavg()[0]:.1f}")
        rest_wall, rest_cpu = total - sum(r[1] for r in log), total_cpu - sum(r[2] for r in log)
        print(f"{rest_wall:7.2f}s {rest_cpu:7.2f}cpu  (not a statement: the Arrow stream and Parquet encoding of "
              f"the write, the Delta commit)")
        runs: dict[str, list[float]] = {}  # statement: [runs, wall, cpu]
        for label, wall, spent, _ in log:
            summed = runs.setdefault(" ".join(label.split())[:150], [0, 0.0, 0.0])
            summed[0], summed[1], summed[2] = summed[0] + 1, summed[1] + wall, summed[2] + spent
        for label, (n, wall, spent) in sorted(runs.items(), key=lambda r: -r[1][2])[:20]:
            print(f"{wall:7.2f}s {spent:7.2f}cpu {int(n):3d}x  {label}")
        for label, _, spent, profile in log:
            if profile and spent > total_cpu / 10 and os.path.exists(profile):
                print(f"\n=== {spent:.2f}cpu {' '.join(label.split())[:100]}")
                print(Path(profile).read_text())


if __name__ == "__main__":
    main()
