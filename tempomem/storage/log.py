"""The Delta log entries tempomem reads and writes itself, on the write path's hot loop.

A one-file append through deltalake's transaction costs 7-20 ms: it reloads its snapshot of the
log and checks the commit against it. In the Delta protocol an append is one JSON file, put in
place only if no other writer took that version first; on a local file system that is a hard
link, which fails when the name exists (delta-rs commits the same way there: a temporary file,
then a rename that never replaces). A writer killed before the link leaves a temporary file no
reader lists, never a half commit.

Reading goes the other way: the file list of a newer version is the one we hold plus the adds
and minus the removes of the entries in between, so a writer that sees another's commits reads
those entries, not the whole log. Whatever this module cannot follow exactly (a missing entry,
a change of protocol or metadata, paths it would have to decode, deletion vectors) it answers
``None`` for, and the caller asks deltalake.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

from ..errors import TempomemError

#: The log's folder inside a table folder.
LOG_DIR = "_delta_log"
#: delta-rs writes a checkpoint every this many versions (``delta.checkpointInterval``); the
#: entries written here keep that rhythm, or a reader would replay ever more JSON files.
CHECKPOINT_INTERVAL = 100

_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./")


def entry_name(version: int) -> str:
    """The file name of version ``version``'s commit in ``_delta_log``."""
    return f"{version:020d}.json"


def put_append(root: Path, version: int, adds: list[dict[str, Any]], info: dict[str, str] | None = None) -> bool:
    """Commit ``adds`` (Delta add actions) as ``version`` of the table at ``root``, with ``info``
    in its commitInfo; ``False`` when another writer has it."""
    commit = {"timestamp": int(time.time() * 1000), "operation": "WRITE",
              "operationParameters": {"mode": "Append", "partitionBy": "[]"},
              "engineInfo": "tempomem", "clientVersion": "tempomem", **(info or {})}
    lines = [json.dumps({"commitInfo": commit})] + [json.dumps({"add": a}) for a in adds]
    tmp = root / LOG_DIR / f"_commit_{uuid.uuid4()}.json.tmp"
    tmp.write_text("\n".join(lines) + "\n")
    try:
        os.link(tmp, root / LOG_DIR / entry_name(version))
        return True
    except FileExistsError:
        return False
    finally:
        tmp.unlink()


def has_commit_info(root: Path, since: int, until: int, key: str, value: str) -> bool:
    """Whether a commit of versions ``since`` to ``until`` has ``key`` = ``value`` in its commitInfo."""
    for version in range(since, until + 1):
        for action in actions(root, version) or ():
            if action.get("commitInfo", {}).get(key) == value:
                return True
    return False


def add_action(path: str, size: int, modified_ms: int, stats: str) -> dict[str, Any]:
    """A Delta add action of a data file of the table folder (``path`` relative to it)."""
    return {"path": path, "partitionValues": {}, "size": size, "modificationTime": modified_ms,
            "dataChange": True, "stats": stats}


def actions(root: Path, version: int) -> list[dict[str, Any]] | None:
    """The actions of version ``version``'s commit; ``None`` when its entry is gone (cleaned up)."""
    entry = root / LOG_DIR / entry_name(version)
    try:
        text = entry.read_text()
    except FileNotFoundError:
        return None
    try:
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    except json.JSONDecodeError as exc:
        raise TempomemError(f"store: the Delta log entry {entry} is damaged ({exc})") from None


def files_after(root: Path, files: tuple[str, ...], since: int, until: int) -> tuple[str, ...] | None:
    """The data files of version ``until``, from those of version ``since`` (absolute paths)
    and the log entries in between; ``None`` when one of them is not a plain file change."""
    current = dict.fromkeys(files)
    for version in range(since + 1, until + 1):
        found = actions(root, version)
        if found is None:
            return None
        for action in found:
            if {"protocol", "metaData"} & action.keys():
                return None
            for kind in ("add", "remove"):
                change = action.get(kind)
                if change is None:
                    continue
                if change.get("deletionVector") or not set(change["path"]) <= _PLAIN:
                    return None
                path = str(root / change["path"])
                if kind == "add":
                    current[path] = None
                else:
                    current.pop(path, None)
    return tuple(current)


def appended(root: Path, since: int, until: int) -> list[tuple[str, int]] | None:
    """The data files (absolute path, rows) that appends added in versions ``since`` + 1 to
    ``until``; ``None`` when an entry is gone and the caller cannot know.

    A version that also removed files (a compaction or fold) rewrote rows without changing
    them, so its files are not counted.
    """
    out: list[tuple[str, int]] = []
    for version in range(since + 1, until + 1):
        found = actions(root, version)
        if found is None:
            return None
        if any("remove" in a for a in found):
            continue
        for action in found:
            if "add" in action:
                stats = json.loads(action["add"].get("stats") or "{}")
                out.append((str(root / action["add"]["path"]), int(stats.get("numRecords", 1 << 40))))
    return out
