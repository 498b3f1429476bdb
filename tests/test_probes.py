"""tm.probes.divergence and summary (SPEC §10) on a small hand-checked history."""

from __future__ import annotations

import polars as pl
import pytest
from analytics_helpers import Clock, at, new_store

import tempomem as tm


@pytest.fixture
def history(tmp_path):
    clock = Clock("2026-01-10T00:00:00")
    mem = new_store(tmp_path, clock, predicates={"works_on": "multi"})
    ids = {}
    ids["fr11"] = mem.assert_fact("acct", "iban", "FR11", valid_from="2026-01-01", source="tool_verified").fact_id
    mem.assert_many([{"subject": "ada", "predicate": "works_on", "object": "x", "valid_from": "2026-01-01"},
                     {"subject": "ada", "predicate": "works_on", "object": "y", "valid_from": "2026-01-05"}])
    clock.set("2026-01-15T00:00:00")
    ids["email"] = mem.assert_fact("acct", "email", "a@x", valid_from="2026-01-01").fact_id
    clock.set("2026-01-20T00:00:00")
    mem.correct(ids["email"], reason="wrong customer")
    clock.set("2026-02-10T00:00:00")
    ids["fr22"] = mem.assert_fact("acct", "iban", "FR22", valid_from="2026-02-01", source="agent").fact_id
    return mem, ids


def _probe(pid, subject, predicate, valid_at, believed_at):
    return {"probe_id": pid, "subject": subject, "predicate": predicate, "valid_at": valid_at,
            "believed_at": believed_at}


def test_each_kind_on_hand_checked_probes(history):
    mem, _ = history
    probes = pl.DataFrame([
        _probe("late", "acct", "iban", "2026-02-05", "2026-02-05"),      # believed FR11, now FR22
        _probe("early", "acct", "iban", "2026-01-05", "2026-01-05"),     # nothing recorded yet
        _probe("ok", "acct", "iban", "2026-01-15", "2026-01-15"),        # FR11 both ways
        _probe("wrong", "acct", "email", "2026-01-16", "2026-01-16"),    # a@x, retracted Jan 20
        _probe("multi", "ada", "works_on", "2026-01-07", "2026-01-11"),  # x and y
        _probe("ghost", "nobody", "iban", "2026-01-07", "2026-01-11"),   # nothing anywhere
    ])
    out = tm.probes.divergence(mem, probes)
    assert out.columns == [*probes.columns, "source", "as_of_object", "as_believed_object", "diverged", "kind"]
    assert out["probe_id"].to_list() == probes["probe_id"].to_list()
    assert out["valid_at"].to_list() == probes["valid_at"].to_list()   # probe columns unchanged
    rows = {r["probe_id"]: r for r in out.to_dicts()}
    assert [rows["late"][k] for k in ("as_of_object", "as_believed_object", "diverged", "kind", "source")] == [
        "FR22", "FR11", True, "learned_late", "tool_verified"]
    assert [rows["early"][k] for k in ("as_of_object", "as_believed_object", "diverged", "kind", "source")] == [
        "FR11", None, True, "not_yet_known", "tool_verified"]
    assert [rows["ok"][k] for k in ("as_of_object", "as_believed_object", "diverged", "kind")] == [
        "FR11", "FR11", False, "same"]
    assert [rows["wrong"][k] for k in ("as_of_object", "as_believed_object", "diverged", "kind", "source")] == [
        None, "a@x", True, "corrected", "user"]
    assert [rows["multi"][k] for k in ("as_of_object", "as_believed_object", "kind")] == ["x | y", "x | y", "same"]
    assert [rows["ghost"][k] for k in ("as_of_object", "as_believed_object", "diverged", "kind", "source")] == [
        None, None, False, "same", None]


def test_scope_column_restricts_the_match(history):
    mem, _ = history
    out = tm.probes.divergence(mem, [
        {**_probe("a", "acct", "iban", "2026-01-15", "2026-01-15"), "scope": "default"},
        {**_probe("b", "acct", "iban", "2026-01-15", "2026-01-15"), "scope": "other"},
    ])
    assert out["as_of_object"].to_list() == ["FR11", None]


def test_generated_probes_sit_inside_each_wrong_window(history):
    mem, ids = history
    out = tm.probes.divergence(mem)
    got = {r["probe_id"]: (r["valid_at"], r["believed_at"], r["kind"]) for r in out.to_dicts()}
    assert got[f"learned_late:{ids['fr22']}"] == (at("2026-02-01T00:00:00"), at("2026-02-05T12:00:00"),
                                                  "learned_late")
    assert got[f"learned_late:{ids['fr11']}"] == (at("2026-01-01T00:00:00"), at("2026-01-05T12:00:00"),
                                                  "not_yet_known")
    assert got[f"retraction:{ids['email']}"] == (at("2026-01-01T00:00:00"), at("2026-01-17T12:00:00"),
                                                 "corrected")
    # ada's two facts were learned late too; the retracted email has no learned_late probe
    assert len(got) == 5 and f"learned_late:{ids['email']}" not in got


def test_summary_counts_and_rates(history):
    mem, _ = history
    s = tm.probes.summary(tm.probes.divergence(mem))
    assert s.columns == ["predicate", "source", "probes", "diverged", "divergence_rate",
                         "same", "not_yet_known", "corrected", "learned_late"]
    rows = {(r["predicate"], r["source"]): r for r in s.to_dicts()}
    # generated iban probes: FR11's (not_yet_known) and FR22's (learned_late); both believed
    # FR11 or nothing, so the source is tool_verified for both
    assert rows[("iban", "tool_verified")] == {
        "predicate": "iban", "source": "tool_verified", "probes": 2, "diverged": 2, "divergence_rate": 1.0,
        "same": 0, "not_yet_known": 1, "corrected": 0, "learned_late": 1}
    assert rows[("works_on", "user")]["not_yet_known"] == 2
    assert rows[("email", "user")]["corrected"] == 1


def test_bad_probes_are_refused_with_the_row(history):
    mem, _ = history
    with pytest.raises(tm.TempomemError, match="believed_at"):
        tm.probes.divergence(mem, [{"subject": "a", "predicate": "p", "valid_at": "2026"}])
    with pytest.raises(tm.TimeParseError, match="row 1, valid_at"):
        tm.probes.divergence(mem, [_probe("a", "s", "p", "2026", "2026"), _probe("b", "s", "p", "soon", "2026")])


def test_source_of_a_multi_valued_divergence_is_the_wrong_value(tmp_path):
    """db-1 stays true; legacy-queue (inferred) was believed for a week, then corrected."""
    clock = Clock("2026-01-10T00:00:00")
    mem = new_store(tmp_path, clock, predicates={"depends_on": "multi"})
    mem.assert_fact("svc", "depends_on", "db-1", valid_from="2026-01-01", source="tool_verified")
    clock.set("2026-02-01T00:00:00")
    wrong = mem.assert_fact("svc", "depends_on", "legacy-queue", valid_from="2026-01-01", source="inferred")
    clock.set("2026-02-08T00:00:00")
    mem.correct(wrong.fact_id, reason="never a dependency")
    got = tm.probes.divergence(mem, pl.DataFrame([_probe("p", "svc", "depends_on", "2026-02-03", "2026-02-03")]))
    assert got.select("as_of_object", "as_believed_object", "kind", "source").row(0) == (
        "db-1", "db-1 | legacy-queue", "corrected", "inferred")
