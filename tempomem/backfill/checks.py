"""Stages 1 and 2 of a backfill: every row parsed and checked against the reject rules in one
statement, then exact repeats collapsed, spans fixed and fact-level rejections found."""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from ..connection import quote, sql_parts
from ..ids import FACT_ID_MACRO
from ..schema import LINK_TYPES
from ..timegrammar import reason_sql, time_sql
from .columns import BELIEF_STATUSES, INPUT_COLUMNS, NUMBERS, STRINGS, TIMES

#: Stage 2's statements, in the order they run.
_SQL = sql_parts("backfill_checks.sql")


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


class Loader:
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

        for name in STRINGS:
            parsed(name, _text_sql(quote(name), cols.get(name, "")), "VARCHAR")
        for name in TIMES:
            parsed(name, time_sql(quote(name), cols.get(name, ""), self.epoch_unit), "TIMESTAMPTZ")
            out.append(self._source(name))
        for name in NUMBERS:
            parsed(name, f"TRY_CAST({quote(name)} AS DOUBLE)", "DOUBLE")
            out.append(self._source(name))
        parsed("valid_from_inferred", 'TRY_CAST("valid_from_inferred" AS BOOLEAN)', "BOOLEAN")
        out.append(self._source("valid_from_inferred"))
        for name, element in (("artifacts", "VARCHAR"), ("embedding", "FLOAT")):
            parsed(name, _list_sql(quote(name), cols.get(name, ""), element), f"{element}[]")
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
        return f"{quote(name)} AS _src_{name}" if name in self.columns else f"CAST(NULL AS VARCHAR) AS _src_{name}"

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
        # The object's members are written as text, a row's null fields left out: what
        # json_object then json_merge_patch onto {} make, without parsing every object again.
        members = []
        for i, name in enumerate(extra):
            params[f"attr{i}"] = name
            members.append(f"to_json($attr{i}) || ':' || to_json({quote(name)})")
        extra_json = None
        if members:
            present = f"list_filter([{', '.join(members)}], lambda m: m IS NOT NULL)"
            extra_json = f"nullif('{{' || array_to_string({present}, ',') || '}}', '{{}}')"
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
        self.params.update(params, link_types=list(LINK_TYPES), statuses=list(BELIEF_STATUSES))
        absent = "".join(f", {name}" for name in self.absent)
        # A column the input lacks is NULL in every row: it cannot tell two rows apart.
        hashed = ", ".join(c for c in ROW_VALUES if c not in self.absent)
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
        con.execute(_SQL["nonce"], {"nonce": secrets.randbits(59)})
        con.execute(FACT_ID_MACRO)
        con.register("_bf_repeated_hashes", pa.table({"_h": _repeated(
            con.sql("SELECT _h FROM _bf_checked_rows WHERE _h IS NOT NULL").to_arrow_table()["_h"])}))
        for part in ("repeated", "merged", "candidates", "fact_rejects_table"):
            con.execute(_SQL[part])
        if self.has_fact_id and not resolve:
            con.execute(_SQL["fact_rejects"])
        con.execute(_SQL["rows"])


def _repeated(hashes: pa.ChunkedArray) -> np.ndarray:
    """The values occurring more than once in ``hashes`` (each once), by sorting them: the
    row hashes of a load are nearly all distinct, and a sort of 64-bit integers costs a
    fifth of the CPU of DuckDB's group per hash (10M rows: ~0.5 against ~2.5 s).

    >>> _repeated(pa.chunked_array([[5, 1, 5, 2, 1, 5]], pa.uint64())).tolist()
    [1, 5]
    """
    values = np.sort(hashes.to_numpy())
    return np.unique(values[1:][values[1:] == values[:-1]])


#: The columns two rows must share to be exact repeats (artifacts aside: they are merged);
#: backfill_checks.sql spells them out (tests/test_backfill.py holds the two together).
ROW_VALUES = ("fact_id", "scope", "subject", "predicate", "object", "text", "reason", "retraction_reason", "source",
              "superseded_by", "link_type", "status", "valid_from", "valid_to", "recorded_at", "retracted_at",
              "superseded_at", "confidence", "weight", "valid_from_inferred", "embedding", "attributes")
#: Columns whose source value stage 1 reads (to tell "missing" from "unreadable") but does not keep.
_RAW = (*TIMES, *NUMBERS, "valid_from_inferred", "artifacts", "embedding")
