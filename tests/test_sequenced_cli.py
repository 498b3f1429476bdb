"""`tempomem sequenced` and `tempomem coalesced`: tables, --json, and one-line errors."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

import tempomem as tm
from tempomem.cli import cli


@pytest.fixture
def store(store_path, clock):
    mem = tm.open(store_path, create=True, clock=clock)
    mem.backfill([
        {"fact_id": "a", "subject": "svc", "predicate": "type", "object": "small", "valid_from": "2026-01-01",
         "valid_to": "2026-01-02T12:00Z", "recorded_at": "2026-01-01"},
        {"fact_id": "b", "subject": "svc", "predicate": "type", "object": "large", "valid_from": "2026-01-02T12:00Z",
         "recorded_at": "2026-01-05"},
        {"fact_id": "c", "subject": "db", "predicate": "version", "object": "15", "valid_from": "2025-12-01",
         "recorded_at": "2026-01-01"},
    ], strict=True)
    return str(store_path)


def run(store, *args):
    return CliRunner().invoke(cli, ["--store", store, *args])


def test_sequenced_json_and_table(store):
    out = run(store, "sequenced", "--from", "2026-01-01", "--to", "2026-01-03", "--every", "1d", "--subject", "svc",
              "--json")
    assert out.exit_code == 0, out.output
    assert [(r["bin_from"], r["bin_to"], r["object"], r["coverage"], r["fact_id"]) for r in json.loads(out.output)] == [
        ("2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z", "small", 1.0, "a"),
        ("2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z", "large", 0.5, "b"),
        ("2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z", "small", 0.5, "a"),
    ]
    past = run(store, "sequenced", "--from", "2026-01-01", "--to", "2026-01-03", "--every", "1d",
               "--believed-at", "2026-01-03", "--predicate", "type", "--json")
    assert [r["fact_id"] for r in json.loads(past.output)] == ["a", "a"]   # b was recorded on 01-05
    table = run(store, "sequenced", "--from", "2026-01-01", "--to", "2026-01-02", "--every", "12h")
    assert table.exit_code == 0, table.output
    lines = table.output.splitlines()
    assert lines[0].split("|")[1:-1] == [" bin_from             ", " bin_to               ", " subject ",
                                         " predicate ", " object ", " coverage ", " fact_id "]
    assert len(lines) == 2 + 4 and "2026-01-01T12:00:00Z" in table.output


def test_coalesced_json_and_table(store):
    out = run(store, "coalesced", "--json")
    assert out.exit_code == 0, out.output
    assert [(r["subject"], r["object"], r["valid_from"], r["valid_to"], r["facts"], r["fact_ids"])
            for r in json.loads(out.output)] == [
        ("db", "15", "2025-12-01T00:00:00Z", None, 1, ["c"]),
        ("svc", "small", "2026-01-01T00:00:00Z", "2026-01-02T12:00:00Z", 1, ["a"]),
        ("svc", "large", "2026-01-02T12:00:00Z", None, 1, ["b"]),
    ]
    past = run(store, "coalesced", "--believed-at", "2026-01-02", "--subject", "svc", "--json")
    assert [r["fact_ids"] for r in json.loads(past.output)] == [["a"]]
    table = run(store, "coalesced", "--subject", "db", "--predicate", "version")
    assert table.exit_code == 0 and "| db      | version   | 15     |" in table.output


@pytest.mark.parametrize(("args", "message"), [
    (["sequenced", "--from", "2026-01-03", "--to", "2026-01-01", "--every", "1d"], "to_at: must be after from_at"),
    (["sequenced", "--from", "2026-01-01", "--to", "2026-01-03", "--every", "-1d"], "every: expected a step"),
    (["sequenced", "--from", "2000", "--to", "2026", "--every", "1m"], "more than 1,000,000 bins"),
    (["sequenced", "--from", "later", "--to", "2026", "--every", "1d"], "from_at: cannot read 'later'"),
    (["coalesced", "--believed-at", "yesterday"], "believed_at: cannot read"),
])
def test_user_errors_are_one_line_and_exit_1(store, args, message):
    out = run(store, *args)
    assert out.exit_code == 1
    assert message in out.output and len(out.output.strip().splitlines()) == 1
    assert "Traceback" not in out.output
