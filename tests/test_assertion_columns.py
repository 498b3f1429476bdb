"""A large assert_many read a column at a time gives what new_assertion gives one row at a time,
and it never accepts a batch that new_assertion refuses."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import polars as pl
import pytest
from conftest import HEAVY
from hypothesis import given, settings
from hypothesis import strategies as st

import tempomem as tm
from tempomem import assertion_columns, engine
from tempomem.bulk import ops_from_news
from tempomem.writepath import new_assertion

_GOOD = st.sampled_from(["svc", "a b", " x ", "日本", "\u3000y"])
_TEXT = st.one_of(_GOOD, _GOOD, _GOOD, st.sampled_from(["", " ", "\t", "\u3000", "\x1f", "a\x00b"]))
_TIME = st.one_of(
    st.none(),
    st.sampled_from(["2024", "2024-06", "2024-06-01", "2024-06-01T10:00:00+02:00", "20240601T1000Z", "2024-W23-1",
                     " 2024-06-01 ", "2024-153"]),
    st.sampled_from(["2024-02-30", "", "yesterday", "1717236000"]),
    st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2030, 1, 1)),
    st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2030, 1, 1)).map(
        lambda d: d.replace(tzinfo=timezone(timedelta(hours=5)))),
    st.dates(min_value=date(2000, 1, 1), max_value=date(2030, 1, 1)),
)


# text only: a column mixing text and datetimes is read row by row (Arrow holds one type a column)
_CLEAN_TIME = st.one_of(st.none(), st.sampled_from(["2024", "2024-06-01", "2024-06-01T10:00:00+02:00", "2023-W05"]))


@st.composite
def _clean_row(draw):
    """A row new_assertion accepts but for the order of its times."""
    row = {"subject": draw(_GOOD), "predicate": draw(st.sampled_from(["p", "q"])), "object": draw(_GOOD)}
    for name, values in (("valid_from", _CLEAN_TIME), ("valid_to", _CLEAN_TIME), ("reference_time", _CLEAN_TIME),
                         ("scope", st.sampled_from(["", "s", None])),
                         ("text", st.one_of(st.sampled_from([None, ""]), _GOOD)),
                         ("link_type", st.sampled_from([None, "", "temporal"])),
                         ("confidence", st.floats(0, 1)), ("artifact", _GOOD),
                         ("artifacts", st.lists(_GOOD, max_size=3))):
        if draw(st.booleans()):
            row[name] = draw(values)
    return row


# past FLOAT's range (1e39) an embedding's number would be stored as an infinity
_NUMBER = st.one_of(st.floats(-2, 2), st.sampled_from([float("nan"), float("inf"), -float("inf"), 1e39, -3e38]))


@st.composite
def _row(draw):
    row = {"subject": draw(_TEXT), "predicate": draw(st.sampled_from(["p", "q", ""])), "object": draw(_TEXT)}
    for name, values in (("valid_from", _TIME), ("valid_to", _TIME), ("reference_time", _TIME),
                         ("scope", st.one_of(st.none(), _TEXT)), ("source", st.one_of(st.none(), _TEXT)),
                         ("text", st.one_of(st.none(), _TEXT)),
                         ("link_type", st.sampled_from([None, "", "entity", "causal", "semantic", "bogus"])),
                         ("confidence", st.one_of(st.none(), st.one_of(st.floats(-0.5, 1.5), st.just(float("nan"))))),
                         ("weight", st.one_of(st.none(), st.integers(-1, 3), st.sampled_from([1e13, float("inf")]))),
                         ("artifact", st.one_of(st.none(), _TEXT)),
                         ("artifacts", st.one_of(st.none(), st.lists(st.one_of(_TEXT, st.none()), max_size=3))),
                         ("embedding", st.one_of(st.none(), st.lists(_NUMBER, max_size=3)))):
        if draw(st.booleans()):
            row[name] = draw(values)
    return row


# Each example opens a DuckDB connection; TEMPOMEM_HEAVY=1 runs five times as many.
_EXAMPLES = 300 if HEAVY else 60


def _row_by_row(rows):
    try:
        return ops_from_news([new_assertion(r, row=i) for i, r in enumerate(rows)])
    except tm.TempomemError:
        return None


@settings(max_examples=_EXAMPLES, deadline=None)
@given(rows=st.lists(_row(), min_size=1, max_size=6))
def test_columns_give_what_rows_give(rows):
    expected = _row_by_row(rows)
    got = assertion_columns.checked(rows)
    if expected is None:
        assert got is None  # a batch new_assertion refuses goes row by row, which raises its error
    elif got is not None:
        assert got.cast(expected.schema).equals(expected)


@settings(max_examples=_EXAMPLES, deadline=None)
@given(rows=st.lists(_clean_row(), min_size=1, max_size=8))
def test_clean_rows_are_read_column_wise_as_row_by_row(rows):
    expected = _row_by_row(rows)
    got = assertion_columns.checked(rows)
    assert (got is None) == (expected is None)  # only an end before its start refuses these
    if expected is not None:
        assert got.cast(expected.schema).equals(expected)


def test_a_clean_frame_is_read_column_wise():
    """Hand-checked: defaults, the time grammar, naive datetimes as UTC, artifacts first-come."""
    frame = pl.DataFrame({"subject": ["a", "b"], "predicate": ["p", "p"], "object": ["x", "y"],
                          "valid_from": ["2024-06", "2024-06-01T12:00:00+02:00"],
                          "artifacts": [["m1", "m2", "m1"], None]})
    got = assertion_columns.checked(frame.to_arrow())
    assert got is not None
    row = got.to_pylist()
    assert [r["valid_from"] for r in row] == [datetime(2024, 6, 1, tzinfo=UTC), datetime(2024, 6, 1, 10, tzinfo=UTC)]
    assert [r["artifacts"] for r in row] == [["m1", "m2"], []]
    assert [(r["scope"], r["source"], r["confidence"], r["link_type"], r["weight"], r["text"]) for r in row] == [
        ("default", "user", 0.9, "entity", 1.0, "a p x"), ("default", "user", 0.9, "entity", 1.0, "b p y")]
    naive = assertion_columns.checked([{"subject": "a", "predicate": "p", "object": "x",
                                        "valid_from": datetime(2024, 1, 1, 8)}])
    assert naive is not None and naive.column("valid_from")[0].as_py() == datetime(2024, 1, 1, 8, tzinfo=UTC)


@pytest.mark.parametrize("blank", ["", " ", "\t\n", "\u3000"])
def test_an_optional_string_of_white_space_takes_its_default_on_every_path(mem, blank):
    """As backfill reads it: a blank text, scope, source or link type is no value, so a store
    never holds a blank that an export read back by backfill would turn into the default."""
    row = {"subject": "svc", "predicate": "p", "object": "x", "text": blank, "scope": blank, "source": blank,
           "link_type": blank}
    one = new_assertion(row)
    assert (one["text"], one["scope"], one["source"], one["link_type"]) == ("svc p x", "default", "user", "entity")
    batch = [dict(row, subject=f"s{i}") for i in range(3000)]  # read a column at a time, or left to the rows
    facts = mem.assert_many(batch)
    assert {(f.text, f.scope, f.source, f.link_type) for f in facts[:2]} == {
        ("s0 p x", "default", "user", "entity"), ("s1 p x", "default", "user", "entity")}
    assert mem.sql("SELECT count(*) FROM facts WHERE text = concat_ws(' ', subject, predicate, object) "
                   "AND scope = 'default' AND source = 'user' AND link_type = 'entity'").fetchall() == [(3000,)]


@pytest.mark.parametrize("bad, message", [
    ({"valid_from": "2024-02-30"}, "row 1, valid_from: cannot read '2024-02-30'"),
    ({"object": " "}, "row 1, object: must not be empty"),
    ({"confidence": 2.0}, "row 1, confidence: must be between"),
    ({"valid_from": 5}, "row 1, valid_from: cannot read 5 as a time"),
])
def test_a_bad_row_of_a_large_batch_names_its_row_and_field(tmp_path, monkeypatch, bad, message):
    mem = tm.open(tmp_path / "s", create=True)
    monkeypatch.setattr(engine, "SET_BASED_FROM", 0)
    rows = [{"subject": "a", "predicate": "p", "object": "x"}, {"subject": "b", "predicate": "p", "object": "y", **bad}]
    with pytest.raises(tm.TempomemError, match=message.replace("(", r"\(")):
        mem.assert_many(rows)
    assert mem.sql("SELECT count(*) FROM revisions").fetchall() == [(0,)]


def test_most_clean_batches_are_read_column_wise():
    """The property above is not vacuous: clean rows of every kind are accepted column-wise."""
    rows = [{"subject": "a", "predicate": "p", "object": "x", "valid_from": datetime(2024, 1, 1, tzinfo=UTC),
             "valid_to": date(2025, 1, 1), "confidence": 1, "weight": 2.5, "artifact": "m", "artifacts": ["n"],
             "embedding": [0.5, 1.0], "link_type": "causal", "scope": "s", "source": "tool", "text": "t"}]
    got = assertion_columns.checked(rows)
    assert got is not None
    assert got.cast(_row_by_row(rows).schema).equals(_row_by_row(rows))


def test_categorical_and_enum_columns_are_read_column_wise():
    """Polars' Categorical and Enum columns (Arrow dictionaries) are strings to the column path."""
    frame = pl.DataFrame({"subject": ["a", "b"], "predicate": ["p", "p"], "object": ["x", "y"],
                          "source": ["tool", "user"]}).with_columns(
        pl.col("predicate").cast(pl.Categorical), pl.col("object").cast(pl.Enum(["x", "y"])),
        pl.col("source").cast(pl.Categorical))
    got = assertion_columns.checked(frame.to_arrow())
    assert got is not None
    expected = _row_by_row(frame.to_dicts())
    assert got.cast(expected.schema).equals(expected)
    assert got.select(["predicate", "object", "source"]).to_pylist() == [
        {"predicate": "p", "object": "x", "source": "tool"}, {"predicate": "p", "object": "y", "source": "user"}]


