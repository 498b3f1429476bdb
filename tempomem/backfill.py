"""Bulk backfill (SPEC §9): load history exported from elsewhere, keeping its belief times.

Everything here is set-based: the input is bound to a DuckDB connection as a view, every rule
(time parsing, rejection, fixes, duplicates, flags) is SQL over all rows, and DuckDB writes the
revision rows to Parquet itself, committed as one Delta transaction: no row passes through
Python. Python only builds the statements (from fixed templates; column names are quoted
identifiers, every value is a bound parameter) and drives the stages.

The load is materialised once, on a private connection with a memory limit (DuckDB spills to
a temporary folder beyond it):

``_bf_checked``  every input row, parsed, with its first bad field (or none) and a hash
                 (stored as ``_bf_checked_rows`` without the columns the input lacks);
``_bf_merged``   the exact repeats, each loaded once with artifacts merged (usually empty);
``_bf_rows``     a view: the loadable rows with fixed spans and fact ids, fact-level
                 rejections removed;
then one ``COPY`` writes the revision rows (a row with a later ``retracted_at`` gives two).

``resolve=True`` replays ``_bf_rows`` through the write path instead (:mod:`tempomem.writepath`).
"""

from __future__ import annotations

import glob
import itertools
import os
import secrets
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from . import queries
from .connection import bind_files, new_connection, without_progress_bar
from .errors import BackfillError, TempomemError
from .schema import EVENT_SCHEMA, LINK_TYPES, PREVIOUS, SORT_KEYS
from .storage import BackgroundWriter, writer
from .timegrammar import EPOCH_FACTORS, reason_sql, time_sql
from .times import system_clock

if TYPE_CHECKING:
    from .engine import Engine

# -- the input columns of SPEC §9 ---------------------------------------------------------------

REQUIRED = ("subject", "predicate", "object", "recorded_at")
_STRINGS = ("fact_id", "scope", "subject", "predicate", "object", "text", "reason", "retraction_reason",
            "source", "superseded_by", "link_type", "status")
_TIMES = ("valid_from", "valid_to", "recorded_at", "retracted_at", "superseded_at")
_NUMBERS = ("confidence", "weight")
#: Every column backfill understands. ``status`` and ``superseded_at`` are not input columns in
#: SPEC §9 but are columns of an export (``tempomem export``); honouring them makes the round
#: trip exact. Every other column goes to ``attributes``.
INPUT_COLUMNS = (*_STRINGS, *_TIMES, *_NUMBERS, "valid_from_inferred", "artifacts", "embedding", "attributes")
#: Columns a store manages itself: never taken from input, and not kept as attributes either
#: (an export carries them; they describe the old store, not the facts).
_STORE_MANAGED = ("origin", "ingested_at", "revision", "believed_until", "__row")

FILE_FORMATS = ("parquet", "csv", "jsonl")
_EXTENSIONS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".tsv": "csv",
               ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl"}
_BELIEF_STATUSES = ("live", "ended", "superseded", "retracted")
#: A strptime format no time text matches: it keeps DuckDB's JSON reader from guessing one.
_NO_FORMAT = "tempomem: text stays text"

#: A share of the loaded rows (and a minimum count) above which one instant shared by many
#: rows looks like an export that stamped its own run time (SPEC §9).
SHARED_SHARE = 0.2
SHARED_MIN_ROWS = 100

Progress = Callable[[str, int], None]

#: DuckDB's memory limit during a load (it spills to disk beyond it): with Python, Arrow and
#: the Delta commit around it, a load of any size stays well under 4 GB of RSS.
_DUCKDB_MEMORY = "2GB"


# -- the report ---------------------------------------------------------------------------------

_REJECTED_SCHEMA = {"row": pl.Int64, "field": pl.String, "value": pl.String, "reason": pl.String}
_FLAGS_SCHEMA = {"flag": pl.String, "count": pl.Int64, "example_row": pl.Int64}


