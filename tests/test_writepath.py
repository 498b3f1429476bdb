"""The write path of SPEC §5: every row of the decision table, both arities and policies."""

from __future__ import annotations

import re

import pytest
from conftest import ts

import tempomem as tm


def _state(mem, fact_id):
    f = mem.get(fact_id)
    return f.object, f.valid_from, f.valid_to, f.status


@pytest.fixture
def multi(store_path, clock):
    return tm.open(store_path, create=True, clock=clock, predicates={"works_on": "multi"})


# -- same object, intervals overlap: a duplicate -------------------------------------------------


def test_duplicate_returns_existing_fact_and_merges_artifacts(mem, clock):
    clock.set("2026-01-02")
    s = mem.assert_fact("k", "p", "a", valid_from="2025-01", artifact="msg-1")
    clock.advance(days=1)
    n = mem.assert_fact("k", "p", "a", valid_from="2025-03", artifact="msg-2")
    assert n.fact_id == s.fact_id
    assert n.artifacts == ("msg-1", "msg-2")
    assert n.valid_from == ts("2025-01")  # a known start is kept
    assert mem.history("k").height == 1


def test_duplicate_fills_unknown_start_and_missing_end(mem, clock):
    clock.set("2026-01-02")
    s = mem.assert_fact("k", "p", "a")
    assert (s.valid_from, s.valid_from_inferred) == (None, True)
    clock.advance(days=1)
    n = mem.assert_fact("k", "p", "a", valid_from="2025-02", valid_to="2025-12")
    assert n.fact_id == s.fact_id
    assert (n.valid_from, n.valid_to, n.valid_from_inferred, n.status) == (ts("2025-02"), ts("2025-12"), False, "ended")


def test_a_merge_weighs_the_whole_merged_fact_against_the_key(mem, clock):
    """The conflict rows apply to the fact N merged into, over its whole interval: here x
    [01, 03) overlaps y [02, 04) (two values loaded as given), and N = x [01-10, 01-20) overlaps
    only x. Merged, x starts before y and is closed at y's start, as if N had been that fact.
    A commit reads only the facts that can take part (states.relevant_states): y overlaps x but
    not N, and must be read all the same; z, apart from both, need not be."""
    clock.set("2026-06-01")
    rows = [("s1", "x", "2026-01-01", "2026-03-01"), ("t", "y", "2026-02-01", "2026-04-01"),
            ("u", "z", "2026-06-01", "2026-07-01")]
    mem.backfill([{"fact_id": i, "subject": "svc", "predicate": "owner", "object": o, "valid_from": ts(lo),
                   "valid_to": ts(hi), "recorded_at": ts("2026-01-01")} for i, o, lo, hi in rows])
    clock.advance(days=1)
    n = mem.assert_fact("svc", "owner", "x", valid_from="2026-01-10", valid_to="2026-01-20")
    assert (n.fact_id, n.valid_to, n.status, n.superseded_by) == ("s1", ts("2026-02-01"), "superseded", "t")
    assert _state(mem, "t") == ("y", ts("2026-02-01"), ts("2026-04-01"), "ended")


def test_duplicate_never_overwrites_a_stored_end(mem, clock):
    clock.set("2026-01-02")
    s = mem.assert_fact("k", "p", "a", valid_from="2025-01", valid_to="2025-06")
    clock.advance(days=1)
    n = mem.assert_fact("k", "p", "a", valid_from="2025-02", valid_to="2025-09")
    assert n.fact_id == s.fact_id
    assert n.valid_to == ts("2025-06")


def test_duplicate_of_multi_valued_value(multi, clock):
    clock.set("2026-01-02")
    s = multi.assert_fact("ada", "works_on", "tempomem", valid_from="2025")
    clock.advance(days=1)
    assert multi.assert_fact("ada", "works_on", "tempomem", valid_from="2025-05").fact_id == s.fact_id


