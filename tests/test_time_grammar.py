"""One time grammar (SPEC §2) through every entry point: the same instant, or a rejection with
the same reason, from the API, the CLI, backfill (rows, CSV, JSON Lines), probes and decisions.

CASES is the one table: each text, then the instant it means (hand-checked) or the reason it
is refused. The grammar's two renderings (Python's ``parse_text``, DuckDB's ``time_sql`` and
``reason_sql``) are pinned to it first, then each entry point is.
"""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import pytest
from click.testing import CliRunner
from conftest import ts

import tempomem as tm
from tempomem import timegrammar as g
from tempomem.cli import cli
from tempomem.timegrammar import parse_text, reason_sql, time_sql

#: (text, the instant it means as ISO UTC, or the reason it is refused).
CASES: list[tuple[str, str]] = [
    # calendar dates, extended and basic, and the partial dates of SPEC §2
    ("2024", "2024-01-01T00:00:00Z"),
    ("2024-06", "2024-06-01T00:00:00Z"),
    ("2024-06-01", "2024-06-01T00:00:00Z"),
    ("20240601", "2024-06-01T00:00:00Z"),            # basic format: never epoch 20240601 (1970-08-23)
    ("20240601T120000Z", "2024-06-01T12:00:00Z"),
    ("20240601T1230+0530", "2024-06-01T07:00:00Z"),
    (" 2024-06-05 ", "2024-06-05T00:00:00Z"),
    # times of day, fractions, offsets
    ("2024-06-01T12", "2024-06-01T12:00:00Z"),
    ("2024-06-01T12:00", "2024-06-01T12:00:00Z"),
    ("2024-06-01 12:00:00", "2024-06-01T12:00:00Z"),
    ("2024-06-01t12:00z", "2024-06-01T12:00:00Z"),
    ("2024-06-01 12:00:00.123456+02:00", "2024-06-01T10:00:00.123456Z"),
    ("2024-06-01T12:00:00.1234567Z", "2024-06-01T12:00:00.123456Z"),   # cut to the µs, not rounded
    ("2024-06-01T12:00:00,5Z", "2024-06-01T12:00:00.500000Z"),
    ("2024-06-01T23:59:59.999999Z", "2024-06-01T23:59:59.999999Z"),
    ("2024-06-01T12:00+14:00", "2024-05-31T22:00:00Z"),
    ("2024-06-01T12:00-12:00", "2024-06-02T00:00:00Z"),
    ("2024-06-01T12:00:00-07", "2024-06-01T19:00:00Z"),
    ("2024-06-01T12:00:00+0530", "2024-06-01T06:30:00Z"),
    ("2024-06-01T12:00:00-00:00", "2024-06-01T12:00:00Z"),
    # week and ordinal dates (ISO 8601)
    ("2024-W23-1", "2024-06-03T00:00:00Z"),
    ("2024W231", "2024-06-03T00:00:00Z"),
    ("2024-W23", "2024-06-03T00:00:00Z"),
    ("2024-W01-1", "2024-01-01T00:00:00Z"),
    ("2020-W53-5", "2021-01-01T00:00:00Z"),
    ("2024-W23-1T08:00Z", "2024-06-03T08:00:00Z"),
    ("2024-153", "2024-06-01T00:00:00Z"),
    ("2024153", "2024-06-01T00:00:00Z"),
    ("2024-366", "2024-12-31T00:00:00Z"),
    ("2024-153T10:00:00+02:00", "2024-06-01T08:00:00Z"),
    # refused: fields that do not exist
    ("2024-06-01T25:00", "hour 25 is not 00-23"),
    ("2024-06-01T24:00", "hour 24 is not 00-23"),
    ("2024-06-01T12:61", "minute 61 is not 00-59"),
    ("2024-06-01T23:59:60Z", "second 60 (a leap second) cannot be stored: stored UTC times have no leap seconds"),
    ("2024-02-30", "day 30 does not exist in 2024-02"),
    ("2023-02-29", "day 29 does not exist in 2023-02"),
    ("20230229", "day 29 does not exist in 2023-02"),
    ("2024-13", "month 13 is not 01-12"),
    ("2024-00-10", "month 00 is not 01-12"),
    ("2021-W53-1", "week 53 does not exist in 2021"),
    ("2024-W23-8", "weekday 8 is not 1-7 (Monday-Sunday)"),
    ("2023-366", "day 366 of the year does not exist in 2023"),
    ("0000-01-01", "year 0000 is before year 0001"),
    ("2024-06-01T12:00+14:01", "offset +14:01 is outside -12:00 to +14:00, the offsets of real time zones"),
    ("2024-06-01T12:00-12:30", "offset -12:30 is outside -12:00 to +14:00, the offsets of real time zones"),
    ("2024-06-01T12:00+15:00", "offset +15:00 is outside -12:00 to +14:00, the offsets of real time zones"),
    ("2024-06-01T12:00+02:60", "offset minute 60 is not 00-59"),
    ("2024-06-01Z", "an offset needs a time of day (such as 2024-06-01T00:00+02:00)"),
    ("2024-06T10:00", "a time of day needs a full date (YYYY-MM-DD, YYYY-Www-D or YYYY-DDD)"),
    ("9999-12-31T23:00-02:00", g.OUT_OF_RANGE),
    # refused: not the grammar (several of these DuckDB's own cast reads, some as other instants)
    ("1e9", g.EXPONENT),
    ("1717236000", g.BARE_NUMBER),
    ("-1", g.BARE_NUMBER),
    ("202406", g.BARE_NUMBER),                        # YYYYMM is not ISO 8601 (it reads as YYMMDD)
    ("", g.EMPTY),
    ("   ", g.EMPTY),
    ("\t", g.EMPTY),
    ("10000-01-01", g.NOT_ISO),
    ("2024-6-1", g.NOT_ISO),
    ("24-06-01", g.NOT_ISO),
    ("infinity", g.NOT_ISO),
    ("epoch", g.NOT_ISO),
    ("2024-06-01 10:00 Europe/Paris", g.NOT_ISO),
    ("2024-06-01 10:00:00 +02:00", g.NOT_ISO),
    ("2024-06-01T10:00:00.Z", g.NOT_ISO),
    ("June 5th", g.NOT_ISO),
]
ACCEPTED = [(text, want) for text, want in CASES if want.endswith("Z") and want[:4].isdigit()]
REFUSED = [(text, want) for text, want in CASES if (text, want) not in ACCEPTED]
#: Refused everywhere, but in a table an empty cell is a missing value (SPEC §9), not a time.
BLANK = {"", "   "}

