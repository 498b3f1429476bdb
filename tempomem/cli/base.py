"""The ``tempomem`` group and what its commands share: opening the store, tables and JSON."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import click
import polars as pl

from ..errors import TempomemError
from ..progress import quiet
from ..storage import Storage
from ..store import Memory
from ..store import open as open_store
from ..times import iso

_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S%.6fZ"


class _Group(click.Group):
    """Turns tempomem's errors into one clear line and a non-zero exit, never a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except TempomemError as exc:
            raise click.ClickException(_one_line(str(exc))) from None
        except KeyError as exc:
            raise click.ClickException(_one_line(str(exc.args[0]) if exc.args else "not found")) from None


def _one_line(message: str) -> str:
    return " ".join(message.split())


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--store", envvar="TEMPOMEM_STORE", type=click.Path(file_okay=False),
              help="Store folder (default: $TEMPOMEM_STORE).")
@click.pass_context
def cli(ctx: click.Context, store: str | None) -> None:
    """tempomem: bitemporal memory for AI agents."""
    ctx.obj = {"store": store}


def main() -> None:
    """Entry point of the ``tempomem`` script."""
    cli(prog_name="tempomem")


# -- helpers shared by the commands ------------------------------------------------------------


def json_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Add ``--json`` to a command; with it, no progress bar is drawn (tempomem.progress.quiet)."""
    @functools.wraps(fn)
    def command(*args: Any, **kwargs: Any) -> Any:
        if not kwargs.get("as_json"):
            return fn(*args, **kwargs)
        with quiet():
            return fn(*args, **kwargs)

    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")(command)


def open_from(ctx: click.Context, *, create: bool = False) -> Memory:
    """The store named by ``--store`` / ``TEMPOMEM_STORE``."""
    path = ctx.obj.get("store")
    if not path:
        raise TempomemError("store: give --store PATH or set TEMPOMEM_STORE")
    if not create and not Storage.exists(path):  # the API's message names its create= argument
        raise TempomemError(f"store: no tempomem store at {path}; make one with: tempomem --store {path} init")
    return open_store(path, create=create)


def readable_frame(df: pl.DataFrame) -> pl.DataFrame:
    """Times as ISO-8601 UTC strings, lists joined: what a person or a JSON reader wants."""
    exprs = []
    for name, dtype in df.schema.items():
        if isinstance(dtype, pl.Datetime):
            exprs.append(pl.col(name).dt.convert_time_zone("UTC").dt.strftime(_TIME_FORMAT)
                         .str.replace(r"\.000000Z$", "Z"))
        elif isinstance(dtype, pl.Duration):  # Polars 2 cannot cast a duration to text
            exprs.append(pl.col(name).dt.to_string("polars"))
    return df.with_columns(exprs) if exprs else df


def emit(df: pl.DataFrame, as_json: bool, columns: list[str] | None = None) -> None:
    """Print a frame as a table (``columns`` only) or, with ``--json``, as JSON rows (all columns)."""
    if as_json:
        readable = readable_frame(df.drop([c for c in ("embedding",) if c in df.columns]))
        click.echo(json.dumps(readable.to_dicts(), default=str))
        return
    shown = readable_frame(df.select([c for c in columns if c in df.columns]) if columns else df)
    if shown.is_empty():
        click.echo("(no rows)")
        return
    with pl.Config(tbl_rows=-1, tbl_cols=-1, tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=True,
                   fmt_str_lengths=60, tbl_width_chars=250, tbl_formatting="ASCII_MARKDOWN"):
        click.echo(str(shown))


def emit_value(value: dict[str, Any], as_json: bool) -> None:
    """Print one record (a fact) as ``key: value`` lines or JSON."""
    clean = {k: (iso(v) if isinstance(v, datetime) else v)
             for k, v in value.items() if k != "embedding"}
    if as_json:
        click.echo(json.dumps(clean, default=str))
    else:
        for k, v in clean.items():
            click.echo(f"{k}: {v}")


def fact_dict(fact: Any) -> dict[str, Any]:
    return {name: getattr(fact, name) for name in fact.__dataclass_fields__}


FACT_COLUMNS = ["fact_id", "subject", "predicate", "object", "valid_from", "valid_to", "status",
                 "recorded_at", "source", "confidence"]
AUDIT_COLUMNS = ["recorded_at", "believed_until", "fact_id", "revision", "predicate", "object",
                  "valid_from", "valid_to", "status", "reason", "source"]


def side_by_side(mem: Memory, subject: str, valid_at: Any, believed_at: Any) -> pl.DataFrame:
    """Per predicate: what was true at ``valid_at`` and what was believed at ``believed_at``.

    Several values of a multi-valued predicate are sorted and joined by ``" | "``.
    """
    def answer(df: pl.DataFrame, name: str) -> pl.DataFrame:
        return df.group_by("predicate").agg(pl.col("object").sort().str.join(" | ").alias(name))

    true = answer(mem.as_of(valid_at, subject), "as_of")
    believed = answer(mem.as_believed(valid_at, believed_at, subject), "as_believed")
    both = true.join(believed, on="predicate", how="full", coalesce=True).sort("predicate")
    return both.with_columns(differs=pl.col("as_of").ne_missing(pl.col("as_believed")))


def read_frame(path: str) -> pl.DataFrame:
    """A CSV, Parquet or JSON Lines file (by extension) as a Polars frame."""
    file = Path(path)
    if not file.is_file():
        raise TempomemError(f"file: {path} does not exist")
    suffix = file.suffix.lower()
    try:
        if suffix == ".parquet":
            return pl.read_parquet(file)
        if suffix in (".jsonl", ".ndjson"):
            return pl.read_ndjson(file)
        if suffix == ".csv":
            return pl.read_csv(file, infer_schema_length=0)   # times stay text: tempomem reads them
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise TempomemError(f"file: cannot read {path}: {exc}") from None
    raise TempomemError(f"file: {path}: expected a .csv, .parquet or .jsonl file")
