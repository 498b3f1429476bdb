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
from ..schema import LINK_TYPES, MAX_WEIGHT
from ..timegrammar import reason_sql, time_sql
from .columns import BELIEF_STATUSES, INPUT_COLUMNS, NUMBERS, STRINGS, TIMES

#: Stage 2's statements, in the order they run.
_SQL = sql_parts("backfill_checks.sql")
#: Stage 1's readings of one value, as macros.
_PARSE = sql_parts("backfill_parse.sql")


#: Stage 1's readings (backfill_parse.sql): per kind of column, the macro reading a text source
#: and the one reading a source of any other type.
_READERS = {"text": ("tm__bf_text", "tm__bf_text_of"), "number": ("tm__bf_number", "tm__bf_number"),
            "flag": ("tm__bf_flag", "tm__bf_flag"), "strings": ("tm__bf_strings_text", "tm__bf_strings"),
            "floats": ("tm__bf_floats_text", "tm__bf_floats"),
            "attributes": ("tm__bf_attributes_text", "tm__bf_attributes"),
            "given": ("tm__bf_given_text", "tm__bf_given")}
_KINDS = {**dict.fromkeys(STRINGS, "text"), **dict.fromkeys(NUMBERS, "number"), "valid_from_inferred": "flag",
          "artifacts": "strings", "embedding": "floats"}
