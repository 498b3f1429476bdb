"""Backfill throughput: N rows from Parquet into a new store, against DuckDB copying the file.

    python benchmarks/bench_backfill.py                 # 10 million rows, 3 runs each
    python benchmarks/bench_backfill.py --rows 1000000 --runs 1
    python benchmarks/bench_backfill.py --parts          # also: what parts of the load cost alone
    python benchmarks/bench_backfill.py --incremental    # also: loads into a store that holds a load

The input is generated in a temporary folder (one row per fact, unique keys, string times with
offsets, an epoch-free mix of typed and text columns plus one extra column kept as attributes).
Each timed run happens in a fresh spawned process so that its peak RSS (``ru_maxrss``) is the
load's own. The baseline is DuckDB alone reading the same file and writing it back to Parquet
in the store's compression (``storage.COMPRESSION``), run the same number of times in the same
invocation; the ratio is of the medians.

``--parts`` then times, each in a fresh process and on one store the runs wrote, two things the
load cannot do without: DuckDB copying the input sorted by key (what any key-ordered write
pays), and Arrow's Parquet writer encoding the stored revision rows (the store's columns and
writer settings) on one thread, which is what a load's write stage costs at the least. Last,
a *bare load* of the input: what is left of a load with every check taken out (see
``_BARE_ROWS``), the floor of any load that writes the store's row on this machine.

``--incremental`` times two loads into a copy of a store the runs wrote (N rows already held),
against the load into a new store of the same run: N new rows (the next day's batch, other
keys), and the same file again (a notebook cell run twice), which loads nothing and reports
every row as a duplicate, having compared it with the stored facts.
"""

from __future__ import annotations

import argparse
import itertools
import multiprocessing
import os
import resource
import statistics
import tempfile
import time
from pathlib import Path

_GENERATE = """
COPY (
    SELECT 'svc-' || (i // 4) AS subject,
           'attr' || (i % 4) AS predicate,
           'value-' || (i % 1000) AS object,
           strftime(TIMESTAMP '2020-01-01' + to_seconds(i % 100000000), '%Y-%m-%dT%H:%M:%S') || '-08:00'
               AS valid_from,
           CASE WHEN i % 3 = 0 THEN TIMESTAMPTZ '2024-06-01' + to_seconds(i % 1000000) END AS valid_to,
           TIMESTAMPTZ '2025-01-01' + to_microseconds(i * 997) AS recorded_at,
           CASE WHEN i % 2 = 0 THEN 'tool_verified' ELSE 'user' END AS source,
           (i % 100) / 100.0 AS confidence,
           'INC-' || (i % 5000) AS ticket
    FROM range({start}, {stop}) t(i)
) TO '{path}' (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 122880)
"""