@pytest.mark.parametrize("bad", [float("inf"), float("nan"), 1e39, None])
def test_an_embedding_of_numbers_a_float_cannot_hold_is_refused_on_every_path(mem, bad):
    rows = [{"subject": f"s{i}", "predicate": "p", "object": "o", "embedding": [0.5, 1.0]} for i in range(3)]
    rows[1]["embedding"] = [bad, 1.0]
    for batch in (rows[1:2], rows * 1000):  # row by row, and read a column at a time (3,000 rows)
        with pytest.raises(tm.TempomemError, match="embedding: "):
            mem.assert_many(batch)
    frame = pl.DataFrame({"subject": ["s"], "predicate": ["p"], "object": ["o"], "recorded_at": ["2026-01-01"],
                          "embedding": [[bad, 1.0]]}, schema_overrides={"embedding": pl.List(pl.Float64)})
    assert mem.backfill(frame).rejected.select("field", "reason").rows() == [
        ("embedding", "expected a list of finite numbers (each within the range of a 32-bit float)")]
    assert mem.sql("SELECT count(*) FROM revisions").fetchall() == [(0,)]


def test_a_flag_is_not_a_number_on_any_path(mem):
    """True was read as a confidence of 1.0 (Python's float(True), DuckDB's cast): refused."""
    rows = [{"subject": f"s{i}", "predicate": "p", "object": "o", "confidence": True} for i in range(3)]
    for batch in (rows[:1], rows * 1000):  # row by row, and a large batch
        with pytest.raises(tm.TempomemError, match="confidence: expected a number, got True"):
            mem.assert_many(batch)
    with pytest.raises(tm.TempomemError, match="weight: expected a number, got False"):
        mem.assert_fact("s", "p", "o", weight=False)
    frame = pl.DataFrame({"subject": ["s"], "predicate": ["p"], "object": ["o"], "recorded_at": ["2026-01-01"],
                          "confidence": [True]})
    assert mem.backfill(frame).rejected.select("field", "value", "reason").rows() == [
        ("confidence", "true", "must be a number between 0 and 1")]
    assert mem.sql("SELECT count(*) FROM revisions").fetchall() == [(0,)]


@pytest.mark.parametrize("weight", [float("inf"), 1e13, -1.0])
def test_a_weight_past_the_limit_is_refused_on_every_path(mem, weight):
    rows = [{"subject": f"s{i}", "predicate": "p", "object": "o", "weight": 1.0} for i in range(3)]
    rows[1]["weight"] = weight
    for batch in (rows[1:2], rows * 1000):
        with pytest.raises(tm.TempomemError, match=r"weight: must be between 0\.0 and 1000000000000\.0"):
            mem.assert_many(batch)
    frame = pl.DataFrame({"subject": ["s"], "predicate": ["p"], "object": ["o"], "recorded_at": ["2026-01-01"],
                          "weight": [weight]})
    assert mem.backfill(frame).rejected.select("field", "reason").rows() == [
        ("weight", "must be a number from 0 to 1000000000000.0")]
