"""Hostile input through assert_fact, backfill and the CLI (SPEC §1.7).

Garbage must end in a typed error (a ``TempomemError``) or a rejected-row report, never in
another exception, and never in a partial write; SQL in any field is plain text.
"""

from __future__ import annotations

import json
import math
from datetime import date, datetime, timedelta, timezone

import hypothesis.strategies as st
import polars as pl
from click.testing import CliRunner
from conftest import HEAVY
from hypothesis import HealthCheck, given, settings

import tempomem as tm
from tempomem.cli import cli

EXAMPLES = 300 if HEAVY else 40
SQL = "x'); DROP TABLE facts; --"

nasty_text = st.one_of(
    st.text(max_size=30),
    st.sampled_from([SQL, "", " ", "\x00", "a\x00b", "'", '"', "\\", "%", "$1", "?", "NULL", "\u202e", "🧨" * 5]),
    st.just("x" * 200_000),
)
nasty_time = st.one_of(
    st.none(), st.text(max_size=20),
    st.sampled_from(["0001-01-01", "9999-12-31T23:59:59.999999Z", "1969-12-31T23:59:59Z", "2024-13", "2024-02-30",
                     "10000-01-01", "-0001", "2024-06-01T25:00", "NaN", "now", SQL]),
    st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)),
    st.datetimes(timezones=st.just(timezone(timedelta(hours=-12)))),
    st.dates(),
    st.integers(), st.floats(allow_nan=True),
)
nasty_number = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True), st.integers(-10**20, 10**20),
                         st.text(max_size=5), st.booleans())
any_value = st.one_of(nasty_text, nasty_time, nasty_number, st.lists(st.integers(), max_size=3))

SETTINGS = settings(max_examples=EXAMPLES, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def _version(mem: tm.Memory) -> int:
    return mem._storage.latest_version()


@SETTINGS
@given(subject=nasty_text, predicate=nasty_text, obj=nasty_text, valid_from=nasty_time, valid_to=nasty_time,
       confidence=nasty_number, source=st.one_of(nasty_text, nasty_number))
def test_assert_fact_takes_garbage_with_a_typed_error_or_stores_it_verbatim(
        mem, subject, predicate, obj, valid_from, valid_to, confidence, source):
    before = _version(mem)
    try:
        fact = mem.assert_fact(subject, predicate, obj, valid_from=valid_from, valid_to=valid_to,
                               confidence=confidence, source=source)
    except tm.TempomemError:
        assert _version(mem) == before, "a refused write changed the store"
        return
    assert (fact.subject, fact.predicate, fact.object) == (subject, predicate, obj)
    assert confidence is None or (isinstance(confidence, (int, float)) and not math.isnan(confidence)
                                  and 0 <= confidence <= 1)
    stored = mem.history(subject, predicate)
    assert fact.fact_id in stored["fact_id"].to_list()
    assert stored.filter(pl.col("fact_id") == fact.fact_id)["object"].to_list() == [obj]


def test_sql_in_every_field_is_plain_text(mem, clock):
    fact = mem.assert_fact(SQL, SQL, SQL, valid_from="2025-01-01", source=SQL, text=SQL)
    clock.advance(days=1)
    assert mem.current(SQL, SQL)["object"].to_list() == [SQL]
    assert mem.as_of("2025-06-01", SQL)["text"].to_list() == [SQL]
    assert mem.history(SQL)["source"].to_list() == [SQL]
    assert mem.sql("SELECT count(*) FROM facts WHERE subject = $s", params={"s": SQL}).fetchall() == [(1,)]
    mem.invalidate(fact.fact_id, at="2025-03-01", reason=SQL)
    assert mem.get(fact.fact_id).reason == SQL
    assert mem.check().ok


def test_a_bad_row_in_a_batch_writes_nothing(mem):
    rows = [{"subject": "a", "predicate": "p", "object": str(i)} for i in range(50)]
    rows[37]["valid_from"] = "2024-99-99"
    before = _version(mem)
    try:
        mem.assert_many(rows)
    except tm.TempomemError as exc:
        assert "row 37" in str(exc) and "valid_from" in str(exc)
    else:
        raise AssertionError("an unparseable time was accepted")
    assert _version(mem) == before and mem.history("a").is_empty()


@SETTINGS
@given(rows=st.lists(st.fixed_dictionaries({
    "subject": any_value, "predicate": any_value, "object": any_value, "recorded_at": any_value,
    "valid_from": any_value, "valid_to": any_value, "confidence": any_value, "retracted_at": any_value,
}), min_size=1, max_size=6), kind=st.sampled_from(["csv", "jsonl", "frame"]), strict=st.booleans())
def test_backfill_of_garbage_rejects_rows_or_raises_typed_errors(mem, tmp_path_factory, rows, kind, strict):
    folder = tmp_path_factory.mktemp("input")
    before = _version(mem)
    texts = [{k: (v.isoformat() if isinstance(v, (datetime, date)) else v) for k, v in r.items()} for r in rows]
    if kind == "jsonl":
        data = folder / "in.jsonl"
        data.write_text("".join(json.dumps(r) + "\n" for r in texts) + '{"broken": \n')
    elif kind == "csv":
        data = folder / "in.csv"
        pl.DataFrame([{k: None if v is None else str(v) for k, v in r.items()} for r in texts]).write_csv(data)
    else:
        data = texts
    try:
        report = mem.backfill(data, strict=strict)
    except tm.TempomemError:
        assert _version(mem) == before, "a refused backfill changed the store"
        return
    assert report.loaded + report.rejected.height <= report.rows_read
    if report.loaded == 0:
        assert _version(mem) == before
    assert set(mem.check().problems["kind"].to_list()) <= {
        "overlapping_values", "valid_from_after_valid_to", "belief_overlap"}, "backfill left a broken store"


@SETTINGS
@given(args=st.lists(st.one_of(nasty_text.filter(lambda s: "\x00" not in s and len(s) < 1000),
                               st.sampled_from(["--from", "--to", "--at", "--reason", "--json", "--confidence",
                                                "--believed-at", "-x", "--store"])), max_size=6),
       command=st.sampled_from(["assert", "invalidate", "correct", "current", "as-of", "history", "timeline",
                                "check", "sql", "backfill"]))
def test_cli_garbage_gets_one_line_and_a_non_zero_exit(store_path, args, command):
    if not store_path.exists():
        tm.open(store_path, create=True)
    runner = CliRunner()
    result = runner.invoke(cli, ["--store", str(store_path), command, *args])
    if result.exit_code == 0:
        return
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit), \
        f"{command} {args!r} raised {result.exception!r}"
    assert "Traceback" not in result.output
