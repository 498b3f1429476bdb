"""Every call into ``deltalake``, fork-safe.

Each goes through :func:`run`. deltalake's Rust runtime cannot be used in a process forked
from one that already used it (it panics), so in such a child the call is carried out by a
worker process started with ``spawn``.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import pyarrow as pa

from ..errors import TempomemError
from ..schema import EVENT_SCHEMA, STATS_COLUMNS
from . import footer
from .writer import writer_properties

T = TypeVar("T")

#: Files a compaction replaced are deleted once older than this; readers that listed them
#: just before the compaction can still finish.
_VACUUM_RETENTION_HOURS = 1


@dataclass(frozen=True)
class Snapshot:
    """One version of the table: its number and the absolute paths of its data files."""

    version: int
    files: tuple[str, ...]



_runtime_pid: int | None = None
_worker: tuple[int, Any, Any] | None = None  # (owner pid, process, connection)
_worker_lock = threading.Lock()
_tables: dict[str, Any] = {}


def run(op: Callable[..., T], *args: Any) -> T:
    """Run a deltalake operation here, or in a spawned worker when this is a forked child."""
    global _runtime_pid
    pid = os.getpid()
    if _runtime_pid is None or _runtime_pid == pid:
        _runtime_pid = pid
        return op(*args)
    with _worker_lock:  # one request at a time on the pipe
        conn = _worker_connection(pid)
        conn.send((op, args))
        ok, value = conn.recv()
    if not ok:
        raise value
    return value


def _worker_connection(pid: int) -> Any:
    """A daemonic spawned worker for this process: daemonic, so it never blocks the exit."""
    global _worker
    if _worker is None or _worker[0] != pid or not _worker[1].is_alive():
        ctx = multiprocessing.get_context("spawn")
        ours, theirs = ctx.Pipe()
        process = ctx.Process(target=_serve, args=(theirs,), daemon=True, name="tempomem-delta")
        process.start()
        _worker = (pid, process, ours)
    return _worker[2]


def _serve(conn: Any) -> None:
    """The worker's loop: run each operation sent and send back its result or its error."""
    while True:
        try:
            op, args = conn.recv()
        except EOFError:
            return
        try:
            conn.send((True, op(*args)))
        except Exception as exc:
            conn.send((False, exc))


def _table(path: str) -> Any:
    from deltalake import DeltaTable

    dt = _tables.get(path)
    if dt is None:
        dt = _tables[path] = DeltaTable(path)
    return dt


def op_create(path: str) -> None:
    from deltalake import DeltaTable

    DeltaTable.create(
        path,
        schema=EVENT_SCHEMA,
        name="tempomem",
        configuration={"delta.dataSkippingStatsColumns": ",".join(STATS_COLUMNS)},
    )


def op_snapshot(path: str, newest_on_disk: int) -> Snapshot:
    from deltalake.exceptions import DeltaError

    try:
        dt = _table(path)
        if dt.version() < newest_on_disk:
            dt.update_incremental()
    except DeltaError as exc:  # a damaged log: named in one line, not deltalake's backtrace
        _tables.pop(path, None)
        raise TempomemError(f"store: cannot read the Delta log of {path}: {str(exc).splitlines()[0]}") from None
    return Snapshot(dt.version(), tuple(dt.file_uris()))


def op_plain_appends(path: str) -> bool:
    """Whether an append may be written as a plain log entry (:mod:`.log`): the table asks
    nothing of a writer beyond what that entry does (writer version 2 at most, no invariants)."""
    dt = _table(path)
    dt.update_incremental()
    return dt.protocol().min_writer_version <= 2 and not any(
        "delta.invariants" in (f.metadata or {}) for f in dt.schema().fields)


def op_checkpoint(path: str) -> None:
    dt = _table(path)
    dt.update_incremental()
    dt.create_checkpoint()


