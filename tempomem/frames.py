"""The one reader of caller frames: Polars (eager or lazy), pandas, Arrow, a DuckDB relation or
a list of dicts, as an Arrow table (backfill, the analytics inputs) or as rows (``assert_many``).

No other module tells the kinds apart or converts them (``tests/test_layout.py`` checks it).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa

from .errors import TempomemError
from .forks import check_polars

#: What every frame-taking function accepts, for its error message.
KINDS = "a Polars/pandas/Arrow frame, a DuckDB relation or a list of dicts"


def as_arrow(data: Any, *, field: str = "data", paths: bool = False) -> pa.Table:
    """An in-memory input as an Arrow table; ``paths`` says the caller also takes a path (for the error)."""
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatchReader):
        return data.read_all()
    if isinstance(data, pl.DataFrame | pl.LazyFrame):
        check_polars()  # reading the caller's frame is work for Polars' threads
        return (data.collect() if isinstance(data, pl.LazyFrame) else data).to_arrow()
    if isinstance(data, duckdb.DuckDBPyRelation):
        return data.to_arrow_table()
    if type(data).__module__.startswith("pandas"):
        return pa.Table.from_pandas(data, preserve_index=False)
    if isinstance(data, list):
        return _dicts_to_arrow(data, field)
    raise TempomemError(f"{field}: expected {'a path, ' if paths else ''}{KINDS}, got {type(data).__name__}")


def records(rows: Any, *, field: str = "rows") -> list[dict[str, Any]]:
    """Rows of any supported input as a list of dicts (missing values as ``None``); a list of
    dicts is taken as it is, so that its values keep their Python types."""
    if isinstance(rows, list):
        if not all(isinstance(r, dict) for r in rows):
            raise TempomemError(f"{field}: expected a list of dicts")
        return rows
    return as_arrow(rows, field=field).to_pylist()


def strict_columns(rows: list[dict[str, Any]] | pa.Table) -> pa.Table | None:
    """Rows already read by :func:`as_arrow`, or a list of dicts, as Arrow column by column; ``None``
    when a column of the list does not hold one Python type (:func:`as_arrow` would read a column
    mixing types as text, and ``True`` would pass for a subject): the caller then reads row by row.

    >>> strict_columns([{"subject": "svc"}, {"subject": True}]) is None
    True
    """
    if isinstance(rows, pa.Table):
        return rows
    try:
        return pa.table({name: [row.get(name) for row in rows] for name in sorted(set().union(*rows))})
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        return None


def _dicts_to_arrow(rows: list[Any], field: str) -> pa.Table:
    """A list of dicts as Arrow; a column mixing types (say datetimes and strings) becomes text."""
    if not all(isinstance(r, dict) for r in rows):
        raise TempomemError(f"{field}: a list input must hold dicts")
    names = list(dict.fromkeys(k for r in rows for k in r))
    arrays = {}
    for name in names:
        values = [r.get(name) for r in rows]
        try:
            arrays[name] = pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):  # OverflowError: an int beyond 64 bits
            arrays[name] = pa.array([None if v is None else v.isoformat() if isinstance(v, datetime) else str(v)
                                     for v in values], pa.string())
    return pa.table(arrays) if names else pa.table({"__row": pa.array([], pa.int64())})