def test_merge_that_only_adds_nothing_writes_nothing(mem, clock, store_path):
    clock.set("2026-01-02")
    mem.assert_fact("k", "p", "a", valid_from="2025-01")
    version = mem._storage.latest_version()
    clock.advance(days=1)
    mem.assert_fact("k", "p", "a", valid_from="2025-02")
    assert mem._storage.latest_version() == version


# -- different object ----------------------------------------------------------------------------


def test_different_object_without_overlap_changes_nothing(mem, clock):
    clock.set("2026-01-02")
    s = mem.assert_fact("k", "p", "a", valid_from="2025-01", valid_to="2025-03")
    clock.advance(days=1)
    n = mem.assert_fact("k", "p", "b", valid_from="2025-03")  # meets: no shared instant
    assert _state(mem, s.fact_id) == ("a", ts("2025-01"), ts("2025-03"), "ended")
    assert _state(mem, n.fact_id) == ("b", ts("2025-03"), None, "live")


def test_empty_span_overlaps_nothing(mem, clock):
    clock.set("2026-01-02")
    s = mem.assert_fact("k", "p", "a", valid_from="2025-01")
    clock.advance(days=1)
    n = mem.assert_fact("k", "p", "b", valid_from="2025-05", valid_to="2025-05")
    assert _state(mem, s.fact_id) == ("a", ts("2025-01"), None, "live")
    assert n.status == "ended"
    assert mem.as_of("2025-05", "k")["object"].to_list() == ["a"]


def test_older_value_is_closed_at_the_new_start(mem, clock):
    clock.set("2026-01-02")
    s = mem.assert_fact("k", "p", "a", valid_from="2025-01")
    clock.advance(days=1)
    n = mem.assert_fact("k", "p", "b", valid_from="2025-06")
    old = mem.get(s.fact_id)
    assert (old.valid_to, old.status, old.superseded_by) == (ts("2025-06"), "superseded", n.fact_id)
    assert old.retracted_at is None


def test_closing_drops_what_lay_after_a_bounded_new_value(mem, clock):
    clock.set("2026-01-02")
    s = mem.assert_fact("k", "p", "a", valid_from="2025-01")
    clock.advance(days=1)
    mem.assert_fact("k", "p", "b", valid_from="2025-06", valid_to="2025-08")
    assert mem.get(s.fact_id).valid_to == ts("2025-06")
    assert mem.as_of("2025-09", "k").is_empty()  # tempomem does not assume a resumes


def test_unknown_start_counts_as_earliest_and_is_closed(mem, clock):
    clock.set("2026-01-02")
    s = mem.assert_fact("k", "p", "a")
    clock.advance(days=1)
    n = mem.assert_fact("k", "p", "b", valid_from="2025-06")
    old = mem.get(s.fact_id)
    assert (old.valid_from, old.valid_to, old.superseded_by) == (None, ts("2025-06"), n.fact_id)


def test_text_about_an_earlier_time_is_stored_closed(mem, clock):
    clock.set("2026-01-02")
    s = mem.assert_fact("k", "p", "b", valid_from="2025-06")
    clock.advance(days=1)
    n = mem.assert_fact("k", "p", "a", valid_from="2025-01")
    assert (n.valid_to, n.status, n.superseded_by) == (ts("2025-06"), "superseded", s.fact_id)
    assert _state(mem, s.fact_id) == ("b", ts("2025-06"), None, "live")
    assert mem.as_of("2025-03", "k")["object"].to_list() == ["a"]


def test_same_start_retracts_the_old_value(mem, clock):
    clock.set("2026-01-02")
    s = mem.assert_fact("k", "p", "a", valid_from="2025-01")
    clock.advance(days=1)
    n = mem.assert_fact("k", "p", "b", valid_from="2025-01")
    old = mem.get(s.fact_id)
    assert (old.status, old.valid_to, old.retracted_at) == ("retracted", None, ts("2026-01-03"))
    assert n.fact_id in old.reason
    assert mem.as_of("2025-06", "k")["object"].to_list() == ["b"]


