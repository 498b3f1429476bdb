"""A writer's held states of one key (states.KeyFacts): the facts overlapping an interval, found
by comparing rows a column at a time and by bisection, are exactly those a scan of every fact finds."""

from __future__ import annotations

from datetime import datetime, timedelta

import pyarrow as pa
import pytest
from conftest import ts
from hypothesis import given, settings
from hypothesis import strategies as st

import tempomem as tm
from tempomem.schema import EVENT_SCHEMA, WRITER_COLUMNS
from tempomem.states import KeyFacts
from tempomem.temporal.intervals import overlap
from tempomem.times import UTC

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _day(n: int | None) -> datetime | None:
    return None if n is None else T0 + timedelta(days=n)


def _state(fact_id: str, lo: int | None, hi: int | None) -> dict:
    return {"fact_id": fact_id, "valid_from": _day(lo), "valid_to": _day(hi)}


def _rows(states: list[dict]) -> pa.Table:
    """States as the rows a writer loads a key from (its latest believed revisions)."""
    schema = pa.schema([EVENT_SCHEMA.field(name) for name in WRITER_COLUMNS])
    return pa.Table.from_pylist([{**s, "revision": 1, "recorded_at": T0} for s in states], schema=schema)


def _ids(states: list[dict]) -> list[str]:
    return sorted(s["fact_id"] for s in states)


def test_a_long_fact_far_before_the_interval_is_found():
    """A year-long fact begun long before [day 200, day 201), among short ones that do not
    reach it; an open fact and one of unknown start; a fact ended just at the interval's start."""
    facts = KeyFacts()
    for state in [_state("year", 0, 365), _state("short1", 100, 101), _state("short2", 150, 200),
                  _state("open", 300, None), _state("unknown", None, 250), _state("after", 201, 202)]:
        facts.put(state)
    assert _ids(facts.overlapping(_day(200), _day(201))) == ["unknown", "year"]
    # the year-long fact closed at day 120 (a revision replaces its state): no longer found
    facts.put(_state("year", 0, 120))
    assert _ids(facts.overlapping(_day(200), _day(201))) == ["unknown"]
    facts.drop("unknown")
    assert facts.overlapping(_day(200), _day(201)) == []
    assert _ids(facts.overlapping(None, _day(101))) == ["short1", "year"]
    assert _ids(facts.overlapping(_day(301), None)) == ["open"]


def test_a_key_loaded_as_rows_makes_states_only_of_the_facts_asked_for():
    """A key loaded with many facts keeps them as rows: a commit's interval makes states of the
    facts overlapping it alone (here a year-long fact, one of unknown start and an open one);
    a put replaces a row's fact, a drop removes it, and every fact is still there, once."""
    facts = KeyFacts(_rows([_state("year", 0, 365), _state("short1", 100, 101), _state("short2", 150, 200),
                            _state("open", 300, None), _state("unknown", None, 250), _state("after", 201, 202),
                            _state("empty", 200, 200)]))
    assert _ids(facts.overlapping(_day(200), _day(201))) == ["unknown", "year"]
    assert sorted(facts._made) == ["unknown", "year"]  # the others are still rows
    facts.put(_state("open", 300, 310))  # the open fact closed by a commit: no longer a row
    facts.drop("short1")
    assert _ids(facts.overlapping(_day(305), None)) == ["open", "year"]
    assert _ids(facts.overlapping(_day(0), _day(400))) == ["after", "open", "short2", "unknown", "year"]
    assert facts.get("short1") is None and facts.get("after")["valid_to"] == _day(202)
    assert sorted(facts.fact_ids()) == ["after", "empty", "open", "short2", "unknown", "year"]
    assert _ids(facts.states()) == ["after", "empty", "open", "short2", "unknown", "year"]


_bound = st.one_of(st.none(), st.integers(0, 40))
_op = st.tuples(st.sampled_from(["put", "put", "put", "drop", "get"]), st.integers(0, 12), _bound, _bound)


