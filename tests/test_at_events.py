"""tm.probes.at_events (SPEC §12): any event log joined to the memory, hand-checked per event."""

from __future__ import annotations

from datetime import date

import duckdb
import polars as pl
import pytest
from conftest import ts

import tempomem as tm

ADDED = ["as_of_object", "as_believed_object", "diverged"]


@pytest.fixture
def mem(store_path, clock):
    """checkout-api's type changed on 03-10, learned 03-16; its deps are multi-valued; a retraction."""
    m = tm.open(store_path, create=True, clock=clock, predicates={"depends_on": "multi"})
    clock.set("2026-01-05T09:00Z")
    m.assert_fact("checkout-api", "instance_type", "t3.large", valid_from="2026-01-05")
    m.assert_fact("checkout-api", "depends_on", "payments-db", valid_from="2026-01-01")
    m.assert_fact("checkout-api", "depends_on", "cache", valid_from="2026-01-01")
    wrong = m.assert_fact("checkout-api", "region", "us-east-1", valid_from="2026-01-01")
    m.assert_fact("checkout-api", "instance_type", "ops-large", valid_from="2026-01-01", scope="ops")
    clock.set("2026-03-16T10:30Z")
    m.assert_fact("checkout-api", "instance_type", "m5.xlarge", valid_from="2026-03-10")
    clock.set("2026-03-20")
    m.correct(wrong.fact_id, reason="typo")
    return m


def answers(df: pl.DataFrame) -> list[tuple]:
    return df.select(ADDED).rows()


def test_each_event_gets_what_held_and_what_was_believed_at_its_instant(mem):
    events = pl.DataFrame({
        "event_id": ["e1", "e2", "e3", "e4", "e5", "e6"],
        "at": ["2026-03-15T08:00Z", "2026-01-02", "2026-03-17", "2026-03-15T08:00Z", "2026-03-15T08:00Z",
               "2026-03-21"],
        "subject": ["checkout-api"] * 6,
        "predicate": ["instance_type", "instance_type", "instance_type", "depends_on", "region", "region"],
    })
    got = tm.probes.at_events(mem, events)
    assert got.columns == ["event_id", "at", "subject", "predicate", *ADDED]
    assert answers(got) == [
        ("m5.xlarge", "t3.large", True),       # the change of 03-10 was learned on 03-16
        (None, None, False),                   # before anything was true or known: NULL = NULL
        ("m5.xlarge", "m5.xlarge", False),
        ("cache | payments-db", "cache | payments-db", False),   # multi-valued: sorted, joined
        (None, "us-east-1", True),             # believed then, retracted since
        (None, None, False),                   # after the retraction
    ]


def test_events_before_anything_was_known(mem):
    # t3.large held from 01-05, but the memory only learned it at 09:00 that day
    got = tm.probes.at_events(mem, [{"at": "2026-01-05T08:00Z", "subject": "checkout-api",
                                     "predicate": "instance_type"},
                                    {"at": "2026-01-05T09:00Z", "subject": "checkout-api",
                                     "predicate": "instance_type"}])
    assert answers(got) == [("t3.large", None, True), ("t3.large", "t3.large", False)]


def test_row_order_and_every_column_are_kept(mem):
    events = pl.DataFrame({
        "amount": [12.5, None, 3.0],
        "when": [ts("2026-03-17"), ts("2026-01-02"), ts("2026-03-15T08:00Z")],
        "tags": [["a"], [], None],
        "service": ["checkout-api", "checkout-api", "nobody"],
        "attribute": ["instance_type", "instance_type", "instance_type"],
        "day": [date(2026, 3, 17), date(2026, 1, 2), None],
    })
    got = tm.probes.at_events(mem, events, at="when", subject="service", predicate="attribute")
    assert got.drop(ADDED).equals(events)             # same columns, same order, same types, same rows
    assert answers(got) == [("m5.xlarge", "m5.xlarge", False), (None, None, False), (None, None, False)]
    assert got.schema["diverged"] == pl.Boolean and got.schema["as_of_object"] == pl.String