def op_add_files(path: str, entries: list[tuple[str, int, int, str]], mode: str,
                 replaced: list[tuple[str, int]] | None = None, info: dict[str, str] | None = None) -> None:
    """Commit Parquet files already written in the table folder as one transaction.

    ``mode="overwrite"`` (a fold) also removes every file of the previous version; ``replaced``
    (a compaction: path, size) removes those files only, and marks the commit as changing no
    data. Removed files are deleted from disk once older than the retention, so readers that
    listed them can finish. ``info`` goes into the commit's commitInfo.
    """
    from deltalake import CommitProperties
    from deltalake.transaction import AddAction, RemoveAction

    dt = _table(path)
    dt.update_incremental()
    rewrite = replaced is not None
    actions: list[Any] = [AddAction(name, size, {}, mtime_ms, not rewrite, stats)
                          for name, size, mtime_ms, stats in entries]
    now_ms = int(datetime.now(UTC).timestamp() * 1000)
    actions += [RemoveAction(name, False, now_ms, size) for name, size in replaced or ()]
    dt.create_write_transaction(actions, mode=mode, schema=EVENT_SCHEMA,
                                commit_properties=CommitProperties(custom_metadata=info) if info else None)
    if mode == "overwrite" or rewrite:
        dt.update_incremental()  # the transaction does not move this handle's snapshot
        _vacuum(dt, every_seconds=0 if mode == "overwrite" else _VACUUM_RETENTION_HOURS * 3600 / 4)


