"""The store directory: a Delta Lake table of revision rows, its settings and its writer lock.

Layout of a store folder::

    _delta_log/          the Delta transaction log (one JSON file per commit)
    part-*.parquet       revision rows, one file per commit until compacted
    _tempomem/           settings.json, clock.json and the writer lock

Every call into ``deltalake`` goes through :func:`_run`. deltalake's Rust runtime cannot be
used in a process forked from one that already used it (it panics), so in such a child the
call is carried out by a worker process started with ``spawn``.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import tempfile
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa

from .errors import TempomemError
from .schema import EVENT_SCHEMA, SORT_KEYS, STATS_COLUMNS

T = TypeVar("T")

_META_DIR = "_tempomem"
_LOG_DIR = "_delta_log"
#: Rows per Parquet row group. A point query decodes the whole group that holds its key, and
#: pays a fixed cost for every other group whose statistics it tests: 16k balances the two at
#: 100k-10M revisions (at 100k, 122,880-row groups made a point query 14 -> 31 ms; at 10M they
#: saved as much in statistics tests as they cost in decoding).
_ROW_GROUP_ROWS = 16 * 1024
#: Compact once this many files under _SMALL_FILE_BYTES have piled up.
_SMALL_FILES_BEFORE_COMPACTION = 32
_SMALL_FILE_BYTES = 16 * 1024 * 1024
#: Files a compaction replaced are deleted once older than this; readers that listed them
#: just before the compaction can still finish.
_VACUUM_RETENTION_HOURS = 1
#: A compaction folds the table once rows written since the last fold are 1/8 of it or more.
_FOLD_WHEN_FRESH_SHARE = 8
#: DuckDB's memory for a fold; a larger table spills its sort to a temporary folder.
_FOLD_MEMORY = "2GB"
#: A fold writes files of at most this many row groups (1M rows).
_FOLD_ROW_GROUPS_PER_FILE = 64


def _entry(version: int) -> str:
    return f"{version:020d}.json"


@dataclass(frozen=True)
class Snapshot:
    """One version of the table: its number and the absolute paths of its data files."""

    version: int
    files: tuple[str, ...]


# -- deltalake calls, fork-safe -------------------------------------------------------------

_runtime_pid: int | None = None
_worker: tuple[int, Any, Any] | None = None  # (owner pid, process, connection)
_worker_lock = threading.Lock()
_tables: dict[str, Any] = {}


def _run(op: Callable[..., T], *args: Any) -> T:
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


def _writer_properties() -> Any:
    from deltalake import WriterProperties

    return WriterProperties(max_row_group_size=_ROW_GROUP_ROWS, compression="ZSTD")


def _op_create(path: str) -> None:
    from deltalake import DeltaTable

    DeltaTable.create(
        path,
        schema=EVENT_SCHEMA,
        name="tempomem",
        configuration={"delta.dataSkippingStatsColumns": ",".join(STATS_COLUMNS)},
    )


def _op_snapshot(path: str, newest_on_disk: int) -> Snapshot:
    dt = _table(path)
    if dt.version() < newest_on_disk:
        dt.update_incremental()
    return Snapshot(dt.version(), tuple(dt.file_uris()))


def _op_append(path: str, table: pa.Table) -> int:
    from deltalake import write_deltalake

    dt = _table(path)
    dt.update_incremental()
    write_deltalake(dt, table, mode="append", writer_properties=_writer_properties())
    return dt.version()


def _op_add_files(path: str, entries: list[tuple[str, int, int, str]], mode: str) -> int:
    """Commit Parquet files already written in the table folder as one transaction.

    ``mode="overwrite"`` (a fold) also removes every file of the previous version; those are
    deleted from disk once older than the retention, so readers that listed them can finish.
    """
    from deltalake.transaction import AddAction

    dt = _table(path)
    dt.update_incremental()
    actions = [AddAction(name, size, {}, mtime_ms, True, stats) for name, size, mtime_ms, stats in entries]
    dt.create_write_transaction(actions, mode=mode, schema=EVENT_SCHEMA)
    if mode == "overwrite":
        dt.update_incremental()  # the transaction does not move this handle's snapshot
        _vacuum(dt)
    return dt.version()


def _stat_value(value: Any, *, upper: bool) -> Any:
    """A Parquet min/max as Delta writes it: timestamps at millisecond precision, as UTC text.

    Delta statistics hold milliseconds; a maximum is rounded up (not truncated like the
    minimum) so that it still bounds every value of the file and no reader skips it wrongly.
    """
    if not isinstance(value, datetime):
        return value
    value = value.astimezone(UTC)
    floor = value.replace(microsecond=value.microsecond // 1000 * 1000)
    if upper and floor != value:
        floor += timedelta(milliseconds=1)
    return floor.strftime("%Y-%m-%dT%H:%M:%S.") + f"{floor.microsecond // 1000:03d}Z"


def parquet_stats(path: str | os.PathLike[str]) -> str:
    """Delta file statistics (JSON) of a Parquet file, from its footer, for ``STATS_COLUMNS`` only.

    Subject, object, text and attributes never appear in them (SPEC §3). A column whose
    row groups lack statistics is left out of min/max (readers then never skip on it).
    """
    import pyarrow.parquet as pq

    meta = pq.ParquetFile(path).metadata
    index = {meta.schema.column(i).path: i for i in range(meta.num_columns)}
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
            mins[name] = _stat_value(min(s.min for s in valued), upper=False)
            maxs[name] = _stat_value(max(s.max for s in valued), upper=True)
    return json.dumps({"numRecords": meta.num_rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls})


def _op_compact(path: str) -> int:
    dt = _table(path)
    dt.update_incremental()
    dt.optimize.compact(writer_properties=_writer_properties())
    _vacuum(dt)
    return dt.version()


def _vacuum(dt: Any) -> None:
    # full=True also deletes files the log never referenced (left by a writer killed between
    # writing its Parquet file and committing it) once they are older than the retention.
    dt.vacuum(retention_hours=_VACUUM_RETENTION_HOURS, enforce_retention_duration=False, dry_run=False, full=True)


def _op_overwrite(path: str, table: pa.Table) -> int:
    """Replace the whole table (erasure): old files leave the table and are then deleted."""
    from deltalake import write_deltalake

    dt = _table(path)
    dt.update_incremental()
    write_deltalake(dt, table, mode="overwrite", writer_properties=_writer_properties())
    dt.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    dt.cleanup_metadata()
    return dt.version()


def _op_set_embeddings(path: str, table: pa.Table) -> int:
    """Fill ``embedding`` on the rows keyed (fact_id, revision) in ``table``, in one commit.

    A Delta MERGE rewrites only the files holding a matched row; every other column, and so
    every belief time, is left as it was.
    """
    dt = _table(path)
    dt.update_incremental()
    (dt.merge(source=table, predicate="t.fact_id = s.fact_id AND t.revision = s.revision",
              source_alias="s", target_alias="t", writer_properties=_writer_properties())
       .when_matched_update(updates={"embedding": "s.embedding"})
       .execute())
    return dt.version()


def _fresh_rows(files: tuple[str, ...]) -> tuple[int, int]:
    """(rows written since the last fold, all rows) of a version's files: one column read."""
    import duckdb

    if not files:
        return 0, 0
    with duckdb.connect() as con:
        found = con.sql("SELECT count(*) FILTER (WHERE folded IS NOT TRUE), count(*) FROM read_parquet($files)",
                        params={"files": list(files)}).fetchall()
    return found[0][0], found[0][1]


