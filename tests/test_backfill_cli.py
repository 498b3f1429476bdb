"""The backfill and export commands: report table, --json, round trip, errors."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

import tempomem as tm
from tempomem import timegrammar
from tempomem.cli import cli

CSV = ("entity,predicate,object,ts,valid_from\n"
       "api,instance_type,m5.large,2025-01-01T00:00:00Z,2024-06\n"
       "api,instance_type,m5.xlarge,2025-02-01T00:00:00-08:00,2025-01-15\n"
       "db,engine,postgres,not a time,\n")


def test_backfill_json_report_then_export_round_trip(tmp_path: Path) -> None:
    (tmp_path / "in.csv").write_text(CSV)
    runner = CliRunner()
    store, copy = str(tmp_path / "s"), str(tmp_path / "c")
    assert runner.invoke(cli, ["--store", store, "init"]).exit_code == 0
    result = runner.invoke(cli, ["--store", store, "backfill", str(tmp_path / "in.csv"), "--map", "entity=subject",
                                 "--map", "ts=recorded_at", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert (report["rows_read"], report["loaded"], report["revisions"]) == (3, 2, 2)
    assert report["rejected"] == [{"row": 2, "field": "recorded_at", "value": "not a time",
                                   "reason": f"cannot read not a time as a time: {timegrammar.NOT_ISO}"}]
    exported = runner.invoke(cli, ["--store", store, "export", str(tmp_path / "out.csv"), "--json"])
    assert exported.exit_code == 0 and json.loads(exported.output)["format"] == "csv"  # by its extension
    mismatch = runner.invoke(cli, ["--store", store, "export", "--format", "parquet", str(tmp_path / "x.csv")])
    assert mismatch.exit_code == 1 and "Traceback" not in mismatch.output
    assert "backfill would read" in mismatch.output and not (tmp_path / "x.csv").exists()
    assert runner.invoke(cli, ["--store", copy, "init"]).exit_code == 0
    table = runner.invoke(cli, ["--store", copy, "backfill", str(tmp_path / "out.csv")])
    assert table.exit_code == 0 and "rows_read" in table.output and "overlapping_values" in table.output
    one, two = (tm.open(p).sql("SELECT * EXCLUDE (ingested_at) FROM revisions ORDER BY fact_id").pl()
                for p in (store, copy))
    assert one.equals(two)
    assert two["recorded_at"].dt.to_string("%Y-%m-%dT%H:%M:%S").to_list() == [
        "2025-01-01T00:00:00", "2025-02-01T08:00:00"]


def test_backfill_errors_are_one_line(tmp_path: Path) -> None:
    (tmp_path / "in.csv").write_text(CSV)
    runner = CliRunner()
    store = str(tmp_path / "s")
    runner.invoke(cli, ["--store", store, "init"])
    strict = runner.invoke(cli, ["--store", store, "backfill", str(tmp_path / "in.csv"), "--map", "entity=subject",
                                 "--map", "ts=recorded_at", "--strict"])
    assert strict.exit_code == 1 and "strict=True; nothing was loaded" in strict.output
    assert "Traceback" not in strict.output
    bad_map = runner.invoke(cli, ["--store", store, "backfill", str(tmp_path / "in.csv"), "--map", "entity"])
    assert bad_map.exit_code == 1 and "--map: expected SRC=DST" in bad_map.output
    unmapped = runner.invoke(cli, ["--store", store, "backfill", str(tmp_path / "in.csv")])
    assert unmapped.exit_code == 1 and "Traceback" not in unmapped.output
    assert "the input has no subject column (columns: entity, predicate, object, ts, valid_from)" in unmapped.output
    assert "--map your_column=subject" in unmapped.output  # the option a command-line user has
    assert tm.open(store).sql("SELECT count(*) FROM revisions").fetchall() == [(0,)]
