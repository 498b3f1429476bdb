"""tm.plot.sequenced: a heat strip and a stacked area of a sequenced frame, drawing the right cells."""

from __future__ import annotations

import matplotlib.dates as mdates
import pytest
from conftest import ts
from matplotlib.patches import Rectangle
from test_plot import png_size

import tempomem as tm


@pytest.fixture
def frame(mem, clock):
    clock.set("2026-01-01")
    mem.assert_fact("api", "type", "small", valid_from="2026-01-01", valid_to="2026-01-02T06:00Z")
    mem.assert_fact("api", "type", "large", valid_from="2026-01-02T06:00Z")
    mem.assert_fact("web", "type", "small", valid_from="2026-01-02")
    return mem.sequenced("2026-01-01", "2026-01-04", "1d")


def cells(ax) -> list[tuple]:
    """(left, width, bottom, height, alpha) of every bar, rounded, left as a date string."""
    out = []
    for p in ax.patches:
        if isinstance(p, Rectangle) and p.get_width() > 0:
            left = mdates.num2date(p.get_x()).strftime("%m-%d %H:%M")
            out.append((left, round(p.get_width(), 3), round(p.get_y(), 2), round(p.get_height(), 2),
                        round(p.get_facecolor()[3], 2)))
    return sorted(out)


def test_strip_one_lane_per_value_shaded_by_coverage(frame, tmp_path):
    fig = tm.plot.sequenced(frame, out=tmp_path / "strip.png", figsize=(6, 3), dpi=50)
    assert png_size(tmp_path / "strip.png") == (300, 150)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["api: large", "api: small", "web: small"]
    assert cells(ax) == [
        ("01-01 00:00", 1.0, 0.6, 0.8, 1.0),      # api small, lane 1
        ("01-02 00:00", 1.0, -0.4, 0.8, 0.75),    # api large from 06:00: three quarters of the day
        ("01-02 00:00", 1.0, 0.6, 0.8, 0.25),     # api small until 06:00
        ("01-02 00:00", 1.0, 1.6, 0.8, 1.0),      # web small, lane 2
        ("01-03 00:00", 1.0, -0.4, 0.8, 1.0),
        ("01-03 00:00", 1.0, 1.6, 0.8, 1.0),
    ]
    top = tm.plot.sequenced(frame, top=1)   # covered: web small 2 days, api large 1.75, api small 1.25
    assert [t.get_text() for t in top.axes[0].get_yticklabels()] == ["web: small"]
    assert "2 more not shown" in top.axes[0].get_title(loc="left")


def test_area_stacks_the_summed_coverage_per_object(frame):
    ax = tm.plot.sequenced(frame, kind="area").axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["small", "large"]
    assert cells(ax) == [
        ("01-01 00:00", 1.0, 0.0, 1.0, 1.0),      # small: api
        ("01-02 00:00", 1.0, 0.0, 1.25, 1.0),     # small: api's quarter and web's whole day
        ("01-02 00:00", 1.0, 1.25, 0.75, 1.0),    # large on top
        ("01-03 00:00", 1.0, 0.0, 1.0, 1.0),
        ("01-03 00:00", 1.0, 1.0, 1.0, 1.0),
    ]
    other = tm.plot.sequenced(frame, kind="area", top=1).axes[0]
    assert [t.get_text() for t in other.get_legend().get_texts()] == ["small", "other"]


def test_bad_frames_are_clear_errors(frame):
    with pytest.raises(tm.TempomemError, match="missing column"):
        tm.plot.sequenced(frame.drop("coverage"))
    with pytest.raises(tm.TempomemError, match="no rows"):
        tm.plot.sequenced(frame.head(0))
    with pytest.raises(tm.TempomemError, match="kind"):
        tm.plot.sequenced(frame, kind="pie")
    assert frame["bin_from"].min() == ts("2026-01-01")
