"""tm.plot: every chart renders headless to a PNG of the promised size and draws the right data."""

from __future__ import annotations

import struct
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import matplotlib.dates as mdates
import polars as pl
import pytest
from click.testing import CliRunner
from conftest import ts
from matplotlib.patches import Rectangle

import tempomem as tm
from tempomem.cli import cli


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk; fails unless the file is a PNG."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def d(text: str) -> float:
    return mdates.date2num(ts(text))


@pytest.fixture
def incident(mem, clock):
    """instance_type t3.large → m5.xlarge learned six days late; a region fact later retracted."""
    clock.set("2026-01-05T09:12:00Z")
    mem.assert_fact("checkout-api", "instance_type", "t3.large", valid_from="2026-01-05", source="tool_verified")
    wrong = mem.assert_fact("checkout-api", "region", "us-east-1", valid_from="2026-01-01")
    clock.set("2026-01-07T00:00:00Z")
    mem.correct(wrong.fact_id, reason="typo")
    clock.set("2026-03-16T10:30:00Z")
    mem.assert_fact("checkout-api", "instance_type", "m5.xlarge", valid_from="2026-03-10", source="tool_verified")
    return mem


def r6(values: tuple) -> tuple:
    """Floats rounded to 1e-6 days (< 0.1 s) so tuples of chart coordinates compare exactly."""
    return tuple(round(float(v), 6) if isinstance(v, float) else v for v in values)


def boxes(ax) -> list[tuple]:
    """(x0, x1, y0, y1, hatch) of every revision rectangle on an axes, sorted."""
    return sorted(r6((p.get_x(), p.get_x() + p.get_width(), p.get_y(), p.get_y() + p.get_height(), p.get_hatch()))
                  for p in ax.patches if isinstance(p, Rectangle))


