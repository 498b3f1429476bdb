"""The analytics commands of the CLI: diff, probe, lag, exposure, audit, forget."""

from __future__ import annotations

import json

import pytest
from analytics_helpers import Clock, new_store
from click.testing import CliRunner

from tempomem.cli import cli


@pytest.fixture
def store(tmp_path):
    clock = Clock("2026-01-10T00:00:00")
    mem = new_store(tmp_path, clock)
    mem.assert_fact("acct", "iban", "FR11", valid_from="2026-01-01", source="tool_verified", confidence=0.95)
    clock.set("2026-01-12T00:00:00")
    mem.assert_fact("acct", "iban", "FR99", valid_from="2026-01-11", source="agent", confidence=0.5)
    return str(mem.path)


def _run(store, *args):
    result = CliRunner().invoke(cli, ["--store", store, *args])
    return result


def test_diff_table_and_json(store):
    table = _run(store, "diff", "--from", "2026-01-11", "--to", "2026-01-13")
    assert table.exit_code == 0, table.output
    assert "changed: 1" in table.output and "created: 0" in table.output and "FR99" in table.output
    out = json.loads(_run(store, "diff", "--from", "2026-01-01", "--to", "2026-01-13", "--json").output)
    assert [r["object"] for r in out["created"]] == ["FR11"]
    assert [(r["before_object"], r["after_object"], r["recorded_at"]) for r in out["changed"]] == [
        ("FR11", "FR99", "2026-01-12T00:00:00Z")]
    assert [r["subject"] for r in out["new_entities"]] == ["acct"]


def test_probe_lag_exposure_audit(store, tmp_path):
    probes = json.loads(_run(store, "probe", "--json").output)
    assert [(p["as_of_object"], p["as_believed_object"], p["kind"]) for p in probes] == [
        ("FR11", None, "not_yet_known"), ("FR99", "FR11", "learned_late")]
    summary = json.loads(_run(store, "probe", "--summary", "--json").output)
    assert [(s["predicate"], s["source"], s["probes"]) for s in summary] == [("iban", "tool_verified", 2)]
    lag = json.loads(_run(store, "lag", "--json").output)
    assert [(r["predicate"], r["count"], r["max"]) for r in lag] == [("iban", 2, "9d")]
    exposure = json.loads(_run(store, "exposure", "--json").output)
    assert [(r["object"], r["exposure_from"], r["exposure_to"]) for r in exposure] == [
        ("FR11", "2026-01-11T00:00:00Z", "2026-01-12T00:00:00Z")]
    decisions = tmp_path / "decisions.csv"
    decisions.write_text("decision_id,decided_at,subject,predicate,object_used\n"
                         "d1,2026-01-11T12:00:00Z,acct,iban,FR11\nd2,2026-01-05,acct,iban,FR11\n")
    audit = json.loads(_run(store, "audit", str(decisions), "--json").output)
    assert [(r["decision_id"], r["verdict"]) for r in audit] == [("d1", "stale"), ("d2", "unknown")]
    assert "stale" in _run(store, "audit", str(decisions)).output


def test_forget_and_errors_are_one_line(store, tmp_path):
    done = _run(store, "forget", "acct", "--reason", "GDPR", "--json")
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["erased_facts"] == 2
    again = _run(store, "forget", "acct", "--reason", "GDPR")
    assert again.exit_code == 1 and again.output.count("\n") == 1 and "neither a subject" in again.output
    bad = _run(store, "diff", "--from", "soon", "--to", "2026")
    assert bad.exit_code == 1 and "from_at" in bad.output
    missing = _run(store, "audit", str(tmp_path / "none.csv"))
    assert missing.exit_code == 1 and "does not exist" in missing.output