# -- the store directory ----------------------------------------------------------------------

class Storage:
    """A store folder: its Delta table, settings and writer lock."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path).resolve()
        self._uri = str(self.path)
        self._snapshot = Snapshot(-1, ())
        self._newest = -1

    # creation and discovery
    @staticmethod
    def exists(path: str | os.PathLike[str]) -> bool:
        return (Path(path) / _LOG_DIR).is_dir()

    @classmethod
    def create(cls, path: str | os.PathLike[str], settings: dict[str, Any]) -> Storage:
        folder = Path(path)
        if folder.exists() and any(folder.iterdir()):
            raise TempomemError(f"path: {folder} exists and is not empty; pick a new folder for a new store")
        (folder / _META_DIR).mkdir(parents=True, exist_ok=True)
        store = cls(folder)
        store.write_settings(settings)
        _run(_op_create, store._uri)
        return store

    # settings
    def read_settings(self) -> dict[str, Any]:
        return json.loads((self.path / _META_DIR / "settings.json").read_text())

    def write_settings(self, settings: dict[str, Any]) -> None:
        self._write_json("settings.json", settings)

    def _write_json(self, name: str, value: dict[str, Any]) -> None:
        target = self.path / _META_DIR / name
        tmp = target.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps(value, indent=2, sort_keys=True))
        os.replace(tmp, target)

    def read_clock(self) -> dict[str, Any] | None:
        try:
            return json.loads((self.path / _META_DIR / "clock.json").read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def write_clock(self, version: int, last_recorded_us: int | None, epoch: int = 0) -> None:
        """The store clock as of ``version``: the last write-path belief time, and the count of
        rewrites (erasures) so far, which tells a writer's state cache to start again."""
        self._write_json("clock.json", {"version": version, "last_recorded_us": last_recorded_us, "epoch": epoch})

    # the table
    def latest_version(self) -> int:
        """The newest committed version, read from the log folder without deltalake.

        Versions only grow, so after the first listing it probes the next entries' names: a
        store of many commits is not listed on every commit.
        """
        log = self.path / _LOG_DIR
        if self._newest < 0 or not (log / _entry(self._newest)).exists():
            self._newest = max((int(n[:20]) for n in os.listdir(log) if n.endswith(".json") and n[:20].isdigit()),
                               default=-1)
        while (log / _entry(self._newest + 1)).exists():
            self._newest += 1
        return self._newest

    def appended_files(self, since: int) -> list[tuple[str, int]] | None:
        """The data files (path, rows) that appends added after version ``since``.

        A version that also removed files (a compaction or fold) rewrote rows without changing
        them, so its files are not counted; an erasure is told by the clock's epoch. ``None``
        when a log entry is gone (the log was cleaned up): the caller cannot know.
        """
        out: list[tuple[str, int]] = []
        for version in range(since + 1, self.latest_version() + 1):
            try:
                lines = (self.path / _LOG_DIR / _entry(version)).read_text().splitlines()
            except FileNotFoundError:
                return None
            actions = [json.loads(line) for line in lines if line.strip()]
            if any("remove" in a for a in actions):
                continue
            for action in actions:
                if "add" in action:
                    stats = json.loads(action["add"].get("stats") or "{}")
                    out.append((str(self.path / action["add"]["path"]), int(stats.get("numRecords", 1 << 40))))
        return out

    def snapshot(self) -> Snapshot:
        """The current version and its data files (cached while the log has not moved)."""
        newest = self.latest_version()
        if newest != self._snapshot.version:
            self._snapshot = _run(_op_snapshot, self._uri, newest)
        return self._snapshot

    def append(self, table: pa.Table) -> int:
        """Commit ``table`` as one atomic Delta commit; returns the new version."""
        version = _run(_op_append, self._uri, table.select(EVENT_SCHEMA.names).cast(EVENT_SCHEMA))
        self.compact_if_needed()
        return version

    def new_file_path(self) -> Path:
        """A fresh name for a data file written into the table folder (then :meth:`add_files`)."""
        return self.path / f"part-00000-{uuid.uuid4()}-c000.zstd.parquet"

    def add_files(self, files: list[Path], *, replace_all: bool = False) -> int:
        """Commit Parquet files (``EVENT_SCHEMA`` columns, written in the table folder by someone
        else, e.g. DuckDB's COPY) as one atomic append; returns the new version.

        Their Delta statistics come from the Parquet footers (``STATS_COLUMNS`` only). Until the
        commit the files are invisible to readers; if the commit does not happen they are deleted.
        ``replace_all=True`` makes them the table's only files (a fold).
        """
        version = self._commit_files(files, "overwrite" if replace_all else "append")
        if not replace_all:
            self.compact_if_needed()
        return version

    def _commit_files(self, files: list[Path], mode: str) -> int:
        before = self.latest_version()
        try:
            entries = []
            for file in files:
                info = file.stat()
                entries.append((file.relative_to(self.path).as_posix(), info.st_size,
                                info.st_mtime_ns // 1_000_000, parquet_stats(file)))
            return _run(_op_add_files, self._uri, entries, mode)
        except BaseException:
            if self.latest_version() == before:
                for file in files:
                    file.unlink(missing_ok=True)
            raise

    def overwrite(self, table: pa.Table) -> int:
        """Replace every row in one commit and delete the replaced files from disk."""
        return _run(_op_overwrite, self._uri, table.select(EVENT_SCHEMA.names).cast(EVENT_SCHEMA))

    def set_embeddings(self, table: pa.Table) -> int:
        """Write derived embeddings in place: ``table`` has ``fact_id``, ``revision``, ``embedding``.

        One atomic commit that rewrites only the files containing those rows; no revision is
        added and no time changes. Returns the new version.
        """
        keyed = table.select(["fact_id", "revision", "embedding"]).cast(pa.schema(
            [EVENT_SCHEMA.field("fact_id"), EVENT_SCHEMA.field("revision"), EVENT_SCHEMA.field("embedding")]))
        version = _run(_op_set_embeddings, self._uri, keyed)
        self.compact_if_needed()
        return version

    def compact_if_needed(self) -> bool:
        """Merge small files once enough have piled up; answers never change.

        Called by writers, under the writer lock. When the rows written since the last fold
        are a large share of the table (so that reads spend time deriving their belief ends),
        the merge is a fold (:meth:`fold`); otherwise Delta's bin-packing merges the small
        files only, which costs little however large the table is.
        """
        snap = self.snapshot()
        small = sum(1 for f in snap.files if os.path.getsize(f) < _SMALL_FILE_BYTES)
        if small < _SMALL_FILES_BEFORE_COMPACTION:
            return False
        fresh, total = _fresh_rows(snap.files)
        if fresh * _FOLD_WHEN_FRESH_SHARE >= total:
            self.fold()
        else:
            _run(_op_compact, self._uri)
        return True

    def fold(self) -> int:
        """Rewrite every row with its belief end stored (``folded``), sorted, in one commit.

        Reads then derive belief time without a window over the table (``revisions.sql``).
        No answer changes: the rows are the ``_tm_folded`` view of the current version. Call
        it under the writer lock; returns the new version.
        """
        from .connection import bind_files, new_connection, without_progress_bar

        snap = self.snapshot()
        con = new_connection()
        without_progress_bar(con)
        with tempfile.TemporaryDirectory(prefix="tempomem-fold-") as spill:
            con.execute("SET memory_limit = $limit", {"limit": _FOLD_MEMORY})
            con.execute("SET temp_directory = $dir", {"dir": spill})
            bind_files(con, snap.files, first=True)
            folder = self.path / f"fold-{uuid.uuid4()}"
            # The rows still believed first, then the rest, each part in key order: `facts`
            # (snapshots, point queries, history) reads only the first part, skipping the row
            # groups of the second by their statistics (at 10M revisions of which 1.2M are
            # believed, the rows of a snapshot as_of: 3.2 -> 2.1 s CPU).
            order = "folded_until IS NOT NULL, " + ", ".join(name for name, _ in SORT_KEYS)
            try:
                # Files of _FOLD_ROW_GROUPS_PER_FILE row groups, in that order across files: a
                # point query then reads the footer of files it skips, not of every row group.
                con.execute(f"COPY (SELECT * FROM _tm_folded ORDER BY {order}) TO $folder "
                            f"(FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE {_ROW_GROUP_ROWS}, "
                            f"ROW_GROUPS_PER_FILE {_FOLD_ROW_GROUPS_PER_FILE}, PRESERVE_ORDER true, "
                            "FILENAME_PATTERN 'part-{i}')",
                            {"folder": str(folder)})
                files = sorted(folder.glob("*.parquet"))
            except BaseException:
                shutil.rmtree(folder, ignore_errors=True)
                raise
            finally:
                con.close()
        return self._commit_files(files, "overwrite")

    def referenced_files(self) -> set[str]:
        """Every data file any retained log entry or checkpoint has ever added."""
        log = self.path / _LOG_DIR
        seen: set[str] = set()
        for entry in sorted(log.iterdir()):
            if entry.name.endswith(".json") and entry.name[:20].isdigit():
                for line in entry.read_text().splitlines():
                    action = json.loads(line) if line.strip() else {}
                    for kind in ("add", "remove"):
                        if kind in action:
                            seen.add(action[kind]["path"])
            elif ".checkpoint" in entry.name and entry.name.endswith(".parquet"):
                import pyarrow.parquet as pq

                cp = pq.read_table(entry, columns=["add", "remove"]).to_pylist()
                for row in cp:
                    for kind in ("add", "remove"):
                        if row.get(kind):
                            seen.add(row[kind]["path"])
        return {str((self.path / p).resolve()) for p in seen}

    def data_files_on_disk(self) -> list[str]:
        """Parquet files in the folder outside the log and settings folders."""
        out = []
        for root, dirs, files in os.walk(self.path):
            dirs[:] = [d for d in dirs if d not in (_LOG_DIR, _META_DIR)]
            out.extend(str(Path(root, f).resolve()) for f in files if f.endswith(".parquet"))
        return sorted(out)

    def lock_path(self) -> Path:
        """The file whose flock serializes writer processes (the engine takes it)."""
        return self.path / _META_DIR / "write.lock"