#: Bare numbers, as text and as numbers, with and without a unit: (value, epoch_unit, meaning).
EPOCHS: list[tuple[object, str | None, str]] = [
    ("1717236000", "s", "2024-06-01T10:00:00Z"),
    ("1717236000", "ms", "1970-01-20T21:00:36Z"),
    ("1717236000000", "ms", "2024-06-01T10:00:00Z"),
    ("1717236000.5", "s", "2024-06-01T10:00:00.500000Z"),
    ("-1", "us", "1969-12-31T23:59:59.999999Z"),
    ("20240601", "s", "2024-06-01T00:00:00Z"),        # an ISO 8601 form stays one, even with a unit
    ("1e9", "s", g.EXPONENT),
    ("1717236000000", "s", g.OUT_OF_RANGE),           # milliseconds read as seconds: year 56 000, refused
    ("1717236000", None, g.BARE_NUMBER),
    (1717236000, "s", "2024-06-01T10:00:00Z"),
    (1e9, "s", "2001-09-09T01:46:40Z"),
    (1717236000, None, g.BARE_NUMBER),
    (1e9, None, g.BARE_NUMBER),
]


def _instant(want: str) -> datetime:
    return ts(want)


def _sql(values: list[object], duck_type: str, epoch_unit: str | None) -> list[tuple[object, object]]:
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    arrow_type = {"VARCHAR": pa.string(), "BIGINT": pa.int64(), "DOUBLE": pa.float64()}[duck_type]
    con.register("t", pa.table({"i": pa.array(range(len(values))), "v": pa.array(values, arrow_type)}))
    # as backfill and the frame readers ask: the reason of the values time_sql refused
    return con.sql(f"SELECT value, CASE WHEN value IS NULL THEN {reason_sql('v', duck_type, epoch_unit)} END "
                   f"FROM (SELECT i, v, {time_sql('v', duck_type, epoch_unit)} AS value FROM t) ORDER BY i").fetchall()