def test_same_object_without_overlap_is_a_new_fact(mem, clock):
    clock.set("2026-01-02")
    s = mem.assert_fact("k", "p", "a", valid_from="2025-01", valid_to="2025-03")
    clock.advance(days=1)
    n = mem.assert_fact("k", "p", "a", valid_from="2025-06")
    assert n.fact_id != s.fact_id
    assert mem.history("k").height == 2


def test_multi_valued_keeps_both_values(multi, clock):
    clock.set("2026-01-02")
    a = multi.assert_fact("ada", "works_on", "tempomem", valid_from="2025-01")
    clock.advance(days=1)
    b = multi.assert_fact("ada", "works_on", "billing", valid_from="2025-01")
    c = multi.assert_fact("ada", "works_on", "search", valid_from="2024-01")
    assert sorted(multi.as_of("2025-06", "ada")["object"].to_list()) == ["billing", "search", "tempomem"]
    for f in (a, b, c):
        assert multi.get(f.fact_id).status == "live"


# -- the unknown-start rule ------------------------------------------------------------------------


def test_unknown_start_on_empty_key_stays_null_not_now(mem, clock):
    clock.set("2026-01-02")
    f = mem.assert_fact("k", "p", "a")
    assert (f.valid_from, f.valid_from_inferred) == (None, True)
    assert mem.as_of("1990-01-01", "k")["object"].to_list() == ["a"]


def test_unknown_start_against_a_believed_value_takes_the_reference_time(mem, clock):
    clock.set("2026-01-02")
    s = mem.assert_fact("k", "p", "a", valid_from="2025-01")
    clock.set("2026-02-01")
    n = mem.assert_fact("k", "p", "b", reference_time="2026-01-20")
    assert (n.valid_from, n.valid_from_inferred) == (ts("2026-01-20"), True)
    assert mem.get(s.fact_id).valid_to == ts("2026-01-20")
    clock.set("2026-03-01")
    m = mem.assert_fact("k", "p", "c")  # default reference: the commit time
    assert m.valid_from == ts("2026-03-01")


def test_unknown_start_with_end_before_reference_stays_null(mem, clock):
    clock.set("2026-01-02")
    mem.assert_fact("k", "p", "a", valid_from="2025-06")
    clock.advance(days=1)
    n = mem.assert_fact("k", "p", "b", valid_to="2025-06")
    assert (n.valid_from, n.valid_to, n.status) == (None, ts("2025-06"), "ended")
    assert mem.as_of("2025-01", "k")["object"].to_list() == ["b"]


# -- policies and invalidate -------------------------------------------------------------------------


def test_reject_policy_raises_and_writes_nothing(store_path, clock):
    mem = tm.open(store_path, create=True, clock=clock, policy="reject")
    clock.set("2026-01-02")
    s = mem.assert_fact("k", "p", "a", valid_from="2025-01")
    version = mem._storage.latest_version()
    clock.advance(days=1)
    with pytest.raises(tm.ConflictError, match="overlapping value") as err:
        mem.assert_many([
            {"subject": "other", "predicate": "p", "object": "x"},
            {"subject": "k", "predicate": "p", "object": "b", "valid_from": "2025-06"},
        ])
    assert s.fact_id in str(err.value)
    assert mem._storage.latest_version() == version
    assert mem.history("other").is_empty()
    assert _state(mem, s.fact_id) == ("a", ts("2025-01"), None, "live")


def test_reject_policy_per_predicate(mem, clock):
    mem.declare("iban", policy="reject")
    clock.set("2026-01-02")
    mem.assert_fact("c42", "iban", "FR76-1", valid_from="2025-01")
    mem.assert_fact("c42", "city", "Paris", valid_from="2025-01")
    clock.advance(days=1)
    with pytest.raises(tm.ConflictError):
        mem.assert_fact("c42", "iban", "DE89-2", valid_from="2025-06")
    mem.assert_fact("c42", "city", "Lyon", valid_from="2025-06")  # default policy still applies
    assert mem.as_of("2025-07", "c42")["object"].to_list() == ["Lyon", "FR76-1"]


