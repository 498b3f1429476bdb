"""mem.forget (SPEC §8): bytes gone from every file, tombstones kept, other subjects untouched."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from analytics_helpers import Clock, assert_previous_columns, at, new_store
from deltalake import DeltaTable

import tempomem as tm
from tempomem.erasure import hash_subject
from tempomem.storage.delta import run


def _bytes_found(folder: Path, needle: str) -> list[str]:
    """Every file under ``folder`` whose raw bytes contain ``needle`` (Parquet, log, checkpoints)."""
    raw = needle.encode()
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and raw in p.read_bytes())


@pytest.fixture
def store(tmp_path):
    clock = Clock("2026-01-01T00:00:00")
    mem = new_store(tmp_path, clock, predicates={"knows": "multi"})
    ids = {}
    ids["iban1"] = mem.assert_fact("customer-4242", "iban", "FR76-SECRET-ONE", valid_from="2024-01-01").fact_id
    clock.tick(days=1)
    ids["iban2"] = mem.assert_fact("customer-4242", "iban", "FR76-SECRET-TWO", valid_from="2025-01-01").fact_id
    clock.tick(days=1)
    ids["knows"] = mem.assert_fact("agent-7", "knows", "customer-4242", valid_from="2024-06-01").fact_id
    ids["other"] = mem.assert_fact("agent-7", "knows", "customer-99", valid_from="2024-06-01").fact_id
    clock.tick(days=1)
    ids["city"] = mem.assert_fact("customer-99", "city", "Lyon", valid_from="2023-01-01").fact_id
    clock.tick(days=1)
    ids["city2"] = mem.assert_fact("customer-99", "city", "Nice", valid_from="2025-03-01").fact_id
    for i in range(12):
        clock.tick(hours=1)
        mem.assert_fact("customer-4242", "visits", f"page-{i}", valid_from="2025-06-01")
    # a compaction (whose replaced files stay on disk for an hour) and a log checkpoint, so
    # the name sits in files no current version references
    mem._storage.compact()
    run(lambda uri: DeltaTable(uri).create_checkpoint(), str(mem.path))
    assert any(".checkpoint." in p.name for p in (mem.path / "_delta_log").iterdir())
    return mem, clock, ids


def _answers(mem: tm.Memory) -> dict[str, pl.DataFrame]:
    cols = ["fact_id", "subject", "predicate", "object", "valid_from", "valid_to", "recorded_at", "status"]
    return {
        "current": mem.current("customer-99").select(cols),
        "as_of": mem.as_of("2024-07-01", "customer-99").select(cols),
        "believed": mem.as_believed("2024-07-01", "2026-01-03T12:00:00", "customer-99").select(cols),
        "history": mem.history("customer-99", revisions=True).select([*cols, "reason"]),
        "agent": mem.as_of("2024-07-01", "agent-7").select(cols),
    }


def test_forget_removes_the_bytes_and_keeps_tombstones(store):
    mem, clock, ids = store
    before = _answers(mem)
    secrets = ["customer-4242", "FR76-SECRET-ONE", "FR76-SECRET-TWO", "page-3"]
    assert _bytes_found(mem.path, "customer-4242")  # it is there to begin with
    # ... including in files the compaction replaced, which only a vacuum deletes
    assert len(mem._storage.data_files_on_disk()) > len(mem._storage.snapshot().files)
    clock.set("2026-01-10T00:00:00")
    erased = mem.forget("customer-4242", reason="GDPR request 118")
    assert erased == 2 + 12 + 1   # two IBANs, twelve visits, agent-7 knows it
    for secret in secrets:
        assert _bytes_found(mem.path, secret) == [], secret
    # other subjects' answers are unchanged; agent-7 lost only the erased fact
    after = _answers(mem)
    for name in ("current", "as_of", "believed", "history"):
        assert after[name].equals(before[name]), name
    assert after["agent"]["object"].to_list() == ["customer-99"]
    # tombstones: subject hashed, times kept, every revision erased, the last one has the reason
    hashed = hash_subject(mem._storage.read_settings()["salt"], "customer-4242")
    rows = mem.sql("SELECT * FROM revisions WHERE fact_id = $id ORDER BY revision", {"id": ids["iban1"]}).pl()
    assert rows["subject"].unique().to_list() == [hashed]
    assert rows["status"].unique().to_list() == ["erased"]
    assert rows["object"].null_count() == rows.height and rows["text"].null_count() == rows.height
    assert rows["recorded_at"].to_list() == [at("2026-01-01T00:00:00"), at("2026-01-02T00:00:00"),
                                            at("2026-01-10T00:00:00")]
    assert rows["valid_from"][0] == at("2024-01-01T00:00:00")
    assert rows["reason"][-1] == "GDPR request 118"
    # erased facts answer no query, at any belief time
    assert mem.as_believed("2024-02-01", "2026-01-01T12:00:00", hashed).is_empty()
    assert mem.as_of("2024-02-01", hashed).is_empty()
    assert mem.current(predicate="iban").is_empty()
    # the erasure shows in diff, once, under the hashed name (also when filtered by the name)
    d = mem.diff("2026-01-09", "2026-01-11", subjects=["customer-4242"])
    assert d.forgotten_entities.to_dicts() == [{"scope": "default", "subject": hashed,
                                                "recorded_at": at("2026-01-10T00:00:00"),
                                                "reason": "GDPR request 118"}]
    assert mem.diff("2026-01-01", "2026-01-09").created.filter(pl.col("subject") == hashed).is_empty()
    assert mem.check().ok, mem.check().problems
    assert_previous_columns(mem)  # each erased row repeats the wiped revision before it


def test_tombstone_follows_a_revision_later_than_the_clock(store):
    mem, clock, ids = store
    clock.set("2025-12-01T00:00:00")   # behind the store's last revision
    mem.forget("customer-99", reason="left")
    rows = mem.sql("SELECT recorded_at FROM revisions WHERE fact_id = $id ORDER BY revision",
                   {"id": ids["city"]}).fetchall()
    # Lyon: recorded Jan 4, closed by Nice Jan 5. The store's last commit (the twelfth visit)
    # was Jan 5 12:00, so a clock set back to December stamps the erasure 1 µs after it.
    assert [r[0] for r in rows] == [at("2026-01-04T00:00:00"), at("2026-01-05T00:00:00"),
                                    at("2026-01-05T12:00:00.000001")]


def test_forgetting_an_unknown_name_is_an_error_and_changes_nothing(store):
    mem, _, _ = store
    version = mem._storage.latest_version()
    with pytest.raises(tm.TempomemError, match="nobody"):
        mem.forget("nobody", reason="x")
    with pytest.raises(tm.TempomemError, match="reason"):
        mem.forget("customer-99", reason=" ")
    with pytest.raises(tm.TempomemError, match="scope"):
        mem.forget("customer-99", reason="x", scope="elsewhere")
    assert mem._storage.latest_version() == version


def test_the_name_is_scrubbed_from_other_facts_free_text(tmp_path):
    """Another fact that mentions the name keeps its key and object, but not the name: its text,
    its attributes (also as JSON escapes it) and its artifacts lose it, and the embedding made
    from the text is dropped for embed() to make again. A subject that merely contains the name
    is another entity; a mention in another scope stays when the forget names a scope."""
    clock = Clock("2026-01-01T00:00:00")
    mem = new_store(tmp_path, clock)
    name = 'ann "a" lee'
    mem.assert_fact(name, "iban", "FR76-SECRET")
    mem.assert_many([{"subject": "ticket-1", "predicate": "about", "object": "billing", "text": f"call {name} back",
                      "artifact": f"mail from {name}", "embedding": [0.5, 0.5]},
                     {"subject": "ticket-2", "predicate": "about", "object": "refund", "embedding": [0.25, 0.75]},
                     {"subject": "ticket-3", "predicate": "about", "object": "vip", "scope": "crm",
                      "text": f"{name} is a VIP"},
                     {"subject": f"{name}-card", "predicate": "status", "object": "blocked"}])
    mem.backfill([{"subject": "ticket-4", "predicate": "about", "object": "fraud", "recorded_at": "2025-12-01",
                   "caller": name, "valid_to": "2025-12-02", "reason": f"closed by {name}"},
                  {"subject": "ticket-5", "predicate": "about", "object": "fraud", "recorded_at": "2025-12-01",
                   "scope": "crm", "valid_to": "2025-12-02", "reason": f"closed by {name}"}])
    clock.tick(days=1)
    assert mem.forget(name, reason="GDPR", scope="default") == 1
    kept = mem.sql("SELECT subject, object, text, artifacts, attributes, embedding, status FROM facts "
                   "WHERE status <> 'erased' ORDER BY subject").fetchall()
    assert kept == [
        (f"{name}-card", "blocked", f"{name}-card status blocked", [], None, None, "live"),
        ("ticket-1", "billing", "call [erased] back", ["mail from [erased]"], None, None, "live"),
        ("ticket-2", "refund", "ticket-2 about refund", [], None, [0.25, 0.75], "live"),
        ("ticket-3", "vip", f"{name} is a VIP", [], None, None, "live"),
        ("ticket-4", "fraud", "ticket-4 about fraud", [], '{"caller":"[erased]"}', None, "ended"),
        ("ticket-5", "fraud", "ticket-5 about fraud", [], None, None, "ended"),
    ]
    assert mem.sql("SELECT scope, subject, reason FROM facts WHERE subject LIKE 'ticket-_' AND reason IS NOT NULL "
                   "ORDER BY subject").fetchall() == [
        ("default", "ticket-4", "closed by [erased]"), ("crm", "ticket-5", f"closed by {name}")]
    assert mem.check().ok, mem.check().problems
