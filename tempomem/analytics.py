"""The connection the analytics helpers (diff, probes, reports) read the store through.

It is the store's own connection (:meth:`Memory._connection`) with one more view,
``_tm_belief_rows`` (``belief_rows.sql``): every revision with its belief end, spelled so that
time filters reach the Parquet scan of a folded store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .connection import sql_file

if TYPE_CHECKING:
    import duckdb

    from .store import Memory

_VIEW = "_tm_belief_rows"


def analytics_connection(mem: Memory) -> duckdb.DuckDBPyConnection:
    """``mem``'s connection with ``_tm_belief_rows`` defined (hold ``mem._lock``).

    >>> analytics_connection(mem).sql("SELECT count(*) FROM _tm_belief_rows")  # doctest: +SKIP
    """
    con = mem._connection()
    # a view is bound by name when queried, so it follows the connection to each new version
    found = con.sql("SELECT count(*) FROM duckdb_views() WHERE view_name = $name", params={"name": _VIEW})
    if not found.fetchall()[0][0]:
        con.execute(sql_file("belief_rows.sql"))
    return con
