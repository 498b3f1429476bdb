"""``tempomem demo`` (a small store of the outage story, and its answers) and ``tempomem plot``."""

from __future__ import annotations

import tempfile
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any

import click
import polars as pl

from ..errors import TempomemError
from ..store import Memory
from ..store import open as open_store
from .base import (
    cli,
    emit,
    emit_value,
    json_option,
    open_from,
    read_frame,
    side_by_side,
)


def _sample(name: str) -> Path:
    """A bundled sample file: inside the installed package, else the repository's data/."""
    packaged = resources.files("tempomem").joinpath("_data", name)
    if packaged.is_file():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[2] / "data" / name


OUTAGE = "2026-03-15T08:00:00Z"


def build_demo_store(path: Path) -> Memory:
    """Replay the checkout-api incident (data/checkout_incident.csv) into a new store.

    Each row is asserted through the normal write path with the store clock set to the row's
    ``recorded_at``, so belief times are the ones the incident really had.
    """
    rows = pl.read_csv(_sample("checkout_incident.csv"), infer_schema=False).sort("recorded_at")
    now: list[Any] = [None]
    mem = open_store(path, create=True, predicates={"depends_on": "multi"}, clock=lambda: now[0])
    for (recorded_at,), group in rows.group_by("recorded_at", maintain_order=True):
        now[0] = datetime.fromisoformat(str(recorded_at).replace("Z", "+00:00"))
        mem.assert_many(group.drop("recorded_at").with_columns(
            pl.col("valid_to").replace("", None)).to_dicts())
    return mem


@cli.command()
@click.option("--keep", type=click.Path(file_okay=False), default=None,
              help="Build the demo store here instead of a temporary folder.")
@json_option
def demo(keep: str | None, as_json: bool) -> None:
    """The checkout-api incident: what was true at the outage vs what the agent believed."""
    with tempfile.TemporaryDirectory() as tmp:
        mem = build_demo_store(Path(keep) if keep else Path(tmp) / "checkout.tm")
        both = side_by_side(mem, "checkout-api", OUTAGE, OUTAGE)
        if as_json:
            emit(both, True)
            return
        click.echo(f"checkout-api at the outage, {OUTAGE}:\n")
        emit(both, False)
        for row in both.filter(pl.col("differs")).to_dicts():
            click.echo(f"\n{row['predicate']}: the agent believed {row['as_believed']}, "
                       f"but {row['as_of']} was already true.")
        late = mem.history("checkout-api", "instance_type").filter(pl.col("object") == "m5.xlarge")
        if late.height:
            f = late.row(0, named=True)
            click.echo(f"The change to {f['object']} happened {f['valid_from']:%Y-%m-%d} "
                       f"and was recorded {f['recorded_at']:%Y-%m-%d %H:%M} UTC: "
                       f"{(f['recorded_at'] - f['valid_from']).days} days late.")
        if keep:
            click.echo(f"\nstore kept at {mem.path}; try: tempomem --store {mem.path} timeline checkout-api")




@cli.command()
@click.argument("subject", required=False)
@click.argument("predicate", required=False)
@click.option("--out", required=True, type=click.Path(dir_okay=False),
              help="Image file to write (.png, .svg or .pdf).")
@click.option("--kind", type=click.Choice(["bitemporal", "lifeline", "lag", "divergence"]), default="bitemporal",
              show_default=True,
              help="bitemporal chart of a key, lifeline of a subject, ingestion lag, or divergence rate.")
@click.option("--valid-at", default=None, help="Draw a vertical line at this valid time (a probe instant).")
@click.option("--believed-at", default=None, help="Draw a horizontal line at this belief time (bitemporal).")
@click.option("--probes", "probes_file", default=None, type=click.Path(dir_okay=False),
              help="Divergence: probes file (CSV, Parquet, JSON Lines); default: the generated probes.")
@click.option("--by", type=click.Choice(["predicate", "source"]), default="predicate", show_default=True,
              help="Divergence: one bar per predicate or per source.")
@click.option("--size", type=(float, float), default=None, metavar="W H", help="Figure size in inches.")
@click.option("--dpi", type=int, default=100, show_default=True)
@json_option
@click.pass_context
def plot(ctx: click.Context, subject: str | None, predicate: str | None, out: str, kind: str,
         valid_at: str | None, believed_at: str | None, probes_file: str | None, by: str,
         size: tuple[float, float] | None, dpi: int, as_json: bool) -> None:
    """Draw a chart of the store to an image file (no display needed).

    tempomem plot checkout-api instance_type --valid-at 2026-03-15T08:00Z --out bitemporal.png

    tempomem plot --kind divergence --probes probes.csv --out divergence.png
    """
    from .. import plot as tmplot  # matplotlib loads only for this command

    mem = open_from(ctx)
    sized = {"dpi": dpi, **({"figsize": size} if size else {})}
    if probes_file is not None and kind != "divergence":
        raise TempomemError("probes: --probes applies to --kind divergence only")
    counts: dict[str, int] = {}
    if kind == "divergence":
        from ..probes import divergence

        result = divergence(mem, read_frame(probes_file) if probes_file else None)
        counts = {"probes": result.height, "diverged": int(result["diverged"].sum())}
        fig = tmplot.divergence(result, by=by, out=out, **sized)
    elif kind == "lag":
        fig = tmplot.ingestion_lag(mem, out=out, **sized)
    elif subject is None:
        raise TempomemError(f"subject: the {kind} chart needs a SUBJECT")
    elif kind == "lifeline":
        fig = tmplot.lifeline(mem, subject, valid_at=valid_at, out=out, **sized)
    else:
        fig = tmplot.bitemporal(mem, subject, predicate, valid_at=valid_at, believed_at=believed_at, out=out,
                                **sized)
    width, height = (round(v) for v in fig.get_size_inches() * fig.dpi)
    emit_value({"out": out, "kind": kind, "width": width, "height": height, **counts}, as_json)
