"""Group commit across processes: the assertions of writers in other processes, handed through
files to whichever process holds the writer lock.

A process whose leader finds the writer lock held by another (:class:`~tempomem.engine.Engine`)
*offers* its queued assertions: one request file in the store's ``_tempomem/spool`` folder,
written whole then renamed into place, so that a reader never sees half of one. Whoever holds
the lock next *takes* the offers whose keys its commit does not touch yet (under the lock:
nobody else takes them) and applies them after its own requests, in the order offered, in its
one commit; an offer on a key it touches waits for a later commit, so two processes' values of
one key stay two commits, each believed in turn, as without the spool.

Before committing, the holder writes each offer's *answer* (its requests' Facts, or a refused
request's error) naming the commit's group and the version it expects; the commit names its
group in its ``commitInfo``. The offerer polls for its answer and takes it only once a commit of
that group is in the log from that version on (or the answer says nothing was to be
committed). A holder killed after answering and before committing leaves answers no one takes:
when the offerer gets the lock, it removes its offer and commits it itself, once. A holder
killed after taking an offer and before answering leaves no answer: the same. An offerer
killed while waiting leaves a request that the next holder applies unacknowledged, like a
client gone after sending; its answer is removed once stale.

Values travel as JSON: times as microseconds since the epoch (exact, aware UTC), the rest as
JSON has them; no file is ever unpickled.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import fields
from datetime import datetime
from pathlib import Path
from typing import Any

from . import errors
from .schema import Fact
from .times import EPOCH, MICROSECOND

#: An answer no offerer collected in this long belongs to one that is gone.
STALE_SECONDS = 600.0
_FACT_FIELDS = tuple(f.name for f in fields(Fact))
#: The errors a refused request can raise, by name; any other name reads as TempomemError.
_ERRORS = {cls.__name__: cls for cls in (errors.TempomemError, errors.ConflictError, errors.ClockError,
                                         errors.FactNotFoundError, errors.TimeParseError)}


def _encode(value: Any) -> Any:
    if isinstance(value, datetime):
        return {"$us": (value - EPOCH) // MICROSECOND}
    raise TypeError(f"not JSON: {type(value).__name__}")


def _decode(obj: dict[str, Any]) -> Any:
    return EPOCH + obj["$us"] * MICROSECOND if obj.keys() == {"$us"} else obj


def dumps(value: Any) -> str:
    """``value`` as the spool's JSON: times exact to the microsecond.

    >>> from datetime import UTC
    >>> loads(dumps({"at": datetime(2026, 3, 1, 9, 30, 0, 7, tzinfo=UTC), "tags": ["a"]}))
    {'at': datetime.datetime(2026, 3, 1, 9, 30, 0, 7, tzinfo=datetime.timezone.utc), 'tags': ['a']}
    """
    return json.dumps(value, default=_encode)


def loads(text: str) -> Any:
    """The inverse of :func:`dumps`."""
    return json.loads(text, object_hook=_decode)


def fact_answer(fact: Fact) -> dict[str, Any]:
    """A Fact as an answer carries it (:func:`answered` makes it a Fact again)."""
    return {name: getattr(fact, name) for name in _FACT_FIELDS}


def error_answer(exc: BaseException) -> dict[str, Any]:
    """A refused request's error as its answer carries it: its class name and message."""
    return {"error": type(exc).__name__, "message": str(exc)}


def answered(answer: dict[str, Any] | list[dict[str, Any]]) -> list[Fact] | errors.TempomemError:
    """One request's answer as its Facts, or as the error to raise in its caller."""
    if isinstance(answer, dict):
        return _ERRORS.get(answer["error"], errors.TempomemError)(answer["message"])
    return [Fact.from_row(f) for f in answer]


#: The commitInfo field naming a commit that carries other processes' requests.
GROUP_KEY = "tempomemGroup"

Key = tuple[str, str, str]


def keys_of(news: list[dict[str, Any]]) -> set[Key]:
    """The keys a request's assertions touch."""
    return {(n["scope"], n["subject"], n["predicate"]) for n in news}


