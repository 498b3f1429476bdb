"""``tempomem backfill`` and ``tempomem export``: history in and out."""

from __future__ import annotations

import json

import click
import polars as pl

from ..errors import TempomemError
from ..progress import reporter
from .base import (
    cli,
    emit,
    emit_value,
    json_option,
    open_from,
)


@cli.command()
@click.argument("file", type=click.Path())
@click.option("--map", "maps", multiple=True, metavar="SRC=DST", help="Rename a source column (repeatable).")
@click.option("--format", "fmt", default=None,
              help="parquet, csv, jsonl, or an importer: graphiti, mem0, sqlite4ts (default: by extension).")
@click.option("--epoch-unit", type=click.Choice(["s", "ms", "us"]), default=None,
              help="Read bare numbers as epochs in this unit (without it a number is a rejected row).")
@click.option("--lenient", is_flag=True, help="Unreadable valid times count as missing; future beliefs load.")
@click.option("--strict", is_flag=True, help="All or nothing: load nothing if any row is rejected.")
@click.option("--resolve", is_flag=True, help="Replay the rows through the write path in recorded_at order.")
@json_option
@click.pass_context
def backfill(ctx: click.Context, file: str, maps: tuple[str, ...], fmt: str | None, epoch_unit: str | None,
             lenient: bool, strict: bool, resolve: bool, as_json: bool) -> None:
    """Load existing history (a file, folder or glob) keeping its original times.

    tempomem backfill export.csv --map ts=recorded_at --map entity=subject
    """
    from ..errors import BackfillError

    mapping = {}
    for item in maps:
        src, sep, dst = item.partition("=")
        if not sep or not src or not dst:
            raise TempomemError(f"--map: expected SRC=DST, got {item!r}")
        mapping[src] = dst
    mem = open_from(ctx)
    try:
        # bars on stderr for a load of a million rows or more, when stderr is a terminal
        with reporter(False if as_json else None) as progress:
            report = mem.backfill(file, mapping=mapping, format=fmt, lenient=lenient, strict=strict,
                                  resolve=resolve, epoch_unit=epoch_unit, progress=progress)
    except BackfillError as exc:
        if as_json:
            click.echo(json.dumps(exc.report.to_dict(), default=str))
        raise
    if as_json:
        click.echo(json.dumps(report.to_dict(), default=str))
        return
    summary = pl.DataFrame({
        "rows_read": [report.rows_read], "loaded": [report.loaded], "rejected": [report.rejected.height],
        "fixed": [report.fixed], "duplicates": [report.duplicates], "revisions": [report.revisions],
    })
    emit(summary, False)
    if report.flags.height:
        click.echo("flags:")
        emit(report.flags, False)
    if report.rejected.height:
        click.echo("rejected rows:")
        emit(report.rejected, False)


@cli.command()
@click.argument("out", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["parquet", "csv"]), default=None,
              help="By default the one OUT's extension names (.csv: csv), else parquet.")
@json_option
@click.pass_context
def export(ctx: click.Context, out: str, fmt: str | None, as_json: bool) -> None:
    """Write every revision to a Parquet or CSV file that `tempomem backfill` reads back.

    tempomem export memory.parquet
    """
    from ..export import export as run_export
    from ..export import format_for

    chosen = format_for(out, fmt)
    rows = run_export(open_from(ctx), out, chosen)
    emit_value({"out": out, "format": chosen, "rows": rows}, as_json)
