"""DuckDB connections over a store: the raw rows, the ``revisions`` view and the macros."""

from __future__ import annotations

import re
from importlib import resources

import duckdb

from .schema import EVENT_SCHEMA
from .storage import footer


def sql_file(name: str) -> str:
    """The text of one of the package's ``.sql`` files."""
    return resources.files("tempomem").joinpath(name).read_text()


def sql_parts(name: str) -> dict[str, str]:
    """The named parts of a ``.sql`` file whose parts start at lines ``-- @part <name>``."""
    pieces = re.split(r"^-- @part (\w+)[ \t]*$", sql_file(name), flags=re.M)
    return {pieces[i]: pieces[i + 1].strip("\n") + "\n" for i in range(1, len(pieces), 2)}


def quote(name: str) -> str:
    """A column or table name as a SQL identifier: names are identifiers, never values."""
    return '"' + name.replace('"', '""') + '"'


def new_connection() -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection that speaks UTC."""
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute("SET parquet_metadata_cache = true")
    return con


def without_checkpoints(con: duckdb.DuckDBPyConnection) -> None:
    """For a private connection whose temp tables are scratch, made and dropped within one
    write: never checkpoint them. An in-memory database checkpoints every 16 MB of changes,
    compressing its tables on the committing statement's thread; in a replay that was a
    seventh of the CPU, spent on tables dropped a few statements later."""
    con.execute("SET checkpoint_threshold = '1TB'")


def without_progress_bar(con: duckdb.DuckDBPyConnection) -> None:
    """Keep DuckDB's own progress bar out of a private connection's work (it would print into
    the CLI's output); Jupyter without ipywidgets refuses the setting, then nothing prints."""
    try:
        con.execute("SET enable_progress_bar = false")
    except duckdb.Error:
        pass


#: Whether a data file holds rows written since a fold, by path: files are never rewritten in
#: place (a new version writes new files), so the answer never changes.
_HAS_FRESH_ROWS: dict[str, bool] = {}


def bind_files(con: duckdb.DuckDBPyConnection, files: tuple[str, ...], *, first: bool, macros: bool = True) -> None:
    """Point ``_tm_events`` at ``files``, and ``_tm_fresh_events`` at those of them holding rows
    written since the last fold; on the first call also create the views and, unless
    ``macros`` is false (a fold needs only the views; the macros take ~170 ms to create), the
    macros.

    ``revisions.sql`` derives belief ends with a window over the fresh rows only; binding it to
    the few files that have any spares every query a scan of the whole table. When no file has
    any, the views are those of ``folded.sql``: one filtered scan each, no join.
    """
    fresh = _files_with_fresh_rows(files)
    _events(con, files).create_view("_tm_events", replace=True)
    _events(con, fresh).create_view("_tm_fresh_events", replace=True)
    if first:
        con.execute(sql_file("revisions.sql"))
        if macros:
            con.execute(sql_file("macros.sql"))
    use_views(con, folded=not fresh, first=first)


def bind_events(con: duckdb.DuckDBPyConnection, files: tuple[str, ...], *, first: bool) -> None:
    """Point ``_tm_events`` at ``files``; on the first call also create the interval predicates
    (``macros.sql``'s part ``intervals``). What the write engine and a backfill read: no view, no
    other macro (all of them took a backfill ~170 ms to create), and none of the footers
    ``bind_files`` reads to choose its views."""
    _events(con, files).create_view("_tm_events", replace=True)
    if first:
        con.execute(sql_parts("macros.sql")["intervals"])


def use_views(con: duckdb.DuckDBPyConnection, *, folded: bool, first: bool) -> None:
    """Make ``_tm_events`` read through the views of ``folded.sql`` (every row folded) or of
    ``revisions.sql`` (any rows), replacing the others only when the choice changes."""
    if not first and con.sql("SELECT getvariable('tm_folded_views')").fetchall()[0][0] == folded:
        return
    if folded:
        con.execute(sql_file("folded.sql"))
    elif not first:
        con.execute(sql_file("revisions.sql"))
    con.execute("SET VARIABLE tm_folded_views = $folded", {"folded": folded})


def _events(con: duckdb.DuckDBPyConnection, files: tuple[str, ...]) -> duckdb.DuckDBPyRelation:
    if files:
        return con.read_parquet(list(files))
    return con.from_arrow(EVENT_SCHEMA.empty_table())


def _files_with_fresh_rows(files: tuple[str, ...]) -> tuple[str, ...]:
    """The files with a row whose ``folded`` is not true, as their Parquet footers tell (a group
    the statistics leave open counts as fresh)."""
    for file in files:
        if file not in _HAS_FRESH_ROWS:
            states = footer.groups_folding(footer.metadata(file))
            _HAS_FRESH_ROWS[file] = not states or any(s in (footer.FRESH, footer.MIXED) for s in states)
    return tuple(f for f in files if _HAS_FRESH_ROWS[f])
