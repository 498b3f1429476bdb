"""The write engine: the one owner of every commit to a store.

It holds the writer lock (threads of this process, then processes on this machine), the store
clock (SPEC §1.4), the believed states of the keys a commit touches, and the commit itself.
``assert_fact``, ``assert_many``, ``invalidate`` and ``correct`` reach it as requests
(:meth:`Engine.assertions`, :meth:`Engine.change`); backfill, erasure, ``embed`` and settings
changes take it whole with :meth:`Engine.exclusive`.

**Group commit.** A request is queued, then its thread waits for the writer lock. Whoever gets
the lock takes every queued request and applies them in queue order, as if one after another,
in one Delta commit with one ``recorded_at``; the others find their answer ready when the lock
comes to them. Each request is all-or-nothing: one that the write path refuses is left out
and gets its own error, and the group is applied again without it.

**Across processes** (:mod:`tempomem.spool`). A leader that finds the writer lock held by
another process offers its group through the spool before it waits; whoever holds the lock next
applies the offered requests after its own, in the order offered, in its commit, and answers
them. A leader that gets the lock and finds its offer answered (by a commit that happened) is
done; otherwise it takes its offer back and commits it itself. Changes of stored facts
(``invalidate``, ``correct``) are never offered.

**Small commits read what they touch.** The engine keeps the believed states of the keys it
has seen, valid for the store version it last saw. Before a commit it checks the log: rows
another writer appended since are read from those files alone and bring the keys it holds up
to date (writers taking turns on the same keys, or committing each other's offers, read no key
again); a rewrite (erasure) empties the cache. A key it does not hold is read from the store by key.
"""

from __future__ import annotations

import fcntl
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from . import ids, queries
from .connection import bind_events, new_connection, without_checkpoints, without_progress_bar
from .errors import TempomemError
from .schema import EVENT_SCHEMA, SORT_KEYS, Fact
from .spool import GROUP_KEY, Spool, answered, error_answer, fact_answer, keys_of
from .staterows import as_fact, micros
from .states import StateCache
from .storage import Storage
from .times import EPOCH, MICROSECOND, clock_or_system, system_clock, to_utc
from .writepath import Batch

Clock = Callable[[], datetime]

#: How often a process whose assertions are offered looks for their answer (and for the lock),
#: for its first ``_POLL_FAST_FOR`` seconds of waiting; then ten times less often.
_POLL_SECONDS = 0.001
_POLL_FAST_FOR = 0.2

#: Batches with more assertions than this are applied set-based (``rounds.sql``); fewer go
#: through the one-row path, whose fixed cost is microseconds instead of a DuckDB round.
SET_BASED_FROM = 512

#: How long a leader waits for the writers its predecessor just answered (only when the last
#: group was larger than what is queued): a fraction of the ~10 ms a commit costs.
_GATHER_SECONDS = 0.002

_thread_locks: dict[str, threading.RLock] = {}
_thread_locks_guard = threading.Lock()


def _thread_lock(path: Path) -> threading.RLock:
    with _thread_locks_guard:
        return _thread_locks.setdefault(str(path), threading.RLock())


@dataclass
class _Request:
    """One caller's operations: applied to a :class:`Batch`, answered with Facts or an error."""

    apply: Callable[[Batch], list[str]]
    keys: set[tuple[str, str, str]]
    news: list[dict[str, Any]] = field(default_factory=list)
    fact_ids: list[str] = field(default_factory=list)
    facts: list[Fact] | None = None
    error: BaseException | None = None
    done: bool = False


def _flock(fd: int, on_wait: Callable[[], bool] | None) -> bool:
    """Take the flock on ``fd``; ``False`` when ``on_wait()`` says, while another process holds
    it, that it is no longer wanted."""
    if on_wait is None:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return True
    started = time.monotonic()
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if on_wait():
                return False
            # a holder this slow is a long job (a backfill): look ten times less often
            time.sleep(_POLL_SECONDS if time.monotonic() - started < _POLL_FAST_FOR else 10 * _POLL_SECONDS)


