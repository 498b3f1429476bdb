"""A writer's held states of one key (states.KeyFacts): the facts overlapping an interval,
found by bisection, are exactly those a scan of every fact finds."""

from __future__ import annotations

from datetime import datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from tempomem.states import KeyFacts
from tempomem.temporal.intervals import overlap
from tempomem.times import UTC

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _day(n: int | None) -> datetime | None:
    return None if n is None else T0 + timedelta(days=n)


def _state(fact_id: str, lo: int | None, hi: int | None) -> dict:
    return {"fact_id": fact_id, "valid_from": _day(lo), "valid_to": _day(hi)}


def test_a_long_fact_far_before_the_interval_is_found():
    """A year-long fact begun long before [day 200, day 201), among short ones that do not
    reach it; an open fact and one of unknown start; a fact ended just at the interval's start."""
    facts = KeyFacts()
    for state in [_state("year", 0, 365), _state("short1", 100, 101), _state("short2", 150, 200),
                  _state("open", 300, None), _state("unknown", None, 250), _state("after", 201, 202)]:
        facts.put(state)
    assert sorted(s["fact_id"] for s in facts.overlapping(_day(200), _day(201))) == ["unknown", "year"]
    # the year-long fact closed at day 120 (a revision replaces its state): no longer found
    facts.put(_state("year", 0, 120))
    assert sorted(s["fact_id"] for s in facts.overlapping(_day(200), _day(201))) == ["unknown"]
    facts.drop("unknown")
    assert facts.overlapping(_day(200), _day(201)) == []
    assert sorted(s["fact_id"] for s in facts.overlapping(None, _day(101))) == ["short1", "year"]
    assert sorted(s["fact_id"] for s in facts.overlapping(_day(301), None)) == ["open"]


_bound = st.one_of(st.none(), st.integers(0, 40))
_op = st.tuples(st.sampled_from(["put", "put", "put", "drop"]), st.integers(0, 12), _bound, _bound)


@settings(max_examples=200, deadline=None)
@given(ops=st.lists(_op, max_size=40), lo=_bound, hi=_bound)
def test_overlapping_is_the_scan_of_every_fact(ops, lo, hi):
    """Random puts (new facts, revisions moving a fact's bounds, empty intervals), drops, and
    any query interval: the bisection finds what a scan finds."""
    facts = KeyFacts()
    for op, n, a, b in ops:
        if op == "put":
            facts.put(_state(f"f{n}", a, b))
        else:
            facts.drop(f"f{n}")
    want = sorted(i for i, s in facts.by_id.items() if overlap(s["valid_from"], s["valid_to"], _day(lo), _day(hi)))
    assert sorted(s["fact_id"] for s in facts.overlapping(_day(lo), _day(hi))) == want
