"""Other memory systems' exports read as backfill input (SPEC §11): the readers behind
``mem.backfill(..., format=...)`` and :mod:`tempomem.importers`.

Each reader reads its source into Arrow and maps it to backfill's input columns with one DuckDB
statement of ``importers.sql`` (times parsed by :func:`tempomem.timegrammar.time_sql`), with
``origin = 'import:<format>'``. A source row that becomes two revisions gives two input rows
with the same ``fact_id`` and ``__row`` (the source row's 0-based position), so the report
names source rows.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import polars as pl
import pyarrow as pa

from .connection import new_connection, quote, sql_parts, without_progress_bar
from .errors import TempomemError
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
    return table.append_column("__row", pa.array(range(table.num_rows), pa.int64()))


def _column(values: list[Any]) -> pa.Array:
    """One source column; a column mixing types (SQLite allows it) becomes text."""
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([None if v is None else v.isoformat() if isinstance(v, datetime) else str(v)
                         for v in values], pa.string())


def _sqlite_table(path: str | os.PathLike[str], table: str) -> pa.Table:
    """All rows of ``table`` in a SQLite file, in rowid order."""
    if not os.path.isfile(path):
        raise TempomemError(f"data: no SQLite file {os.fspath(path)}")
    con = sqlite3.connect(f"file:{os.fspath(path)}?mode=ro", uri=True)
    try:
        names = [r[1] for r in con.execute("SELECT * FROM pragma_table_info(?)", (table,))]
        if not names:
            raise TempomemError(f"data: {os.fspath(path)} has no table {table!r}")
        columns = ", ".join(quote(n) for n in names)
        rows = con.execute(f"SELECT {columns} FROM {quote(table)} ORDER BY rowid").fetchall()
    except sqlite3.DatabaseError as exc:
        raise TempomemError(f"data: cannot read {os.fspath(path)} as SQLite: {exc}") from None
    finally:
        con.close()
    return pa.table({n: _column([r[i] for r in rows]) for i, n in enumerate(names)})


def _map(table: pa.Table, *queries: str, prepare: str | None = None) -> list[pa.Table]:
    """Run mapping queries over the source registered as ``src``, on one connection with the
    macro ``tm__text_time``, after the statement ``prepare`` (a table the queries share, made once)."""
    con = new_connection()
    without_progress_bar(con)  # a long mapping would draw DuckDB's bar into the caller's output
    try:
        con.execute(TEXT_TIME_MACRO)
        con.register("src", table)
        if prepare is not None:
            con.execute(prepare)
        return [con.sql(sql).to_arrow_table() for sql in queries]
    finally:
        con.close()


# -- Graphiti / Zep ---------------------------------------------------------------------------------

_GRAPHITI_OPTIONAL = ("uuid", "name", "source_node_uuid", "target_node_uuid", "group_id", "source_name",
                      "target_name", "fact", "episodes", "episode_uuids", "expired_at", "valid_at", "invalid_at",
                      "reference_time", "attributes", "created_at")


def _read_graphiti(path: str | os.PathLike[str]) -> pa.Table:
    """Edges from a JSON array, an object with an ``edges`` list, or JSON Lines."""
    try:
        text = open(path, encoding="utf-8").read()
    except OSError as exc:
        raise TempomemError(f"data: cannot read {os.fspath(path)}: {exc.strerror}") from None
    try:
        parsed = json.loads(text)
        # a dict is {"edges": [...]} or the only line of a JSON Lines file: one edge
        edges = (parsed["edges"] if "edges" in parsed else [parsed]) if isinstance(parsed, dict) else parsed
    except json.JSONDecodeError:
        try:
            edges = [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError as exc:
            raise TempomemError(f"data: {os.fspath(path)} is neither JSON nor JSON Lines: {exc}") from None
    if not isinstance(edges, list) or not all(isinstance(e, dict) for e in edges):
        raise TempomemError(f"data: {os.fspath(path)} should hold a list of Graphiti edges")
    names = list(dict.fromkeys(k for e in edges for k in e))
    columns = {}
    for name in names:
        values = [e.get(name) for e in edges]
        if name == "attributes":  # a free-form object: kept as JSON text
            values = [None if v is None else json.dumps(v, sort_keys=True) for v in values]
        if name in ("episodes", "episode_uuids"):
            columns[name] = pa.array(values, pa.list_(pa.string()))
        else:
            columns[name] = _column([None if v is None else v if isinstance(v, list) else str(v) for v in values])
    for name in ("episodes", "episode_uuids"):  # both lists, so COALESCE(episodes, episode_uuids) binds
        if name not in columns:
            columns[name] = pa.nulls(len(edges), pa.list_(pa.string()))
    return _with_columns(pa.table(columns) if names else pa.table({"uuid": pa.array([], pa.string())}),
                         _GRAPHITI_OPTIONAL)


def _read_graphiti_edges(path: str | os.PathLike[str]) -> Source:
    """Backfill input from a Graphiti edges export."""
    source = _read_graphiti(path)
    rows, defaulted = _map(source, _SQL["graphiti"], _SQL["graphiti_defaulted"])
    flags = pl.from_arrow(defaulted)
    return Source(rows, "import:graphiti", flags)  # type: ignore[arg-type]


# -- mem0 ------------------------------------------------------------------------------------------

_MEM0_OPTIONAL = ("old_memory", "new_memory", "prev_value", "new_value", "created_at", "updated_at", "timestamp",
                  "is_deleted", "actor_id", "role", "id")


def _read_mem0(path: str | os.PathLike[str]) -> Source:
    """Backfill input from a mem0 history file."""
    source = _with_columns(_sqlite_table(path, "history"), _MEM0_OPTIONAL)
    for needed in ("memory_id", "event"):
        if needed not in source.column_names:
            raise TempomemError(f"data: the history table has no {needed} column; is this a mem0 history file?")
    rows, orphans = _map(source, _SQL["mem0"], _SQL["mem0_orphans"], prepare=_SQL["mem0_events"])
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