@dataclass(frozen=True)
class BackfillReport:
    """What a backfill read, loaded, rejected and noticed (SPEC §9).

    ``rows_read`` = ``loaded`` + ``duplicates`` + ``rejected.height``. ``rejected`` has one row
    per rejected input row (``row`` 0-based, its first bad ``field``, the ``value`` as text and
    the ``reason``); ``flags`` one row per red flag raised (``flag``, ``count``,
    ``example_row``). ``revisions`` is how many revision rows were written.

    >>> report = mem.backfill("export.parquet")  # doctest: +SKIP
    >>> report.loaded, report.rejected["reason"].to_list()  # doctest: +SKIP
    """

    rows_read: int
    loaded: int
    rejected: pl.DataFrame
    fixed: int
    duplicates: int
    flags: pl.DataFrame
    revisions: int = 0
    origin: str = "backfill"
    written: bool = field(default=False)

    def flag_count(self, flag: str) -> int:
        """How many rows raised ``flag`` (0 when it was not raised)."""
        hit = self.flags.filter(pl.col("flag") == flag)
        return int(hit["count"][0]) if hit.height else 0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form (the CLI's ``--json``)."""
        return {
            "rows_read": self.rows_read, "loaded": self.loaded, "rejected": self.rejected.to_dicts(),
            "fixed": self.fixed, "duplicates": self.duplicates, "flags": self.flags.to_dicts(),
            "revisions": self.revisions, "origin": self.origin, "written": self.written,
        }

    def __repr__(self) -> str:
        lines = [
            f"BackfillReport ({self.origin}{'' if self.written else ', nothing written'})",
            f"  rows read   {self.rows_read:>10}",
            f"  loaded      {self.loaded:>10}   ({self.revisions} revisions)",
            f"  rejected    {self.rejected.height:>10}",
            f"  fixed spans {self.fixed:>10}",
            f"  duplicates  {self.duplicates:>10}",
        ]
        if self.flags.height:
            lines.append("  flags:")
            lines += [f"    {f:<28} {c:>8}  e.g. row {r}" for f, c, r in self.flags.iter_rows()]
        if self.rejected.height:
            lines.append("  rejected rows (first 10):")
            for row, fld, value, reason in self.rejected.head(10).iter_rows():
                shown = value if value is None or len(value) <= 40 else value[:37] + "..."
                lines.append(f"    row {row}: {fld} = {shown!r}: {reason}")
        return "\n".join(lines)


# -- entry point --------------------------------------------------------------------------------

def backfill(engine: Engine, data: Any, *, mapping: dict[str, str] | None = None, format: str | None = None,
             lenient: bool = False, strict: bool = False, resolve: bool = False, epoch_unit: str | None = None,
             progress: Progress | None = None) -> BackfillReport:
    """Load ``data`` through ``engine`` keeping its belief times; see :meth:`Memory.backfill`.

    ``progress`` is called as ``progress(stage, rows_done)``. An importer's ``format`` reads
    the source first (:data:`tempomem.importers.FORMATS`), which gives the rows, the stored
    ``origin`` (``import:<format>``) and flags of its own.
    """
    if epoch_unit is not None and epoch_unit not in EPOCH_FACTORS:
        raise TempomemError(f"epoch_unit: must be one of {', '.join(EPOCH_FACTORS)} or None, got {epoch_unit!r}")
    origin, extra_flags = "backfill", None
    if format is not None and format not in FILE_FORMATS:
        from . import importers

        if format not in importers.FORMATS:
            known = ", ".join((*FILE_FORMATS, *importers.FORMATS))
            raise TempomemError(f"format: must be one of {known}, got {format!r}")
        source = importers.FORMATS[format](data)
        data, origin, extra_flags, epoch_unit = source.rows, source.origin, source.flags, source.epoch_unit
        format = None
    notify = progress or (lambda stage, done: None)
    storage = engine.storage
    with engine.exclusive(), tempfile.TemporaryDirectory(prefix="tempomem-backfill-") as spill:
        con = new_connection()
        bind_files(con, storage.snapshot().files, first=True)
        # A load of any size fits: past the limit DuckDB spills to a private temp folder.
        con.execute("SET memory_limit = $limit", {"limit": _DUCKDB_MEMORY})
        con.execute("SET temp_directory = $dir", {"dir": spill})
        without_progress_bar(con)
        try:
            _bind_input(con, data, format)
            notify("read", 0)
            columns = _rename(con, mapping or {})
            settings = storage.read_settings()
            now = system_clock()
            loader = _Loader(con, columns, lenient=lenient, epoch_unit=epoch_unit, now=now)
            loader.check_rows()
            notify("checked", loader.rows_read)
            loader.collapse_and_check_facts(resolve=resolve)
            report_parts = loader.report_parts(settings, extra_flags=extra_flags)
            plan = None
            if resolve:
                from .resolve import replay

                # Rows the write path refuses become rejected rows of the report.
                plan = replay(con, settings, origin=origin, ingested_at=now, notify=notify)
                if plan.rejected.height:
                    rejected = pl.concat([report_parts["rejected"], plan.rejected.cast(_REJECTED_SCHEMA)])  # type: ignore[arg-type]
                    report_parts = {**report_parts, "rejected": rejected.sort("row"),
                                    "loaded": report_parts["loaded"] - plan.rejected.height}
            report = BackfillReport(**report_parts, origin=origin)
            if strict and report.rejected.height:
                if not resolve:
                    report_parts["flags"] = loader.with_overlaps(report_parts["flags"], settings, None)
                    report = BackfillReport(**report_parts, origin=origin)
                raise BackfillError(
                    f"backfill: {report.rejected.height} of {report.rows_read} rows rejected and strict=True; "
                    f"nothing was loaded (first: row {report.rejected['row'][0]}, {report.rejected['field'][0]}: "
                    f"{report.rejected['reason'][0]})",
                    report,
                )
            if plan is not None:
                revisions = plan.rows.num_rows
                if revisions:
                    engine.append(plan.rows.sort_by(SORT_KEYS))
            else:
                def flag_overlaps(written_keys: pa.Table) -> None:
                    report_parts["flags"] = loader.with_overlaps(report_parts["flags"], settings, written_keys)

                revisions = _write_as_given(engine, con, loaded=report.loaded, has_fact_id=loader.has_fact_id,
                                            absent=loader.absent, origin=origin, ingested_at=now, notify=notify,
                                            finish=flag_overlaps)
            return BackfillReport(**{**report_parts, "revisions": revisions}, origin=origin, written=revisions > 0)
        finally:
            con.close()


# -- binding the input --------------------------------------------------------------------------

def _quote(name: str) -> str:
    """A column name as a SQL identifier (names are identifiers, never values)."""
    return '"' + name.replace('"', '""') + '"'


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
    formats = {format or _EXTENSIONS.get(Path(f).suffix.lower()) for f in files}
    if None in formats:
        raise TempomemError(f"data: cannot tell the format of {text}; pass format= ({', '.join(FILE_FORMATS)})")
    if len(formats) > 1:
        raise TempomemError(f"data: {text} mixes formats ({', '.join(sorted(formats))}); load them separately")
    return files, formats.pop()  # type: ignore[return-value]


def _bind_input(con: duckdb.DuckDBPyConnection, data: Any, format: str | None) -> None:
    """Create the view ``_bf_src``: the input columns plus ``__row``, its 0-based position."""
    if isinstance(data, str | os.PathLike):
        files, fmt = input_files(data, format)
        try:
            if fmt == "parquet" and len(files) == 1:
                # One file: its row number is the input position (no join with the offsets).
                src = con.read_parquet(files, file_row_number=True)
                src.create_view("_bf_file", replace=True)
                con.execute("CREATE TEMP VIEW _bf_src AS SELECT CAST(file_row_number AS BIGINT) AS __row, "
                            "* EXCLUDE (file_row_number) FROM _bf_file")
                return
            if fmt == "parquet":
                # file_row_number restarts in every file: add the rows of the files before it.
                con.sql(
                    """CREATE TEMP TABLE _bf_offsets AS
                       SELECT file_name, sum(num_rows) OVER (ORDER BY idx) - num_rows AS offset_rows
                       FROM (SELECT file_name, num_rows, list_position($files, file_name) AS idx
                             FROM parquet_file_metadata($files))""",
                    params={"files": files},
                )
                src = con.read_parquet(files, file_row_number=True, filename=True)
                src.create_view("_bf_file", replace=True)
                con.execute("""CREATE TEMP VIEW _bf_src AS
                    SELECT CAST(o.offset_rows + f.file_row_number AS BIGINT) AS __row,
                           f.* EXCLUDE (file_row_number, filename)
                    FROM _bf_file f JOIN _bf_offsets o ON o.file_name = f.filename""")
                return
            if fmt == "csv":
                rel = con.read_csv(files, all_varchar=True, header=True)
            else:
                # JSON strings stay text, read by the one time grammar (timegrammar), not by
                # DuckDB's guess of a date or timestamp format (which takes +15:00 offsets).
                rel = con.read_json(files, format="newline_delimited", date_format=_NO_FORMAT,
                                    timestamp_format=_NO_FORMAT)
        except duckdb.Error as exc:
            raise TempomemError(f"data: cannot read {os.fspath(data)} as {fmt}: {exc}") from None
        rel.create_view("_bf_file", replace=True)
        # One file read in order: row_number over the scan is the input position.
        con.execute("CREATE TEMP TABLE _bf_src AS SELECT CAST(row_number() OVER () - 1 AS BIGINT) AS __row, * "
                    "FROM _bf_file")
        return
    table = _as_arrow(data)
    if "__row" not in table.column_names:
        table = table.append_column("__row", pa.array(range(table.num_rows), pa.int64()))
    con.register("_bf_arrow", table)
    con.execute("CREATE TEMP VIEW _bf_src AS SELECT * FROM _bf_arrow")


def _as_arrow(data: Any) -> pa.Table:
    """An in-memory input as an Arrow table."""
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatchReader):
        return data.read_all()
    if isinstance(data, pl.DataFrame):
        return data.to_arrow()
    if isinstance(data, pl.LazyFrame):
        return data.collect().to_arrow()
    if isinstance(data, duckdb.DuckDBPyRelation):
        return data.to_arrow_table()
    if type(data).__module__.startswith("pandas"):
        return pa.Table.from_pandas(data, preserve_index=False)
    if isinstance(data, list):
        return _dicts_to_arrow(data)
    raise TempomemError(
        f"data: expected a path, a Polars/pandas/Arrow frame, a DuckDB relation or a list of dicts, "
        f"got {type(data).__name__}"
    )


def _dicts_to_arrow(rows: list[Any]) -> pa.Table:
    """A list of dicts as Arrow; a column mixing types (say datetimes and strings) becomes text."""
    if not all(isinstance(r, dict) for r in rows):
        raise TempomemError("data: a list input must hold dicts")
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