def test_a_scope_column_gives_each_event_its_scope_and_without_one_it_is_default(mem):
    base = {"at": ["2026-02-01"] * 3, "subject": ["checkout-api"] * 3, "predicate": ["instance_type"] * 3}
    scoped = tm.probes.at_events(mem, pl.DataFrame({**base, "scope": ["ops", None, "default"]}))
    assert answers(scoped) == [("ops-large", "ops-large", False), ("t3.large", "t3.large", False),
                               ("t3.large", "t3.large", False)]
    assert scoped["scope"].to_list() == ["ops", None, "default"]    # the column itself is untouched
    unscoped = tm.probes.at_events(mem, pl.DataFrame(base))
    assert answers(unscoped) == [("t3.large", "t3.large", False)] * 3
    assert "scope" not in unscoped.columns


def test_erased_facts_answer_nothing(mem, clock):
    clock.set("2026-03-21")
    mem.assert_fact("cust-42", "iban", "FR76", valid_from="2026-01-01")
    clock.set("2026-03-22")
    before = tm.probes.at_events(mem, [{"at": "2026-03-21T12:00Z", "subject": "cust-42", "predicate": "iban"}])
    assert answers(before) == [("FR76", "FR76", False)]
    mem.forget("cust-42", reason="GDPR request")
    after = tm.probes.at_events(mem, [{"at": "2026-03-21T12:00Z", "subject": "cust-42", "predicate": "iban"}])
    assert answers(after) == [(None, None, False)]


def test_same_answers_as_divergence_of_the_same_probes(mem):
    instants = ["2026-01-02", "2026-03-15T08:00Z", "2026-03-17", "2026-03-21"]
    keys = [("checkout-api", p) for p in ("instance_type", "depends_on", "region")]
    events = pl.DataFrame([{"at": at, "subject": s, "predicate": p} for at in instants for s, p in keys])
    # a probe without a scope matches every scope; an event without one is in `default`
    probes = events.select("subject", "predicate", valid_at="at", believed_at="at", scope=pl.lit("default"))
    div = tm.probes.divergence(mem, probes)
    assert answers(tm.probes.at_events(mem, events)) == answers(div)


def test_frames_of_any_kind(mem):
    row = {"at": "2026-03-17", "subject": "checkout-api", "predicate": "instance_type"}
    as_frame = pl.DataFrame([row])
    # a private DuckDB, closed after: the module-level default one would keep its threads, and a
    # later test that forks (test_concurrency) would deadlock in the child
    with duckdb.connect() as con:
        con.register("as_frame", as_frame)
        for events in ([row], as_frame, as_frame.to_arrow(), con.sql("SELECT * FROM as_frame")):
            assert answers(tm.probes.at_events(mem, events)) == [("m5.xlarge", "m5.xlarge", False)]
    empty = tm.probes.at_events(mem, pl.DataFrame(schema={"at": pl.String, "subject": pl.String,
                                                          "predicate": pl.String}))
    assert empty.is_empty() and empty.columns == ["at", "subject", "predicate", *ADDED]


@pytest.mark.parametrize(("events", "kwargs", "message"), [
    ([{"at": "2026-03-17", "subject": "x"}], {}, "events: no 'predicate' column"),
    ([{"ts": "2026-03-17", "subject": "x", "predicate": "p"}], {}, "events: no 'at' column"),
    ([{"at": "soon", "subject": "x", "predicate": "p"}], {}, "events: row 0, at: cannot read 'soon'"),
    ([{"at": None, "subject": "x", "predicate": "p"}], {}, "events: row 0, at: cannot read"),
    # an epoch column: no unit is guessed, and the message says what to give instead
    ([{"at": 1773734400, "subject": "x", "predicate": "p"}], {},
     "events: row 0, at: cannot read '1773734400' as a time: a bare number .*give datetimes or ISO 8601 text"),
    ([{"at": "2026-03-17", "subject": "x", "predicate": "p", "diverged": 1}], {}, "'diverged', which the result adds"),
    # a list is not a key: DuckDB's text of it ('[x]') was compared as the subject
    ([{"at": "2026-03-17", "subject": ["x"], "predicate": "p"}], {},
     r"events: the 'subject' column holds VARCHAR\[\] values; expected text"),
    ([{"at": "2026-03-17", "subject": "x", "predicate": "p", "_tm_row": 1}], {}, "'_tm_row'"),
    ([{"at": "2026-03-17", "subject": "x", "predicate": "p"}], {"subject": "at"}, "three columns"),
    ("not a frame", {}, "events:"),
])
def test_bad_events_are_typed_errors(mem, events, kwargs, message):
    with pytest.raises(tm.TempomemError, match=message):
        tm.probes.at_events(mem, events, **kwargs)
