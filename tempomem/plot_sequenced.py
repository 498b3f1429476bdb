"""``tm.plot.sequenced``: a frame of ``mem.sequenced`` as a heat strip or a stacked area over its bins.

Part of :mod:`tempomem.plot`, which re-exports it; both draw with :mod:`tempomem.figures`. Kept apart so that
each module stays short.
"""

from __future__ import annotations

import os
from typing import Any

import matplotlib.dates as mdates
import polars as pl
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from . import figures
from .errors import TempomemError

_NEEDED = ("bin_from", "bin_to", "subject", "predicate", "object", "coverage")
_OTHER = "other"


def sequenced(frame: pl.DataFrame, *, kind: str = "strip", top: int = 12, out: str | os.PathLike[str] | None = None,
              figsize: tuple[float, float] = (9.0, 4.0), dpi: int = 100) -> Figure:
    """A frame of ``mem.sequenced`` (or the ``sequenced`` macro) drawn over its bins.

    ``kind="strip"``, a heat strip: one lane per value (subject, predicate, object), each bin a
    cell in the object's colour, as opaque as the share of the bin the value covered (the
    summed ``coverage`` of its facts, at most 1). The ``top`` lanes covering most are drawn.
    ``kind="area"``, a stacked area: per bin, the summed ``coverage`` per object over every
    subject (how many facts held it, on average over the bin: "how many instances ran each
    type, day by day"); objects beyond the ``top`` largest are stacked together as ``other``.
    Labels leave out a subject or predicate that all rows share (the area never names subjects).

    >>> _ = mem.assert_fact("checkout-api", "instance_type", "m5.large", valid_from="2026-03-01")
    >>> _ = mem.assert_fact("checkout-api", "region", "eu-west-1", valid_from="2026-02-01")
    >>> df = mem.sequenced("2026-03-01", "2026-04-01", "1d", subject="checkout-api")
    >>> fig = tm.plot.sequenced(df, out=folder / "sequenced.png")
    >>> [label.get_text() for label in fig.axes[0].get_yticklabels()]  # the shared subject left out
    ['instance_type: m5.large', 'region: eu-west-1']
    """
    missing = [c for c in _NEEDED if c not in frame.columns]
    if missing:
        raise TempomemError(f"frame: missing column(s) {', '.join(missing)}; pass the frame of mem.sequenced")
    if frame.is_empty():
        raise TempomemError("frame: no rows to plot")
    if kind not in ("strip", "area"):
        raise TempomemError(f"kind: must be 'strip' or 'area', got {kind!r}")
    if top < 1:
        raise TempomemError(f"top: must be at least 1, got {top}")
    fig = figures.figure(figsize, dpi)
    ax = fig.subplots()
    if kind == "strip":
        _strip(ax, frame.with_columns(label=_label_expr(frame, ("subject", "predicate"))), top)
    else:
        _area(ax, frame.with_columns(label=_label_expr(frame, ("predicate",))), top)
    ax.set_xlim(mdates.date2num(frame["bin_from"].min()), mdates.date2num(frame["bin_to"].max()))
    figures.date_axis(ax.xaxis)
    ax.set_xlabel("valid time (bins)")
    ax.set_axisbelow(True)
    return figures.save(fig, out)


def _label_expr(frame: pl.DataFrame, keys: tuple[str, ...]) -> pl.Expr:
    """A label: those of ``keys`` that differ between rows, then the object."""
    parts = [pl.col(c) for c in keys if frame[c].n_unique() > 1]
    if not parts:
        return pl.col("object")
    return pl.concat_str([pl.concat_str(parts, separator=" · "), pl.col("object")], separator=": ")


def _cells(frame: pl.DataFrame, by: str) -> pl.DataFrame:
    """Summed coverage per bin and ``by``, with the bin's edges as matplotlib numbers."""
    return (frame.group_by("bin_from", "bin_to", by)
            .agg(pl.col("coverage").sum().alias("value"))
            .with_columns(x0=pl.col("bin_from").map_elements(mdates.date2num, return_dtype=pl.Float64),
                          x1=pl.col("bin_to").map_elements(mdates.date2num, return_dtype=pl.Float64))
            .sort("bin_from", by))


def _strip(ax: Any, frame: pl.DataFrame, top: int) -> None:
    weight = (frame.with_columns(w=pl.col("coverage") * (pl.col("bin_to") - pl.col("bin_from")).dt.total_seconds())
              .group_by("label").agg(pl.col("w").sum(), pl.col("object").first())
              .sort(["w", "label"], descending=[True, False]))
    shown = weight.head(top)
    lanes = {label: i for i, label in enumerate(sorted(shown["label"].to_list()))}
    colors = figures.colors(sorted(shown["object"].to_list()))
    object_of = dict(zip(shown["label"], shown["object"], strict=True))
    cells = _cells(frame.filter(pl.col("label").is_in(list(lanes))), "label")
    ax.bar(cells["x0"].to_list(), 0.8, width=(cells["x1"] - cells["x0"]).to_list(),
           bottom=[lanes[label] - 0.4 for label in cells["label"]], align="edge", linewidth=0,
           color=[(*colors[object_of[label]][:3], min(1.0, value))
                  for label, value in zip(cells["label"], cells["value"], strict=True)])
    ax.set_yticks(range(len(lanes)), list(lanes), fontsize=8)
    ax.set_ylim(len(lanes) - 0.5, -0.5)
    more = weight.height - shown.height
    ax.set_title("Share of each bin each value held" + (f" (top {top}; {more} more not shown)" if more else ""),
                 loc="left", fontsize=10)
    ax.grid(True, axis="x", color="0.9", lw=0.6)


def _area(ax: Any, frame: pl.DataFrame, top: int) -> None:
    totals = (frame.group_by("label").agg(pl.col("coverage").sum())
              .sort(["coverage", "label"], descending=[True, False]))
    keep = set(totals.head(top)["label"].to_list())
    grouped = frame.with_columns(pl.when(pl.col("label").is_in(list(keep))).then(pl.col("label"))
                                 .otherwise(pl.lit(_OTHER)).alias("label"))
    cells = _cells(grouped, "label")
    order = [label for label in totals["label"].to_list() if label in keep]
    if totals.height > len(keep):
        order.append(_OTHER)
    colors = figures.colors(order)
    bins = cells.select("x0", "x1").unique().sort("x0")
    bottom = dict.fromkeys(bins["x0"].to_list(), 0.0)
    for label in order:
        part = cells.filter(pl.col("label") == label)
        x0 = part["x0"].to_list()
        ax.bar(x0, part["value"].to_list(), width=(part["x1"] - part["x0"]).to_list(),
               bottom=[bottom[x] for x in x0], align="edge", linewidth=0,
               color="0.7" if label == _OTHER else colors[label], label=label)
        for x, v in zip(x0, part["value"].to_list(), strict=True):
            bottom[x] += v
    ax.set_ylabel("facts holding it (summed coverage)")
    ax.set_title("Believed values per bin", loc="left", fontsize=10)
    ax.grid(True, axis="y", color="0.9", lw=0.6)
    handles = [Patch(color="0.7" if label == _OTHER else colors[label], label=label) for label in order]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