def _rename(con: duckdb.DuckDBPyConnection, mapping: dict[str, str]) -> dict[str, str]:
    """Apply ``mapping`` as the view ``_bf_in``; returns its columns and their DuckDB types."""
    described = con.sql("SELECT * FROM _bf_src LIMIT 0")
    source = dict(zip(described.columns, [str(t) for t in described.types], strict=True))
    for src, dst in mapping.items():
        if src not in source:
            names = ", ".join(c for c in source if c != "__row")
            raise TempomemError(f"mapping: the input has no column {src!r} (columns: {names})")
        if not isinstance(dst, str) or not dst:
            raise TempomemError(f"mapping: {src!r} must map to a column name")
    targets = [mapping.get(c, c) for c in source]
    clash = {t for t in targets if targets.count(t) > 1}
    if clash:
        raise TempomemError(f"mapping: more than one input column becomes {sorted(clash)[0]!r}")
    keep = [(c, mapping.get(c, c)) for c in source if mapping.get(c, c) not in _STORE_MANAGED or c == "__row"]
    select = ", ".join(f"{_quote(c)} AS {_quote(d)}" for c, d in keep)
    con.execute(f"CREATE TEMP VIEW _bf_in AS SELECT {select} FROM _bf_src")
    columns = {d: source[c] for c, d in keep if d != "__row"}
    missing = [c for c in REQUIRED if c not in columns]
    if missing:
        raise TempomemError(
            f"{missing[0]}: the input has no {missing[0]} column (columns: {', '.join(columns) or 'none'}); "
            f"name one with mapping={{'your_column': '{missing[0]}'}}"
        )
    return columns


# -- parsing and checking every row (one statement) ----------------------------------------------

def _blank_sql(col: str) -> str:
    """SQL: text ``col`` is empty or only spaces (what trim() removes); trim() copies the
    text, so it only runs on the rare values that start with a space."""
    return f"({col} = '' OR (starts_with({col}, ' ') AND trim({col}) = ''))"


def _text_sql(col: str, duck_type: str) -> str:
    """A column as text, NULL when empty or blank (a blank subject is a missing one)."""
    return f"nullif(trim(CAST({col} AS VARCHAR)), '')" if duck_type != "VARCHAR" else \
        f"CASE WHEN {_blank_sql(col)} THEN NULL ELSE {col} END"


def _list_sql(col: str, duck_type: str, element: str) -> str:
    if duck_type == "VARCHAR":
        # A JSON list ('["a","b"]'), a DuckDB list literal, or one bare value (artifacts only).
        bare = f"[{col}]" if element == "VARCHAR" else "NULL"
        return (f"CASE WHEN trim({col}) = '' THEN NULL "
                f"WHEN starts_with(trim({col}), '[') THEN coalesce(try(from_json({col}, '[\"{element}\"]')), "
                f"TRY_CAST({col} AS {element}[])) ELSE {bare} END")
    return f"TRY_CAST({col} AS {element}[])"


