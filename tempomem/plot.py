"""Pictures of a memory: the bitemporal chart of a key, a subject's lifeline, lag and divergence.

Every function returns a :class:`matplotlib.figure.Figure` (Jupyter shows it inline) and,
with ``out="file.png"`` (or ``.svg``, ``.pdf``), also writes it there. Figures are rendered
by matplotlib's Agg canvas, so nothing needs a display or a browser. The pixel size of a
written raster image is ``figsize × dpi`` exactly (no tight bounding box), so pictures made
for a README or a report keep their size.

matplotlib is a dependency of tempomem; ``import tempomem`` does not load it, ``tm.plot``
does on first use.

>>> from matplotlib.image import imread
>>> _ = mem.assert_fact("checkout-api", "instance_type", "m5.large", valid_from="2026-03-01")
>>> fig = tm.plot.bitemporal(mem, "checkout-api", "instance_type",
...                          valid_at="2026-03-15T08:00Z", out=folder / "bitemporal.png")
>>> imread(folder / "bitemporal.png").shape  # figsize (8, 5) × dpi 100, RGBA
(500, 800, 4)
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import matplotlib.dates as mdates
import polars as pl
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

from . import figures
from .errors import TempomemError
from .plot_sequenced import sequenced
from .times import TimeLike, to_utc

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from .store import Memory

__all__ = ["bitemporal", "divergence", "ingestion_lag", "lifeline", "sequenced"]

_OPEN_ARROW = {"arrowstyle": "-|>", "color": "0.15", "lw": 1.4, "mutation_scale": 12}
_PROBE_COLOR = "#c0392b"
_BELIEF_COLOR = "#1f4e8c"
#: Log-scale ticks for durations, in seconds.
_LAG_TICKS = [(1, "1s"), (60, "1m"), (3600, "1h"), (86400, "1d"), (7 * 86400, "1w"),
              (30 * 86400, "30d"), (365 * 86400, "1y")]


def _time(value: TimeLike | None, field: str) -> datetime | None:
    return None if value is None else to_utc(value, field=field)


def _span(values: Sequence[datetime | None], minimum: timedelta = timedelta(days=1)) -> tuple[datetime, datetime]:
    """The padded range of the known instants in ``values`` (room left for open ends)."""
    known = [v for v in values if v is not None]
    lo, hi = min(known), max(known)
    width = max(hi - lo, minimum)
    return lo - width * 0.06, hi + width * 0.16


# -- (1) the bitemporal chart of one key ---------------------------------------------------------

def bitemporal(mem: Memory, subject: str, predicate: str | None = None, *, scope: str | None = None,
               valid_at: TimeLike | None = None, believed_at: TimeLike | None = None,
               out: str | os.PathLike[str] | None = None, figsize: tuple[float, float] = (8.0, 5.0),
               dpi: int = 100) -> Figure:
    """The bitemporal chart of a key: valid time across, belief time up.

    Each revision of each fact on ``(subject, predicate)`` is the rectangle
    ``[valid_from, valid_to) × [recorded_at, believed_until)`` labelled with its object;
    retracted revisions are hatched, erased ones grey. An open end (unknown start, still
    true, still believed) runs to the edge of the chart and ends in an arrow. ``valid_at``
    draws a vertical line (a probe instant) and ``believed_at`` a horizontal one (a belief
    instant): the rectangle under their crossing is what ``as_believed(valid_at,
    believed_at)`` answers. With ``predicate=None`` every predicate of the subject gets its
    own panel. Audit data: reads ``history(..., revisions=True)``, retracted facts included.

    >>> _ = mem.assert_fact("checkout-api", "instance_type", "m5.large", valid_from="2026-03-01")
    >>> _ = mem.assert_fact("checkout-api", "region", "eu-west-1", valid_from="2026-02-01")
    >>> fig = tm.plot.bitemporal(mem, "checkout-api", valid_at="2026-03-15T08:00Z",
    ...                          believed_at="2026-03-15T08:00Z", out=folder / "bitemporal.png")
    >>> [ax.get_title(loc="left") for ax in fig.axes]  # predicate=None: a panel per predicate
    ['checkout-api · instance_type', 'checkout-api · region']
    """
    probe, belief = _time(valid_at, "valid_at"), _time(believed_at, "believed_at")
    revs = mem.history(subject, predicate, scope=scope, revisions=True)
    if revs.is_empty():
        key = subject if predicate is None else f"{subject} {predicate}"
        raise TempomemError(f"subject: no facts recorded on {key!r}")
    predicates = revs["predicate"].unique(maintain_order=True).sort().to_list()
    rows = revs.to_dicts()
    x_lo, x_hi = _span([r[c] for r in rows for c in ("valid_from", "valid_to")] + [probe])
    y_lo, y_hi = _span([r[c] for r in rows for c in ("recorded_at", "believed_until")] + [belief])
    colors = figures.colors([r["object"] for r in rows])

    fig = figures.figure(figsize, dpi)
    axes = fig.subplots(len(predicates), 1, sharex=True, squeeze=False)[:, 0]
    for ax, pred in zip(axes, predicates, strict=True):
        for r in (r for r in rows if r["predicate"] == pred):
            _revision_box(ax, r, colors[r["object"]], (x_lo, x_hi), (y_lo, y_hi))
        if probe is not None:
            ax.axvline(probe, color=_PROBE_COLOR, lw=1.5, ls="--", zorder=4)
        if belief is not None:
            ax.axhline(belief, color=_BELIEF_COLOR, lw=1.5, ls=":", zorder=4)
        ax.set_xlim(x_lo, x_hi)
        ax.set_ylim(y_lo, y_hi)
        ax.set_title(f"{subject} · {pred}", loc="left", fontsize=10)
        ax.set_ylabel("belief time (recorded)")
        ax.grid(True, color="0.9", lw=0.6)
        ax.set_axisbelow(True)
        figures.date_axis(ax.xaxis)
        figures.date_axis(ax.yaxis, offset=False)
    axes[-1].set_xlabel("valid time")
    handles: list[Any] = []
    if any(r["retracted_at"] is not None or r["status"] == "retracted" for r in rows):
        handles.append(Patch(facecolor="white", edgecolor="0.3", hatch="///", label="retracted"))
    if probe is not None:
        handles.append(Line2D([], [], color=_PROBE_COLOR, ls="--", label=f"valid at {probe:%Y-%m-%d %H:%M}"))
    if belief is not None:
        handles.append(Line2D([], [], color=_BELIEF_COLOR, ls=":",
                                               label=f"believed at {belief:%Y-%m-%d %H:%M}"))
    if handles:
        fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), fontsize=8, frameon=False)
    return figures.save(fig, out)


def _revision_box(ax: Any, r: dict[str, Any], color: Any, xs: tuple[datetime, datetime],
                  ys: tuple[datetime, datetime]) -> None:
    """One revision as a rectangle; open sides reach the axis limit and carry an arrow."""
    left = r["valid_from"] or xs[0]
    right = r["valid_to"] or xs[1]
    bottom, top = r["recorded_at"], r["believed_until"] or ys[1]
    retracted = r["retracted_at"] is not None or r["status"] == "retracted"
    erased = r["status"] == "erased"
    x0, x1 = mdates.date2num(left), mdates.date2num(right)
    y0, y1 = mdates.date2num(bottom), mdates.date2num(top)
    # An empty valid span (start unknown, ended then) has no width: give it a sliver so it shows.
    width = max(x1 - x0, (mdates.date2num(xs[1]) - mdates.date2num(xs[0])) * 0.004)
    ax.add_patch(Rectangle(
        (x0, y0), width, y1 - y0,
        facecolor="0.85" if erased else (*color[:3], 0.10 if retracted else 0.35),
        edgecolor="0.5" if erased else color, lw=1.3,
        hatch="xx" if erased else ("///" if retracted else None),
        ls="--" if r["valid_from_inferred"] else "-", zorder=2,
    ))
    label = "erased" if erased else str(r["object"])
    if retracted:
        label += " (retracted)"
    ax.text((x0 + x1) / 2, (y0 + y1) / 2, label, ha="center", va="center", fontsize=8, zorder=5,
            clip_on=True, bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.8})
    # Arrows sit off the label (which is centred): the up arrow towards the right edge.
    mid_y, arrow_x = (y0 + y1) / 2, x0 + (x1 - x0) * 0.85
    if r["valid_to"] is None:
        ax.annotate("", xy=(x1, mid_y), xytext=(-22, 0), textcoords="offset points", arrowprops=_OPEN_ARROW)
    if r["valid_from"] is None:
        ax.annotate("", xy=(x0, mid_y), xytext=(22, 0), textcoords="offset points", arrowprops=_OPEN_ARROW)
    if r["believed_until"] is None:
        ax.annotate("", xy=(arrow_x, y1), xytext=(0, -18), textcoords="offset points", arrowprops=_OPEN_ARROW)


# -- (2) the lifeline of a subject ---------------------------------------------------------------

def lifeline(mem: Memory, subject: str, *, scope: str | None = None, include_retracted: bool = True,
             valid_at: TimeLike | None = None, out: str | os.PathLike[str] | None = None,
             figsize: tuple[float, float] = (9.0, 4.0), dpi: int = 100) -> Figure:
    """The lifeline of a subject: one lane per predicate, each fact a bar over its valid interval.

    Bars show the valid intervals as best we know today (the ``facts`` view); a black
    triangle marks when each fact was learned (``recorded_at``) and a dotted line joins it to
    the start, so a long line is a late lesson. Overlapping values of a multi-valued predicate
    share the lane in sub-rows. Retracted facts are drawn hatched (``include_retracted=False``
    leaves them out); erased facts are never drawn. ``valid_at`` adds a vertical line.

    >>> _ = mem.assert_fact("checkout-api", "instance_type", "m5.large", valid_from="2026-03-01")
    >>> _ = mem.assert_fact("checkout-api", "region", "eu-west-1", valid_from="2026-02-01")
    >>> fig = tm.plot.lifeline(mem, "checkout-api", valid_at="2026-03-15T08:00Z", out=folder / "life.svg")
    >>> [label.get_text() for label in fig.axes[0].get_yticklabels()]  # one lane per predicate
    ['instance_type', 'region']
    """
    probe = _time(valid_at, "valid_at")
    facts = mem.history(subject, scope=scope).filter(pl.col("status") != "erased")
    if not include_retracted:
        facts = facts.filter(pl.col("status") != "retracted")
    if facts.is_empty():
        raise TempomemError(f"subject: no facts recorded on {subject!r}")
    rows = facts.sort("predicate", "valid_from", "recorded_at", nulls_last=False).to_dicts()
    x_lo, x_hi = _span([r[c] for r in rows for c in ("valid_from", "valid_to", "recorded_at")] + [probe])
    colors = figures.colors([r["object"] for r in rows])
    lanes = _lanes(rows, x_lo, x_hi)

    fig = figures.figure(figsize, dpi)
    ax = fig.subplots()
    predicates = list(dict.fromkeys(r["predicate"] for r in rows))
    for r, (lane, sub, subs) in zip(rows, lanes, strict=True):
        height = 0.64 / subs
        y = lane - 0.28 + sub * height
        left, right = r["valid_from"] or x_lo, r["valid_to"] or x_hi
        retracted = r["status"] == "retracted"
        ax.barh(y, mdates.date2num(right) - mdates.date2num(left), left=mdates.date2num(left),
                height=height * 0.9, align="edge", color=(*colors[r["object"]][:3], 0.15 if retracted else 0.55),
                edgecolor=colors[r["object"]], hatch="///" if retracted else None,
                ls="--" if r["valid_from_inferred"] else "-", zorder=2)
        mid = y + height * 0.5
        ax.annotate(str(r["object"]), (mdates.date2num(left), mid), xytext=(4, 0), textcoords="offset points",
                    va="center", ha="left", fontsize=8, clip_on=True, zorder=5)
        # When it was learned: a marker on the bar's top edge, a dotted line back to the start.
        learned = mdates.date2num(r["recorded_at"])
        if r["valid_from"] is not None:
            ax.plot([mdates.date2num(r["valid_from"]), learned], [y, y], color="0.2", lw=1.0, ls=":", zorder=3)
        ax.plot([learned], [y], marker="v", color="0.1", ms=7, zorder=6, clip_on=False)
        if r["valid_to"] is None:
            ax.annotate("", xy=(mdates.date2num(x_hi), mid), xytext=(-18, 0), textcoords="offset points",
                        arrowprops=_OPEN_ARROW)
    if probe is not None:
        ax.axvline(probe, color=_PROBE_COLOR, lw=1.5, ls="--", zorder=4, label=f"valid at {probe:%Y-%m-%d %H:%M}")
    ax.set_yticks(range(len(predicates)), predicates)
    ax.set_ylim(len(predicates) - 0.5, -0.5)
    ax.set_xlim(x_lo, x_hi)
    figures.date_axis(ax.xaxis)
    ax.set_xlabel("valid time (bars) · ▼ when it was learned")
    ax.set_title(f"{subject}: lifeline", loc="left", fontsize=10)
    ax.grid(True, axis="x", color="0.9", lw=0.6)
    ax.set_axisbelow(True)
    if probe is not None:
        fig.legend(loc="outside lower right", fontsize=8, frameon=False)
    return figures.save(fig, out)


def _lanes(rows: list[dict[str, Any]], x_lo: datetime, x_hi: datetime) -> list[tuple[int, int, int]]:
    """(predicate lane, sub-row, sub-rows in that lane) per fact: overlapping values get sub-rows.

    Greedy interval colouring per predicate over one subject's facts (rows sorted by predicate
    and start), so two values of a multi-valued predicate never hide each other.
    """
    placed: list[tuple[int, int]] = []
    lane_of: dict[str, int] = {}
    ends: dict[str, list[datetime]] = {}
    for r in rows:
        lane = lane_of.setdefault(r["predicate"], len(lane_of))
        free = ends.setdefault(r["predicate"], [])
        start, end = r["valid_from"] or x_lo, r["valid_to"] or x_hi
        sub = next((i for i, e in enumerate(free) if e <= start), len(free))
        if sub == len(free):
            free.append(end)
        else:
            free[sub] = end
        placed.append((lane, sub))
    count = {p: len(e) for p, e in ends.items()}
    return [(lane, sub, count[r["predicate"]]) for r, (lane, sub) in zip(rows, placed, strict=True)]


# -- (3) ingestion lag ----------------------------------------------------------------------

def ingestion_lag(mem: Memory, *, out: str | os.PathLike[str] | None = None,
                  figsize: tuple[float, float] = (8.0, 4.5), dpi: int = 100) -> Figure:
    """The distribution of ingestion lag per predicate, on a log scale.

    Lag is ``recorded_at − valid_from`` over the believed facts (retracted and erased ones left
    out) with a known, non-inferred start: the rows of ``tm.reports.fact_lags``, the population
    ``tm.reports.ingestion_lag`` counts. Each predicate gets a box (quartiles, whiskers
    at p5/p95) over its individual lags drawn as dots, and a diamond at p90. A log axis cannot
    show a lag of zero or less (a fact recorded before it became true): those are counted in
    the lane label as ``≤0``.

    >>> _ = mem.backfill([
    ...     {"subject": "svc-a", "predicate": "region", "object": "eu-west-1", "valid_from": "2026-03-01",
    ...      "recorded_at": "2026-03-01T06:00Z"},
    ...     {"subject": "svc-b", "predicate": "region", "object": "us-east-1", "valid_from": "2026-03-01",
    ...      "recorded_at": "2026-03-03"}])
    >>> fig = tm.plot.ingestion_lag(mem, out=folder / "lag.png")
    >>> print(fig.axes[0].get_yticklabels()[0].get_text())  # one lane per predicate
    region
    (n=2)
    """
    from .reports import fact_lags

    lags = (fact_lags(mem, by=("predicate",)).drop_nulls("lag")
            .select("predicate", lag_s=pl.col("lag").dt.total_microseconds() / 1e6))
    if lags.is_empty():
        raise TempomemError("ingestion_lag: no fact has a known start to measure a lag from")
    per = (lags.group_by("predicate")
           .agg(pl.col("lag_s").filter(pl.col("lag_s") > 0).alias("positive"),
                (pl.col("lag_s") <= 0).sum().alias("non_positive"),
                pl.col("lag_s").filter(pl.col("lag_s") > 0).quantile(0.9, "higher").alias("p90"))
           .sort("predicate", descending=True))
    fig = figures.figure(figsize, dpi)
    ax = fig.subplots()
    labels = []
    for i, row in enumerate(per.iter_rows(named=True)):
        values = row["positive"]
        if values:
            ax.boxplot([values], positions=[i], orientation="horizontal", widths=0.55, whis=(5, 95),
                       showfliers=False, patch_artist=True,
                       boxprops={"facecolor": (*figures.PALETTE[0][:3], 0.25), "edgecolor": figures.PALETTE[0]},
                       medianprops={"color": figures.PALETTE[3], "lw": 2})
            # Deterministic jitter: dots spread by their rank so the picture is reproducible.
            jitter = [((k * 0.6180339887 + 0.5) % 1 - 0.5) * 0.4 for k in range(len(values))]
            ax.scatter(values, [i + j for j in jitter], s=8, color="0.25", alpha=0.5, zorder=3, lw=0)
            ax.scatter([row["p90"]], [i], marker="D", s=36, color=figures.PALETTE[1], zorder=4,
                       label="p90" if i == 0 or not labels else None)
        extra = f", ≤0: {row['non_positive']}" if row["non_positive"] else ""
        labels.append(f"{row['predicate']}\n(n={len(values) + row['non_positive']}{extra})")
    ax.set_xscale("log")
    ticks = [s for s, _ in _LAG_TICKS]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: dict(_LAG_TICKS).get(round(v), "")))
    ax.xaxis.set_minor_formatter(NullFormatter())
    positive = lags.filter(pl.col("lag_s") > 0)["lag_s"]
    if positive.len():
        ax.set_xlim(max(positive.min() / 3, 0.5), positive.max() * 3)
    ax.set_yticks(range(per.height), labels, fontsize=8)
    ax.set_ylim(-0.6, per.height - 0.4)
    ax.set_xlabel("ingestion lag: recorded_at − valid_from (log scale)")
    ax.set_title("How late the memory learns, per predicate", loc="left", fontsize=10)
    ax.grid(True, axis="x", which="major", color="0.88", lw=0.6)
    ax.set_axisbelow(True)
    if any(per["positive"].list.len() > 0):
        ax.legend(loc="lower right", fontsize=8)
    return figures.save(fig, out)


# -- (4) divergence rate -----------------------------------------------------------------------

#: Divergence kinds of SPEC §10 in stacking order, with their colours.
_KINDS = [("learned_late", figures.PALETTE[1]), ("corrected", figures.PALETTE[3]),
          ("not_yet_known", figures.PALETTE[7])]


def divergence(result: pl.DataFrame, *, by: str = "predicate", out: str | os.PathLike[str] | None = None,
               figsize: tuple[float, float] = (8.0, 4.0), dpi: int = 100) -> Figure:
    """Divergence rate per predicate (or per ``by`` column), split by kind.

    ``result`` is a frame of ``tm.probes.divergence`` (columns ``diverged``, ``kind`` and
    ``by``). Each bar is the share of probes whose believed answer differed from what we now
    know, stacked by kind (``learned_late``, ``corrected``, ``not_yet_known``) and labelled
    with the rate and the probe count.

    >>> _ = mem.assert_fact("acct-7", "iban", "FR76 3000", valid_from="2026-03-01")  # learned 03-20
    >>> res = tm.probes.divergence(mem)
    >>> fig = tm.plot.divergence(res, out=folder / "divergence.png")
    >>> [text.get_text().strip() for text in fig.axes[0].texts]
    ['100.0% of 1']
    """
    missing = {by, "diverged", "kind"} - set(result.columns)
    if missing:
        raise TempomemError(f"result: missing column(s) {', '.join(sorted(missing))}; "
                            "pass the frame returned by tm.probes.divergence")
    if result.is_empty():
        raise TempomemError("result: no probes to plot")
    rates = (result.group_by(by)
             .agg(pl.len().alias("probes"),
                  pl.col("diverged").fill_null(False).mean().alias("rate"),
                  *[((pl.col("kind") == k) & pl.col("diverged").fill_null(False)).mean().alias(k) for k, _ in _KINDS])
             .sort("rate", by))
    fig = figures.figure(figsize, dpi)
    ax = fig.subplots()
    names = rates[by].cast(pl.String).to_list()
    left = [0.0] * rates.height
    for kind, color in _KINDS:
        share = rates[kind].to_list()
        ax.barh(names, share, left=left, color=color, label=kind, height=0.6)
        left = [a + b for a, b in zip(left, share, strict=True)]
    for i, row in enumerate(rates.iter_rows(named=True)):
        ax.text(row["rate"], i, f"  {row['rate']:.1%} of {row['probes']}", va="center", fontsize=8)
    ax.set_xlim(0, min(1.0, max(rates["rate"].max() or 0.0, 0.05) * 1.35))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:.0%}"))
    ax.set_xlabel("share of probes where the belief differed from what we now know")
    ax.set_title(f"Divergence rate per {by}", loc="left", fontsize=10)
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(True, axis="x", color="0.9", lw=0.6)
    ax.set_axisbelow(True)
    return figures.save(fig, out)


# (5) sequenced: a frame of mem.sequenced over its bins (its own module, which uses the helpers above)