@settings(max_examples=200, deadline=None)
@given(loaded=st.lists(st.tuples(_bound, _bound), max_size=12), ops=st.lists(_op, max_size=40),
       queries=st.lists(st.tuples(_bound, _bound), min_size=1, max_size=3))
def test_overlapping_is_the_scan_of_every_fact(loaded, ops, queries):
    """A key loaded from rows (or from none), then random puts (new facts, revisions moving a
    fact's bounds, empty intervals), drops and gets, and queries of any interval between them:
    the rows compared a column at a time and the bisection of the states made find what a
    scan of every fact finds, and the key holds each fact once."""
    facts = KeyFacts(_rows([_state(f"f{n}", a, b) for n, (a, b) in enumerate(loaded)]) if loaded else None)
    model = {f"f{n}": (_day(a), _day(b)) for n, (a, b) in enumerate(loaded)}
    for (op, n, a, b), (lo, hi) in zip(ops, queries * len(ops), strict=False):
        if op == "put":
            facts.put(_state(f"f{n}", a, b))
            model[f"f{n}"] = (_day(a), _day(b))
        elif op == "drop":
            facts.drop(f"f{n}")
            model.pop(f"f{n}", None)
        else:
            got = facts.get(f"f{n}")
            assert (got["valid_from"], got["valid_to"]) == model[f"f{n}"] if got else f"f{n}" not in model
        want = sorted(i for i, (f, t) in model.items() if overlap(f, t, _day(lo), _day(hi)))
        assert _ids(facts.overlapping(_day(lo), _day(hi))) == want
    assert sorted(facts.fact_ids()) == sorted(model)
    assert sorted((s["fact_id"], s["valid_from"], s["valid_to"]) for s in facts.states()) == sorted(
        (i, f, t) for i, (f, t) in model.items())


def test_a_writer_that_holds_nothing_finds_the_fact_it_changes_by_its_id(mem, clock, store_path):
    """A writer (a new process: a store opened again) changing a fact it never read finds the
    fact's key by its id: a made id by the time it carries first, an id given to backfill by
    the id alone, even one that looks made but carries another time; a retracted fact is found
    to say so, an unknown id is not found."""
    clock.set("2026-02-01")
    looks_made = "0" * 28 + "1"  # a made id's form, carrying 1970: the fact was recorded in 2026
    mem.backfill([{"fact_id": fid, "subject": s, "predicate": "owner", "object": "ana", "valid_from": ts("2026-01-01"),
                   "recorded_at": ts("2026-01-02")} for fid, s in [("h-1", "svc1"), (looks_made, "svc2")]])
    clock.advance(days=1)
    made = mem.assert_fact("svc3", "owner", "bo", valid_from="2026-01-05").fact_id
    clock.advance(days=1)
    wrong = mem.assert_fact("svc4", "owner", "cy", valid_from="2026-01-05").fact_id
    clock.advance(days=1)
    mem.correct(wrong, reason="never true")

    def fresh() -> tm.Memory:
        clock.advance(days=1)
        return tm.open(store_path, clock=clock)

    ended = fresh().invalidate("h-1", at="2026-01-20", reason="left")
    assert (ended.subject, ended.valid_to, ended.status) == ("svc1", ts("2026-01-20"), "ended")
    assert fresh().invalidate(looks_made, at="2026-01-21", reason="left").subject == "svc2"
    fixed = fresh().correct(made, reason="typo")
    assert (fixed.subject, fixed.object, fixed.status) == ("svc3", "bo", "retracted")
    with pytest.raises(tm.TempomemError, match="is retracted"):
        fresh().correct(wrong, reason="again")
    with pytest.raises(tm.FactNotFoundError):
        fresh().invalidate("no-such-fact", at="2026-01-22", reason="left")
    assert mem.current("svc1").height == 0 and mem.as_of("2026-01-19", "svc1")["object"].to_list() == ["ana"]