class _Loader:
    """The SQL stages of one backfill on its private connection."""

    def __init__(self, con: duckdb.DuckDBPyConnection, columns: dict[str, str], *, lenient: bool,
                 epoch_unit: str | None, now: datetime) -> None:
        self.con = con
        self.columns = columns
        self.lenient = lenient
        self.epoch_unit = epoch_unit
        self.now = now
        self.params = {"now": now, "lenient": lenient}
        self.rows_read = 0
        self.has_fact_id = "fact_id" in columns
        #: Columns the input lacks (name: SQL type): always NULL, so not stored, only named.
        self.absent: dict[str, str] = {}

    # stage 1 ------------------------------------------------------------------------------
    def _parsed_select(self) -> tuple[str, dict[str, Any]]:
        """The parsed columns; a column the input lacks is a typed NULL, noted in ``absent``."""
        cols, params = self.columns, {}
        out = ["__row"]

        def parsed(name: str, sql: str, sql_type: str) -> None:
            if name in cols:
                out.append(f"{sql} AS {name}")
            else:
                self.absent[name] = sql_type
                out.append(f"CAST(NULL AS {sql_type}) AS {name}")

        for name in _STRINGS:
            parsed(name, _text_sql(_quote(name), cols.get(name, "")), "VARCHAR")
        for name in _TIMES:
            parsed(name, time_sql(_quote(name), cols.get(name, ""), self.epoch_unit), "TIMESTAMPTZ")
            out.append(self._source(name))
        for name in _NUMBERS:
            parsed(name, f"TRY_CAST({_quote(name)} AS DOUBLE)", "DOUBLE")
            out.append(self._source(name))
        parsed("valid_from_inferred", 'TRY_CAST("valid_from_inferred" AS BOOLEAN)', "BOOLEAN")
        out.append(self._source("valid_from_inferred"))
        for name, element in (("artifacts", "VARCHAR"), ("embedding", "FLOAT")):
            parsed(name, _list_sql(_quote(name), cols.get(name, ""), element), f"{element}[]")
            out.append(self._source(name))
        attributes = self._attributes_sql(params)
        if attributes is None:
            self.absent["attributes"] = "VARCHAR"
            out.append("CAST(NULL AS VARCHAR) AS attributes")
        else:
            out.append(f"{attributes} AS attributes")
        return ", ".join(out), params

    # The source value of a parsed column rides along as _src_<name> (free: it is not
    # converted), so that the rules can tell "missing" from "unreadable". Its text is built
    # only for rejected rows: formatting every typed value as text would cost more than
    # parsing it.
    def _source(self, name: str) -> str:
        return f"{_quote(name)} AS _src_{name}" if name in self.columns else f"CAST(NULL AS VARCHAR) AS _src_{name}"

    def _present(self, name: str) -> str:
        """SQL: the source gave a value for ``name`` (blank text counts as none)."""
        if name not in self.columns:
            return "false"
        if self.columns[name] == "VARCHAR":
            return f"coalesce(NOT {_blank_sql(f'_src_{name}')}, false)"
        return f"(_src_{name} IS NOT NULL)"

    @staticmethod
    def _raw(name: str) -> str:
        """SQL: the source value of ``name`` as text (NULL when blank), for rejection messages."""
        return f"nullif(trim(CAST(_src_{name} AS VARCHAR)), '')"

    def _attributes_sql(self, params: dict[str, Any]) -> str | None:
        """Every non-spec column as one JSON object, merged over a given ``attributes`` column."""
        extra = [c for c in self.columns if c not in INPUT_COLUMNS]
        pieces = []
        for i, name in enumerate(extra):
            params[f"attr{i}"] = name
            pieces += [f"$attr{i}", _quote(name)]
        # merge_patch onto {} drops the keys whose value is null (a row without that field). It
        # parses and rewrites the object, so it only runs on rows where some field is null.
        extra_json = None
        if extra:
            every = " AND ".join(f"{_quote(name)} IS NOT NULL" for name in extra)
            extra_json = (f"CASE WHEN {every} THEN CAST(json_object({', '.join(pieces)}) AS VARCHAR) "
                          f"ELSE nullif(CAST(json_merge_patch('{{}}', json_object({', '.join(pieces)})) AS VARCHAR), "
                          "'{}') END")
        given = None
        if "attributes" in self.columns:
            t = self.columns["attributes"]
            if t == "VARCHAR":
                given = ('CASE WHEN "attributes" IS NULL OR trim("attributes") = \'\' THEN NULL '
                         'WHEN json_valid("attributes") THEN "attributes" '
                         'ELSE CAST(to_json("attributes") AS VARCHAR) END')
            else:
                given = 'CAST(to_json("attributes") AS VARCHAR)'
        if given and extra_json:
            return (f"CASE WHEN ({extra_json}) IS NULL THEN {given} WHEN ({given}) IS NULL THEN {extra_json} "
                    f"ELSE CAST(json_merge_patch({given}, {extra_json}) AS VARCHAR) END")
        return given or extra_json

    def _rules(self) -> list[tuple[str, str, str, str]]:
        """(condition, field, value SQL, reason SQL) in order: a row's first hit rejects it."""
        has, raw = self._present, self._raw
        rules: list[tuple[str, str, str, str]] = []
        for name in ("subject", "predicate", "object"):
            rules.append((f"{name} IS NULL", name, f"CAST({name} AS VARCHAR)", "'required, got nothing'"))

        def unreadable(name: str) -> str:
            why = reason_sql(f"_src_{name}", self.columns.get(name, ""), self.epoch_unit)
            return f"'cannot read ' || {raw(name)} || ' as a time: ' || coalesce({why}, 'not a time')"

        rules += [
            (f"NOT {has('recorded_at')}", "recorded_at", "NULL", "'required: a belief time is never invented'"),
            ("recorded_at IS NULL", "recorded_at", raw("recorded_at"), unreadable("recorded_at")),
            ("NOT $lenient AND recorded_at > $now", "recorded_at", raw("recorded_at"),
             "'belief_from_future: recorded_at is after the real clock (pass lenient=True to load it)'"),
        ]
        for name in ("valid_from", "valid_to", "superseded_at"):
            rules.append((f"NOT $lenient AND {has(name)} AND {name} IS NULL", name, raw(name),
                          unreadable(name) + " || ' (lenient=True reads it as missing)'"))
        rules += [
            (f"{has('retracted_at')} AND retracted_at IS NULL", "retracted_at", raw("retracted_at"),
             unreadable("retracted_at")),
            ("NOT $lenient AND retracted_at > $now", "retracted_at", raw("retracted_at"),
             "'belief_from_future: retracted_at is after the real clock (pass lenient=True to load it)'"),
            ("retracted_at < recorded_at", "retracted_at", raw("retracted_at"),
             "'retracted_before_recorded: retracted_at is before recorded_at'"),
            (f"{has('confidence')} AND (confidence IS NULL OR isnan(confidence) OR confidence < 0 OR confidence > 1)",
             "confidence", raw("confidence"), "'must be a number between 0 and 1'"),
            (f"{has('weight')} AND (weight IS NULL OR isnan(weight) OR weight < 0)", "weight", raw("weight"),
             "'must be a number >= 0'"),
            ("link_type IS NOT NULL AND NOT list_contains($link_types, link_type)", "link_type", "link_type",
             "'must be one of ' || array_to_string($link_types, ', ')"),
            (f"{has('valid_from_inferred')} AND valid_from_inferred IS NULL", "valid_from_inferred",
             raw("valid_from_inferred"), "'must be true or false'"),
            (f"{has('artifacts')} AND artifacts IS NULL", "artifacts", raw("artifacts"),
             "'expected a list of strings (or a JSON list)'"),
            (f"{has('embedding')} AND embedding IS NULL", "embedding", raw("embedding"),
             "'expected a list of numbers'"),
            ("status IS NOT NULL AND NOT list_contains($statuses, status)", "status", "status",
             "'must be one of ' || array_to_string($statuses, ', ') || ' (erased facts cannot be loaded)'"),
        ]
        return rules

    def check_rows(self) -> None:
        """Stage 1: parse every row, find its first bad field, hash the good ones (``_bf_checked``).

        The only full materialisation of a load. A rule's number is found once per row; its
        value and reason are built only for rejected rows. The raw text of the columns is used
        here and not kept.
        """
        parsed, params = self._parsed_select()
        rules = self._rules()
        bad = "CASE " + " ".join(f"WHEN {c} THEN {i}" for i, (c, _, _, _) in enumerate(rules)) + " END"
        bad_field = "CASE _bad " + " ".join(f"WHEN {i} THEN '{f}'" for i, (_, f, _, _) in enumerate(rules)) + " END"
        bad_value = "CASE _bad " + " ".join(f"WHEN {i} THEN {v}" for i, (_, _, v, _) in enumerate(rules)) + " END"
        bad_reason = "CASE _bad " + " ".join(f"WHEN {i} THEN {r}" for i, (_, _, _, r) in enumerate(rules)) + " END"
        sources = ", ".join(f"_src_{n}" for n in _RAW)
        self.params.update(params, link_types=list(LINK_TYPES), statuses=list(_BELIEF_STATUSES))
        absent = "".join(f", {name}" for name in self.absent)
        # A column the input lacks is NULL in every row: it cannot tell two rows apart.
        hashed = ", ".join(c for c in _ROW_VALUES.split(", ") if c not in self.absent)
        self.con.execute(
            f"""CREATE TEMP TABLE _bf_checked_rows AS
                SELECT * EXCLUDE (_bad, {sources}{absent}),
                       {bad_field} AS _bad_field, CAST({bad_value} AS VARCHAR) AS _bad_value,
                       {bad_reason} AS _bad_reason,
                       -- lenient mode read an unreadable time as missing: the unreadable_time flag
                       _bad IS NULL AND $lenient AND (
                           ({self._present("valid_from")} AND valid_from IS NULL)
                        OR ({self._present("valid_to")} AND valid_to IS NULL)
                        OR ({self._present("superseded_at")} AND superseded_at IS NULL)) AS _unreadable,
                       -- exact repeats are found by this hash first (see _bf_repeated)
                       CASE WHEN _bad IS NULL THEN hash({hashed}) END AS _h
                FROM (SELECT *, {bad} AS _bad FROM (SELECT {parsed} FROM _bf_in))""",
            self.params,
        )
        nulls = "".join(f", CAST(NULL AS {sql_type}) AS {name}" for name, sql_type in self.absent.items())
        self.con.execute(f"CREATE TEMP VIEW _bf_checked AS SELECT *{nulls} FROM _bf_checked_rows")
        self.rows_read = self.con.sql("SELECT count(*) FROM _bf_checked_rows").fetchall()[0][0]

    # stage 2 ------------------------------------------------------------------------------
    def collapse_and_check_facts(self, *, resolve: bool) -> None:
        """Stage 2: exact repeats loaded once, fixed spans, fact ids, fact-level rejections.

        Only the repeats (``_bf_merged``) and the fact-level rejections are materialised;
        ``_bf_rows`` is a view over ``_bf_checked``, so a load is held once.
        """
        con = self.con
        # A fresh random number per load: generated fact ids are recorded_at plus (nonce + row),
        # so they are unique in the load, unlikely to meet another load's, and the same each
        # time the view is read (uuid() would differ between reads).
        con.execute("CREATE TEMP TABLE _bf_const AS SELECT CAST($nonce AS BIGINT) AS nonce",
                    {"nonce": secrets.randbits(59)})
        con.execute(_FACT_ID_MACRO)
        con.register("_bf_repeated_hashes", pa.table({"_h": _repeated(
            con.sql("SELECT _h FROM _bf_checked_rows WHERE _h IS NOT NULL").to_arrow_table()["_h"])}))
        con.execute("CREATE TEMP TABLE _bf_repeated AS SELECT _h FROM _bf_repeated_hashes")
        con.execute(_MERGED_SQL)
        con.execute(_CANDIDATES_SQL)
        con.execute("CREATE TEMP TABLE _bf_fact_rejects (row BIGINT, field VARCHAR, value VARCHAR, reason VARCHAR)")
        if self.has_fact_id and not resolve:
            con.execute(_FACT_REJECTS_SQL)
        con.execute("CREATE TEMP VIEW _bf_rows AS SELECT * FROM _bf_candidates "
                    "WHERE __row NOT IN (SELECT f.row FROM _bf_fact_rejects f)")

    # report -------------------------------------------------------------------------------
    def report_parts(self, settings: dict[str, Any], *, extra_flags: pl.DataFrame | None) -> dict[str, Any]:
        """Counts, rejected rows and flags; all but overlapping_values (see :meth:`with_overlaps`)."""
        con = self.con
        rejected = queries.frame(con, """
            SELECT __row AS row, _bad_field AS field, _bad_value AS value, _bad_reason AS reason
            FROM _bf_checked WHERE _bad_field IS NOT NULL
            UNION ALL SELECT * FROM _bf_fact_rejects ORDER BY row""").cast(_REJECTED_SCHEMA)  # type: ignore[arg-type]
        con.execute(_COUNTS_SQL, {
            "now": self.now, "share": SHARED_SHARE, "min_rows": SHARED_MIN_ROWS, "deciles": [i / 10 for i in range(11)],
        })
        con.execute(_FLAGS_SQL)
        ok, loaded, fixed, fact_rejects = con.sql(
            "SELECT ok, loaded, fixed, (SELECT count(*) FROM _bf_fact_rejects) FROM _bf_counts").fetchall()[0]
        flags = queries.frame(con, "SELECT flag, count, example_row FROM _bf_flags WHERE count > 0")
        if extra_flags is not None and extra_flags.height:
            flags = pl.concat([flags.cast(_FLAGS_SCHEMA), extra_flags.cast(_FLAGS_SCHEMA)])  # type: ignore[arg-type]
        return {"rows_read": self.rows_read, "loaded": loaded, "rejected": rejected, "fixed": fixed,
                "duplicates": ok - loaded - fact_rejects, "flags": flags.cast(_FLAGS_SCHEMA).sort("flag")}  # type: ignore[arg-type]

    def with_overlaps(self, flags: pl.DataFrame, settings: dict[str, Any],
                      written_keys: pa.Table | None) -> pl.DataFrame:
        """``flags`` plus overlapping_values when raised, testing the single-valued keys with
        more than one value: those in ``written_keys`` (what the write saw, see
        :class:`_ValueChanges`), or all of the load's keys when it is ``None``."""
        if written_keys is not None and written_keys.num_rows == 0:
            return flags  # no key changes value: nothing can overlap
        if written_keys is not None:
            self.con.register("_bf_written_keys", written_keys)
        multi = [p for p, d in settings["predicates"].items() if d["arity"] == "multi"]
        keys = _ALL_CHANGING_KEYS if written_keys is None else _WRITTEN_KEYS
        n, example = self.con.sql(_OVERLAP_SQL.format(keys=keys), params={"multi": multi}).fetchall()[0]
        if not n:
            return flags
        found = pl.DataFrame({"flag": ["overlapping_values"], "count": [n], "example_row": [example]},
                             schema=_FLAGS_SCHEMA)
        return pl.concat([flags, found]).sort("flag")