class Spool:
    """The spool folder of one store; ``committed(version, group)`` tells whether a commit of
    ``group`` is in the log from ``version`` on."""

    def __init__(self, folder: Path, committed: Callable[[int, str], bool]) -> None:
        self.folder = folder
        self._committed = committed

    def offer(self, requests: list[list[dict[str, Any]]]) -> str:
        """Offer requests (each a list of validated assertions); return the offer's name."""
        self.folder.mkdir(exist_ok=True)
        name = f"{time.time_ns():020d}-{os.getpid()}-{uuid.uuid4().hex}"
        self._put(f"{name}.req", requests)
        return name

    def offers(self) -> list[tuple[str, list[list[dict[str, Any]]]]]:
        """Every offer waiting, oldest first (call under the writer lock, then :meth:`take` those
        applied)."""
        try:
            names = sorted(os.listdir(self.folder))
        except FileNotFoundError:
            return []
        found = []
        for file in names:
            path = self.folder / file
            if file.endswith((".ans", ".tmp")):  # left by an offerer or a writer that is gone
                self._drop_if_stale(path)
            if not file.endswith(".req"):
                continue
            try:
                found.append((file[:-4], loads(path.read_text())))
            except FileNotFoundError:
                pass
            except (OSError, ValueError):  # unreadable: its offerer finds no answer and applies it
                path.unlink(missing_ok=True)
        return found

    def take(self, keys: set[Key]) -> list[tuple[str, list[list[dict[str, Any]]]]]:
        """The offers a commit touching ``keys`` applies, removed from the folder: in offer
        order, each touching no key the commit touches by then (the others wait for a later
        commit). Call under the writer lock."""
        taken = []
        for name, requests in self.offers():
            touched = set().union(*(keys_of(news) for news in requests))
            if not touched & keys:
                (self.folder / f"{name}.req").unlink(missing_ok=True)
                keys = keys | touched
                taken.append((name, requests))
        return taken

    def answer(self, name: str, answers: list[Any], group: str, version: int | None) -> None:
        """Answer offer ``name``: one entry per request (``version``: the commit the answers hold
        for, ``None`` when nothing is committed)."""
        self._put(f"{name}.ans", {"group": group, "version": version, "answers": answers})

    def poll(self, name: str) -> list[Any] | None:
        """The answers to offer ``name`` once they hold (without the writer lock: an answer is
        written before its commit, and holds only once the commit is there), else ``None``."""
        found = self._answer_of(name)
        if found is None or not self._holds(found):
            return None  # not answered, still committing, or its leader is gone: the lock will tell
        os.unlink(f"{self.folder}/{name}.ans")
        return found["answers"]

    def collect(self, name: str) -> list[Any] | None:
        """The answers to offer ``name`` if they hold, else ``None``; either way the offer leaves
        the folder (call under the writer lock: no commit is under way)."""
        (self.folder / f"{name}.req").unlink(missing_ok=True)
        found = self._answer_of(name)
        (self.folder / f"{name}.ans").unlink(missing_ok=True)
        return found["answers"] if found is not None and self._holds(found) else None

    def _answer_of(self, name: str) -> dict[str, Any] | None:
        try:  # asked every poll: a plain string, no pathlib
            with open(f"{self.folder}/{name}.ans") as handle:
                return loads(handle.read())
        except FileNotFoundError:
            return None

    def _holds(self, found: dict[str, Any]) -> bool:
        """Whether an answer holds: nothing was to be committed, or its commit is in the log."""
        return found["version"] is None or self._committed(found["version"], found["group"])

    def _put(self, file: str, value: Any) -> None:
        tmp = self.folder / f".{file}.{uuid.uuid4().hex}.tmp"
        tmp.write_text(dumps(value))
        os.replace(tmp, self.folder / file)

    @staticmethod
    def _drop_if_stale(path: Path) -> None:
        try:
            if time.time() - path.stat().st_mtime > STALE_SECONDS:
                path.unlink(missing_ok=True)
        except FileNotFoundError:
            pass
