"""The store directory: a Delta Lake table of revision rows, its settings and its writer lock.

Layout of a store folder::

    _delta_log/          the Delta transaction log (one JSON file per commit)
    part-*.parquet       revision rows, one file per commit until compacted
    _tempomem/           settings.json, clock.json and the writer lock
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa

from ..errors import TempomemError
from ..schema import EVENT_SCHEMA, SORT_KEYS
from . import delta
from .delta import Snapshot, parquet_stats, run
from .writer import FOLD_MEMORY, FOLD_ROW_GROUPS_PER_FILE, ROW_GROUP_ROWS

_META_DIR = "_tempomem"
_LOG_DIR = "_delta_log"
#: Compact once this many files under _SMALL_FILE_BYTES have piled up.
_SMALL_FILES_BEFORE_COMPACTION = 32
_SMALL_FILE_BYTES = 16 * 1024 * 1024
#: A compaction folds the table once rows written since the last fold are 1/8 of it or more.
_FOLD_WHEN_FRESH_SHARE = 8


def _entry(version: int) -> str:
    return f"{version:020d}.json"


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
            self._snapshot = run(delta.op_snapshot, self._uri, newest)
        return self._snapshot

    def append(self, table: pa.Table) -> int:
        """Commit ``table`` as one atomic Delta commit; returns the new version."""
        version = run(delta.op_append, self._uri, table.select(EVENT_SCHEMA.names).cast(EVENT_SCHEMA))
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
            return run(delta.op_add_files, self._uri, entries, mode)
        except BaseException:
            if self.latest_version() == before:
                for file in files:
                    file.unlink(missing_ok=True)
            raise

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
        fresh, total = delta.fresh_rows(snap.files)
        if fresh * _FOLD_WHEN_FRESH_SHARE >= total:
            self.fold()
        else:
            run(delta.op_compact, self._uri)
        return True

    def fold(self) -> int:
        """Rewrite every row with its belief end stored (``folded``), sorted, in one commit.

        Reads then derive belief time without a window over the table (``revisions.sql``).
        No answer changes: the rows are the ``_tm_folded`` view of the current version. Call
        it under the writer lock; returns the new version.
        """
        from ..connection import bind_files, new_connection, without_progress_bar

        snap = self.snapshot()
        con = new_connection()
        without_progress_bar(con)
        with tempfile.TemporaryDirectory(prefix="tempomem-fold-") as spill:
            con.execute("SET memory_limit = $limit", {"limit": FOLD_MEMORY})
            con.execute("SET temp_directory = $dir", {"dir": spill})
            bind_files(con, snap.files, first=True)
            folder = self.path / f"fold-{uuid.uuid4()}"
            # The rows still believed first, then the rest, each part in key order: `facts`
            # (snapshots, point queries, history) reads only the first part, skipping the row
            # groups of the second by their statistics (at 10M revisions of which 1.2M are
            # believed, the rows of a snapshot as_of: 3.2 -> 2.1 s CPU).
            order = "folded_until IS NOT NULL, " + ", ".join(name for name, _ in SORT_KEYS)
            try:
                # Files of FOLD_ROW_GROUPS_PER_FILE row groups, in that order across files: a
                # point query then reads the footer of files it skips, not of every row group.
                con.execute(f"COPY (SELECT * FROM _tm_folded ORDER BY {order}) TO $folder "
                            f"(FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE {ROW_GROUP_ROWS}, "
                            f"ROW_GROUPS_PER_FILE {FOLD_ROW_GROUPS_PER_FILE}, PRESERVE_ORDER true, "
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
