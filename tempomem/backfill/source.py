"""Binding a backfill's input to its connection: files (by extension or ``format``), frames,
relations or dicts, as the view ``_bf_in`` with the caller's ``mapping`` applied."""

from __future__ import annotations

import glob
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import duckdb

from ..connection import quote, sql_parts
from ..errors import TempomemError
from ..frames import as_arrow
from ..schema import positions
from .columns import REQUIRED, STORE_MANAGED

FILE_FORMATS = ("parquet", "csv", "jsonl")
_EXTENSIONS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".tsv": "csv",
               ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl"}
#: A strptime format no time text matches: it keeps DuckDB's JSON reader from guessing one.
_NO_FORMAT = "tempomem: text stays text"
#: The statements making ``_bf_src`` from what was read, one per kind of input.
_SQL = sql_parts("backfill_input.sql")


def input_files(path: str | os.PathLike[str], format: str | None) -> tuple[list[str], str]:
    """The files a path names (a file, a folder or a glob) and their format."""
    text = os.fspath(path)
    if os.path.isdir(text):
        files = sorted(str(p) for p in Path(text).iterdir()
                       if p.is_file() and (format is not None or p.suffix.lower() in _EXTENSIONS)
                       and not p.name.startswith((".", "_")))
    elif any(ch in text for ch in "*?["):
        files = sorted(glob.glob(text))
    else:
        if not os.path.exists(text):
            raise TempomemError(f"data: no file or folder {text}")
        files = [text]
    if not files:
        raise TempomemError(f"data: {text} names no input files")
    formats = {format or format_of(f) for f in files}
    if None in formats:
        raise TempomemError(f"data: cannot tell the format of {text}; pass format= ({', '.join(FILE_FORMATS)})")
    if len(formats) > 1:
        raise TempomemError(f"data: {text} mixes formats ({', '.join(sorted(formats))}); load them separately")
    return files, formats.pop()  # type: ignore[return-value]


def format_of(path: str | os.PathLike[str]) -> str | None:
    """The format a file is read as when none is given: the one its extension names, or None.

    >>> format_of("memory.CSV"), format_of("edges.json"), format_of("memory")
    ('csv', 'jsonl', None)
    """
    return _EXTENSIONS.get(Path(path).suffix.lower())


def bind_input(con: duckdb.DuckDBPyConnection, data: Any, format: str | None) -> None:
    """Create the view ``_bf_src``: the input columns plus ``__row``, its 0-based position."""
    if isinstance(data, str | os.PathLike):
        files, fmt = input_files(data, format)
        try:
            if fmt == "parquet" and len(files) == 1:
                src = con.read_parquet(files, file_row_number=True)
                src.create_view("_bf_file", replace=True)
                con.execute(_SQL["one_parquet"])
                return
            if fmt == "parquet":
                con.execute(_SQL["parquet_offsets"], {"files": files})
                src = con.read_parquet(files, file_row_number=True, filename=True)
                src.create_view("_bf_file", replace=True)
                con.execute(_SQL["many_parquet"])
                return
            if fmt == "csv":
                # Records DuckDB cannot split into the header's fields are kept aside (which also
                # keeps one from making its sniffer see one column) and refused below.
                rel = con.read_csv(files, all_varchar=True, header=True, store_rejects=True,
                                   rejects_table="_bf_csv_errors", rejects_scan="_bf_csv_scans")
            else:
                # JSON strings stay text, read by the one time grammar (timegrammar), not by
                # DuckDB's guess of a date or timestamp format (which takes +15:00 offsets).
                rel = con.read_json(files, format="newline_delimited", date_format=_NO_FORMAT,
                                    timestamp_format=_NO_FORMAT)
        except duckdb.Error as exc:
            raise TempomemError(f"data: cannot read {os.fspath(data)} as {fmt}: {str(exc).splitlines()[0]}") from None
        rel.create_view("_bf_file", replace=True)
        con.execute(_SQL["text_files"])
        if fmt == "csv" and (bad := con.sql(_SQL["csv_errors"]).fetchall()):
            (path, line, reason), count = bad[0][:3], bad[0][3]
            more = f" ({count - 1} more such records)" if count > 1 else ""
            raise TempomemError(f"data: {path}, CSV record {line} (the header is record 1): {reason}; every record "
                                f"needs the header's fields{more}")
        return
    table = as_arrow(data, paths=True)
    if "__row" not in table.column_names:
        table = table.append_column("__row", positions(table.num_rows))
    con.register("_bf_arrow", table)
    con.execute(_SQL["frame"])


def rename(con: duckdb.DuckDBPyConnection, mapping: Mapping[str, str]) -> dict[str, str]:
    """Apply ``mapping`` as the view ``_bf_in``; returns its columns and their DuckDB types."""
    if not isinstance(mapping, Mapping):
        raise TempomemError(f"mapping: expected a dict {{source_column: spec_column}}, got "
                            f"{type(mapping).__name__} {mapping!r}")
    described = con.sql("SELECT * FROM _bf_src LIMIT 0")
    source = dict(zip(described.columns, [str(t) for t in described.types], strict=True))
    for src, dst in mapping.items():
        if src not in source:
            if _empty(con):
                return _nothing_to_load(con)
            names = ", ".join(c for c in source if c != "__row")
            raise TempomemError(f"mapping: the input has no column {src!r} (columns: {names})")
        if not isinstance(dst, str) or not dst:
            raise TempomemError(f"mapping: {src!r} must map to a column name")
    targets = [mapping.get(c, c) for c in source]
    clash = {t for t in targets if targets.count(t) > 1}
    if clash:
        raise TempomemError(f"mapping: more than one input column becomes {sorted(clash)[0]!r}")
    keep = [(c, mapping.get(c, c)) for c in source if mapping.get(c, c) not in STORE_MANAGED or c == "__row"]
    select = ", ".join(f"{quote(c)} AS {quote(d)}" for c, d in keep)
    con.execute(f"CREATE TEMP VIEW _bf_in AS SELECT {select} FROM _bf_src")
    columns = {d: source[c] for c, d in keep if d != "__row"}
    missing = [c for c in REQUIRED if c not in columns]
    if missing and _empty(con):
        return _nothing_to_load(con)
    if missing:
        raise TempomemError(
            f"{missing[0]}: the input has no {missing[0]} column (columns: {', '.join(columns) or 'none'}); "
            f"name one with mapping={{'your_column': '{missing[0]}'}} "
            f"(tempomem backfill: --map your_column={missing[0]})"
        )
    return columns


def _empty(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the input has no row: an empty JSON Lines file (DuckDB reads it as one column
    named ``json``), an empty list of dicts, a day of an export with nothing in it."""
    return not con.sql("SELECT 1 FROM _bf_src LIMIT 1").fetchall()


def _nothing_to_load(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """``_bf_in`` for an input with no row, whatever its columns: the required ones and no row,
    so that the load reports nothing read rather than a column it would not have read."""
    columns = ", ".join(f"CAST(NULL AS VARCHAR) AS {quote(c)}" for c in REQUIRED)
    con.execute(f"CREATE OR REPLACE TEMP VIEW _bf_in AS SELECT CAST(NULL AS BIGINT) AS __row, {columns} WHERE false")
    return dict.fromkeys(REQUIRED, "VARCHAR")