def _repeated(hashes: pa.ChunkedArray) -> np.ndarray:
    """The values occurring more than once in ``hashes`` (each once), by sorting them: the
    row hashes of a load are nearly all distinct, and a sort of 64-bit integers costs a
    fifth of the CPU of DuckDB's group per hash (10M rows: ~0.5 against ~2.5 s).

    >>> _repeated(pa.chunked_array([[5, 1, 5, 2, 1, 5]], pa.uint64())).tolist()
    [1, 5]
    """
    values = np.sort(hashes.to_numpy())
    return np.unique(values[1:][values[1:] == values[:-1]])


# The columns two rows must share to be exact repeats (artifacts aside: they are merged).
_ROW_VALUES = ("fact_id, scope, subject, predicate, object, text, reason, retraction_reason, source, superseded_by, "
               "link_type, status, valid_from, valid_to, recorded_at, retracted_at, superseded_at, confidence, "
               "weight, valid_from_inferred, embedding, attributes")
#: Columns whose source value stage 1 reads (to tell "missing" from "unreadable") but does not keep.
_RAW = (*_TIMES, *_NUMBERS, "valid_from_inferred", "artifacts", "embedding")

# Stage 2 in SQL. Exact repeats: rows equal in every normalised column but artifacts share a
# hash (stage 1); only the rows whose hash repeats are grouped in full and merged (artifacts
# in order of first appearance). Rows with a unique hash pass through untouched.
_MERGED_SQL = f"""
CREATE TEMP TABLE _bf_merged AS
SELECT * REPLACE (list_filter(artifacts, lambda a, i: list_position(artifacts, a) = i) AS artifacts)
FROM (SELECT min(__row) AS __row, {_ROW_VALUES}, flatten(list(coalesce(artifacts, []) ORDER BY __row)) AS artifacts
      FROM _bf_checked SEMI JOIN _bf_repeated USING (_h)
      GROUP BY ALL)
"""

# The loadable rows before fact-level checks. An end before its start keeps the end and moves
# the start back to it. ``fact_id`` stays as given (NULL when none): a generated id is made
# only where it is needed (_bf_fact_id), so that the write can sort the rows before it.
_CANDIDATES_SQL = f"""
CREATE TEMP VIEW _bf_candidates AS
SELECT * REPLACE (
           CASE WHEN valid_to < valid_from THEN valid_to ELSE valid_from END AS valid_from,
           coalesce(valid_from_inferred, false) OR valid_from IS NULL OR coalesce(valid_to < valid_from, false)
               AS valid_from_inferred),
       coalesce(valid_to < valid_from, false) AS _fixed,
       valid_from IS NULL AS _no_start
FROM (SELECT __row, {_ROW_VALUES}, artifacts FROM _bf_checked
      WHERE _h IS NOT NULL AND _h NOT IN (SELECT r._h FROM _bf_repeated r)
      UNION ALL
      SELECT __row, {_ROW_VALUES}, artifacts FROM _bf_merged) k
CROSS JOIN _bf_const
"""

# A row's fact id: the given one, else 29 hex digits, 14 of recorded_at in µs (clamped to
# 0 .. 2^56 - 1) and 15 of (nonce + row): unique in the load, the write path's length, and in
# the order of (recorded_at, row). One hex conversion of a 117-bit number whose leading 1 is
# dropped (fixed width without lpad; about half the cost of format()).
_FACT_ID_MACRO = """
CREATE TEMP MACRO _bf_fact_id(given, recorded_at, row_, nonce) AS
coalesce(given, lower(substr(to_hex((CAST(1 AS HUGEINT) << 116)
    + (CAST(least(greatest(epoch_us(recorded_at), 0), 72057594037927935) AS HUGEINT) << 60) + nonce + row_), 2)))
"""

# Rows sharing a fact_id are revisions of one fact: they must share its key, have distinct
# belief times and not follow its retraction. A fact_id already in the store is refused:
# backfill adds facts, it does not rewrite a stored fact's history.
_FACT_REJECTS_SQL = """
INSERT INTO _bf_fact_rejects
WITH ordered AS (
    SELECT r.*,
           first_value(r.scope || chr(0) || r.subject || chr(0) || r.predicate) OVER w AS first_key,
           lag(r.recorded_at) OVER w AS prev_recorded_at,
           max(r.retracted_at) OVER (w ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_retracted_at
    FROM (SELECT * REPLACE (coalesce(scope, 'default') AS scope) FROM _bf_candidates WHERE fact_id IS NOT NULL) r
    WINDOW w AS (PARTITION BY r.fact_id ORDER BY r.recorded_at, r.__row)
)
SELECT __row, 'fact_id', fact_id,
       CASE WHEN fact_id IN (SELECT e.fact_id FROM _tm_events e)
                THEN 'already in the store: backfill adds facts, it never rewrites a stored one'
            WHEN scope || chr(0) || subject || chr(0) || predicate <> first_key
                THEN 'an earlier row of this fact has another scope, subject or predicate'
            WHEN recorded_at = prev_recorded_at
                THEN 'another row of this fact has the same recorded_at'
            ELSE 'this fact was already retracted at ' || CAST(prev_retracted_at AS VARCHAR) END
FROM ordered
WHERE fact_id IN (SELECT e.fact_id FROM _tm_events e)
   OR scope || chr(0) || subject || chr(0) || predicate <> first_key
   OR recorded_at = prev_recorded_at
   OR recorded_at >= prev_retracted_at
"""

