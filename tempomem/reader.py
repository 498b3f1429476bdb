"""One store's read side in this process: a DuckDB connection bound to the newest committed
version, the lock that guards it, and the caches built on that connection.

:class:`tempomem.Memory` owns one as ``mem.reader``; the features (diff, sequenced, recall,
graph, probes, reports) read through it, so that none of them needs the store facade.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

import duckdb

from .connection import bind_files, new_connection
from .pointread import PointReader
from .queries import check_keys

if TYPE_CHECKING:
    from .engine import Engine
    from .storage import Storage

T = TypeVar("T")


class Reader:
    """The read side of one open store (the writes go through its :class:`~tempomem.engine.Engine`)."""

    def __init__(self, storage: Storage, engine: Engine, embedder: Any = None) -> None:
        self.storage = storage
        self.engine = engine
        #: The store's embedder (``tm.open(..., embedder=)``); recall picks the default on first use.
        self.embedder = embedder
        #: Serializes use of :meth:`connection` across threads; hold it while using the connection.
        self.lock = threading.RLock()
        #: What features keep in memory on the connection (recall's index, graph's adjacency), by name.
        self.caches: dict[str, Any] = {}
        self._con: duckdb.DuckDBPyConnection | None = None
        self._con_pid: int | None = None
        self._bound_version = -2
        self._points = PointReader()
        #: Whether a query naming a subject reads only that subject's rows (:mod:`tempomem.pointread`);
        #: off, it reads the whole version like any other. The answer is the same either way.
        self.point_reads = True

    def connection(self) -> duckdb.DuckDBPyConnection:
        """This process's connection, bound to the newest committed version (hold :attr:`lock`)."""
        self._own_connection()
        snap = self.storage.snapshot()
        if snap.version != self._bound_version:
            bind_files(self._con, snap.files, first=self._bound_version == -2)
            self._bound_version = snap.version
        return self._con

    def _own_connection(self) -> duckdb.DuckDBPyConnection:
        if self._con is None or self._con_pid != os.getpid():
            self._con, self._con_pid, self._bound_version = new_connection(), os.getpid(), -2
        return self._con

    def read_files(self, fn: Callable[..., T], /, *args: Any) -> T:
        """``fn(connection, files, *args)`` under the lock, ``files`` the newest version's data
        files: for a query that reads them itself and no view, which are then not bound to the
        version (~5 ms after each commit at 10M revisions)."""
        with self.lock, self.storage.files_present():
            return fn(self._own_connection(), self.storage.snapshot().files, *args)

    def read(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(connection, *args, **kwargs)`` under the lock."""
        with self.lock, self.storage.files_present():
            return fn(self.connection(), *args, **kwargs)

    def read_subject(self, subject: str | None, scope: str | None, predicate: str | None, facts_only: bool,
                     fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """``fn(connection, *args, **kwargs)`` under the lock, where ``fn`` answers only about
        ``subject`` (and ``scope``, ``predicate`` when given): over that subject's rows alone
        (:mod:`tempomem.pointread`; ``facts_only`` when it reads only the ``facts`` view), or
        over the whole version when no subject is given or :attr:`point_reads` is off."""
        check_keys(subject=subject, scope=scope, predicate=predicate)  # before the key index reads them
        with self.lock, self.storage.files_present():
            if subject is None or not self.point_reads:
                return fn(self.connection(), *args, **kwargs)
            files = self.storage.snapshot().files
            return self._points.read(files, subject, scope, predicate, facts_only, fn, *args, **kwargs)

    def now(self) -> datetime:
        """The store clock's current time."""
        return self.engine.now()
