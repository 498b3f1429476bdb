"""The core commands of the CLI: tables, --json, the demo, and one clear line on error."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import tempomem as tm
from tempomem.cli import cli


def _run(*args: str, store: Path | None = None):
    prefix = ["--store", str(store)] if store else []
    return CliRunner().invoke(cli, [*prefix, *args])


def test_demo_shows_as_of_and_as_believed_side_by_side():
    result = _run("demo")
    assert result.exit_code == 0, result.output
    line = next(li for li in result.output.splitlines() if "instance_type" in li)
    assert line.split("|")[2].strip() == "m5.xlarge"  # as_of
    assert line.split("|")[3].strip() == "t3.large"  # as_believed
    assert "6 days late" in result.output


def test_demo_json_is_machine_readable():
    rows = {r["predicate"]: r for r in json.loads(_run("demo", "--json").output)}
    assert rows["instance_type"] == {"predicate": "instance_type", "as_of": "m5.xlarge",
                                     "as_believed": "t3.large", "differs": True}
    assert rows["region"]["differs"] is False


def test_assert_query_invalidate_correct_round(tmp_path):
    store = tmp_path / "s"
    assert _run("init", "--multi", "depends_on", store=store).exit_code == 0
    made = json.loads(_run("assert", "api instance_type t3 large", "--from", "2025-01", "--json", store=store).output)
    assert (made["subject"], made["predicate"], made["object"]) == ("api", "instance_type", "t3 large")
    assert made["valid_from"] == "2025-01-01T00:00:00Z"
    ended = _run("invalidate", made["fact_id"], "--at", "2025-06", "--reason", "resized", "--json", store=store)
    assert json.loads(ended.output)["valid_to"] == "2025-06-01T00:00:00Z"
    both = json.loads(_run("as-of", "api", "--at", "2025-07", "--believed-at", "2020", "--json", store=store).output)
    assert both == []
    rows = json.loads(_run("history", "api", "--revisions", "--json", store=store).output)
    assert [r["status"] for r in rows] == ["live", "ended"]
    assert rows[0]["believed_until"] == rows[1]["recorded_at"]
    fixed = json.loads(_run("correct", made["fact_id"], "--reason", "never", "--json", store=store).output)
    assert fixed["status"] == "retracted"
    assert "(no rows)" in _run("current", "api", store=store).output
    assert json.loads(_run("sql", "SELECT count(*) AS n FROM revisions", "--json", store=store).output) == [{"n": 3}]
    assert _run("check", store=store).exit_code == 0


def test_user_errors_are_one_line_and_exit_1(tmp_path):
    store = tmp_path / "s"
    _run("init", store=store)
    for args in (["invalidate", "nope", "--at", "2025", "--reason", "x"],
                 ["assert", "a b c", "--from", "someday"],
                 ["sql", "SELECT * FROM no_such_table"],
                 ["current", "x", "--json"]):
        result = _run(*args, store=store if args[0] != "current" else tmp_path / "missing")
        assert result.exit_code == 1, (args, result.output)
        assert len(result.output.strip().splitlines()) == 1, result.output
        assert result.output.startswith("Error: ")
        assert "Traceback" not in result.output


def test_a_missing_store_names_the_command_that_makes_one(tmp_path):
    result = _run("current", "x", store=tmp_path / "missing")
    assert result.exit_code == 1
    assert result.output == (f"Error: store: no tempomem store at {tmp_path / 'missing'}; make one with: "
                             f"tempomem --store {tmp_path / 'missing'} init\n")
    assert not (tmp_path / "missing").exists()  # nothing made


def test_a_store_that_cannot_be_made_is_one_line(tmp_path):
    (tmp_path / "a-file").write_text("x")
    under_a_file = tmp_path / "a-file" / "store"
    result = _run("init", store=under_a_file)
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.output == f"Error: path: cannot make a store at {under_a_file}: Not a directory\n"
    with pytest.raises(tm.TempomemError, match=r"path: cannot make a store at .*: Not a directory"):
        tm.open(under_a_file, create=True)


def test_module_entry_point_runs():
    out = subprocess.run([sys.executable, "-m", "tempomem", "--help"], capture_output=True, text=True, check=True)
    assert "demo" in out.stdout and "as-of" in out.stdout