# The red flags of SPEC §9 and the report's counts, as the tables _bf_counts (one row) and
# _bf_flags (flag, count, example_row; count 0 = not raised). Counts are of input rows.
_COUNTS_SQL = """
CREATE TEMP TABLE _bf_counts AS
WITH checked AS (
    SELECT count(*) FILTER (WHERE _bad_field IS NULL) AS ok,
           count(*) FILTER (WHERE recorded_at > $now OR retracted_at > $now) AS future_n,
           min(__row) FILTER (WHERE recorded_at > $now OR retracted_at > $now) AS future_row,
           count(*) FILTER (WHERE retracted_at < recorded_at) AS before_n,
           min(__row) FILTER (WHERE retracted_at < recorded_at) AS before_row,
           count(*) FILTER (WHERE _unreadable) AS unreadable_n, min(__row) FILTER (WHERE _unreadable) AS unreadable_row
    FROM _bf_checked
),
loaded AS (
    SELECT count(*) AS loaded, count(*) FILTER (WHERE _fixed) AS fixed, min(__row) FILTER (WHERE _fixed) AS fixed_row,
           count(*) FILTER (WHERE _no_start) AS no_start_n, min(__row) FILTER (WHERE _no_start) AS no_start_row,
           -- Candidates for an instant shared by more than a fifth of the rows: such an instant
           -- fills a run of more than n/5 of the n values sorted, and runs that long always
           -- hold one of the 11 values at the deciles (consecutive deciles are at most n/10 + 1
           -- apart, less than n/5 once n >= 10; a flag needs 100 rows). The deciles are a
           -- selection, not a sort or a group per instant; the candidates are counted exactly.
           quantile_disc(valid_from, $deciles) FILTER (WHERE valid_from IS NOT NULL AND NOT _fixed) AS from_candidates,
           quantile_disc(recorded_at, $deciles) AS recorded_candidates
    FROM _bf_rows
),
shared_from AS (
    SELECT r.valid_from AS t, count(*) AS c, min(r.__row) AS example FROM _bf_rows r
    WHERE list_contains((SELECT l.from_candidates FROM loaded l), r.valid_from) AND NOT r._fixed
    GROUP BY r.valid_from ORDER BY c DESC, t LIMIT 1
),
shared_recorded AS (
    SELECT r.recorded_at AS t, count(*) AS c, min(r.__row) AS example FROM _bf_rows r
    WHERE list_contains((SELECT l.recorded_candidates FROM loaded l), r.recorded_at)
    GROUP BY r.recorded_at ORDER BY c DESC, t LIMIT 1
),
shared AS (
    SELECT (SELECT CASE WHEN c > $share * loaded AND c >= $min_rows THEN c ELSE 0 END FROM shared_from) AS from_n,
           (SELECT example FROM shared_from) AS from_row,
           (SELECT CASE WHEN c > $share * loaded AND c >= $min_rows THEN c ELSE 0 END FROM shared_recorded)
               AS recorded_n,
           (SELECT example FROM shared_recorded) AS recorded_row
    FROM loaded
)
SELECT * EXCLUDE (from_candidates, recorded_candidates) FROM checked, loaded, shared
"""
# The overlapping_values flag (the same rule as check()): the revisions of the candidate keys
# with their belief intervals, and the rows whose value overlaps another fact's value of the
# same key in both valid and belief time. Candidates are the single-valued keys with more than
# one value in this load. Keys are matched by 64-bit hashes (integers compare far faster than
# text; a collision only adds a candidate, as the test compares the values). {keys} is a query
# of the candidates' hashes ``kh``: _WRITTEN_KEYS (the keys the write saw change value between
# adjacent sorted rows) or, when nothing is written, _ALL_CHANGING_KEYS.
_OVERLAP_SQL = """
WITH revs AS (
    SELECT r.__row, _bf_fact_id(r.fact_id, r.recorded_at, r.__row, r.nonce) AS fact_id,
           coalesce(r.scope, 'default') AS scope, r.subject, r.predicate, r.object,
           r.valid_from, r.valid_to, r.recorded_at, r.retracted_at,
           lead(r.recorded_at) OVER (PARTITION BY _bf_fact_id(r.fact_id, r.recorded_at, r.__row, r.nonce)
                                     ORDER BY r.recorded_at) AS next_recorded_at
    FROM _bf_rows r
    WHERE hash(coalesce(r.scope, 'default'), r.subject, r.predicate) IN (SELECT k.kh FROM ({keys}) k)
      AND NOT list_contains($multi, r.predicate)
),
believed AS (
    SELECT *, CASE WHEN retracted_at > recorded_at
                   THEN least(retracted_at, coalesce(next_recorded_at, retracted_at))
                   ELSE next_recorded_at END AS believed_until
    FROM revs WHERE retracted_at IS NULL OR retracted_at > recorded_at
)
SELECT count(*) AS n, min(__row) AS example FROM (
    SELECT a.__row FROM believed a JOIN believed b
      ON a.scope = b.scope AND a.subject = b.subject AND a.predicate = b.predicate
     AND a.fact_id <> b.fact_id AND a.object IS DISTINCT FROM b.object
     AND tm_overlaps(a.recorded_at, a.believed_until, b.recorded_at, b.believed_until)
     AND tm_overlaps(a.valid_from, a.valid_to, b.valid_from, b.valid_to)
    GROUP BY a.__row)
"""
_ALL_CHANGING_KEYS = """
SELECT hash(coalesce(scope, 'default'), subject, predicate) AS kh FROM _bf_rows
WHERE NOT list_contains($multi, predicate)
GROUP BY kh HAVING min(hash(object)) <> max(hash(object))
"""
_WRITTEN_KEYS = "SELECT hash(w.scope, w.subject, w.predicate) AS kh FROM _bf_written_keys w"
_FLAGS_SQL = """
CREATE TEMP TABLE _bf_flags AS
SELECT unnest([
    {'flag': 'belief_from_future', 'count': future_n, 'example_row': future_row},
    {'flag': 'retracted_before_recorded', 'count': before_n, 'example_row': before_row},
    {'flag': 'fixed_span', 'count': fixed, 'example_row': fixed_row},
    {'flag': 'inferred_start', 'count': no_start_n, 'example_row': no_start_row},
    {'flag': 'shared_valid_from', 'count': coalesce(from_n, 0), 'example_row': from_row},
    {'flag': 'shared_recorded_at', 'count': coalesce(recorded_n, 0), 'example_row': recorded_row},
    {'flag': 'unreadable_time', 'count': unreadable_n, 'example_row': unreadable_row}
], recursive := true)
FROM _bf_counts
"""


# -- writing as given ---------------------------------------------------------------------------