def test_invalidate_into_another_value_is_a_conflict(mem, clock):
    clock.set("2026-01-02")
    a = mem.assert_fact("k", "p", "a", valid_from="2025-01")
    clock.advance(days=1)
    mem.assert_fact("k", "p", "b", valid_from="2025-06")
    clock.advance(days=1)
    with pytest.raises(tm.ConflictError, match="overlapping value"):
        mem.invalidate(a.fact_id, at="2025-09", reason="later end")
    ended = mem.invalidate(a.fact_id, at="2025-04", reason="earlier end")  # moving it earlier is fine
    assert (ended.valid_to, ended.status, ended.reason) == (ts("2025-04"), "ended", "earlier end")


def test_invalidate_or_correct_a_retracted_fact_is_refused(mem, clock):
    clock.set("2026-01-02")
    f = mem.assert_fact("k", "p", "a", valid_from="2025-01")
    clock.advance(days=1)
    mem.correct(f.fact_id, reason="wrong")
    with pytest.raises(tm.TempomemError, match="retracted"):
        mem.invalidate(f.fact_id, at="2025-06", reason="x")
    with pytest.raises(tm.TempomemError, match="retracted"):
        mem.correct(f.fact_id, reason="x")


def test_superseded_then_invalidated_is_ended(mem, clock):
    clock.set("2026-01-02")
    a = mem.assert_fact("k", "p", "a", valid_from="2025-01")
    clock.advance(days=1)
    mem.assert_fact("k", "p", "b", valid_from="2025-06")
    clock.advance(days=1)
    assert mem.invalidate(a.fact_id, at="2025-03", reason="left early").status == "ended"


# -- batches and the store clock -------------------------------------------------------------------


def test_batch_applies_rows_in_order_in_one_commit(mem, clock):
    clock.set("2026-01-02")
    facts = mem.assert_many([
        {"subject": "k", "predicate": "p", "object": "a", "valid_from": "2025-01"},
        {"subject": "k", "predicate": "p", "object": "b", "valid_from": "2025-06"},
        {"subject": "k", "predicate": "p", "object": "a", "valid_from": "2025-02"},  # duplicate of row 0
    ])
    assert facts[2].fact_id == facts[0].fact_id
    revs = mem.history("k", revisions=True)
    # only each fact's final state is a belief: one revision per fact, one recorded_at
    assert revs.select("object", "revision", "valid_to", "status").sort("object").rows() == [
        ("a", 1, ts("2025-06"), "superseded"), ("b", 1, None, "live")]
    assert revs["recorded_at"].unique().to_list() == [ts("2026-01-02")]


def test_batch_with_a_bad_row_writes_nothing_and_names_the_row(mem, clock):
    import polars as pl

    version = mem._storage.latest_version()
    rows = pl.DataFrame({"subject": ["a", "b"], "predicate": ["p", "p"], "object": ["x", "y"],
                         "valid_from": ["2025-01", "not a time"]})
    with pytest.raises(tm.TimeParseError, match="row 1, valid_from"):
        mem.assert_many(rows)
    assert mem._storage.latest_version() == version


def test_store_clock_is_strictly_increasing(mem, clock):
    clock.set("2026-01-02")
    a = mem.assert_fact("k", "p", "a", valid_from="2025-01")
    b = mem.assert_fact("k", "q", "b", valid_from="2025-01")  # same clock tick
    clock.set("2025-12-01")  # a clock that went backwards
    c = mem.assert_fact("k", "r", "c", valid_from="2025-01")
    assert a.recorded_at < b.recorded_at < c.recorded_at
    assert b.recorded_at == ts("2026-01-02T00:00:00.000001Z")


def test_belief_time_cannot_be_supplied(mem):
    with pytest.raises(TypeError):
        mem.assert_fact("k", "p", "a", recorded_at="2020-01-01")  # type: ignore[call-arg]
    with pytest.raises(tm.TempomemError, match="recorded_at"):
        mem.assert_many([{"subject": "k", "predicate": "p", "object": "a", "recorded_at": "2020-01-01"}])