# -- the grammar's two renderings ----------------------------------------------------------------

def test_python_and_sql_agree_on_every_case():
    got = _sql([text for text, _ in CASES], "VARCHAR", None)
    for (text, want), (value, reason) in zip(CASES, got, strict=True):
        python = parse_text(text)
        if (text, want) in ACCEPTED:
            assert python == _instant(want) == value and reason is None, text
        else:
            assert python == want == reason and value is None, text


@pytest.mark.parametrize("duck_type", ["VARCHAR", "BIGINT", "DOUBLE"])
def test_bare_numbers_are_epochs_only_with_a_unit(duck_type):
    cases = [(v, u, w) for v, u, w in EPOCHS if isinstance(v, str) == (duck_type == "VARCHAR")
             and (duck_type != "BIGINT" or isinstance(v, int))]
    for value, unit, want in cases:
        (got, reason), = _sql([value], duck_type, unit)
        if want.endswith("Z"):
            assert got == _instant(want) and reason is None, (value, unit)
        else:
            assert got is None and reason == want, (value, unit)
        if isinstance(value, str):
            python = parse_text(value, unit)
            assert python == (_instant(want) if want.endswith("Z") else want), (value, unit)


_PIECES = ["2024", "2023", "2021", "0000", "0001", "9999", "-", "W", "T", " ", ":", "+", "-", "Z", "z", ".", ",",
           "00", "01", "02", "06", "12", "13", "14", "23", "24", "28", "29", "30", "31", "52", "53", "59", "60", "61",
           "1", "7", "8", "153", "365", "366", "e9", "\t", "5"]


def test_python_and_sql_agree_on_generated_texts():
    """20 000 texts glued from the grammar's pieces, most of them near-misses: Python and SQL
    give the same instant or the same reason for each, with and without an epoch unit."""
    rng = random.Random(20240601)
    texts = ["".join(rng.choices(_PIECES, k=rng.randint(1, 9))) for _ in range(20_000)]
    assert sum(isinstance(parse_text(t), datetime) for t in texts) > 500  # many read as times
    for unit in (None, "ms"):
        for text, (value, reason) in zip(texts, _sql(texts, "VARCHAR", unit), strict=True):
            python = parse_text(text, unit)
            if isinstance(python, str):
                assert value is None and reason == python, (text, unit)
            else:
                assert value == python and reason is None, (text, unit)


# -- every entry point -----------------------------------------------------------------------------

def _reason_in(message: str, text: str, reason: str) -> None:
    assert f"cannot read {text!r} as a time: {reason}" in message, message


def test_api_assert_fact_and_as_of(mem):
    for i, (text, want) in enumerate(ACCEPTED):
        fact = mem.assert_fact(f"a{i}", "p", "o", valid_from=text, valid_to=_instant(want) + timedelta(microseconds=1))
        assert fact.valid_from == _instant(want), text
        # the fact holds for one microsecond: as_of finds it only at that very instant
        assert mem.as_of(text, f"a{i}")["object"].to_list() == ["o"], text
    facts = mem.current().height
    for text, reason in REFUSED:
        with pytest.raises(tm.TimeParseError) as err:
            mem.assert_fact("r", "p", "o", valid_from=text)
        _reason_in(str(err.value), text, reason)
        with pytest.raises(tm.TimeParseError) as err:
            mem.as_of(text)
        _reason_in(str(err.value), text, reason)
    assert mem.current().height == facts  # nothing written by a refused time
    for number in (1717236000, 1e9, 20240601):
        with pytest.raises(tm.TimeParseError, match="a number is not a time here"):
            mem.assert_fact("r", "p", "o", valid_from=number)


