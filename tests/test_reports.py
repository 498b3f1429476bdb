"""tm.reports (SPEC §10) and the trusted= policy, on one small hand-checked history."""

from __future__ import annotations

from datetime import timedelta

import polars as pl
import pytest
from analytics_helpers import Clock, at, new_store

import tempomem as tm
from tempomem.reports import parse_duration

DAY, HOUR = timedelta(days=1), timedelta(hours=1)


@pytest.fixture
def history(tmp_path):
    """acct: a verified IBAN displaced by an agent's, a retracted email, a plan with no start."""
    clock = Clock("2026-01-10T00:00:00")
    mem = new_store(tmp_path, clock)
    ids = {}
    ids["fr11"] = mem.assert_fact("acct", "iban", "FR11", valid_from="2026-01-01", source="tool_verified",
                                  confidence=0.95).fact_id                          # lag 9 d
    clock.set("2026-01-10T06:00:00")
    ids["email"] = mem.assert_fact("acct", "email", "a@x", valid_from="2026-01-10").fact_id   # lag 6 h
    clock.set("2026-01-11T00:00:00")
    mem.correct(ids["email"], reason="other customer")                              # exposed 18 h
    clock.set("2026-01-12T00:00:00")
    ids["fr99"] = mem.assert_fact("acct", "iban", "FR99", valid_from="2026-01-11", source="agent",
                                  confidence=0.5).fact_id                           # lag 1 d, FR11 exposed 1 d
    clock.set("2026-01-13T00:00:00")
    ids["gold"] = mem.assert_fact("acct", "plan", "gold").fact_id                   # no start: inferred
    clock.set("2026-01-14T00:00:00")
    ids["silver"] = mem.assert_fact("acct", "plan", "silver", valid_from="2026-01-13T12:00").fact_id  # lag 12 h
    return mem, clock, ids


def test_ingestion_lag_per_predicate(history):
    mem, _, _ = history
    out = tm.reports.ingestion_lag(mem, threshold="1d")
    assert out.columns == ["predicate", "count", "p50", "p90", "p99", "max", "share_over_threshold", "inferred"]
    assert out.schema["p50"] == pl.Duration("us")
    rows = {r["predicate"]: r for r in out.to_dicts()}
    assert set(rows) == {"iban", "plan"}   # the retracted email is no knowledge
    assert rows["iban"] == {"predicate": "iban", "count": 2, "p50": DAY, "p90": 9 * DAY, "p99": 9 * DAY,
                            "max": 9 * DAY, "share_over_threshold": 0.5, "inferred": 0}
    assert rows["plan"] == {"predicate": "plan", "count": 1, "p50": 12 * HOUR, "p90": 12 * HOUR,
                            "p99": 12 * HOUR, "max": 12 * HOUR, "share_over_threshold": 0.0, "inferred": 1}


def test_fact_lags_are_the_population_of_the_report(history):
    mem, _, _ = history
    lags = tm.reports.fact_lags(mem).sort("lag", nulls_last=True)
    # the retracted email (lag 6 h) is no row; the plan with no start has a null lag
    assert lags.rows() == [("plan", 12 * HOUR), ("iban", DAY), ("iban", 9 * DAY), ("plan", None)]
    assert lags.schema["lag"] == pl.Duration("us")
    assert tm.reports.fact_lags(mem, by=("source", "subject")).columns == ["source", "subject", "lag"]
    with pytest.raises(tm.TempomemError, match="by"):
        tm.reports.fact_lags(mem, by=["object"])


def test_ingestion_lag_overall_and_by_source(history):
    mem, _, _ = history
    overall = tm.reports.ingestion_lag(mem, by=(), threshold="23h").row(0, named=True)
    # lags 12 h, 1 d, 9 d: nearest rank p50 = 2nd, p90 = 3rd; two of three over 23 h
    assert (overall["count"], overall["p50"], overall["p90"], overall["inferred"]) == (3, DAY, 9 * DAY, 1)
    assert overall["share_over_threshold"] == pytest.approx(2 / 3)
    by_source = tm.reports.ingestion_lag(mem, by=["source"])
    assert by_source["source"].to_list() == ["agent", "tool_verified", "user"]
    assert by_source["max"].to_list() == [DAY, 9 * DAY, 12 * HOUR]
    with pytest.raises(tm.TempomemError, match="by"):
        tm.reports.ingestion_lag(mem, by=["object"])
    with pytest.raises(tm.TempomemError, match="threshold"):
        tm.reports.ingestion_lag(mem, threshold="a while")


def test_parse_duration():
    assert parse_duration("1d12h") == timedelta(hours=36)
    assert parse_duration("90s") == timedelta(seconds=90)
    assert parse_duration("2w") == timedelta(days=14)
    assert parse_duration(timedelta(minutes=5)) == timedelta(minutes=5)


def test_exposure_windows(history):
    mem, _, ids = history
    out = tm.reports.exposure(mem)
    assert out.columns[:3] == ["exposure_from", "exposure_to", "exposure"]
    got = [(r["fact_id"], r["exposure_from"], r["exposure_to"], r["exposure"]) for r in out.to_dicts()]
    assert got == [
        # FR11 was wrong from FR99's start (Jan 11) until FR99 was recorded (Jan 12)
        (ids["fr11"], at("2026-01-11T00:00:00"), at("2026-01-12T00:00:00"), DAY),
        # the email was served from its recording until its retraction
        (ids["email"], at("2026-01-10T06:00:00"), at("2026-01-11T00:00:00"), 18 * HOUR),
        # gold (recorded Jan 13) was wrong from silver's start, Jan 13 12:00, to Jan 14
        (ids["gold"], at("2026-01-13T12:00:00"), at("2026-01-14T00:00:00"), 12 * HOUR),
    ]