# The bare load: the input parsed into a table (the one time of the input given as text), then
# range by range of subjects sorted by key and made into the store's row with the load's
# generated ids, every other stored column NULL or the load's constant, encoded by the store's
# writer on two threads (two files, alternate row groups). No rule, no hash, no repeat, no
# count, no flag, no Delta commit: only what writing this input as stored rows cannot skip.
_BARE_TABLE = """
CREATE TEMP TABLE bare AS
SELECT file_row_number AS row, subject, predicate, object, CAST(valid_from AS TIMESTAMPTZ) AS valid_from,
       valid_to, recorded_at, source, confidence, CAST(json_object('ticket', ticket) AS VARCHAR) AS attributes
FROM read_parquet($source, file_row_number = true)
"""
_BARE_COLUMNS = {
    "scope": "'default'", "subject": "subject", "predicate": "predicate", "object": "object",
    "text": "subject || ' ' || predicate || ' ' || object", "valid_from": "valid_from", "valid_to": "valid_to",
    "valid_from_inferred": "false", "recorded_at": "recorded_at",
    "status": "CASE WHEN valid_to IS NULL THEN 'live' ELSE 'ended' END", "source": "source",
    "confidence": "confidence", "origin": "'backfill'", "ingested_at": "now()", "artifacts": "CAST([] AS VARCHAR[])",
    "attributes": "attributes", "link_type": "'entity'", "weight": "CAST(1 AS DOUBLE)", "revision": "1",
    "first_recorded_at": "recorded_at", "folded": "true",
}
# {us} is the load's clamped recorded_at in µs (backfill.CLAMPED_US), the id's first half.
_BARE_ROWS = f"""
SELECT {", ".join(f"{sql} AS {name}" for name, sql in _BARE_COLUMNS.items())}, _id_us, 1000 + row AS _id_serial
FROM (SELECT *, {{us}} AS _id_us FROM bare
      WHERE ($lo IS NULL OR subject >= $lo) AND ($hi IS NULL OR subject < $hi)
      -- sorted while narrow, as the load does: the columns made from a row come after the sort
      ORDER BY subject, predicate, _id_us, row)
"""


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _cpu_s() -> float:
    """CPU seconds (user + system) of this process: steadier than wall time on a shared machine."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _run_backfill(source: str, store: str, queue: multiprocessing.Queue) -> None:
    import tempomem as tm

    mem = tm.open(store, create=True)
    start, cpu = time.perf_counter(), _cpu_s()
    report = mem.backfill(source)
    elapsed = time.perf_counter() - start
    queue.put((elapsed, _peak_rss_mb(), report.loaded, report.rejected.height, _cpu_s() - cpu))


def _run_backfill_into(source: str, store: str, queue: multiprocessing.Queue) -> None:
    import tempomem as tm

    mem = tm.open(store)
    start, cpu = time.perf_counter(), _cpu_s()
    report = mem.backfill(source)
    elapsed = time.perf_counter() - start
    queue.put((elapsed, _peak_rss_mb(), report.loaded, report.duplicates, _cpu_s() - cpu))


def _run_duckdb_copy(source: str, target: str, queue: multiprocessing.Queue) -> None:
    import duckdb

    from tempomem.storage import COMPRESSION

    con = duckdb.connect()
    start, cpu = time.perf_counter(), _cpu_s()
    con.read_parquet(source).write_parquet(target, compression=COMPRESSION)
    elapsed = time.perf_counter() - start
    queue.put((elapsed, _peak_rss_mb(), None, None, _cpu_s() - cpu))


def _run_sorted_copy(source: str, target: str, queue: multiprocessing.Queue) -> None:
    import duckdb

    from tempomem.storage import COMPRESSION

    con = duckdb.connect()
    start, cpu = time.perf_counter(), _cpu_s()
    con.read_parquet(source).order("subject, predicate, recorded_at").write_parquet(target, compression=COMPRESSION)
    queue.put((time.perf_counter() - start, _peak_rss_mb(), None, None, _cpu_s() - cpu))


def _run_encoding(store: str, target: str, queue: multiprocessing.Queue) -> None:
    import pyarrow.parquet as pq

    from tempomem.storage import ROW_GROUP_ROWS, parquet_writer

    (stored,) = Path(store).glob("*.parquet")
    batches = pq.read_table(stored).to_batches(ROW_GROUP_ROWS)
    start, cpu = time.perf_counter(), _cpu_s()
    with parquet_writer(target) as writer:
        for batch in batches:
            writer.write_batch(batch, row_group_size=ROW_GROUP_ROWS)
    queue.put((time.perf_counter() - start, _peak_rss_mb(), None, None, _cpu_s() - cpu))


def _run_bare_load(source: str, target: str, queue: multiprocessing.Queue) -> None:
    import duckdb
    import pyarrow as pa

    from tempomem.ids import CLAMPED_US, generated_ids
    from tempomem.schema import EVENT_SCHEMA
    from tempomem.storage import ROW_GROUP_ROWS, BackgroundWriter

    start, cpu = time.perf_counter(), _cpu_s()
    con = duckdb.connect()
    con.execute("SET memory_limit = '2GB'")
    con.execute(_BARE_TABLE, {"source": source})
    # Ranges of about 2M rows, as the load sorts them (bounds from a 1% sample of subjects).
    ranges = -(-con.sql("SELECT count(*) FROM bare").fetchall()[0][0] // 2_000_000)
    sample = [s for (s,) in con.sql("SELECT subject FROM bare USING SAMPLE 1 PERCENT (system, 7) ORDER BY 1")
              .fetchall()]
    bounds = [None, *sorted({sample[len(sample) * i // ranges] for i in range(1, ranges)}), None]
    query = _BARE_ROWS.format(us=CLAMPED_US.format("recorded_at"))
    with BackgroundWriter(Path(target + ".0")) as first, BackgroundWriter(Path(target + ".1")) as second:
        written, batches = 0, 0
        for lo, hi in itertools.pairwise(bounds):
            for batch in con.sql(query, params={"lo": lo, "hi": hi}).to_arrow_reader(ROW_GROUP_ROWS):
                n = batch.num_rows
                columns = [generated_ids(batch.column("_id_us"), batch.column("_id_serial")),
                           *(batch.column(f.name) if f.name in _BARE_COLUMNS else pa.nulls(n, f.type)
                             for f in list(EVENT_SCHEMA)[1:])]
                (first, second)[batches % 2].write(
                    pa.RecordBatch.from_arrays(columns, names=EVENT_SCHEMA.names).cast(EVENT_SCHEMA))
                written, batches = written + n, batches + 1
    queue.put((time.perf_counter() - start, _peak_rss_mb(), written, None, _cpu_s() - cpu))


def _in_child(target: object, *args: str) -> tuple:
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=target, args=(*args, queue))
    proc.start()
    result = queue.get()
    proc.join()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--parts", action="store_true",
                        help="also time a sorted copy, the encoding alone and a bare load")
    parser.add_argument("--incremental", action="store_true",
                        help="also time loads into a store holding a load: new rows, and the same rows again")
    args = parser.parse_args()

    import duckdb

    with tempfile.TemporaryDirectory(prefix="tm-bench-") as tmp:
        source = str(Path(tmp) / "input.parquet")
        start = time.perf_counter()
        # The path is ours (a temp folder) and COPY takes no parameter for it.
        duckdb.connect().execute(_GENERATE.format(start=0, stop=int(args.rows), path=source))
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        print(f"generated {args.rows:,} rows in {time.perf_counter() - start:.1f}s "
              f"({Path(source).stat().st_size / 2**20:.0f} MiB)")

        loads, copies = [], []
        for run in range(args.runs):
            copy = _in_child(_run_duckdb_copy, source, str(Path(tmp) / f"copy{run}.parquet"))
            copies.append(copy)
            load = _in_child(_run_backfill, source, str(Path(tmp) / f"store{run}"))
            loads.append(load)
            assert load[2] == args.rows and load[3] == 0, load
            print(f"run {run + 1}: backfill {load[0]:.2f}s ({args.rows / load[0]:,.0f} rows/s, "
                  f"cpu {load[4]:.1f}s, peak RSS {load[1]:,.0f} MiB); duckdb copy {copy[0]:.2f}s "
                  f"(cpu {copy[4]:.1f}s, peak RSS {copy[1]:,.0f} MiB); load average {os.getloadavg()[0]:.1f}")

        load_s = statistics.median(t for t, *_ in loads)
        copy_s = statistics.median(t for t, *_ in copies)
        print(f"median backfill: {load_s:.2f}s = {args.rows / load_s:,.0f} rows/s "
              f"(target >= 1,000,000), peak RSS max {max(r for _, r, *_ in loads):,.0f} MiB (target < 4096)")
        print(f"median duckdb copy: {copy_s:.2f}s; backfill / copy = {load_s / copy_s:.2f}x (target <= 3x)")
        cpu_ratio = statistics.median(r[4] for r in loads) / statistics.median(r[4] for r in copies)
        print(f"cpu seconds, backfill / copy = {cpu_ratio:.2f}x (less sensitive to other load)")
        if args.incremental:
            _incremental(tmp, source, args.rows, args.runs, load_s)
        if args.parts:
            for label, part, inputs in (
                ("duckdb copy sorted by key", _run_sorted_copy, (source, str(Path(tmp) / "sorted.parquet"))),
                ("encoding of the stored rows alone, one thread", _run_encoding,
                 (str(Path(tmp) / "store0"), str(Path(tmp) / "encoded.parquet"))),
                ("bare load (no check, no report, two encoder threads)", _run_bare_load,
                 (source, str(Path(tmp) / "bare.parquet"))),
            ):
                times = [_in_child(part, *inputs) for _ in range(args.runs)]
                assert all(t[2] in (None, args.rows) for t in times), times
                wall, cpu = statistics.median(t[0] for t in times), statistics.median(t[4] for t in times)
                print(f"{label}: median {wall:.2f}s ({args.rows / wall:,.0f} rows/s), cpu {cpu:.1f}s "
                      f"({wall / copy_s:.2f}x the copy)")


def _incremental(tmp: str, source: str, rows: int, runs: int, fresh_s: float) -> None:
    """Loads into a copy of ``store0`` (``rows`` rows held), each beside ``fresh_s``, the median
    load of as many rows into a new store from the same run."""
    import shutil

    import duckdb

    following = str(Path(tmp) / "following.parquet")
    duckdb.connect().execute(_GENERATE.format(start=int(rows), stop=2 * int(rows), path=following))
    grown, extended = _grown_export(tmp)
    for label, input_, loaded in (("new rows into a store holding a load", following, rows),
                                  ("the same file again (every row already stored)", source, 0),
                                  ("its export grown since (a tenth of the facts ended later)", grown, extended)):
        times = []
        for run in range(runs):
            store = Path(tmp) / f"held{run}"
            shutil.rmtree(store, ignore_errors=True)
            shutil.copytree(Path(tmp) / "store0", store)
            times.append(_in_child(_run_backfill_into, input_, str(store)))
            assert times[-1][2] == loaded and times[-1][3] == rows - (loaded if input_ != grown else 0), times[-1]
            shutil.rmtree(store)
        wall, cpu = statistics.median(t[0] for t in times), statistics.median(t[4] for t in times)
        print(f"{label}: median {wall:.2f}s ({rows / wall:,.0f} rows/s), cpu {cpu:.1f}s; "
              f"{wall / fresh_s:.2f}x the load into a new store; load average {os.getloadavg()[0]:.1f}")


# A later export of the store: every revision as exported (each a duplicate when loaded again),
# and a tenth of the facts with a revision recorded 400 days on that ends them (each the next
# revision of a stored fact). {export} and {path} are ours (a temp folder).
_GROWN = """
COPY (
    SELECT * FROM read_parquet('{export}')
    UNION ALL BY NAME
    SELECT * REPLACE (recorded_at + INTERVAL 400 DAY AS recorded_at,
                      coalesce(valid_to, TIMESTAMPTZ '2025-06-01') AS valid_to, 'ended' AS status)
    FROM read_parquet('{export}') WHERE hash(fact_id) % 10 = 0
) TO '{path}' (FORMAT parquet, COMPRESSION zstd)
"""


def _grown_export(tmp: str) -> tuple[str, int]:
    """The export of ``store0`` grown since (:data:`_GROWN`), and how many rows it adds."""
    import duckdb

    import tempomem as tm

    export, grown = str(Path(tmp) / "export.parquet"), str(Path(tmp) / "grown.parquet")
    tm.export.export(tm.open(str(Path(tmp) / "store0")), export)
    con = duckdb.connect()
    con.execute(_GROWN.format(export=export, path=grown))
    added = con.execute("SELECT count(*) FROM read_parquet($p)", {"p": grown}).fetchone()[0]
    return grown, added - con.execute("SELECT count(*) FROM read_parquet($p)", {"p": export}).fetchone()[0]


if __name__ == "__main__":
    main()