def test_declared_arity_is_stored_with_the_store(store_path, clock):
    tm.open(store_path, create=True, clock=clock, predicates={"works_on": "multi"})
    again = tm.open(store_path, clock=clock)
    clock.set("2026-01-02")
    again.assert_fact("ada", "works_on", "x", valid_from="2025")
    again.assert_fact("ada", "works_on", "y", valid_from="2025")
    assert sorted(again.current("ada")["object"].to_list()) == ["x", "y"]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"predicates": {"works_on": "many"}}, "arity: must be one of single, multi, got 'many'"),
    ({"predicates": {" ": "multi"}}, "predicate: must be a non-empty string"),
    ({"policy": "maybe"}, "policy: must be one of last_write_wins, reject, got 'maybe'"),
    ({"clock": "now"}, "clock: expected a function returning an aware datetime, got str"),
])
def test_open_refuses_a_bad_argument_before_it_makes_a_store(tmp_path, kwargs, message):
    with pytest.raises(tm.TempomemError, match=re.escape(message)):
        tm.open(tmp_path / "new", create=True, **kwargs)
    assert not (tmp_path / "new").exists()  # nothing made (a bad arity came after the store was made)


# -- bad input --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda m: m.assert_fact("k", "p", "a", valid_from="yesterday-ish"), tm.TimeParseError, "valid_from"),
        (lambda m: m.assert_fact("k", "p", "a", valid_from="2025-06", valid_to="2025-01"), tm.TempomemError,
         "valid_to"),
        (lambda m: m.assert_fact("", "p", "a"), tm.TempomemError, "subject"),
        (lambda m: m.assert_fact("k", "p", "a", confidence=float("nan")), tm.TempomemError, "confidence"),
        (lambda m: m.assert_fact("k", "p", "a\x00b"), tm.TempomemError, "object"),
        (lambda m: m.invalidate("no-such-id", at="2025-01", reason="x"), tm.FactNotFoundError, "no-such-id"),
        (lambda m: m.correct("no-such-id", reason="x"), KeyError, "no-such-id"),
        (lambda m: m.invalidate(m.current()["fact_id"][0], at="2025-01", reason="  "), tm.TempomemError, "reason"),
        (lambda m: m.invalidate(m.current()["fact_id"][0], at="2019-01", reason="x"), tm.TempomemError, "before"),
        (lambda m: m.get("no-such-id"), KeyError, "no-such-id"),
        # an id that is not a string: a DuckDB conversion error or a TypeError inside the commit
        (lambda m: m.get(5), tm.TempomemError, r"fact_id: expected a fact id \(a string\), got int 5"),
        (lambda m: m.get(list(m.current()["fact_id"])), tm.TempomemError, "fact_id: .* got list"),
        (lambda m: m.invalidate(5, at="2025-01", reason="x"), tm.TempomemError, "fact_id: .* got int 5"),
        (lambda m: m.correct(None, reason="x"), tm.TempomemError, "fact_id: .* got NoneType None"),
        (lambda m: m.forget("seed", reason="x", scope=3), tm.TempomemError, "scope: expected a string"),
        # a flag given as text: "no" is truthy, and was read as True
        (lambda m: m.backfill([{"subject": "s", "predicate": "p", "object": "o", "recorded_at": "2025-01-01"}],
                              resolve="no"), tm.TempomemError, "resolve: expected True or False, got str 'no'"),
        (lambda m: m.history("seed", revisions="no"), tm.TempomemError, "revisions: expected True or False"),
        (lambda m: tm.open(m.path.parent / "other", create="no"), tm.TempomemError, "create: expected True or False"),
        (lambda m: tm.open(5), tm.TempomemError, r"path: expected a folder path \(a str or a Path\), got int 5"),
    ],
)
def test_bad_input_gets_a_typed_error_and_changes_nothing(mem, clock, call, error, match):
    clock.set("2026-01-02")
    mem.assert_fact("seed", "p", "v", valid_from="2024-01")
    version = mem._storage.latest_version()
    clock.advance(days=1)
    with pytest.raises(error, match=match):
        call(mem)
    assert mem._storage.latest_version() == version
    assert issubclass(error, (tm.TempomemError, KeyError))
