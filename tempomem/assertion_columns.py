"""A large ``assert_many`` read a column at a time (``assertion_columns.sql``).

:func:`checked` turns a batch into the engine's operations table in one DuckDB statement, with
the values :func:`tempomem.writepath.new_assertion` gives one row at a time: the same defaults,
the same time grammar (:mod:`tempomem.timegrammar`), the same checks. It only ever accepts: a
batch it cannot decide column-wise (a column of an unexpected type, an unknown field, a row a
check refuses) returns ``None``, and the caller validates row by row, which raises the error
naming the row and field. The column checks lean to refusing (a string is blank for them when it
holds only characters from a superset of Python's whitespace), so the two readings never
differ on a batch both accept.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

import duckdb
import pyarrow as pa

from . import frames
from .connection import sql_parts
from .schema import FLOAT32_MAX, LINK_TYPES, MAX_WEIGHT, positions
from .timegrammar import TEXT_TIME_MACRO
from .writepath import new_assertion

_TS = pa.timestamp("us", tz="UTC")
_STRINGS = ("subject", "predicate", "object", "scope", "source", "text", "link_type", "artifact")
_TIMES = ("valid_from", "valid_to", "reference_time")
_NUMBERS = ("confidence", "weight")
_LISTS = {"artifacts": pa.list_(pa.string()), "embedding": pa.list_(pa.float64())}
FIELDS = frozenset((*_STRINGS, *_TIMES, *_NUMBERS, *_LISTS))


def read(rows: Any, set_based: Callable[[int], bool]) -> tuple[pa.Table | None, list[dict[str, Any]]]:
    """``assert_many``'s rows: checked column-wise when ``set_based`` says the batch is large and
    :func:`checked` decides it (then the list is empty), else validated row by row by
    ``new_assertion``, which raises the error naming the row and field."""
    if not isinstance(rows, list):
        rows = frames.as_arrow(rows, field="rows")
    if set_based(len(rows)):
        table = checked(rows)
        if table is not None:
            return table, []
    records = frames.records(rows)
    return None, [new_assertion(r, row=i if len(records) > 1 else None) for i, r in enumerate(records)]


@cache
def _parts() -> dict[str, str]:
    return sql_parts("assertion_columns.sql")


def _column(table: pa.Table, name: str) -> list[pa.Array] | None:
    """The column ``name`` in the shape the statement reads (two for a time: text and instant)."""
    n = table.num_rows
    given = table.column(name) if name in table.column_names else pa.nulls(n)
    kind = given.type
    try:
        if name in _TIMES:
            if pa.types.is_null(kind):
                return [pa.nulls(n, pa.string()), pa.nulls(n, _TS)]
            if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind):
                return [given.cast(pa.string()), pa.nulls(n, _TS)]
            if pa.types.is_timestamp(kind) or pa.types.is_date(kind):
                # naive datetimes are UTC, as writepath reads them
                utc = given.cast(pa.timestamp("us")) if pa.types.is_date(kind) or kind.tz is None else given
                return [pa.nulls(n, pa.string()), utc.cast(_TS)]
            return None
        if name in _STRINGS:
            # a Polars Categorical or Enum column is a dictionary of strings
            text = kind.value_type if pa.types.is_dictionary(kind) else kind
            ok = pa.types.is_null(text) or pa.types.is_string(text) or pa.types.is_large_string(text) \
                or pa.types.is_string_view(text)
            return [given.cast(pa.string())] if ok else None
        if name in _NUMBERS:
            ok = pa.types.is_null(kind) or pa.types.is_integer(kind) or pa.types.is_floating(kind)
            return [given.cast(pa.float64())] if ok else None
        lists = (pa.types.is_list, pa.types.is_large_list, pa.types.is_list_view, pa.types.is_fixed_size_list)
        if not pa.types.is_null(kind) and not any(is_list(kind) for is_list in lists):
            return None
        return [given.cast(_LISTS[name])]
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        return None


def checked(rows: list[dict[str, Any]] | pa.Table) -> pa.Table | None:
    """The batch as operations (``bulk.OPS_SCHEMA`` but ``kind``, ``commit_time``, ``target_op``
    and ``serial``), or ``None`` when it must be validated row by row (see the module doc)."""
    table = frames.strict_columns(rows)
    if table is None or not set(table.column_names) <= FIELDS:
        return None
    columns: dict[str, pa.Array] = {}
    for name in sorted(FIELDS):
        shaped = _column(table, name)
        if shaped is None:
            return None
        if name in _TIMES:
            columns[f"{name}_text"], columns[f"{name}_time"] = shaped
        else:
            columns[name] = shaped[0]
    columns["op"] = positions(table.num_rows)
    # a connection of its own: the writer's is the engine's, and this runs before the lock
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute(TEXT_TIME_MACRO)
    con.execute(_parts()["macros"])
    con.register("_tm_assertions_in", pa.table(columns))
    try:
        params = {"link_types": list(LINK_TYPES), "max_weight": MAX_WEIGHT, "float32_max": FLOAT32_MAX}
        out = con.sql(_parts()["assertions"], params=params).to_arrow_table()
    finally:
        con.close()
    if out.num_rows != table.num_rows or not out.column("accepted").to_numpy(zero_copy_only=False).all():
        return None
    return out.drop_columns(["accepted"])
