"""A fold at the store sizes users have, beside DuckDB writing the same rows sorted itself.

    python benchmarks/bench_fold.py --store 10000000 --runs 3     # the store replayed, as bench_writes builds it
    python benchmarks/bench_fold.py --store 1000000 --as-given    # loaded as given

A store folds itself inside a commit once the rows written since its last fold are an eighth of
it (``Storage.compact_if_needed``): every row is rewritten with its belief end, sorted, into files
of 64 row groups. The fold is DuckDB's sort streamed to the store's Parquet writer (which writes
the ``fact_id`` Bloom filters); the baseline is DuckDB sorting the same rows in the same order and
writing them with its own ``COPY`` (the fold's writer until the twenty-third session), into
files of the same size. Each run folds (or copies) a fresh copy of one built store, in a spawned
process of its own; figures are medians of ``--runs``, with CPU seconds and peak RSS.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench_writes import _build_store, _copy_of


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _fold(store: str) -> dict[str, float]:
    from tempomem.storage import Storage

    storage = Storage(store)
    started, cpu = time.perf_counter(), _cpu()
    storage.fold()
    return {"seconds": time.perf_counter() - started, "cpu": _cpu() - cpu,
            "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def _duckdb_copy(store: str) -> dict[str, float]:
    from tempomem.connection import new_connection, without_progress_bar
    from tempomem.schema import SORT_KEYS
    from tempomem.storage import Storage
    from tempomem.storage.writer import COMPRESSION, FOLD_ROW_GROUPS_PER_FILE, ROW_GROUP_ROWS

    files = list(Storage(store).snapshot().files)
    order = "folded_until IS NOT NULL, " + ", ".join(name for name, _ in SORT_KEYS)
    con = new_connection()
    without_progress_bar(con)
    started, cpu = time.perf_counter(), _cpu()
    with tempfile.TemporaryDirectory(prefix="bench-fold-spill-") as spill:
        con.execute("SET memory_limit = '2GB'")
        con.execute("SET temp_directory = $dir", {"dir": spill})
        # the folder is ours (a temp folder) and COPY's options take no parameter
        con.execute(f"COPY (SELECT * FROM read_parquet($files) ORDER BY {order}) TO $out (FORMAT parquet, "
                    f"COMPRESSION {COMPRESSION}, ROW_GROUP_SIZE {ROW_GROUP_ROWS}, "
                    f"ROW_GROUPS_PER_FILE {FOLD_ROW_GROUPS_PER_FILE}, PRESERVE_ORDER true)",
                    {"files": files, "out": str(Path(store) / "copied")})
    return {"seconds": time.perf_counter() - started, "cpu": _cpu() - cpu,
            "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def _listed(runs: list[dict[str, float]]) -> str:
    return ", ".join(f"{r['seconds']:.2f} s {r['rss_mb']:,.0f} MB" for r in runs)


def _spawned(task: object, *args: object) -> dict[str, float]:
    """``task(*args)`` in a fresh process. The store is built in one too: a child's peak RSS
    counts from its parent's at the fork, so the parent stays small."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(task, args)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", type=int, default=10_000_000, help="rows of the log the store is built from")
    parser.add_argument("--as-given", action="store_true", help="build the store with resolve=False")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(f"fold: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}, python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory(prefix="bench-fold-") as root:
        built = os.path.join(root, "built")
        _spawned(_build_store, built, args.store, args.as_given)
        runs: dict[str, list[dict[str, float]]] = {"fold": [], "copy": []}
        for _ in range(args.runs):
            for task, timed in (("fold", _fold), ("copy", _duckdb_copy)):  # in turns, each on a fresh copy
                with _copy_of(built) as store:
                    runs[task].append(_spawned(timed, store))
    med = {task: {k: statistics.median(r[k] for r in rs) for k in ("seconds", "cpu", "rss_mb")}
           for task, rs in runs.items()}
    f, c = med["fold"], med["copy"]
    print(f"store from a {args.store:,}-row log ({'as given' if args.as_given else 'replayed'}); "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"fold            {f['seconds']:7.2f} s (cpu {f['cpu']:.1f} s, peak {f['rss_mb']:,.0f} MB; runs "
          f"{_listed(runs['fold'])})")
    print(f"DuckDB's COPY   {c['seconds']:7.2f} s (cpu {c['cpu']:.1f} s, peak {c['rss_mb']:,.0f} MB; runs "
          f"{_listed(runs['copy'])})   ratio {f['seconds'] / c['seconds']:.2f}x "
          f"(cpu {f['cpu'] / c['cpu']:.2f}x)")


if __name__ == "__main__":
    main()