_TYPES = {"text": "VARCHAR", "number": "DOUBLE", "flag": "BOOLEAN", "strings": "VARCHAR[]", "floats": "FLOAT[]"}


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
    def _read(self, kind: str, name: str, column: str | None = None) -> str:
        """SQL: the backfill_parse.sql macro of ``kind`` for the input column ``name``'s type, over
        ``column`` (the column itself by default)."""
        text, other = _READERS[kind]
        return f"{text if self.columns[name] == 'VARCHAR' else other}({column or quote(name)})"

    def _parsed_select(self) -> tuple[str, dict[str, Any]]:
        """The parsed columns; a column the input lacks is a typed NULL, noted in ``absent``."""
        cols, params = self.columns, {}
        out = ["__row"]
        for name in (*STRINGS, *TIMES, *NUMBERS, "valid_from_inferred", "artifacts", "embedding"):
            sql_type = "TIMESTAMPTZ" if name in TIMES else _TYPES[_KINDS[name]]
            if name not in cols:
                self.absent[name] = sql_type
                out.append(f"CAST(NULL AS {sql_type}) AS {name}")
            elif name in TIMES:
                out.append(f"{time_sql(quote(name), cols[name], self.epoch_unit)} AS {name}")
            else:
                out.append(f"{self._read(_KINDS[name], name)} AS {name}")
            if name in _RAW:
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
        return self._read("given", name, f"_src_{name}") if name in self.columns else "false"

    @staticmethod
    def _raw(name: str) -> str:
        """SQL: the source value of ``name`` as text (NULL when blank), for rejection messages."""
        return f"tm__bf_text_of(_src_{name})"

    def _attributes_sql(self, params: dict[str, Any]) -> str | None:
        """Every non-spec column as one JSON object, merged over a given ``attributes`` column."""
        extra = [c for c in self.columns if c not in INPUT_COLUMNS]
        members = []
        for i, name in enumerate(extra):
            params[f"attr{i}"] = name
            members.append(f"tm__bf_member($attr{i}, {quote(name)})")
        extra_json = f"tm__bf_extra(concat_ws(',', {', '.join(members)}))" if members else None
        given = self._read("attributes", "attributes") if "attributes" in self.columns else None
        if given and extra_json:
            return f"tm__bf_merged({given}, {extra_json})"
        return given or extra_json

    def _rules(self) -> list[tuple[str, str, str, str]]:
        """(condition, field, value SQL, reason SQL) in order: a row's first hit rejects it."""
        has, raw = self._present, self._raw
        # First: an erased fact's tombstone (an export of a store after a forget) has no object
        rules: list[tuple[str, str, str, str]] = [
            ("coalesce(status = 'erased', false)", "status", "status",
             "'the tombstone of an erased fact: its content is gone, and backfill loads facts, not tombstones'")]
        for name in ("subject", "predicate", "object"):
            rules.append((f"{name} IS NULL", name, f"CAST({name} AS VARCHAR)", "'required, got nothing'"))
        # refused as the write path refuses them: no path stores what another refuses (PostgreSQL's
        # text, for one, holds no NUL)
        rules += [(f"coalesce(contains({name}, chr(0)), false)", name, f"replace({name}, chr(0), '\\0')",
                   "'contains a NUL character'") for name in STRINGS if name in self.columns]

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
            (f"{has('weight')} AND (weight IS NULL OR isnan(weight) OR weight NOT BETWEEN 0 AND $max_weight)", "weight",
             raw("weight"), "'must be a number from 0 to ' || $max_weight"),
            ("link_type IS NOT NULL AND NOT list_contains($link_types, link_type)", "link_type", "link_type",
             "'must be one of ' || array_to_string($link_types, ', ')"),
            (f"{has('valid_from_inferred')} AND valid_from_inferred IS NULL", "valid_from_inferred",
             raw("valid_from_inferred"), "'must be true or false'"),
            (f"{has('artifacts')} AND artifacts IS NULL", "artifacts", raw("artifacts"),
             "'expected a list of strings (or a JSON list)'"),
            (f"{has('embedding')} AND embedding IS NULL", "embedding", raw("embedding"),
             "'expected a list of numbers'"),
            # an item NULL, not finite, or beyond FLOAT's range (which the cast made NULL)
            ("len(list_filter(embedding, lambda x: x IS NULL OR NOT isfinite(x))) > 0", "embedding",
             raw("embedding"), "'expected a list of finite numbers (each within the range of a 32-bit float)'"),
            ("status IS NOT NULL AND NOT list_contains($statuses, status)", "status", "status",
             "'must be one of ' || array_to_string($statuses, ', ')"),
        ]
        return rules

    def check_rows(self) -> None:
        """Stage 1: parse every row, find its first bad field, hash the good ones (``_bf_checked``).

        The only full materialisation of a load. A rule's number is found once per row; its
        value and reason are built only for rejected rows. The raw text of the columns is used
        here and not kept.
        """
        self.con.execute(_PARSE["macros"])
        parsed, params = self._parsed_select()
        rules = self._rules()
        bad = "CASE " + " ".join(f"WHEN {c} THEN {i}" for i, (c, _, _, _) in enumerate(rules)) + " END"
        bad_field = "CASE _bad " + " ".join(f"WHEN {i} THEN '{f}'" for i, (_, f, _, _) in enumerate(rules)) + " END"
        bad_value = "CASE _bad " + " ".join(f"WHEN {i} THEN {v}" for i, (_, _, v, _) in enumerate(rules)) + " END"
        bad_reason = "CASE _bad " + " ".join(f"WHEN {i} THEN {r}" for i, (_, _, _, r) in enumerate(rules)) + " END"
        sources = ", ".join(f"_src_{n}" for n in _RAW)
        self.params.update(params, link_types=list(LINK_TYPES), statuses=list(BELIEF_STATUSES), max_weight=MAX_WEIGHT)
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
        """Stage 2: exact repeats loaded once (and rows repeating a stored fact not again),
        fixed spans, fact ids, fact-level rejections.

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
        held = con.sql("SELECT count(*) FROM (SELECT 1 FROM _tm_events LIMIT 1)").fetchall()[0][0] > 0
        stored = held and not resolve  # a replay finds the stored facts itself
        con.execute(_SQL["stored_matches"], {"stored": stored})
        for part in ("stored_repeats", "late_retractions", "stored_retractions"):
            con.execute(_SQL[part])
        con.execute(_SQL["stored_fact_ids"], {"stored": stored and self.has_fact_id})
        found = con.sql("SELECT count(*) FROM _bf_stored_fact_ids").fetchall()[0][0]
        # A hash join passes the values of a build side of at most this many rows into the scan
        # as a filter (DuckDB's default: 50), which then decodes the other columns only where an
        # id matches: the latest revisions of 500 facts of a 10M store in 0.2 s, not 0.8.
        con.execute("SET dynamic_or_filter_threshold = $n", {"n": max(50, min(found, _FILTERED_IDS))})
        con.execute(_SQL["stored_facts"], {"found": found > 0})
        con.execute("RESET dynamic_or_filter_threshold")
        if self.has_fact_id and not resolve:
            for part in ("shared_facts", "between_rows", "fact_rejects"):
                con.execute(_SQL[part])
        if resolve:
            con.execute(_SQL["replayed_before_stored"], {"stored": held})
        con.execute(_SQL["rows"])


#: The most stored facts whose ids stored_facts passes into its scan as a filter: beyond some
#: thousands, testing each row against the list costs more than it saves.
_FILTERED_IDS = 2_000


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
