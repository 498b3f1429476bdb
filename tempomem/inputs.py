"""Caller frames for the analytics helpers (probes, decisions): checked, times read, in DuckDB.

A frame may be Polars, pandas, Arrow, a DuckDB relation or a list of dicts. Its time columns
may hold datetimes (naive = UTC), dates or text in the time grammar of SPEC §2
(:mod:`tempomem.timegrammar`, the one the API reads); numbers are refused, as on the API. They
are read in one DuckDB statement, and the first row that cannot be read is reported by position
with the reason.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import duckdb
import polars as pl

from .connection import quote
from .errors import TempomemError, TimeParseError
from .forks import check_polars
from .frames import as_arrow
from .timegrammar import reason_sql, time_sql

ROW = "_tm_row"


@contextmanager
def registered(con: duckdb.DuckDBPyConnection, data: Any, *, field: str, name: str, required: tuple[str, ...],
               times: tuple[str, ...], optional: tuple[str, ...] = ()
               ) -> Iterator[tuple[duckdb.DuckDBPyConnection, pl.DataFrame]]:
    """:func:`register` on a shared connection, dropping what it made on exit."""
    try:
        yield con, register(con, data, field=field, name=name, required=required, times=times, optional=optional)
    finally:
        con.execute(f"DROP TABLE IF EXISTS {name}")
        con.unregister(f"{name}_input")


def register(con: duckdb.DuckDBPyConnection, data: Any, *, field: str, name: str,
             required: tuple[str, ...], times: tuple[str, ...], optional: tuple[str, ...] = ()) -> pl.DataFrame:
    """Register ``data`` on ``con`` as the view ``name`` and return it as a Polars frame.

    The view has ``_tm_row`` (the 0-based input position), the ``required`` columns, each
    ``optional`` column present in the input (else NULL) as text, and ``times`` as TIMESTAMPTZ.
    Raises :class:`TempomemError` naming ``field`` for a missing column or an unreadable time.
    """
    table = as_arrow(data, field=field, paths=True)
    missing = [c for c in required if c not in table.column_names]
    if missing:
        raise TempomemError(f"{field}: no {missing[0]!r} column (columns: {', '.join(table.column_names) or 'none'})")
    check_polars()
    original = pl.from_arrow(table)
    assert isinstance(original, pl.DataFrame)
    original = original.with_row_index(ROW)
    con.register(f"{name}_input", original.to_arrow())
    described = con.sql(f"SELECT * FROM {name}_input LIMIT 0")
    types = dict(zip(described.columns, [str(t) for t in described.types], strict=True))
    for column in [c for c in (*required, *optional) if c in types and c not in times]:
        if _nested(types[column]):  # DuckDB's text of a list or struct would be compared as a key
            raise TempomemError(f"{field}: the {column!r} column holds {types[column]} values; expected text")
    select = [f"{ROW}"]
    for column in required:
        if column in times:
            select.append(f"{time_sql(quote(column), types[column])} AS {quote(column)}")
        else:
            select.append(f"CAST({quote(column)} AS VARCHAR) AS {quote(column)}")
    for column in optional:
        source = f"CAST({quote(column)} AS VARCHAR)" if column in types else "CAST(NULL AS VARCHAR)"
        select.append(f"{source} AS {quote(column)}")
    con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS SELECT {', '.join(select)} FROM {name}_input")
    for column in times:
        why = reason_sql(f"i.{quote(column)}", types[column])
        bad = con.sql(
            f"SELECT t.{ROW}, CAST(i.{quote(column)} AS VARCHAR), {why} FROM {name} t "
            f"JOIN {name}_input i USING ({ROW}) WHERE t.{quote(column)} IS NULL ORDER BY t.{ROW} LIMIT 1"
        ).fetchall()
        if bad:
            row, value, reason = bad[0]
            raise TimeParseError(f"{field}: row {row}, {column}: cannot read {value!r} as a time: "
                                 f"{reason or 'nothing given'}")
    return original


def _nested(duck_type: str) -> bool:
    """Whether a DuckDB type is a list, array, struct, map or union.

    >>> _nested("VARCHAR[]"), _nested("INTEGER[3]"), _nested("STRUCT(a INTEGER)"), _nested("BIGINT")
    (True, True, True, False)
    """
    return duck_type.endswith("]") or duck_type.startswith(("STRUCT", "MAP", "UNION"))