def test_lazy_import_keeps_matplotlib_out():
    code = ("import sys, tempomem; assert 'matplotlib' not in sys.modules; "
            "tempomem.plot; assert 'matplotlib' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_bitemporal_png_and_rectangles(incident, tmp_path):
    out = tmp_path / "bt.png"
    fig = tm.plot.bitemporal(incident, "checkout-api", "instance_type", valid_at="2026-03-15T08:00Z",
                             believed_at="2026-03-15T08:00Z", out=out)
    assert png_size(out) == (800, 500)
    assert out.stat().st_size > 5_000
    ax = fig.axes[0]
    x_hi, y_hi = ax.get_xlim()[1], ax.get_ylim()[1]
    # Three revisions: t3.large as first believed (open in both), t3.large closed at the change,
    # m5.xlarge: open-ended ones reach the chart's edge.
    assert boxes(ax) == sorted(r6(b) for b in [
        (d("2026-01-05"), x_hi, d("2026-01-05T09:12Z"), d("2026-03-16T10:30Z"), None),
        (d("2026-01-05"), d("2026-03-10"), d("2026-03-16T10:30Z"), y_hi, None),
        (d("2026-03-10"), x_hi, d("2026-03-16T10:30Z"), y_hi, None),
    ])
    labels = sorted(t.get_text() for t in ax.texts if t.get_text())
    assert labels == ["m5.xlarge", "t3.large", "t3.large"]
    # The probe and belief lines are at the requested instants.
    (vline,), (hline,) = [ln for ln in ax.lines if ln.get_xdata()[0] == ln.get_xdata()[1]], \
        [ln for ln in ax.lines if ln.get_ydata()[0] == ln.get_ydata()[1]]
    assert mdates.date2num(vline.get_xdata()[0]) == pytest.approx(d("2026-03-15T08:00Z"))
    assert mdates.date2num(hline.get_ydata()[0]) == pytest.approx(d("2026-03-15T08:00Z"))
    # Open ends carry arrows: valid_to open on 2 revisions, believed_until open on 2.
    arrows = [a for a in ax.texts if getattr(a, "arrow_patch", None) is not None]
    assert len(arrows) == 4


def test_bitemporal_hatches_retracted_and_one_panel_per_predicate(incident, tmp_path):
    out = tmp_path / "all.svg"
    fig = tm.plot.bitemporal(incident, "checkout-api", out=out, figsize=(6, 6), dpi=80)
    assert out.read_text().lstrip().startswith("<?xml")
    assert [ax.get_title(loc="left") for ax in fig.axes] == ["checkout-api · instance_type", "checkout-api · region"]
    region = boxes(fig.axes[1])
    # us-east-1: believed from 01-05 09:12 to the correction at 01-07, then a hatched retracted revision.
    assert [(b[2], b[3], b[4]) for b in region] == [
        r6((d("2026-01-05T09:12Z"), d("2026-01-07"), None)),
        r6((d("2026-01-07"), fig.axes[1].get_ylim()[1], "///"))]
    png = tmp_path / "all.png"
    fig.savefig(png, dpi=fig.dpi)
    assert png_size(png) == (480, 480)


def test_bitemporal_unknown_key_is_a_clear_error(incident):
    with pytest.raises(tm.TempomemError, match="no facts recorded on 'checkout-api cpu'"):
        tm.plot.bitemporal(incident, "checkout-api", "cpu")


@pytest.mark.parametrize(("name", "message"), [
    ("chart.txt", r"out: cannot draw a chart as \.txt .*; name the file \.png, \.svg or \.pdf"),
    ("no-such-folder/chart.png", "out: cannot write .*chart.png: No such file or directory"),
])
def test_a_chart_that_cannot_be_written_is_a_clear_error(incident, tmp_path, name, message):
    out = tmp_path / name
    with pytest.raises(tm.TempomemError, match=message):
        tm.plot.bitemporal(incident, "checkout-api", "instance_type", out=out)
    assert not out.exists()
    svg = tmp_path / "chart.SVG"  # any case of a format matplotlib draws
    tm.plot.bitemporal(incident, "checkout-api", "instance_type", out=svg)
    assert svg.read_bytes().lstrip().startswith(b"<?xml")


def test_lifeline_bars_and_learned_markers(incident, tmp_path):
    out = tmp_path / "life.png"
    fig = tm.plot.lifeline(incident, "checkout-api", valid_at="2026-03-15T08:00Z", out=out)
    assert png_size(out) == (900, 400)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["instance_type", "region"]
    x_hi = ax.get_xlim()[1]
    spans = sorted(r6((p.get_x(), p.get_x() + p.get_width(), p.get_hatch())) for p in ax.patches
                   if isinstance(p, Rectangle))
    assert spans == [r6((d("2026-01-01"), x_hi, "///")), r6((d("2026-01-05"), d("2026-03-10"), None)),
                     r6((d("2026-03-10"), x_hi, None))]
    learned = sorted(ln.get_xdata()[0] for ln in ax.lines if ln.get_marker() == "v")
    assert learned == pytest.approx([d("2026-01-05T09:12Z"), d("2026-01-05T09:12Z"), d("2026-03-16T10:30Z")])
    without = tm.plot.lifeline(incident, "checkout-api", include_retracted=False)
    assert [t.get_text() for t in without.axes[0].get_yticklabels()] == ["instance_type"]


def test_ingestion_lag_log_scale_and_medians(mem, clock, tmp_path):
    # works_on lags: 1 h, 2 h, 3 h (median 2 h); deploy lag: 2 days; one start unknown (left out).
    clock.set("2026-02-01T00:00:00Z")
    mem.declare("works_on", "multi")
    mem.assert_many([{"subject": "ann", "predicate": "works_on", "object": o, "valid_from": f}
                     for o, f in [("a", "2026-01-31T23:00Z"), ("b", "2026-01-31T22:00Z"), ("c", "2026-01-31T21:00Z")]]
                    + [{"subject": "svc", "predicate": "deploy", "object": "v2", "valid_from": "2026-01-30"},
                       {"subject": "svc", "predicate": "owner", "object": "ann"}])
    out = tmp_path / "lag.png"
    fig = tm.plot.ingestion_lag(mem, out=out, figsize=(5, 3), dpi=120)
    assert png_size(out) == (600, 360)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log"
    assert [t.get_text() for t in ax.get_yticklabels()] == ["works_on\n(n=3)", "deploy\n(n=1)"]
    medians = sorted(ln.get_xdata()[0] for ln in ax.lines if ln.get_color() != "black" and len(ln.get_xdata()) == 2
                     and ln.get_xdata()[0] == ln.get_xdata()[1] and ln.get_linewidth() == 2)
    assert medians == pytest.approx([7200, 2 * 86400])


def test_ingestion_lag_counts_the_report_population(mem, clock):
    # deploy: lags 1 h and 5 h; a third deploy (lag 9 h) is retracted, so neither counts it
    clock.set("2026-02-01T00:00:00Z")
    mem.declare("deploy", "multi")
    facts = mem.assert_many([{"subject": "svc", "predicate": "deploy", "object": o, "valid_from": f}
                             for o, f in [("v1", "2026-01-31T23:00Z"), ("v2", "2026-01-31T19:00Z"),
                                          ("v3", "2026-01-31T15:00Z")]])
    clock.set("2026-02-02T00:00:00Z")
    mem.correct(facts[2].fact_id, reason="never deployed")
    report = tm.reports.ingestion_lag(mem)
    assert report.select("predicate", "count", "max").rows() == [("deploy", 2, timedelta(hours=5))]
    ax = tm.plot.ingestion_lag(mem).axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["deploy\n(n=2)"]
    dots = sorted(x for c in ax.collections for x, _ in c.get_offsets() if len(c.get_offsets()) > 1)
    assert dots == [3600, 5 * 3600]


def test_ingestion_lag_without_known_starts_is_an_error(mem, clock):
    mem.assert_fact("svc", "owner", "ann")
    with pytest.raises(tm.TempomemError, match="no fact has a known start"):
        tm.plot.ingestion_lag(mem)


def test_divergence_rates_per_predicate(tmp_path):
    result = pl.DataFrame({
        "predicate": ["iban", "iban", "iban", "iban", "plan", "plan"],
        "source": ["user"] * 6,
        "diverged": [True, True, False, True, False, False],
        "kind": ["learned_late", "corrected", "same", "not_yet_known", "same", "same"],
    })
    out = tmp_path / "div.png"
    fig = tm.plot.divergence(result, out=out)
    assert png_size(out) == (800, 400)
    ax = fig.axes[0]
    # Sorted by rate: plan (0 %) then iban (3 of 4 = 75 %, a quarter of each kind).
    assert [t.get_text() for t in ax.get_yticklabels()] == ["plan", "iban"]
    widths = {(round(p.get_y() + p.get_height() / 2), p.get_facecolor()): p.get_width() for p in ax.patches}
    assert sorted(w for (y, _), w in widths.items() if y == 1) == pytest.approx([0.25, 0.25, 0.25])
    assert sum(w for (y, _), w in widths.items() if y == 0) == 0
    assert [t.get_text().strip() for t in ax.texts] == ["0.0% of 2", "75.0% of 4"]
    by_source = tm.plot.divergence(result, by="source")
    assert by_source.axes[0].texts[0].get_text().strip() == "50.0% of 6"
    with pytest.raises(tm.TempomemError, match="missing column"):
        tm.plot.divergence(result.drop("kind"))


def test_cli_plot_writes_png(incident, store_path, tmp_path):
    out = tmp_path / "cli.png"
    res = CliRunner().invoke(cli, ["--store", str(store_path), "plot", "checkout-api", "instance_type",
                                   "--valid-at", "2026-03-15T08:00Z", "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    assert '"width": 800, "height": 500' in res.output
    assert png_size(out) == (800, 500)
    lag = tmp_path / "lag.png"
    res = CliRunner().invoke(cli, ["--store", str(store_path), "plot", "--kind", "lag", "--size", "4", "3",
                                   "--out", str(lag)])
    assert res.exit_code == 0, res.output
    assert png_size(lag) == (400, 300)
    res = CliRunner().invoke(cli, ["--store", str(store_path), "plot", "--kind", "lifeline", "--out", str(out)])
    assert res.exit_code == 1
    assert "needs a SUBJECT" in res.output
    res = CliRunner().invoke(cli, ["--store", str(store_path), "plot", "checkout-api", "--out",
                                   str(tmp_path / "missing" / "c.png")])
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert res.output.count("\n") == 1 and "out: cannot write" in res.output


def test_cli_plot_divergence_from_probes_file_and_generated(incident, store_path, tmp_path):
    # Hand-checked against the incident fixture: instance_type was t3.large until 2026-03-10 but
    # only recorded as m5.xlarge on 03-16; region us-east-1 was believed 01-05..01-07, then retracted.
    probes = tmp_path / "probes.csv"
    probes.write_text("subject,predicate,valid_at,believed_at\n"
                      "checkout-api,instance_type,2026-03-12,2026-03-12\n"    # t3.large vs m5.xlarge: diverged
                      "checkout-api,instance_type,2026-02-01,2026-02-01\n"    # t3.large both: same
                      "checkout-api,instance_type,2026-03-20,2026-03-20\n"    # m5.xlarge both: same
                      "checkout-api,region,2026-01-06,2026-01-06\n"           # us-east-1 vs nothing: corrected
                      "checkout-api,region,2026-02-01,2026-02-01\n")          # nothing both: same
    out = tmp_path / "div.png"
    res = CliRunner().invoke(cli, ["--store", str(store_path), "plot", "--kind", "divergence", "--probes", str(probes),
                                   "--size", "6", "3", "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    assert '"probes": 5, "diverged": 2' in res.output
    assert png_size(out) == (600, 300)
    # Without a file: one generated probe per late-learned fact (t3.large, m5.xlarge) and per
    # retraction (us-east-1), each inside a window where the belief was wrong.
    res = CliRunner().invoke(cli, ["--store", str(store_path), "plot", "--kind", "divergence", "--by", "source",
                                   "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    assert '"probes": 3, "diverged": 3' in res.output
    assert png_size(out) == (800, 400)
    res = CliRunner().invoke(cli, ["--store", str(store_path), "plot", "checkout-api", "--probes", str(probes),
                                   "--out", str(out)])
    assert res.exit_code == 1
    assert "--probes applies to --kind divergence only" in res.output