def _stat_value(value: Any, *, upper: bool) -> Any:
    """A Parquet min/max as Delta writes it: timestamps at millisecond precision, as UTC text.

    Delta statistics hold milliseconds; a maximum is rounded up (not truncated like the
    minimum) so that it still bounds every value of the file and no reader skips it wrongly.
    ``None`` when no millisecond bounds it (within 1 ms of the end of year 9999).
    """
    if not isinstance(value, datetime):
        return value
    value = value.astimezone(UTC)
    floor = value.replace(microsecond=value.microsecond // 1000 * 1000)
    if upper and floor != value:
        if floor > datetime.max.replace(tzinfo=UTC) - timedelta(milliseconds=1):
            return None
        floor += timedelta(milliseconds=1)
    return floor.strftime("%Y-%m-%dT%H:%M:%S.") + f"{floor.microsecond // 1000:03d}Z"


def parquet_stats(path: str | os.PathLike[str]) -> str:
    """Delta file statistics (JSON) of a Parquet file, from its footer, for ``STATS_COLUMNS`` only.

    Subject, object, text and attributes never appear in them (SPEC §3). A column whose
    row groups lack statistics, or whose maximum no millisecond bounds, is left out of
    min/max (readers then never skip on it).
    """
    meta = footer.metadata(path)
    index = footer.column_places(meta)
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    for name in STATS_COLUMNS:
        groups = [meta.row_group(g).column(index[name]).statistics for g in range(meta.num_row_groups)]
        if any(s is None or not s.has_null_count for s in groups):
            continue
        nulls[name] = sum(s.null_count for s in groups)
        valued = [s for s in groups if s.null_count < s.num_values]
        if valued and all(s.has_min_max for s in valued):
            low = _stat_value(min(s.min for s in valued), upper=False)
            high = _stat_value(max(s.max for s in valued), upper=True)
            if high is not None:
                mins[name], maxs[name] = low, high
    return json.dumps({"numRecords": meta.num_rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls})


_last_vacuum: dict[str, float] = {}


def _vacuum(dt: Any, *, every_seconds: float = 0) -> None:
    """Delete files no version within the retention references. ``every_seconds``: not more
    often than that per table and process (a compaction's replaced files are young anyway: a
    vacuum lists the whole folder, and every merge of small files running one would cost more
    than the merge)."""
    now = time.monotonic()
    if every_seconds and now - _last_vacuum.get(dt.table_uri, -every_seconds) < every_seconds:
        return
    _last_vacuum[dt.table_uri] = now
    # full=True also deletes files the log never referenced (left by a writer killed between
    # writing its Parquet file and committing it) once they are older than the retention.
    dt.vacuum(retention_hours=_VACUUM_RETENTION_HOURS, enforce_retention_duration=False, dry_run=False, full=True)


def op_overwrite(path: str, table: pa.Table) -> int:
    """Replace the whole table (erasure): old files leave the table and are then deleted."""
    from deltalake import write_deltalake

    dt = _table(path)
    dt.update_incremental()
    write_deltalake(dt, table, mode="overwrite", writer_properties=writer_properties())
    dt.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    dt.cleanup_metadata()
    return dt.version()


def op_set_embeddings(path: str, table: pa.Table) -> int:
    """Fill ``embedding`` on the rows keyed (fact_id, revision) in ``table``, in one commit.

    A Delta MERGE rewrites only the files holding a matched row; every other column, and so
    every belief time, is left as it was.
    """
    dt = _table(path)
    dt.update_incremental()
    (dt.merge(source=table, predicate="t.fact_id = s.fact_id AND t.revision = s.revision",
              source_alias="s", target_alias="t", writer_properties=writer_properties())
       .when_matched_update(updates={"embedding": "s.embedding"})
       .execute())
    return dt.version()


def fresh_rows(files: tuple[str, ...], known: dict[str, tuple[int, int]]) -> tuple[int, int]:
    """(rows written since the last fold, all rows) of a version's files.

    Each file's pair is worked out once and kept in ``known`` (files never change once
    written; those that left the table are forgotten): from the footer's statistics of
    ``folded`` where they tell, else by reading that one column of that one file. Counting
    the column over every file, every 32 commits, cost ~0.2 s a compaction at 10M revisions.
    """
    listed = set(files)
    for file in [f for f in known if f not in listed]:
        del known[file]
    for file in files:
        if file not in known:
            known[file] = _file_fresh_rows(file)
    return sum(known[f][0] for f in files), sum(known[f][1] for f in files)


def _file_fresh_rows(path: str) -> tuple[int, int]:
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    meta = footer.metadata(path)
    states = footer.groups_folding(meta)
    if footer.MIXED in states:  # folded and fresh rows in one group, or no statistics: count
        folded = pq.ParquetFile(path, metadata=meta).read(columns=["folded"], use_threads=False)["folded"]
        return meta.num_rows - pc.sum(pc.fill_null(folded, False).cast("int64")).as_py(), meta.num_rows
    fresh = sum(meta.row_group(g).num_rows for g, state in enumerate(states) if state == footer.FRESH)
    return fresh, meta.num_rows


# -- the store directory ----------------------------------------------------------------------


#: Reader features a plain list of Parquet files cannot honour.
_REFUSED_FEATURES = ("deletionVectors", "columnMapping")


def _snapshot_files(path: str, version: int | None) -> list[str]:
    """What :func:`snapshot_files` returns, run through :func:`run`."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        table = DeltaTable(path, version=version)
    except TableNotFoundError:
        raise TempomemError(f"path: no tempomem store (Delta table) at {path!r}") from None
    except Exception as exc:  # deltalake reports a missing version with a generic error
        if version is not None:
            raise TempomemError(f"version: the store at {path!r} has no version {version!r} ({exc})") from None
        raise
    features = set(table.protocol().reader_features or ())
    mapping = table.metadata().configuration.get("delta.columnMapping.mode", "none")
    refused = [f for f in _REFUSED_FEATURES if f in features] + (["columnMapping"] if mapping != "none" else [])
    if refused:
        raise TempomemError(
            f"path: the Delta table at {path!r} uses {refused[0]}, which a plain list of Parquet files "
            "cannot read correctly; read it on a cluster with the Delta Lake reader")
    files = list(table.file_uris())
    gone = [f for f in files if "://" not in f and not os.path.exists(f)]
    if gone and version is None:  # the newest version's files are never removed: a damaged copy
        raise missing_files_error(gone, path)
    if gone:
        # a fold or compaction replaced them and a vacuum removed them: the version is unreadable
        raise TempomemError(f"version: the files of version {version} of {path!r} are gone (removed after a "
                            f"fold or compaction), e.g. {gone[0]!r}")
    return files


def missing_files_error(missing: list[str], store: str | None = None) -> TempomemError:
    """The one-line error of a read or write that meets data files of the newest version missing
    from disk (a damaged copy of the store: those files are never removed), ``store`` naming it
    where the reader may hold several."""
    where = f" of {store!r}" if store else ""
    return TempomemError(f"store: {len(missing)} data file(s) of the newest version{where} are missing from disk "
                         f"(first: {missing[0]!r}); check() (tempomem check) lists them")


def snapshot_files(path: str, version: int | None = None) -> list[str]:
    """The Parquet files of one version of the Delta table at ``path`` (default: the latest),
    for a reader that takes a plain file list (Spark without the Delta reader). Raises
    :class:`TempomemError` naming ``path`` or ``version`` when there is no such table or version,
    when that version's files are gone, and when a file list cannot read the table (deletion
    vectors, column mapping)."""
    return run(_snapshot_files, path, version)
