"""Point reads: a query form that names a subject, run over that subject's rows alone.

Every view of ``revisions.sql`` works fact by fact, and the rows of a fact share its key, so
a query filtered on a subject gives the same answer over that subject's rows as over the
store. Those rows come from the key index (:class:`~tempomem.keyindex.KeyIndex`: the row groups
of the version's files that can hold them, found in memory), and the query itself, the same
function of :mod:`tempomem.queries` with the same macros, runs on a small DuckDB connection of
its own whose ``_tm_events`` are those rows. At 10M revisions that replaces a scan that tests
the statistics of every row group of every file and plans the views over them, per query.

What is left of a point read is decoding the subject's row group (~4-5 ms for a 16k-row group,
whatever the codec) and DuckDB planning the query (~2-3 ms; running it on a few rows is ~0.2 ms).
So the row groups decoded are kept (``CACHE_BYTES``), and the planning is cut where it does
not change the plan's answer: no view over the registered rows, no optimizer passes that pay
only on large inputs, and one bind per statement (:class:`_Once`).
"""

from __future__ import annotations

import gc
import os
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from .connection import new_connection, sql_file, use_views
from .keyindex import NO_ROWS, KeyIndex
from .schema import PREVIOUS_COLUMNS

T = TypeVar("T")

#: The bytes of decoded row groups a point reader keeps (``keyindex._Groups``): a 16k-row group of
#: a fold is ~3.3 MB decoded (``prev_*`` left out), so ~40 groups, ~650k revisions about the
#: subjects last asked about and their neighbours in key order. Decoding a group is most of a
#: point read that misses.
CACHE_BYTES = 128 << 20
#: The optimizer passes the point connection skips. On a subject's few rows each query is almost
#: all planning (at 10M, ~0.2 ms of ~2.7 ms runs), and these passes, which earn their cost on a
#: scan of the store, take ~0.7 ms of it; they never change an answer.
_SKIPPED_OPTIMIZERS = ("expression_rewriter,filter_pushdown,join_order,statistics_propagation,unused_columns,"
                       "column_lifetime,projection_pullup,projection_placement,duplicate_groups,"
                       "outer_join_simplification,reorder_filter,common_subplan")
#: The point connections a forked child inherited, kept there and never destroyed: a DuckDB
#: database destroyed in a forked child waits on threads only its parent has, and can crash it.
_INHERITED: list[duckdb.DuckDBPyConnection] = []
# For the same reason, garbage cycles that hold connections are collected before a fork, in the
# parent, not by the child's first collection (a writer process forked from a test run crashed so).
os.register_at_fork(before=gc.collect)


class PointReader:
    """Runs a query function over one subject's rows (one per :class:`~tempomem.reader.Reader`)."""

    def __init__(self) -> None:
        self._index = KeyIndex(cache_bytes=CACHE_BYTES)
        self._cons: dict[bool, duckdb.DuckDBPyConnection] = {}
        self._pid = os.getpid()

    def read(self, files: tuple[str, ...], subject: str, scope: str | None, predicate: str | None,
             facts_only: bool, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """``fn(connection, *args, **kwargs)`` over the rows of ``subject`` (of ``scope`` and
        ``predicate`` when given) in ``files``; ``facts_only`` when ``fn`` reads only ``facts``.

        The stored copies of each row's previous revision (``prev_*``) are left NULL: the query
        forms read ``facts`` and ``revisions``, which leave them out.
        """
        rows = self._index.subject_rows(files, subject, scope=scope, predicate=predicate, facts_only=facts_only,
                                        unread=PREVIOUS_COLUMNS)
        # all folded (nearly always): the views of folded.sql, no join to plan
        folded = rows.num_rows == 0 or bool(pc.all(pc.fill_null(rows["folded"], False)).as_py())
        con = self._connection(folded)
        # registered as _tm_events itself: a view over the registered rows costs binding each query
        con.register("_tm_events", rows)
        return fn(_Once(con), *args, **kwargs)

    def _connection(self, folded: bool) -> duckdb.DuckDBPyConnection:
        if self._pid != os.getpid():  # a forked child: DuckDB connections do not cross a fork
            _INHERITED.extend(self._cons.values())
            self._cons, self._pid = {}, os.getpid()
        if folded not in self._cons:
            con = new_connection()
            # one thread: the work of a subject's rows is planning, which a second thread only waits on
            con.execute("SET threads = 1")
            try:
                con.execute("SET disabled_optimizers = $names", {"names": _SKIPPED_OPTIMIZERS})
            except duckdb.Error:  # a DuckDB that renamed a pass: every pass runs, the answers are the same
                pass
            con.register("_tm_events", NO_ROWS)
            con.execute("CREATE VIEW _tm_fresh_events AS SELECT * FROM _tm_events")
            con.execute(sql_file("revisions.sql"))
            con.execute(sql_file("macros.sql"))
            use_views(con, folded=folded, first=True)
            self._cons[folded] = con
        return self._cons[folded]


class _Once:
    """The point connection as the query functions use it (``con.sql(query, params=)`` read with
    ``to_arrow_table()``), running each statement once. A DuckDB relation binds its statement to
    describe it and binds it again to run it; on a subject's rows that first bind is a quarter
    of the query (~1 ms). Anything else goes to the connection itself."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self._con = con

    def sql(self, query: str, params: Any = None) -> _Statement:
        return _Statement(self._con, query, params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._con, name)


class _Statement:
    def __init__(self, con: duckdb.DuckDBPyConnection, query: str, params: Any) -> None:
        self._con, self._query, self._params = con, query, params

    def to_arrow_table(self) -> pa.Table:
        self._con.execute(self._query, self._params)
        # DuckDB warns that Arrow from a DB-API result costs a copy: here, of a subject's few rows
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Arrow output on a DB-API result", category=UserWarning)
            return self._con.to_arrow_table()

    def __getattr__(self, name: str) -> Any:  # any other reading: DuckDB's relation
        return getattr(self._con.sql(self._query, params=self._params), name)

