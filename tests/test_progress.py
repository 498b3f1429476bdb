"""Progress (tempomem.progress): tqdm bars behind the loads' progress(stage, rows_done) callback,
drawn only for large loads someone watches, never with --json."""

from __future__ import annotations

import io
import json
import threading
from pathlib import Path

import numpy as np
from click.testing import CliRunner

import tempomem as tm
from tempomem import progress, recall
from tempomem.cli import cli


def _rows(n: int) -> list[dict]:
    return [{"subject": f"s{i}", "predicate": "p", "object": "o", "recorded_at": "2025-01-01",
             "valid_from": "2024-06-01"} for i in range(n)]


def test_bars_draw_the_write_stage_of_a_large_load():
    out = io.StringIO()
    with progress.Bars(min_rows=10, file=out) as bars:
        for stage, done in [("read", 0), ("checked", 10), ("write", 4), ("write", 12)]:
            bars(stage, done)
    text = out.getvalue()
    assert "writing revisions" in text
    assert "12.0/12.0" in text  # two revisions of a retracted row: the total grew to the rows written


def test_bars_stay_off_below_the_threshold():
    out = io.StringIO()
    with progress.Bars(min_rows=11, file=out) as bars:
        for stage, done in [("read", 0), ("checked", 10), ("write", 10)]:
            bars(stage, done)
    assert out.getvalue() == ""


def test_reporter_choices(monkeypatch):
    calls = []
    with progress.reporter(lambda stage, done: calls.append((stage, done))) as notify:
        notify("write", 3)
    assert calls == [("write", 3)]
    monkeypatch.setattr(progress, "watched", lambda: False)   # a pipe, a log file, CI
    with progress.reporter() as notify:
        assert not isinstance(notify, progress.Bars)
    with progress.reporter(True) as notify:
        assert isinstance(notify, progress.Bars) and notify.min_rows == 1
    monkeypatch.setattr(progress, "watched", lambda: True)    # a terminal or a notebook
    with progress.reporter() as notify:
        assert isinstance(notify, progress.Bars) and notify.min_rows == progress.MIN_ROWS
    with progress.reporter(False) as notify:
        assert not isinstance(notify, progress.Bars)
    with progress.quiet(), progress.reporter() as notify:
        assert not isinstance(notify, progress.Bars)


def test_backfill_reports_its_stages(mem):
    calls: list[tuple[str, int]] = []
    report = mem.backfill([*_rows(3), {**_rows(1)[0], "subject": "r", "retracted_at": "2025-02-01"}],
                          progress=lambda stage, done: calls.append((stage, done)))
    assert report.loaded == 4
    assert calls[:2] == [("read", 0), ("checked", 4)]
    assert calls[-1] == ("write", 5)  # the retracted row is two revisions


def test_cli_backfill_bar_on_a_terminal_and_none_with_json(tmp_path, monkeypatch):
    data = tmp_path / "in.csv"
    data.write_text("subject,predicate,object,recorded_at\n" + "".join(f"s{i},p,o,2025-01-01\n" for i in range(5)))
    monkeypatch.setattr(progress, "watched", lambda: True)
    monkeypatch.setattr(progress, "MIN_ROWS", 5)
    runner = CliRunner()
    store = str(tmp_path / "s")
    assert runner.invoke(cli, ["--store", store, "init"]).exit_code == 0
    shown = runner.invoke(cli, ["--store", store, "backfill", str(data)])
    assert shown.exit_code == 0 and "writing revisions" in shown.stderr and "rows_read" in shown.stdout
    assert "writing revisions" not in shown.stdout
    quiet = runner.invoke(cli, ["--store", store, "backfill", str(data), "--json"])
    assert quiet.exit_code == 0 and quiet.stderr == ""
    assert json.loads(quiet.stdout)["rows_read"] == 5


def test_embed_in_slices_gives_the_same_vectors(tmp_path, monkeypatch):
    def vectors(path: Path) -> np.ndarray:
        mem = tm.open(path, create=True)
        mem.assert_many([{"subject": f"s{i}", "predicate": "p", "object": f"value {i}"} for i in range(7)])
        assert mem.embed() == 7
        rows = mem.sql("SELECT embedding FROM revisions ORDER BY subject").fetchall()
        return np.array([r[0] for r in rows])

    whole = vectors(tmp_path / "a")
    monkeypatch.setattr(recall, "_EMBED_BATCH", 3)
    assert np.array_equal(vectors(tmp_path / "b"), whole)


def test_batches_report_each_slice():
    calls: list[tuple[str, int]] = []
    slices = list(progress.batches(7, 3, lambda stage, done: calls.append((stage, done))))
    assert slices == [(0, 3), (3, 6), (6, 7)]
    assert calls == [("checked", 7), ("embed", 3), ("embed", 6), ("embed", 7)]


class _Statement:
    """A stand-in connection whose statement reports 40% then 90% done, then lets the body end."""

    def __init__(self) -> None:
        self.settings: list[str] = []
        self.shares = iter([40.0, 90.0])
        self.finished = threading.Event()

    def execute(self, sql: str) -> None:
        self.settings.append(sql)

    def query_progress(self) -> float:
        share = next(self.shares, None)
        if share is None:
            self.finished.set()
            return -1.0
        return share


def test_statement_polls_duckdb_progress():
    con, calls = _Statement(), []
    with progress.statement(con, "fold", 200, lambda stage, done: calls.append((stage, done)), every=0.001):
        assert con.finished.wait(10)
    assert con.settings == ["SET enable_progress_bar = true", "SET enable_progress_bar_print = false"]
    assert calls == [("checked", 200), ("fold", 80), ("fold", 180), ("fold", 200)]


def test_in_notebook_is_false_here():
    assert progress.in_notebook() is False