def test_cli_assert_and_as_of(tmp_path):
    runner, store = CliRunner(), str(tmp_path / "cli")
    assert runner.invoke(cli, ["--store", store, "init"]).exit_code == 0
    for i, (text, want) in enumerate(ACCEPTED):
        out = runner.invoke(cli, ["--store", store, "assert", f"c{i} p o", "--from", text, "--json"])
        assert out.exit_code == 0, out.output
        assert json.loads(out.output)["valid_from"] == _instant(want).isoformat().replace("+00:00", "Z"), text
        if i % 3 == 0:  # as-of reads --at as assert reads --from (to_utc); a third of them keeps it quick
            shown = runner.invoke(cli, ["--store", store, "as-of", f"c{i}", "--at", text, "--json"])
            assert [r["object"] for r in json.loads(shown.output)] == ["o"], text
    for text, reason in REFUSED:
        for args in (["assert", "r p o", "--from", text], ["as-of", "r", "--at", text]):
            out = runner.invoke(cli, ["--store", store, *args])
            assert out.exit_code == 1 and "Traceback" not in out.output, (text, out.output)
            line = " ".join(f"cannot read {text!r} as a time: {reason}".split())
            assert line in out.output and out.output.count("\n") == 1, out.output
    assert tm.open(store).current().height == len(ACCEPTED)


def _rows(values: list[str]) -> list[dict]:
    return [{"subject": f"b{i}", "predicate": "p", "object": "o", "recorded_at": "2025-01-01T00:00:00Z",
             "valid_from": v} for i, v in enumerate(values)]


def _check_backfill(report: tm.BackfillReport, mem: tm.Memory, cases: list[tuple[str, str]]) -> None:
    rejected = {r["row"]: r for r in report.rejected.to_dicts()}
    got = dict(mem.sql("SELECT subject, valid_from FROM facts").fetchall())
    for i, (text, want) in enumerate(cases):
        if (text, want) in ACCEPTED:
            assert i not in rejected and got[f"b{i}"] == _instant(want), text
        elif text in BLANK:
            assert i not in rejected and got[f"b{i}"] is None, text  # an empty cell: start unknown
        else:
            assert f"b{i}" not in got, text
            assert rejected[i]["field"] == "valid_from"
            assert rejected[i]["reason"] == (f"cannot read {text.strip(' ')} as a time: {want} "
                                             "(lenient=True reads it as missing)"), text


@pytest.mark.parametrize("shape", ["rows", "csv", "jsonl"])
def test_backfill(mem, tmp_path, shape):
    cases = [c for c in CASES if c[0] != "\t" or shape != "csv"]  # a CSV reader keeps no lone tab
    rows = _rows([text for text, _ in cases])
    if shape == "rows":
        data: object = rows
    elif shape == "csv":
        data = tmp_path / "in.csv"
        pl.DataFrame(rows).write_csv(data)
    else:
        data = tmp_path / "in.jsonl"
        data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    _check_backfill(mem.backfill(data), mem, cases)


@pytest.mark.parametrize("text", ["2024-06-01T12:00:00+15:00", "2024-06-01 12:00:00.1234567", "2024-06-01"])
def test_json_lines_times_are_read_by_the_grammar_not_guessed(mem, tmp_path, text):
    # a column of one form only: DuckDB's JSON reader would guess its type and read it itself
    data = tmp_path / "one_form.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in _rows([text] * 3)))
    report = mem.backfill(data)
    want = parse_text(text)
    if isinstance(want, str):
        assert report.loaded == 0 and set(report.rejected["reason"]) == {
            f"cannot read {text} as a time: {want} (lenient=True reads it as missing)"}
    else:
        assert mem.sql("SELECT DISTINCT valid_from FROM facts").fetchall() == [(want,)]