def _asserting(news: list[dict[str, Any]]) -> Callable[[Batch], list[str]]:
    """A request's work: assert each of ``news`` in turn."""
    return lambda batch: [batch.assert_fact(dict(n)) for n in news]


class Engine:
    """Every write to one store goes through here (see the module doc)."""

    def __init__(self, storage: Storage, clock: Clock | None = None) -> None:
        self.storage = storage
        self._clock: Clock = clock_or_system(clock)
        self._lock = _thread_lock(storage.path)
        self._owner: int | None = None  # the thread inside exclusive(), if any
        self._pending: list[_Request] = []
        self._queue = threading.Condition()
        self._leading = False
        self._last_group = 0
        self._cache = StateCache()
        self._con: duckdb.DuckDBPyConnection | None = None
        self._bound = -2
        self._spool = Spool(storage.spool_path(), lambda version, group: storage.has_commit_info(version, GROUP_KEY,
                                                                                                  group))

    def now(self) -> datetime:
        """The store clock's current time."""
        return to_utc(self._clock(), field="clock")  # type: ignore[return-value]

    # -- the writer lock ------------------------------------------------------------------------
    @contextmanager
    def exclusive(self, on_wait: Callable[[], bool] | None = None) -> Iterator[Engine | None]:
        """Hold the writer lock: threads of this process, then processes on this machine.

        While another process holds it, ``on_wait()`` is asked every :data:`_POLL_SECONDS`
        whether the lock is still wanted; when it says no, this yields ``None`` without it.
        Re-entered by the thread that holds it, it just yields (flock would deadlock).
        """
        with self._lock, self.storage.files_present():
            if self._owner is not None:  # only the holder of the RLock can see it set
                yield self
                return
            with open(self.storage.lock_path(), "a+") as handle:
                if not _flock(handle.fileno(), on_wait):
                    yield None
                    return
                self._owner = threading.get_ident()
                try:
                    yield self
                finally:
                    self._owner = None
                    fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    # -- settings -------------------------------------------------------------------------------
    def update_settings(self, change: Callable[[dict[str, Any]], None]) -> None:
        """Apply ``change`` to the stored settings under the writer lock."""
        with self.exclusive():
            settings = self.storage.read_settings()
            change(settings)
            self.storage.write_settings(settings)

    def rules(self) -> tuple[dict[str, tuple[str, str | None]], str]:
        """Each declared predicate's (arity, policy), and the store's default policy."""
        settings = self.storage.read_settings()
        return {p: (d["arity"], d["policy"]) for p, d in settings["predicates"].items()}, settings["policy"]

    # -- the clock ------------------------------------------------------------------------------
    def last_api_us(self) -> int | None:
        """The last write-path belief time (µs): from the clock file when it is current, else a scan.

        Call under the writer lock.
        """
        saved = self.storage.read_clock()
        if saved is not None and saved["version"] == self.storage.latest_version():
            return saved["last_recorded_us"]
        last = queries.last_api_commit(self.connection())
        return None if last is None else micros(last)

    def commit_time(self) -> datetime:
        """The store clock, strictly after the previous write-path commit (under the writer lock)."""
        last_us = self.last_api_us()
        now = self.now()
        if last_us is not None and micros(now) <= last_us:
            return EPOCH + (last_us + 1) * MICROSECOND
        return now

    def _record(self, last_us: int | None, *, rewrote: bool = False) -> tuple[int, int]:
        """Record the clock for the version just committed; a rewrite starts a new cache epoch."""
        epoch = (self.storage.read_clock() or {}).get("epoch", 0) + (1 if rewrote else 0)
        version = self.storage.latest_version()
        self.storage.write_clock(version, last_us, epoch)
        return version, epoch

    def _foreign(self, last_us: int | None, *, rewrote: bool = False) -> None:
        """After a write whose rows the state cache did not see: record the clock, empty the cache."""
        self._cache.forget_all(*self._record(last_us, rewrote=rewrote))

    # -- commits (under the writer lock) ---------------------------------------------------------
    def add_files(self, files: list[Path], last_us: int | None) -> None:
        """Commit Parquet files written in the table folder (backfill, a replay); the clock stays at ``last_us``."""
        self.storage.add_files(files)
        self._foreign(last_us)

    def overwrite(self, table: pa.Table, last_us: int) -> None:
        """Replace every row (erasure); the clock moves to ``last_us``."""
        self.storage.overwrite(table)
        self._foreign(last_us, rewrote=True)

    def set_embeddings(self, table: pa.Table) -> None:
        """Write derived embeddings in place; no belief time moves."""
        last_us = self.last_api_us()
        self.storage.set_embeddings(table)
        self._foreign(last_us)

    def commit(self, table: pa.Table, recorded_at: datetime, group: str | None = None) -> int:
        """Commit write-path rows recorded at ``recorded_at``: the store clock moves to it.
        ``group`` names the commit in its commitInfo (the answers to offered requests hold for it)."""
        _, file = self.storage.append(table, None if group is None else {GROUP_KEY: group})
        self._cache.written(file, table)
        return self._record(micros(recorded_at))[0]

    def connection(self) -> duckdb.DuckDBPyConnection:
        """The engine's DuckDB connection, ``_tm_events`` bound to the newest version (under the
        lock), with the interval predicates (``connection.bind_events``) and nothing else."""
        if self._con is None:
            self._con = new_connection()
            without_progress_bar(self._con)
            without_checkpoints(self._con)
        snap = self.storage.snapshot()
        if snap.version != self._bound:
            bind_events(self._con, snap.files, first=self._bound == -2)
            self._bound = snap.version
        return self._con

    # -- the write path -------------------------------------------------------------------------
    def assertions(self, news: list[dict[str, Any]]) -> list[Fact]:
        """Commit validated assertions (``writepath.new_assertion``) in order; return where each landed."""
        if self.set_based(len(news)):
            from .bulk import ops_from_news

            return self.checked_assertions(ops_from_news(news))

        return self._submit(_Request(_asserting(news), keys_of(news), news=news))

    def set_based(self, rows: int) -> bool:
        """Whether a batch of ``rows`` assertions is applied set-based."""
        return rows > SET_BASED_FROM

    def checked_assertions(self, assertions: pa.Table) -> list[Fact]:
        """Commit a large batch already checked (``bulk.assert_set_based``); return where each landed."""
        from .bulk import assert_set_based

        with self.exclusive():
            facts = assert_set_based(self, assertions)
            self._cache.forget_all(-1, None)
            return facts

    def change(self, fact_id: str, apply: Callable[[Batch], str]) -> Fact:
        """Commit one change of a stored fact (``Batch.invalidate`` or ``Batch.correct``)."""
        return self._submit(_Request(lambda batch: [apply(batch)], set(), fact_ids=[ids.checked(fact_id)]))[0]

    def _submit(self, request: _Request) -> list[Fact]:
        """Queue ``request``; the first waiter leads: it commits everything queued, then hands on.

        Waiters learn of their answer from the condition, not by taking the lock in turn: a
        thread answered first would otherwise lead the next commit alone.
        """
        if self._owner == threading.get_ident():  # inside this thread's own exclusive(): no queue
            self._commit_group([request])
            return self._answer(request)
        with self._queue:
            self._pending.append(request)
            while not request.done and self._leading:
                self._queue.wait()
            lead = not request.done
            if lead:
                self._leading = True
                # Writers answered by the last commit are about to queue again: give them a
                # moment, or every other commit would carry only half of them.
                if self._last_group > len(self._pending):
                    self._queue.wait(_GATHER_SECONDS)
                group, self._pending = self._pending, []
                self._last_group = len(group)
        if lead:
            try:
                self._lead(group)
            finally:
                with self._queue:
                    self._leading = False
                    self._queue.notify_all()
        return self._answer(request)

    def _lead(self, group: list[_Request]) -> None:
        """Commit ``group`` under the writer lock. While another process holds it, a group of
        assertions is offered (:mod:`tempomem.spool`) and done when that process's commit
        answers it; taken back when this one gets the lock first."""
        offer: str | None = None  # the offer's name once made
        tried = False

        def answered_elsewhere() -> bool:
            nonlocal offer, tried
            if not tried:
                tried = True
                with suppress(OSError):  # the spool cannot be written: wait for the lock
                    offer = self._spool.offer([r.news for r in group])
                return False
            return offer is not None and self._settle(group, self._spool.poll(offer))

        offerable = all(r.news and not r.fact_ids for r in group)
        with self.exclusive(on_wait=answered_elsewhere if offerable else None) as held:
            if held is None or (offer is not None and self._settle(group, self._spool.collect(offer))):
                return
            self._commit_group(group)

    @staticmethod
    def _settle(group: list[_Request], answers: list[Any] | None) -> bool:
        """Give each request of an offered group its answer; ``False`` when there are none."""
        if answers is None:
            return False
        for request, answer in zip(group, answers, strict=True):
            result = answered(answer)
            if isinstance(result, list):
                request.facts = result
            else:
                request.error = result
            request.done = True
        return True

    def _answer(self, request: _Request) -> list[Fact]:
        if request.error is not None:
            with self.storage.files_present():  # an error of the leader's commit, in this thread
                raise request.error
        assert request.facts is not None
        return request.facts

    def _commit_group(self, group: list[_Request]) -> None:
        """Apply the group in queue order, then the requests other processes offered, in one
        commit; a refused request leaves it alone."""
        try:
            # a change's key is known only from its fact: a group with one takes no offer
            offers = [] if any(r.fact_ids for r in group) else self._spool.take(set().union(*(r.keys for r in group)))
            foreign = [[_Request(_asserting(news), keys_of(news), news=news) for news in offered]
                       for _, offered in offers]
            group = group + [r for requests in foreign for r in requests]
            self._cache.sync(self.storage)
            commit_time = self.commit_time()
            keys = set().union(*(r.keys for r in group))
            fact_ids = [i for r in group for i in r.fact_ids]
            changed = self._cache.load(self.storage, keys, fact_ids)
            rules, default_policy = self.rules()
            live = list(group)
            while True:
                # a copy of each state: a batch sets a state's fields (never changes a list in place),
                # and a refused request must leave the cache as it was
                batch = Batch([dict(s) for s in self._cache.relevant([n for r in live for n in r.news], changed)],
                              commit_time=commit_time, rules=rules, default_policy=default_policy)
                landed: list[list[str]] = []
                for request in live:
                    try:
                        landed.append(request.apply(batch))
                    except TempomemError as exc:
                        request.error = exc
                        break
                else:
                    break
                live = [r for r in live if r.error is None]
            ingested_at = system_clock()
            rows = batch.rows(ingested_at=ingested_at)
            facts = {id(r): [as_fact(batch.states[i]) for i in ids_] for r, ids_ in zip(live, landed, strict=True)}
            name = uuid.uuid4().hex
            # answered before the commit, for the version it will be: a leader killed in between
            # leaves answers that no offerer accepts (a commit that took no offer reads no log)
            expected = self.storage.latest_version() + 1 if rows and offers else None
            for (offer, _), requests in zip(offers, foreign, strict=True):
                self._spool.answer(offer, [error_answer(r.error) if r.error is not None
                                           else [fact_answer(f) for f in facts[id(r)]] for r in requests],
                                   name, expected)
            if rows:
                version = self.commit(pa.Table.from_pylist(rows, schema=EVENT_SCHEMA).sort_by(SORT_KEYS), commit_time,
                                      name if offers else None)
                self._cache.committed(version, batch)
            for request in live:
                request.facts = facts[id(request)]
        except BaseException as exc:  # the commit failed: every request still waiting gets the error
            for request in group:
                if request.facts is None and request.error is None:
                    request.error = exc
            if not isinstance(exc, Exception):
                raise
        finally:
            for request in group:
                request.done = True
