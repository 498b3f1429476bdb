"""The matplotlib plumbing of :mod:`tempomem.plot`'s charts: figures on their own canvas,
saving, value colours and date axes. pyplot is never used (no global state, no GUI backend)."""

from __future__ import annotations

import io
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

try:
    import matplotlib
    from matplotlib.figure import Figure
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("tempomem.plot needs matplotlib, a dependency of tempomem: pip install tempomem") from exc

import matplotlib.dates as mdates
from matplotlib.backends.backend_agg import FigureCanvasAgg

from .errors import TempomemError

#: Object colours, assigned in order of first appearance so one value keeps one colour.
PALETTE = list(matplotlib.colormaps["tab10"].colors)


class _Figure(Figure):
    """A matplotlib Figure that Jupyter shows as a PNG even when pyplot was never imported."""

    def _repr_png_(self) -> bytes:
        buffer = io.BytesIO()
        self.savefig(buffer, format="png", dpi=self.dpi)
        return buffer.getvalue()


def figure(figsize: tuple[float, float], dpi: int) -> Figure:
    """A figure on its own Agg canvas (never pyplot: no global state, no GUI backend)."""
    fig = _Figure(figsize=figsize, dpi=dpi, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def save(fig: Figure, out: str | os.PathLike[str] | None) -> Figure:
    """Write ``fig`` to ``out`` (when given) in the format its extension names, PNG without one.
    A format matplotlib cannot draw, or a file it cannot write, raises a TempomemError naming
    ``out`` and leaves no file behind."""
    if out is None:
        return fig
    path = Path(out)
    kind = path.suffix.lower().removeprefix(".")
    if kind and kind not in fig.canvas.get_supported_filetypes():
        raise TempomemError(f"out: cannot draw a chart as .{kind} ({path}); name the file .png, .svg or .pdf")
    existed = path.exists()
    try:
        fig.savefig(os.fspath(out), dpi=fig.dpi)
    except (OSError, RuntimeError, ValueError) as exc:  # a missing folder, no permission, no LaTeX for .pgf
        if not existed:
            path.unlink(missing_ok=True)
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc).splitlines()[0]
        raise TempomemError(f"out: cannot write {path}: {reason}") from None
    return fig


def colors(objects: Sequence[str | None]) -> dict[str | None, Any]:
    return {obj: PALETTE[i % len(PALETTE)] for i, obj in enumerate(dict.fromkeys(objects))}


def date_axis(axis: Any, offset: bool = True) -> None:
    locator = mdates.AutoDateLocator(minticks=3, maxticks=7)
    axis.set_major_locator(locator)
    axis.set_major_formatter(mdates.ConciseDateFormatter(locator, show_offset=offset))