def test_backfill_refuses_a_blank_belief_time(mem):
    report = mem.backfill([{**_rows(["2024"])[0], "recorded_at": blank} for blank in BLANK])
    assert report.rejected["reason"].to_list() == ["required: a belief time is never invented"] * len(BLANK)


def test_backfill_epochs(mem):
    for unit in {u for _, u, _ in EPOCHS}:
        for kind in (str, int, float):  # one load per unit and column type
            cases = [(i, v, w) for i, (v, u, w) in enumerate(EPOCHS) if u == unit and type(v) is kind]
            if not cases:
                continue
            report = mem.backfill([{**_rows([v])[0], "subject": f"e{i}"} for i, v, _ in cases],  # type: ignore[list-item]
                                  epoch_unit=unit)
            rejected = dict(zip(report.rejected["row"], report.rejected["reason"], strict=True))
            for row, (i, value, want) in enumerate(cases):
                if want.endswith("Z"):
                    assert mem.history(f"e{i}")["valid_from"].to_list() == [_instant(want)], (value, unit)
                else:
                    assert rejected[row] == f"cannot read {value} as a time: {want} (lenient=True reads it as missing)"


def _one_microsecond_facts(mem: tm.Memory) -> None:
    mem.assert_many([{"subject": f"p{i}", "predicate": "p", "object": "o", "valid_from": _instant(want),
                      "valid_to": _instant(want) + timedelta(microseconds=1)} for i, (_, want) in enumerate(ACCEPTED)])


def test_probes(mem):
    _one_microsecond_facts(mem)
    probes = pl.DataFrame({"subject": [f"p{i}" for i in range(len(ACCEPTED))], "predicate": "p",
                           "valid_at": [text for text, _ in ACCEPTED], "believed_at": "2030-01-01"})
    result = tm.probes.divergence(mem, probes)
    assert result["as_of_object"].to_list() == ["o"] * len(ACCEPTED)
    for n, (text, reason) in enumerate([*REFUSED, *((str(v), w) for v, u, w in EPOCHS if u is None)]):
        for column in ("valid_at", "believed_at")[: 1 + (n % 4 == 0)]:  # both columns are read alike
            bad = probes.head(1).with_columns(pl.lit(text).alias(column))
            with pytest.raises(tm.TimeParseError) as err:
                tm.probes.divergence(mem, bad)
            _reason_in(str(err.value), text, reason)
    with pytest.raises(tm.TimeParseError, match=g.BARE_NUMBER[:30]):
        tm.probes.divergence(mem, probes.head(1).with_columns(valid_at=pl.lit(1717236000)))


def test_decisions(mem):
    _one_microsecond_facts(mem)
    decisions = pl.DataFrame({"decision_id": [str(i) for i in range(len(ACCEPTED))],
                              "decided_at": [text for text, _ in ACCEPTED],
                              "subject": [f"p{i}" for i in range(len(ACCEPTED))], "predicate": "p",
                              "object_used": "o"})
    assert tm.reports.decision_audit(mem, decisions)["true_object"].to_list() == ["o"] * len(ACCEPTED)
    for text, reason in REFUSED:
        with pytest.raises(tm.TimeParseError) as err:
            tm.reports.decision_audit(mem, decisions.head(1).with_columns(decided_at=pl.lit(text)))
        _reason_in(str(err.value), text, reason)


def test_the_cases_cover_the_brief():
    texts = {text for text, _ in CASES}
    assert {"20240601", "20240601T120000Z", "2024-06-01T25:00", "2024-02-30", "2024-W23-1", "2024-153", "1e9",
            "", "   ", "1717236000"} <= texts
    assert any("+14:00" in t for t, _ in ACCEPTED) and any("-12:00" in t for t, _ in ACCEPTED)
    assert any("23:59:60" in t for t, _ in REFUSED)
    assert {u for _, u, _ in EPOCHS} == {None, "s", "ms", "us"}


def test_cases_file_has_no_duplicates():
    assert len({text for text, _ in CASES}) == len(CASES)
    assert Path(__file__).name == "test_time_grammar.py"