# One revision per row from recorded_at; a row retracted later also gives a retracted revision
# at retracted_at (a row retracted at the instant it was recorded is one retracted revision).
# A large load is written in ranges of (scope, subject), [from, to), one statement each, in
# order (see _key_ranges). Sorting moves every column a row carries, so the rows are sorted
# while they are narrow: the columns the input lacks are left out until after it ({absent},
# put back as NULLs in `given`), and so are the columns computed from the row (a generated
# fact id, the default text, the constants, the prev_* of a retraction). When every fact is
# one row, the input rows are sorted ({row_order}) before they become revisions: a row's
# retraction shares its fact id and follows it. When rows share a fact_id, a fact's revisions
# interleave by belief time, so they are numbered by a window over the fact first and sorted
# after it ({revision_order}).
_REVISIONS_SQL = """
WITH ranged AS (
    SELECT r.* EXCLUDE (_fixed, _no_start{absent}) FROM _bf_rows r
    -- the key range being written: [from, to) in (scope, subject) order; NULL = unbounded
    WHERE ($from_scope IS NULL OR coalesce(r.scope, 'default') > $from_scope
           OR (coalesce(r.scope, 'default') = $from_scope AND r.subject >= $from_subject))
      AND ($to_scope IS NULL OR coalesce(r.scope, 'default') < $to_scope
           OR (coalesce(r.scope, 'default') = $to_scope AND r.subject < $to_subject))
    {row_order}
),
given AS (
    SELECT *{absent_nulls} FROM ranged
),
derived AS (
    SELECT r.* REPLACE ({early_fact_id} AS fact_id),
           coalesce(r.scope, 'default') AS scope_, r.retracted_at = r.recorded_at AS born_retracted,
           CASE WHEN r.status IN ('live', 'ended', 'superseded') THEN r.status
                WHEN r.superseded_by IS NOT NULL THEN 'superseded'
                WHEN r.valid_to IS NOT NULL THEN 'ended' ELSE 'live' END AS belief_status,
           -- part 0 is the row as recorded; part 1 its retraction, when that came later. One
           -- scan makes both (a UNION of two reads would materialise the rows first).
           unnest(CASE WHEN r.retracted_at > r.recorded_at THEN [0, 1] ELSE [0] END) AS part
    FROM given r
),
revs AS (
    SELECT * REPLACE (
               CASE WHEN part = 1 THEN retracted_at ELSE recorded_at END AS recorded_at,
               CASE WHEN part = 1 OR born_retracted THEN retracted_at END AS retracted_at,
               CASE WHEN part = 1 OR born_retracted THEN 'retracted' ELSE belief_status END AS status,
               CASE WHEN part = 1 OR born_retracted THEN coalesce(retraction_reason, reason) ELSE reason END
                   AS reason,
               -- superseded when the row was recorded, unless it says when: both parts agree
               coalesce(superseded_at, CASE WHEN superseded_by IS NOT NULL THEN recorded_at END) AS superseded_at),
           recorded_at AS first_recorded_at_,
           CASE WHEN part = 0 AND retracted_at > recorded_at THEN retracted_at END AS folded_until_
    FROM derived
),
numbered AS (
    SELECT *, CAST({revision} AS INTEGER) AS revision_, {first_recorded_at} AS first_recorded_at__,
           {folded_until} AS folded_until__{previous_window}
    FROM revs
),
sorted AS (
    SELECT * FROM numbered {revision_order}
)
SELECT {late_fact_id} AS fact_id, scope_ AS scope, subject, predicate, object,
       coalesce(text, subject || ' ' || predicate || ' ' || object) AS text,
       valid_from, valid_to, valid_from_inferred, recorded_at, retracted_at, superseded_at,
       superseded_by, status, reason, source, confidence,
       CAST($origin AS VARCHAR) AS origin, CAST($ingested_at AS TIMESTAMPTZ) AS ingested_at,
       coalesce(artifacts, CAST([] AS VARCHAR[])) AS artifacts, attributes, embedding,
       coalesce(link_type, 'entity') AS link_type, coalesce(weight, 1.0) AS weight,
       revision_ AS revision, {previous}, first_recorded_at__ AS first_recorded_at, true AS folded,
       folded_until__ AS folded_until{id_parts}
FROM sorted
"""
# How revision number, first recorded time and belief end are derived: over every row of a
# fact when rows share a fact_id, from the row itself otherwise (no window to compute).
# So are the previous revision's columns (prev_*): the revision before in belief time, or, for
# the retraction (part 1) of a fact of one row, the row as recorded (part 0), whose columns the
# row still holds; those need no window, and are made after the sort.
_BY_ROW = {"revision": "row_number() OVER (PARTITION BY fact_id ORDER BY recorded_at, part)",
           "first_recorded_at": "min(recorded_at) OVER (PARTITION BY fact_id)",
           "folded_until": "lead(recorded_at) OVER (PARTITION BY fact_id ORDER BY recorded_at, part)",
           "previous_window": "".join(f", lag({n}) OVER (PARTITION BY fact_id ORDER BY recorded_at, part) AS prev_{n}_"
                                      for n in PREVIOUS),
           "previous": ", ".join(f"prev_{n}_ AS prev_{n}" for n in PREVIOUS),
           "row_order": "", "revision_order": "ORDER BY scope_, subject, predicate, {fact_order}, revision_"}
_PART_0 = {"recorded_at": "first_recorded_at_", "retracted_at": "CAST(NULL AS TIMESTAMPTZ)", "status": "belief_status"}
_ONE_ROW_PER_FACT = {"revision": "1 + part", "first_recorded_at": "first_recorded_at_",
                     "folded_until": "folded_until_", "previous_window": "",
                     "previous": ", ".join(f"CASE WHEN part = 1 THEN {_PART_0.get(n, n)} END AS prev_{n}"
                                           for n in PREVIOUS),
                     "row_order": "ORDER BY coalesce(r.scope, 'default'), r.subject, r.predicate, {row_fact_order}",
                     "revision_order": ""}
#: Columns the input may lack that _bf_rows still gives values (see _CANDIDATES_SQL and
#: _MERGED_SQL): they are not NULL throughout, so they stay in the sort.
_RECOMPUTED = ("valid_from_inferred", "artifacts")
# Where the fact id is made and what the sort compares. With ids in the input, the id (given
# or generated) is a sort key, so it is made first. Without, every id is generated and sorts
# like (recorded_at clamped as in _bf_fact_id, row): the sort compares those two integers,
# which leave the query as the columns _id_us and _id_serial; the id text is made from them
# by _generated_ids while the batch is written (a quarter of the write query's CPU in SQL).
# ``row_fact_order`` is the same order over an input row, before it becomes revisions.
_GIVEN_IDS = {"early_fact_id": "_bf_fact_id(r.fact_id, r.recorded_at, r.__row, r.nonce)",
              "fact_order": "fact_id", "row_fact_order": "_bf_fact_id(r.fact_id, r.recorded_at, r.__row, r.nonce)",
              "late_fact_id": "fact_id", "id_parts": ""}
_CLAMPED_US = "least(greatest(epoch_us({}), 0), 72057594037927935)"
_ID_US = _CLAMPED_US.format("first_recorded_at_")
_GENERATED_IDS = {"early_fact_id": "r.fact_id", "fact_order": f"{_ID_US}, __row",
                  "row_fact_order": f"{_CLAMPED_US.format('r.recorded_at')}, r.__row",
                  "late_fact_id": "CAST(NULL AS VARCHAR)",
                  "id_parts": f", {_ID_US} AS _id_us, nonce + __row AS _id_serial"}

#: Two lowercase hex digits per byte value, as the two bytes of a little-endian uint16.
_HEX_PAIRS = np.array([ord(f"{b:02x}"[0]) | ord(f"{b:02x}"[1]) << 8 for b in range(256)], dtype="<u2")


