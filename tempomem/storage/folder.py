"""The store directory: a Delta Lake table of revision rows, its settings and its writer lock.

Layout of a store folder::

    _delta_log/          the Delta transaction log (one JSON file per commit)
    part-*.parquet       revision rows, one file per commit until compacted
    _tempomem/           settings.json, clock.json and the writer lock
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import tempfile
import threading
import uuid
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from ..errors import TempomemError
from ..schema import EVENT_SCHEMA, SORT_KEYS
from . import delta, log, writer
from .delta import Snapshot, parquet_stats, run
from .writer import FOLD_MEMORY, FOLD_ROW_GROUPS_PER_FILE, SortedFiles

_META_DIR = "_tempomem"
#: Compact once this many files of one size tier have piled up.
_SMALL_FILES_BEFORE_COMPACTION = 32
#: The size tiers of small files: under 1 MiB (a commit's file, or a merge of a few hundred),
#: then under 16 MiB. A merge takes one tier's files, so the write path's one-row files are not
#: merged again and again into one ever larger file: each row is rewritten about twice.
_TIER_BYTES = (1024 * 1024, 16 * 1024 * 1024)
#: A compaction folds the table once rows written since the last fold are 1/8 of it or more.
_FOLD_WHEN_FRESH_SHARE = 8
#: A merge's select list: the stored columns in the schema's order (names, not values).
_COLUMNS = ", ".join(EVENT_SCHEMA.names)


def _tiers(files: tuple[str, ...]) -> list[list[str]]:
    """The small ones of ``files``, by size tier (``_TIER_BYTES``)."""
    tiers: list[list[str]] = [[] for _ in _TIER_BYTES]
    for file in files:
        size = os.path.getsize(file)
        tier = next((t for t, bound in enumerate(_TIER_BYTES) if size < bound), None)
        if tier is not None:
            tiers[tier].append(file)
    return tiers


class Storage:
    """A store folder: its Delta table, settings and writer lock."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path).resolve()
        self._uri = str(self.path)
        self._snapshot = Snapshot(-1, ())
        self._newest = -1
        self._plain: bool | None = None
        self._fresh_rows: dict[str, tuple[int, int]] = {}  # by data file (delta.fresh_rows)

    # creation and discovery
    @staticmethod
    def exists(path: str | os.PathLike[str]) -> bool:
        if not isinstance(path, (str, os.PathLike)):
            raise TempomemError(f"path: expected a folder path (a str or a Path), got {type(path).__name__} {path!r}")
        return (Path(path) / log.LOG_DIR).is_dir()

    @classmethod
    def create(cls, path: str | os.PathLike[str], settings: dict[str, Any]) -> Storage:
        folder = Path(path)
        if folder.exists() and any(folder.iterdir()):
            raise TempomemError(f"path: {folder} exists and is not empty; pick a new folder for a new store")
        try:
            (folder / _META_DIR).mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # under a file, no permission, a read-only file system
            raise TempomemError(f"path: cannot make a store at {folder}: {exc.strerror or exc}") from None
        store = cls(folder)
        store.write_settings(settings)
        run(delta.op_create, store._uri)
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
        entries = self.path / log.LOG_DIR
        if self._newest < 0 or not (entries / log.entry_name(self._newest)).exists():
            self._newest = max((int(n[:20]) for n in os.listdir(entries) if n.endswith(".json") and n[:20].isdigit()),
                               default=-1)
        while (entries / log.entry_name(self._newest + 1)).exists():
            self._newest += 1
        return self._newest

    def has_commit_info(self, since: int, key: str, value: str) -> bool:
        """Whether a commit from version ``since`` on has ``key`` = ``value`` in its commitInfo."""
        return log.has_commit_info(self.path, since, self.latest_version(), key, value)

    def spool_path(self) -> Path:
        """The folder through which writers of other processes hand over their requests
        (:mod:`tempomem.spool`)."""
        return self.path / _META_DIR / "spool"

    def appended_files(self, since: int) -> list[tuple[str, int]] | None:
        """The data files (path, rows) that appends added after version ``since``
        (:func:`.log.appended`); an erasure is told by the clock's epoch."""
        return log.appended(self.path, since, self.latest_version())

    def snapshot(self) -> Snapshot:
        """The current version and its data files (cached while the log has not moved; moved on
        by the entries in between when it can be, :func:`.log.files_after`)."""
        newest = self.latest_version()
        if newest != self._snapshot.version:
            files = None if self._snapshot.version < 0 else log.files_after(
                self.path, self._snapshot.files, self._snapshot.version, newest)
            if files is None:
                self._plain = None  # the protocol may have changed: ask again before a plain append
                self._snapshot = run(delta.op_snapshot, self._uri, newest)
            else:
                self._snapshot = Snapshot(newest, files)
        return self._snapshot

    def append(self, table: pa.Table, info: dict[str, str] | None = None) -> tuple[int, str]:
        """Commit ``table`` as one atomic Delta commit, with ``info`` in its commitInfo; returns
        the new version and the file written (as the snapshot lists it; a compaction may already
        have merged it away).

        The Parquet file is written here with the store's writer settings and then committed
        as an add action: for a one-row commit that is about half of what ``write_deltalake``
        costs (``benchmarks/bench_writes.py fact``).
        """
        file = self.new_file_path()
        try:
            writer.write_file(file, table)
        except BaseException:
            file.unlink(missing_ok=True)
            raise
        version = self._commit_files([file], "append", info=info)
        self._after_commit("merging small files", self.compact_if_needed)
        return version, str(file.resolve())

    def new_file_path(self) -> Path:
        """A fresh name for a data file written into the table folder (then :meth:`add_files`)."""
        return self.path / f"part-00000-{uuid.uuid4()}-c000.parquet"

    def add_files(self, files: list[Path], *, replace_all: bool = False) -> int:
        """Commit Parquet files (``EVENT_SCHEMA`` columns, written in the table folder by someone
        else: a backfill, a fold) as one atomic append; returns the new version.

        Their Delta statistics come from the Parquet footers (``STATS_COLUMNS`` only). Until the
        commit the files are invisible to readers; if the commit does not happen they are deleted.
        ``replace_all=True`` makes them the table's only files (a fold).
        """
        version = self._commit_files(files, "overwrite" if replace_all else "append")
        if not replace_all:
            self._after_commit("merging small files", self.compact_if_needed)
        return version

    def _commit_files(self, files: list[Path], mode: str, replaced: list[str] | None = None,
                      info: dict[str, str] | None = None) -> int:
        """Commit ``files`` (and the removal of ``replaced``), with ``info`` in the commitInfo;
        the snapshot moves with the commit."""
        before = self.snapshot()
        try:
            entries = []
            for file in files:
                stat = file.stat()
                entries.append((self._relative(file), stat.st_size, stat.st_mtime_ns // 1_000_000, parquet_stats(file)))
            version = None
            if mode == "append" and replaced is None and self._plain_appends():
                version = before.version + 1
                if not log.put_append(self.path, version, [log.add_action(*e) for e in entries], info):
                    version = None  # another program took that version: deltalake resolves it
                elif version % log.CHECKPOINT_INTERVAL == 0:
                    self._after_commit("writing a checkpoint", lambda: run(delta.op_checkpoint, self._uri))
            if version is None:
                removed = None if replaced is None else [(self._relative(f), os.path.getsize(f)) for f in replaced]
                run(delta.op_add_files, self._uri, entries, mode, removed, info)
                version = self.latest_version()  # deltalake's handle does not move with its own commit
        except BaseException:
            if self.latest_version() == before.version:
                for file in files:
                    file.unlink(missing_ok=True)
            raise
        if version == before.version + 1:
            # nobody committed in between (we hold the writer lock): the new file list is known
            gone = set(replaced or ())
            kept = () if mode == "overwrite" else tuple(f for f in before.files if f not in gone)
            self._snapshot = Snapshot(version, kept + tuple(str(f.resolve()) for f in files))
            self._newest = max(self._newest, version)
        return version

    @staticmethod
    def _after_commit(what: str, step: Callable[[], object]) -> None:
        """Run ``step``, housekeeping after a commit has landed: whatever it meets, the commit
        stands, so its failure is a warning (the next commit tries again), never the commit's
        error, which would tell a caller that a write it made did not happen."""
        try:
            step()
        except Exception as exc:
            warnings.warn(f"tempomem: the commit landed, but {what} failed ({str(exc).splitlines()[0]}); the next "
                          "commit tries again", RuntimeWarning, stacklevel=3)

    def _plain_appends(self) -> bool:
        if self._plain is None:
            self._plain = run(delta.op_plain_appends, self._uri)
        return self._plain

    def _relative(self, file: str | Path) -> str:
        return Path(file).resolve().relative_to(self.path).as_posix()

    def overwrite(self, table: pa.Table) -> int:
        """Replace every row in one commit and delete the replaced files from disk."""
        return run(delta.op_overwrite, self._uri, table.select(EVENT_SCHEMA.names).cast(EVENT_SCHEMA))

    def set_embeddings(self, table: pa.Table) -> int:
        """Write derived embeddings in place: ``table`` has ``fact_id``, ``revision``, ``embedding``.

        One atomic commit that rewrites only the files containing those rows; no revision is
        added and no time changes. Returns the new version.
        """
        keyed = table.select(["fact_id", "revision", "embedding"]).cast(pa.schema(
            [EVENT_SCHEMA.field("fact_id"), EVENT_SCHEMA.field("revision"), EVENT_SCHEMA.field("embedding")]))
        version = run(delta.op_set_embeddings, self._uri, keyed)
        self._after_commit("merging small files", self.compact_if_needed)
        return version

    def compact_if_needed(self) -> bool:
        """Merge small files once enough have piled up; answers never change.

        Called by writers, under the writer lock. When the rows written since the last fold
        are a large share of the table (so that reads spend time deriving their belief ends),
        the merge is a fold (:meth:`fold`); otherwise only the small files are merged
        (:meth:`compact`), which costs little however large the table is.
        """
        snap = self.snapshot()
        full = next((t for t in _tiers(snap.files) if len(t) >= _SMALL_FILES_BEFORE_COMPACTION), None)
        if full is None:
            return False
        fresh, total = delta.fresh_rows(snap.files, self._fresh_rows)
        if fresh * _FOLD_WHEN_FRESH_SHARE >= total:
            self.fold()
        else:
            self.compact(full)
        return True

    def compact(self, files: list[str] | None = None) -> int | None:
        """Merge ``files`` (default: every small file, of any tier) into files sorted by
        the store's key, in one commit that changes no data; returns the new version, or
        ``None`` when there were fewer than two to merge.

        Sorted by key, a merged file keeps what a point read relies on: row groups whose key
        statistics are narrow enough to skip. (Delta's own bin-packing concatenates its input
        in no order, and would rewrite a large sorted file with it.) Call it under the writer lock.
        """
        if files is None:
            files = [f for tier in _tiers(self.snapshot().files) for f in tier]
        if len(files) < 2:
            return None
        order = ", ".join(name for name, _ in SORT_KEYS)
        merged = self._copy_sorted("SELECT * FROM read_parquet($files)", order, {"files": list(files)}, views=False)
        return self._commit_files(merged, "append", replaced=list(files))

    def fold(self) -> int:
        """Rewrite every row with its belief end stored (``folded``), sorted, in one commit.

        Reads then derive belief time without a window over the table (``revisions.sql``).
        No answer changes: the rows are the ``_tm_folded`` view of the current version. Call
        it under the writer lock; returns the new version.
        """
        # The rows still believed first, then the rest, each part in key order: `facts`
        # (snapshots, point queries, history) reads only the first part, skipping the row
        # groups of the second by their statistics (at 10M revisions of which 1.2M are
        # believed, the rows of a snapshot as_of: 3.2 -> 2.1 s CPU).
        order = "folded_until IS NOT NULL, " + ", ".join(name for name, _ in SORT_KEYS)
        return self._commit_files(self._copy_sorted("SELECT * FROM _tm_folded", order, {}, views=True), "overwrite")

    def _copy_sorted(self, query: str, order: str, params: dict[str, Any], *, views: bool) -> list[Path]:
        """Write ``query``'s rows in ``order`` into new files of the table folder (not committed).

        Files of FOLD_ROW_GROUPS_PER_FILE row groups, in that order across files: a point
        query then reads the footer of the files it skips, not of every row group. DuckDB sorts
        (spilling past FOLD_MEMORY) and streams the rows out as Arrow; the store's Parquet
        writer encodes them (:class:`~.writer.SortedFiles`), since DuckDB's COPY writes a
        Bloom filter only for the columns it gives a dictionary. ``views``: bind the views to
        the current version first (a query over ``_tm_folded``).
        """
        from ..connection import bind_files, new_connection, without_progress_bar

        con = new_connection()
        without_progress_bar(con)
        folder = self.path / f"fold-{uuid.uuid4()}"
        paths = (folder / f"part-{n}.parquet" for n in itertools.count())
        with tempfile.TemporaryDirectory(prefix="tempomem-fold-") as spill:
            con.execute("SET memory_limit = $limit", {"limit": FOLD_MEMORY})
            con.execute("SET temp_directory = $dir", {"dir": spill})
            if views:
                bind_files(con, self.snapshot().files, first=True, macros=False)
            try:
                folder.mkdir()
                rows = con.sql(f"SELECT {_COLUMNS} FROM ({query}) ORDER BY {order}", params=params)
                with SortedFiles(paths, FOLD_ROW_GROUPS_PER_FILE) as out:
                    for batch in rows.to_arrow_reader(writer.ROW_GROUP_ROWS):
                        out.write(pa.Table.from_batches([batch]).cast(EVENT_SCHEMA))
                if not out.files:
                    folder.rmdir()
                return out.files
            except BaseException:
                shutil.rmtree(folder, ignore_errors=True)
                raise
            finally:
                con.close()

    def referenced_files(self) -> set[str]:
        """Every data file any retained log entry or checkpoint has ever added."""
        seen: set[str] = set()
        for entry in sorted((self.path / log.LOG_DIR).iterdir()):
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

    def missing_files(self) -> list[str]:
        """The newest version's data files that are not on disk (a damaged copy of the store)."""
        return [f for f in self.snapshot().files if not os.path.exists(f)]

    @contextmanager
    def files_present(self) -> Iterator[None]:
        """A read or write that fails on a data file the newest version lists but the disk lacks
        (a damaged copy of the store) raises one line naming it, not the reader's error; any
        other error passes as it is. ``check()`` lists every missing file."""
        try:
            yield
        except (FileNotFoundError, duckdb.IOException):
            missing = self.missing_files()
            if not missing:
                raise
            raise delta.missing_files_error(missing) from None

    def data_files_on_disk(self) -> list[str]:
        """Parquet files in the folder outside the log and settings folders."""
        out = []
        for root, dirs, files in os.walk(self.path):
            dirs[:] = [d for d in dirs if d not in (log.LOG_DIR, _META_DIR)]
            out.extend(str(Path(root, f).resolve()) for f in files if f.endswith(".parquet"))
        return sorted(out)

    def lock_path(self) -> Path:
        """The file whose flock serializes writer processes (the engine takes it)."""
        return self.path / _META_DIR / "write.lock"
