"""Whether Polars can run in this process: not in a child forked after its parent started
Polars' thread pool.

Polars' pool does not survive a fork: the child inherits a pool whose threads are gone, and the
first Polars call that hands it work waits forever (a parent that ran any query, then a forked
child's first ``mem.as_of``: the child hangs in ``pl.from_arrow``). Every query form returns a
Polars frame, so such a child gets :class:`~tempomem.errors.TempomemError` naming the remedy
instead of a hang. A child forked before the pool started, or started by ``spawn`` or
``forkserver``, starts a pool of its own and is unaffected.

A forked child's writes work without the pool: ``assert_fact``, ``invalidate``, ``correct`` and
``assert_many`` of dicts, Arrow or pandas (their Facts are made with Arrow alone). What needs
Polars is refused before it takes the writer lock, never hung holding it (a hang there would
stop every writer of the store): a Polars frame as input, ``backfill`` and the importers (their
report is Polars frames), ``forget`` and ``embed``.
"""

from __future__ import annotations

import os

from .errors import TempomemError

#: Polars names its pool's threads ``polars-0``, ``polars-1``, ... (Linux shows them here).
_THREADS = "/proc/self/task"
_parent_pool = False
_forked_after_pool = False


def _pool_started() -> bool:
    try:
        tasks = os.listdir(_THREADS)
    except OSError:  # no /proc: not Linux, where fork is not the default start method
        return False
    for task in tasks:
        try:
            with open(f"{_THREADS}/{task}/comm") as comm:
                if comm.read().startswith("polars-"):
                    return True
        except OSError:  # the thread ended while we looked
            continue
    return False


def _before_fork() -> None:
    global _parent_pool
    _parent_pool = _pool_started()


def _after_fork_in_child() -> None:
    global _forked_after_pool
    _forked_after_pool = _forked_after_pool or _parent_pool


os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)


def check_polars() -> None:
    """Raise :class:`~tempomem.errors.TempomemError` if this process was forked after its
    parent started Polars' thread pool (a Polars frame made here would never be returned)."""
    if _forked_after_pool:
        raise TempomemError(
            "this process was forked from one that had started Polars' threads, and Polars cannot run "
            "in it (its first query would wait forever): start the process with multiprocessing's "
            "'spawn' or 'forkserver' method (multiprocessing.get_context('spawn')), or fork before "
            "the parent's first query")