def test_exposure_leaves_out_windows_of_no_length(tmp_path):
    clock = Clock("2026-01-10T00:00:00")
    mem = new_store(tmp_path, clock)
    mem.assert_fact("svc", "owner", "bob", valid_from="2026-01-05")
    clock.tick(days=1)
    mem.assert_fact("svc", "owner", "eve", valid_from="2026-01-20")   # a future change: never wrong
    assert tm.reports.exposure(mem).is_empty()


def test_decision_audit_verdicts(history):
    mem, _, _ = history
    decisions = pl.DataFrame({
        "decision_id": ["ok", "stale", "wrong", "mismatch", "unknown", "ok2"],
        "decided_at": ["2026-01-10T12:00", "2026-01-11T12:00", "2026-01-10T12:00", "2026-01-10T12:00",
                       "2026-01-05", "2026-01-12T12:00"],
        "subject": ["acct"] * 6,
        "predicate": ["iban", "iban", "email", "iban", "iban", "iban"],
        "object_used": ["FR11", "FR11", "a@x", "FR00", "FR11", "FR99"],
    })
    out = tm.reports.decision_audit(mem, decisions)
    assert out.columns == [*decisions.columns, "believed_object", "true_object", "verdict"]
    assert out["decided_at"].to_list() == decisions["decided_at"].to_list()
    assert out.select("decision_id", "believed_object", "true_object", "verdict").rows() == [
        ("ok", "FR11", "FR11", "ok"),
        ("stale", "FR11", "FR99", "stale"),        # FR99 held from Jan 11, recorded Jan 12
        ("wrong", "a@x", None, "wrong"),           # retracted Jan 11
        ("mismatch", "FR11", "FR11", "mismatch"),  # the agent used a value it did not hold
        ("unknown", None, "FR11", "unknown"),      # nothing recorded before Jan 10
        ("ok2", "FR99", "FR99", "ok"),
    ]


def test_displacements(history):
    mem, _, ids = history
    out = tm.reports.displacements(mem)
    assert out.select("fact_id", "object", "source", "recorded_at", "displaced_fact_id", "displaced_object",
                      "displaced_source").rows() == [
        (ids["fr99"], "FR99", "agent", at("2026-01-12T00:00:00"), ids["fr11"], "FR11", "tool_verified")]
    # gold -> silver is user -> user: no displacement even when user is trusted
    assert tm.reports.displacements(mem, trusted_sources=("tool_verified", "user"), min_confidence=0.9)[
        "fact_id"].to_list() == [ids["fr99"]]
    # a trusted agent at 0.5 makes FR99 trusted too
    assert tm.reports.displacements(mem, trusted_sources=("tool_verified", "agent"), min_confidence=0.5).is_empty()


def test_trusted_policy_on_the_query_forms(history):
    mem, _, _ = history
    assert mem.as_of("2026-01-05", "acct", trusted={"sources": ["tool_verified"]})["object"].to_list() == ["FR11"]
    assert mem.as_of("2026-01-12T12:00", "acct", "iban", trusted={"min_confidence": 0.9}).is_empty()
    assert mem.as_of("2026-01-12T12:00", "acct", "iban", trusted="agent")["object"].to_list() == ["FR99"]
    assert mem.as_believed("2026-01-11T12:00", "2026-01-11T12:00", "acct", trusted=["tool_verified"])[
        "object"].to_list() == ["FR11"]
    assert sorted(mem.current("acct")["object"].to_list()) == ["FR99", "silver"]
    assert mem.current("acct", trusted={"sources": ["user"], "min_confidence": 0.9})["object"].to_list() == ["silver"]
    with pytest.raises(tm.TempomemError, match="trusted"):
        mem.current("acct", trusted={"source": "user"})
    with pytest.raises(tm.TempomemError, match="min_confidence"):
        mem.current("acct", trusted={"min_confidence": "high"})


@pytest.mark.parametrize("n", [1, 7, 40])
def test_lag_percentiles_are_nearest_rank(tmp_path, n):
    """p = the ceil(q·n)-th smallest lag, computed here directly on the same lags."""
    clock = Clock("2026-02-01T00:00:00")
    mem = new_store(tmp_path, clock)
    lags = [timedelta(minutes=(i * 37) % 101 + 1) for i in range(n)]
    mem.assert_many([{"subject": f"s{i}", "predicate": "p", "object": "o",
                      "valid_from": clock.now - lag} for i, lag in enumerate(lags)])
    row = tm.reports.ingestion_lag(mem, threshold="50m").row(0, named=True)
    ordered = sorted(lags)
    for name, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
        assert row[name] == ordered[-(-n * int(q * 100) // 100) - 1], name
    assert row["max"] == ordered[-1] and row["count"] == n
    assert row["share_over_threshold"] == pytest.approx(sum(lag > timedelta(minutes=50) for lag in lags) / n)
