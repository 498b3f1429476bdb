"""Other memory systems' exports read as backfill input (SPEC §11): the readers behind
``mem.backfill(..., format=...)`` and :mod:`tempomem.importers`.

Each reader reads its source into Arrow and maps it to backfill's input columns with one DuckDB
statement of ``importers.sql`` (times parsed by :func:`tempomem.timegrammar.time_sql`), with
``origin = 'import:<format>'``. A source row that becomes two revisions gives two input rows
with the same ``fact_id`` and ``__row`` (the source row's 0-based position), so the report
names source rows.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import adbc_driver_sqlite.dbapi as adbc_sqlite
import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from .connection import new_connection, quote, sql_parts, without_progress_bar
from .errors import TempomemError
from .schema import positions
from .timegrammar import TEXT_TIME_MACRO

#: The mappings and the importers' flags (importers.sql), each a whole statement over ``src``.
_SQL = sql_parts("importers.sql")


@dataclass(frozen=True)
class Source:
    """An export mapped to backfill's input: the rows, their ``origin``, and the importer's own
    flags and time unit."""

    rows: pa.Table
    origin: str
    flags: pl.DataFrame | None = None
    #: The unit of the source's bare numbers, when its format says (SPEC §2: never guessed).
    epoch_unit: str | None = None


def _with_columns(table: pa.Table, names: tuple[str, ...]) -> pa.Table:
    """Add the optional source columns a file lacks, as NULL text, so one statement fits all."""
    for name in names:
        if name not in table.column_names:
            table = table.append_column(name, pa.nulls(table.num_rows, pa.string()))
    return table.append_column("__row", positions(table.num_rows))


def _sqlite_table(path: str | os.PathLike[str], table: str) -> pa.Table:
    """All rows of ``table`` in a SQLite file, in rowid order, read straight into Arrow.

    SQLite types values, not columns; the ADBC driver gives a column the type its values share
    (integer and real: double; text with numbers: text, the numbers' SQLite text), so the
    reader makes one batch of every row, lest a first batch of NULLs fix a column as integer.
    A column of NULLs only stays untyped, as the optional columns a file lacks are."""
    if not os.path.isfile(path):
        raise TempomemError(f"data: no SQLite file {os.fspath(path)}")
    try:
        with adbc_sqlite.connect(Path(path).absolute().as_uri() + "?mode=ro") as con, con.cursor() as cur:
            cur.execute("SELECT name FROM pragma_table_info(?)", (table,))
            names = [name for (name,) in cur.fetchall()]
            if not names:
                raise TempomemError(f"data: {os.fspath(path)} has no table {table!r}")
            cur.execute(f"SELECT count(*) FROM {quote(table)}")
            [(rows,)] = cur.fetchall()
            cur.adbc_statement.set_options(**{"adbc.sqlite.query.batch_rows": str(max(rows, 1))})
            cur.execute(f"SELECT {', '.join(quote(n) for n in names)} FROM {quote(table)} ORDER BY rowid")
            read = cur.fetch_arrow_table()
    except (adbc_sqlite.Error, OSError) as exc:
        reason = str(exc).splitlines()[0]  # the driver appends the query on a line of its own
        raise TempomemError(f"data: cannot read {os.fspath(path)} as SQLite: {reason}") from None
    return pa.table({n: pa.nulls(len(c)) if c.null_count == len(c) else c
                     for n, c in zip(names, read.columns, strict=True)})


def _map(table: pa.Table, *queries: str,
         prepare: Callable[[duckdb.DuckDBPyConnection], None] | None = None) -> list[pa.Table]:
    """Run mapping queries over the source registered as ``src``, on one connection with the
    macro ``tm__text_time``, after ``prepare(con)`` (what the queries share, made once)."""
    con = new_connection()
    without_progress_bar(con)  # a long mapping would draw DuckDB's bar into the caller's output
    try:
        con.execute(TEXT_TIME_MACRO)
        con.register("src", table)
        if prepare is not None:
            prepare(con)
        return [con.sql(sql).to_arrow_table() for sql in queries]
    finally:
        con.close()


# -- Graphiti / Zep ---------------------------------------------------------------------------------

_GRAPHITI_OPTIONAL = ("uuid", "name", "source_node_uuid", "target_node_uuid", "group_id", "source_name",
                      "target_name", "fact", "episodes", "episode_uuids", "expired_at", "valid_at", "invalid_at",
                      "reference_time", "attributes", "created_at")


#: The fields of an edge that are lists of text; every other field is read as text.
_GRAPHITI_LISTS = ("episodes", "episode_uuids")
#: Edges whose fields DuckDB samples before reading (its default); a later field means all.
_GRAPHITI_SAMPLE = 20_480


def _read_graphiti(path: str | os.PathLike[str]) -> pa.Table:
    """Edges from a JSON array, an object with an ``edges`` list, or JSON Lines, read by DuckDB:
    a field's text as given (a number's or a nested value's as its JSON text), ``episodes`` and
    ``episode_uuids`` as lists of text (one value that is not a list: a list of its text),
    ``attributes`` as JSON text."""
    if not os.path.isfile(path):
        raise TempomemError(f"data: no file {os.fspath(path)}")
    con = new_connection()
    without_progress_bar(con)
    try:
        con.execute(_SQL["graphiti_list"])
        table = _graphiti_edges(con, os.fspath(path))
    except duckdb.Error as exc:
        raise TempomemError(f"data: cannot read {os.fspath(path)} as Graphiti edges (a JSON list of objects, "
                            f"an object with an edges list, or JSON Lines): {str(exc).splitlines()[0]}") from None
    finally:
        con.close()
    for name in _GRAPHITI_LISTS:  # both lists, so COALESCE(episodes, episode_uuids) binds
        if name not in table.column_names:
            table = table.append_column(name, pa.nulls(table.num_rows, pa.list_(pa.string())))
    return _with_columns(table, _GRAPHITI_OPTIONAL)


def _graphiti_edges(con: duckdb.DuckDBPyConnection, path: str) -> pa.Table:
    """The edges of a Graphiti file as text fields (see :func:`_read_graphiti`). A list of edges
    or JSON Lines is read with the fields the mapping reads declared (importers.sql,
    ``graphiti_fields``); edges wrapped in an object are read as JSON fields, the first edges
    showing the fields, and when a later edge has another, the read fails and every edge is
    sampled."""
    try:
        return _graphiti_text(con, path, sample=_GRAPHITI_SAMPLE)
    except duckdb.InvalidInputException as exc:
        if "unknown key" not in str(exc):
            raise
        return _graphiti_text(con, path, sample=-1)


def _graphiti_text(con: duckdb.DuckDBPyConnection, path: str, sample: int) -> pa.Table:
    params = {"path": path, "sample": sample, "format": _json_format(path)}
    no_edges = pa.table({"uuid": pa.array([], pa.string())})
    try:
        edges = con.sql(_SQL["graphiti_edges"], params=params)
    except duckdb.BinderException as exc:  # not objects: an error unless there is nothing at all
        values = (con.sql(_SQL["graphiti_values"], params={"path": path, "format": params["format"]})
                  if "non-record JSON" in str(exc) else None)
        if values is not None and not values.fetchall()[0][0]:
            return no_edges
        raise
    if "edges" in edges.columns and len(edges.limit(2).fetchall()) == 1:
        edges = con.sql(_SQL["graphiti_wrapped"], params=params)
        if not edges.limit(1).fetchall():
            return no_edges
        return edges.select(*(_graphiti_field(name).alias(name) for name in edges.columns)).to_arrow_table()
    return con.sql(_SQL["graphiti_fields"], params={"path": path, "format": params["format"]}).to_arrow_table()


def _json_format(path: str) -> str:
    """DuckDB's JSON format for the file at ``path``: ``array`` when its text starts with ``[``
    (after a byte-order mark and blanks), else ``auto``."""
    with open(path, "rb") as f:
        head = f.read(4096).removeprefix(b"\xef\xbb\xbf").lstrip()
    return "array" if head.startswith(b"[") else "auto"


def _graphiti_field(name: str) -> duckdb.Expression:
    """A field read as JSON, as what the mapping reads: lists of text, JSON text, or text."""
    column = duckdb.ColumnExpression(name)
    if name in _GRAPHITI_LISTS:
        return duckdb.FunctionExpression("tm__graphiti_list", column)
    if name == "attributes":
        return column.cast(duckdb.sqltype("VARCHAR"))
    return duckdb.FunctionExpression("json_extract_string", column, duckdb.ConstantExpression("$"))


def _times_read(con: duckdb.DuckDBPyConnection, unreadable: str) -> None:
    """How the mapping gives times (``tm__import_time``): as read, or as text when the part
    ``unreadable`` finds one that cannot be read (backfill then rejects that row, naming the text)."""
    con.execute(_SQL["text_times" if con.sql(_SQL[unreadable]).fetchall()[0][0] else "typed_times"])


def _graphiti_times(con: duckdb.DuckDBPyConnection, source: pa.Table) -> None:
    """The edges (``source``) with their times read once, as ``edges``, and how the mapping gives
    them (:func:`_times_read`). The times are put beside the edges in Arrow: copying a million
    edges into a DuckDB table with them was a fifth of the mapping."""
    times = _by_row(con.sql(_SQL["graphiti_times"]).to_arrow_table())
    con.register("edges", pa.Table.from_arrays([*source.columns, *times.columns[1:]],
                                               names=[*source.column_names, *times.column_names[1:]]))
    _times_read(con, "graphiti_unreadable")


def _by_row(table: pa.Table) -> pa.Table:
    """``table`` in the order of its ``__row`` (0 to n - 1): a query over one scan keeps the
    scan's order, which is checked here, not assumed."""
    rows = table["__row"]
    if rows.equals(pa.chunked_array([positions(table.num_rows)])):
        return table
    return table.take(pc.sort_indices(rows))


def _read_graphiti_edges(path: str | os.PathLike[str]) -> Source:
    """Backfill input from a Graphiti edges export."""
    source = _read_graphiti(path)
    rows, defaulted = _map(source, _SQL["graphiti"], _SQL["graphiti_defaulted"],
                           prepare=lambda con: _graphiti_times(con, source))
    flags = pl.from_arrow(defaulted)
    return Source(rows, "import:graphiti", flags)  # type: ignore[arg-type]


# -- mem0 ------------------------------------------------------------------------------------------

_MEM0_OPTIONAL = ("old_memory", "new_memory", "prev_value", "new_value", "created_at", "updated_at", "timestamp",
                  "is_deleted", "actor_id", "role", "id")


def _mem0_events(con: duckdb.DuckDBPyConnection) -> None:
    """The events with their times read once, each memory's in the order the mapping applies
    them (``mem0_chain()``), and how the mapping gives belief times (:func:`_times_read`)."""
    con.execute(_SQL["mem0_events"])
    con.execute(_SQL["mem0_chain"])
    _times_read(con, "mem0_unreadable")


def _read_mem0(path: str | os.PathLike[str]) -> Source:
    """Backfill input from a mem0 history file."""
    source = _with_columns(_sqlite_table(path, "history"), _MEM0_OPTIONAL)
    for needed in ("memory_id", "event"):
        if needed not in source.column_names:
            raise TempomemError(f"data: the history table has no {needed} column; is this a mem0 history file?")
    rows, orphans = _map(source, _SQL["mem0"], _SQL["mem0_orphans"], prepare=_mem0_events)
    flags = pl.from_arrow(orphans)
    return Source(rows, "import:mem0", flags)  # type: ignore[arg-type]


# -- four-timestamp SQLite ------------------------------------------------------------------------

_SQLITE4TS_OPTIONAL = ("scope", "text", "valid_from", "valid_to", "retracted_at", "source", "confidence",
                           "valid_from_inferred", "supersedes")

def _read_sqlite4ts(path: str | os.PathLike[str]) -> Source:
    """Backfill input from a four-timestamp SQLite file."""
    source = _with_columns(_sqlite_table(path, "facts"), _SQLITE4TS_OPTIONAL)
    [rows] = _map(source, _SQL["sqlite4ts"])
    rows = rows.rename_columns(["superseded_at" if c == "superseded_at_epoch" else c for c in rows.column_names])
    return Source(rows, "import:sqlite4ts", None, "s")


#: The importers ``mem.backfill(..., format=...)`` knows, each as the reader of its source.
FORMATS: dict[str, Callable[[str | os.PathLike[str]], Source]] = {
    "graphiti": _read_graphiti_edges, "mem0": _read_mem0, "sqlite4ts": _read_sqlite4ts}

__all__ = ["FORMATS", "Source"]
