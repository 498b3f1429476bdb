"""DuckDB connections over a store: the raw rows, the ``revisions`` view and the macros."""

from __future__ import annotations

from importlib import resources

import duckdb

from .schema import EVENT_SCHEMA


def sql_file(name: str) -> str:
    """The text of one of the package's ``.sql`` files."""
    return resources.files("tempomem").joinpath(name).read_text()


def new_connection() -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection that speaks UTC."""
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute("SET parquet_metadata_cache = true")
    return con


def bind_files(con: duckdb.DuckDBPyConnection, files: tuple[str, ...], *, first: bool) -> None:
    """Point ``_tm_events`` at ``files``; on the first call also create the views and macros."""
    if files:
        events = con.read_parquet(list(files))
    else:
        events = con.from_arrow(EVENT_SCHEMA.empty_table())
    events.create_view("_tm_events", replace=True)
    if first:
        con.execute(sql_file("revisions.sql"))
        con.execute(sql_file("macros.sql"))