def _generated_ids(us: pa.Array, serial: pa.Array) -> pa.Array:
    """The ids ``_bf_fact_id`` makes, as one Arrow string array: 14 lowercase hex digits of
    ``us`` (< 2^56) then 15 of ``serial`` (< 2^60), for the whole batch at once: each
    big-endian byte becomes its two digits by one table lookup (no Python per row; about a
    third of the CPU of the SQL macro).

    >>> _generated_ids(pa.array([1]), pa.array([255])).to_pylist()
    ['000000000000010000000000000ff']
    """
    n = len(us)
    digits = np.empty((n, 29), np.uint8)
    us_bytes = us.to_numpy().astype(">u8").view(np.uint8).reshape(n, 8)
    serial_bytes = serial.to_numpy().astype(">u8").view(np.uint8).reshape(n, 8)
    digits[:, :14] = _HEX_PAIRS[us_bytes[:, 1:]].view(np.uint8)  # the top byte of us is 0
    digits[:, 14:] = _HEX_PAIRS[serial_bytes].view(np.uint8)[:, 1:]  # so is serial's top digit
    offsets = np.arange(0, 29 * (n + 1), 29, dtype=np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(digits))




#: Rows one sort handles: a load with more is written as several sorted key ranges, so that
#: each sort fits in DuckDB's memory instead of spilling (a range's rows are held once).
_SORT_ROWS = 2_000_000
#: Rows sampled to place the range bounds (only the balance of the ranges depends on it).
_BOUND_SAMPLE = 100_000

# Bounds of about equal key ranges: the (scope, subject) starting each range but the first,
# from a sample. All rows of a subject share a range, so do all revisions of a fact. The sample
# takes whole vectors of the stage-1 table (SYSTEM): a quarter of the CPU of a row sample of
# the _bf_rows view, which reads every row. {percent} is a number computed from the row count
# (TABLESAMPLE takes no parameter), never input.
_BOUNDS_SQL = """
SELECT DISTINCT ON (tile) s, j FROM (
    SELECT s, j, ntile($ranges) OVER (ORDER BY s, j) AS tile
    FROM (SELECT coalesce(c.scope, 'default') AS s, c.subject AS j
          FROM _bf_checked c TABLESAMPLE SYSTEM ({percent} PERCENT) REPEATABLE (7) WHERE c._h IS NOT NULL)
) WHERE tile > 1 ORDER BY tile, s, j
"""


def _key_ranges(con: duckdb.DuckDBPyConnection, loaded: int) -> list[dict[str, str | None]]:
    """Parameters of the write's key ranges: [from, to) in (scope, subject) order, tiling all keys.

    One unbounded range when the load fits one sort. The sample only places the bounds:
    every row falls in exactly one range whatever they are (a subject too large for one
    range just makes a large range).
    """
    ranges = -(-loaded // _SORT_ROWS)
    percent = min(100.0, 100.0 * _BOUND_SAMPLE / loaded)
    sampled = con.sql(_BOUNDS_SQL.format(percent=float(percent)),
                      params={"ranges": ranges}).fetchall() if ranges > 1 else []
    bounds = sorted({tuple(b) for b in sampled})
    edges: list[tuple[str, str] | tuple[None, None]] = [(None, None), *bounds, (None, None)]
    return [{"from_scope": lo[0], "from_subject": lo[1], "to_scope": hi[0], "to_subject": hi[1]}
            for lo, hi in itertools.pairwise(edges)]


def _write_as_given(engine: Engine, con: duckdb.DuckDBPyConnection, *, loaded: int, has_fact_id: bool,
                    absent: dict[str, str], origin: str, ingested_at: datetime, notify: Progress,
                    finish: Callable[[pa.Table], None]) -> int:
    """Write the revision rows as one Delta commit; keep the store clock where it was.

    DuckDB computes them sorted by the store's SORT_KEYS (a large load range by range of
    keys, in order); they stream out as Arrow batches of the store's row-group size (so that
    point queries prune row groups) into one Parquet file in the table folder, which is
    committed in one transaction (:meth:`Storage.add_files`). No row becomes a Python object:
    Arrow's Parquet writer encodes each batch (a third of the CPU DuckDB's COPY takes for them).
    Once the file is written and before it is committed, ``finish`` gets the keys whose value
    changes between adjacent rows (:class:`_ValueChanges`): the report's overlap test.
    ``absent`` names the columns the input lacks (name: SQL type), kept out of the sort.
    """
    if loaded == 0:
        return 0
    # Rows sharing a given fact_id are revisions numbered by belief time; otherwise a fact
    # has one revision (two when retracted later).
    has_ids = has_fact_id and con.sql(
        "SELECT count(fact_id) > count(DISTINCT fact_id) FROM _bf_rows").fetchall()[0][0]
    ids = _GIVEN_IDS if has_fact_id else _GENERATED_IDS
    order = _BY_ROW if has_ids else _ONE_ROW_PER_FACT
    nulls = {name: sql_type for name, sql_type in absent.items() if name not in _RECOMPUTED}
    query = _REVISIONS_SQL.format(**{
        **order, **ids, "row_order": order["row_order"].format(**ids),
        "revision_order": order["revision_order"].format(**ids), "absent": "".join(f", {name}" for name in nulls),
        "absent_nulls": "".join(f", CAST(NULL AS {sql_type}) AS {name}" for name, sql_type in nulls.items())})
    last_api_us = engine.last_api_us()
    target = engine.storage.new_file_path()
    written = 0
    changes = _ValueChanges()
    try:
        with BackgroundWriter(target) as out:
            for key_range in _key_ranges(con, loaded):
                rows = con.sql(query, params={"origin": origin, "ingested_at": ingested_at, **key_range})
                for batch in rows.to_arrow_reader(writer.ROW_GROUP_ROWS):
                    if not has_fact_id:
                        ids = _generated_ids(batch.column("_id_us"), batch.column("_id_serial"))
                        batch = pa.RecordBatch.from_arrays([ids, *batch.columns[1:len(EVENT_SCHEMA)]],
                                                           names=EVENT_SCHEMA.names)
                    out.write(batch.cast(EVENT_SCHEMA))
                    changes.see(batch)
                    written += batch.num_rows
                notify("write", written)
        finish(changes.keys())
    except BaseException:
        target.unlink(missing_ok=True)
        raise
    engine.add_files([target], last_api_us)
    return written


class _ValueChanges:
    """The keys (scope, subject, predicate) whose object differs between two adjacent rows of
    the written stream. The stream is sorted by key, so a key's rows are adjacent and a key
    holds more than one value exactly when it appears here: the candidates of the overlap
    test, found with a few vectorised comparisons per batch instead of a group per key.
    """

    _KEY = ("scope", "subject", "predicate")

    def __init__(self) -> None:
        self._found: list[pa.Table] = []
        self._last: pa.RecordBatch | None = None  # the previous batch's last row

    def see(self, batch: pa.RecordBatch) -> None:
        """Note the changes inside ``batch`` and between the previous batch and it."""
        if batch.num_rows == 0:
            return
        cols = batch.select([*self._KEY, "object"])
        # The boundary: the previous batch's last row before this one (a two-row batch).
        pairs = [cols] if self._last is None else [pa.concat_batches([self._last, cols.slice(0, 1)]), cols]
        for part in pairs:
            before, after = part.slice(0, part.num_rows - 1), part.slice(1)
            same_key = pc.and_(pc.and_(pc.equal(before["scope"], after["scope"]),
                                       pc.equal(before["subject"], after["subject"])),
                               pc.equal(before["predicate"], after["predicate"]))
            changed = pc.and_(same_key, pc.not_equal(before["object"], after["object"]))
            if pc.any(changed).as_py():
                self._found.append(pa.Table.from_batches([after.select(list(self._KEY)).filter(changed)]))
        self._last = cols.slice(cols.num_rows - 1)

    def keys(self) -> pa.Table:
        """The keys seen changing value, each once."""
        if not self._found:
            return pa.table({k: pa.array([], pa.string()) for k in self._KEY})
        return pa.concat_tables(self._found).group_by(list(self._KEY)).aggregate([])


__all__ = ["BackfillReport", "backfill", "input_files", "time_sql"]
