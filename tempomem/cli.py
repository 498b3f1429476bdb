"""The ``tempomem`` command line: tables for people, ``--json`` for machines.

Every command takes the store from ``--store PATH`` or ``TEMPOMEM_STORE``. A user error prints
one line on stderr and exits with status 1; usage errors exit with status 2.
"""

from __future__ import annotations

import functools
import json
import sys
import tempfile
from collections.abc import Callable
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any

import click
import polars as pl

from .errors import TempomemError
from .progress import quiet, reporter
from .store import Memory
from .store import open as open_store
from .times import iso

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
    return open_store(path, create=create)


def _readable(df: pl.DataFrame) -> pl.DataFrame:
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
        readable = _readable(df.drop([c for c in ("embedding",) if c in df.columns]))
        click.echo(json.dumps(readable.to_dicts(), default=str))
        return
    shown = _readable(df.select([c for c in columns if c in df.columns]) if columns else df)
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


def _fact_dict(fact: Any) -> dict[str, Any]:
    return {name: getattr(fact, name) for name in fact.__dataclass_fields__}


_FACT_COLUMNS = ["fact_id", "subject", "predicate", "object", "valid_from", "valid_to", "status",
                 "recorded_at", "source", "confidence"]
_AUDIT_COLUMNS = ["recorded_at", "believed_until", "fact_id", "revision", "predicate", "object",
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


# -- commands ------------------------------------------------------------------------------------


@cli.command()
@click.option("--policy", type=click.Choice(["last_write_wins", "reject"]), default=None,
              help="Default policy of single-valued predicates.")
@click.option("--multi", multiple=True, metavar="PREDICATE", help="Declare a multi-valued predicate.")
@click.pass_context
def init(ctx: click.Context, policy: str | None, multi: tuple[str, ...]) -> None:
    """Create a store (or update the settings of an existing one)."""
    path = ctx.obj.get("store")
    if not path:
        raise TempomemError("store: give --store PATH or set TEMPOMEM_STORE")
    mem = open_store(path, create=True, policy=policy, predicates={p: "multi" for p in multi})
    click.echo(f"store ready at {mem.path}")


@cli.command("assert")
@click.argument("triple", nargs=-1, required=True)
@click.option("--from", "valid_from", help="Valid from (ISO-8601; default unknown).")
@click.option("--to", "valid_to", help="Valid to, exclusive (default: still true).")
@click.option("--source", default="user", show_default=True)
@click.option("--confidence", type=float, default=0.9, show_default=True)
@click.option("--scope", default="default", show_default=True)
@click.option("--text", default=None, help="Human-readable form (default: the triple).")
@json_option
@click.pass_context
def assert_cmd(ctx: click.Context, triple: tuple[str, ...], valid_from: str | None, valid_to: str | None,
               source: str, confidence: float, scope: str, text: str | None, as_json: bool) -> None:
    """Assert a fact: "SUBJECT PREDICATE OBJECT" (the object may contain spaces)."""
    parts = list(triple) if len(triple) == 3 else " ".join(triple).split(maxsplit=2)
    if len(parts) != 3:
        raise TempomemError('triple: expected "SUBJECT PREDICATE OBJECT"')
    mem = open_from(ctx)
    fact = mem.assert_fact(*parts, valid_from=valid_from, valid_to=valid_to, source=source,
                           confidence=confidence, scope=scope, text=text)
    emit_value(_fact_dict(fact), as_json)


@cli.command()
@click.argument("fact_id")
@click.option("--at", required=True, help="When the fact stopped being true (ISO-8601).")
@click.option("--reason", required=True)
@json_option
@click.pass_context
def invalidate(ctx: click.Context, fact_id: str, at: str, reason: str, as_json: bool) -> None:
    """Record that a fact ended in the world at --at."""
    emit_value(_fact_dict(open_from(ctx).invalidate(fact_id, at=at, reason=reason)), as_json)


@cli.command()
@click.argument("fact_id")
@click.option("--reason", required=True)
@json_option
@click.pass_context
def correct(ctx: click.Context, fact_id: str, reason: str, as_json: bool) -> None:
    """Retract a fact as never true."""
    emit_value(_fact_dict(open_from(ctx).correct(fact_id, reason=reason)), as_json)


@cli.command()
@click.argument("subject")
@json_option
@click.pass_context
def current(ctx: click.Context, subject: str, as_json: bool) -> None:
    """Facts about SUBJECT valid now and believed now."""
    emit(open_from(ctx).current(subject), as_json, _FACT_COLUMNS)


@cli.command("as-of")
@click.argument("subject")
@click.option("--at", required=True, help="Valid time to ask about.")
@click.option("--believed-at", default=None, help="Also show what was believed at this time.")
@json_option
@click.pass_context
def as_of_cmd(ctx: click.Context, subject: str, at: str, believed_at: str | None, as_json: bool) -> None:
    """What was true about SUBJECT at --at; with --believed-at, both answers side by side."""
    mem = open_from(ctx)
    if believed_at is None:
        emit(mem.as_of(at, subject), as_json, _FACT_COLUMNS)
        return
    both = side_by_side(mem, subject, at, believed_at)
    if as_json or both["differs"].any():
        emit(both, as_json)
    else:
        click.echo("as_of and as_believed agree:")
        emit(both.drop("as_believed", "differs"), as_json)


@cli.command()
@click.argument("subject")
@click.argument("predicate", required=False)
@click.option("--revisions", is_flag=True, help="Every revision instead of one row per fact.")
@json_option
@click.pass_context
def history(ctx: click.Context, subject: str, predicate: str | None, revisions: bool, as_json: bool) -> None:
    """Every fact ever recorded on a key, retracted ones included, in belief order."""
    df = open_from(ctx).history(subject, predicate, revisions=revisions)
    emit(df, as_json, _AUDIT_COLUMNS if revisions else [*_FACT_COLUMNS, "reason"])


@cli.command()
@click.argument("subject")
@json_option
@click.pass_context
def timeline(ctx: click.Context, subject: str, as_json: bool) -> None:
    """The audit view of SUBJECT: every revision, with status and reasons."""
    emit(open_from(ctx).timeline(subject), as_json, _AUDIT_COLUMNS)


@cli.command()
@click.argument("text")
@click.option("--at", "valid_at", default=None, help="Valid time to ask about (default: now).")
@click.option("--believed-at", default=None, help="Belief time to rewind to (default: now).")
@click.option("-k", "k", default=5, show_default=True, type=int, help="How many facts.")
@json_option
@click.pass_context
def recall(ctx: click.Context, text: str, valid_at: str | None, believed_at: str | None, k: int,
           as_json: bool) -> None:
    """The K facts in force (at --at, as believed at --believed-at) most similar to TEXT."""
    df = open_from(ctx).recall(text, k=k, valid_at=valid_at, believed_at=believed_at)
    emit(df, as_json, ["score", "fact_id", "subject", "predicate", "object", "valid_from", "valid_to", "status"])


@cli.command()
@click.argument("start")
@click.option("--depth", default=2, show_default=True, type=int, help="Most hops.")
@click.option("--at", "valid_at", default=None, help="Valid time of the slice (default: now).")
@click.option("--believed-at", default=None, help="Belief time of the slice (default: now).")
@json_option
@click.pass_context
def traverse(ctx: click.Context, start: str, depth: int, valid_at: str | None, believed_at: str | None,
             as_json: bool) -> None:
    """Entities reached from START over the typed links in force, best score first."""
    from . import graph

    df = graph.traverse(open_from(ctx), start, depth, valid_at=valid_at, believed_at=believed_at)
    emit(df if as_json else df.with_columns(pl.col("path").list.join(" > ")), as_json)


@cli.command()
@click.argument("query")
@json_option
@click.pass_context
def sql(ctx: click.Context, query: str, as_json: bool) -> None:
    """Run a SQL query against the store's views and macros."""
    rel = open_from(ctx).sql(query)
    try:
        df = rel.pl()
    except Exception as exc:  # DuckDB raises its own error types at fetch time
        raise TempomemError(f"sql: {exc}") from None
    emit(df, as_json)


@cli.command()
@json_option
@click.pass_context
def check(ctx: click.Context, as_json: bool) -> None:
    """Verify the store's invariants; exits 1 when a problem is found."""
    report = open_from(ctx).check()
    emit(report.problems, as_json)
    if not report.ok:
        sys.exit(1)


def _sample(name: str) -> Path:
    """A bundled sample file: inside the installed package, else the repository's data/."""
    packaged = resources.files("tempomem").joinpath("_data", name)
    if packaged.is_file():
        return Path(str(packaged))
    return Path(__file__).resolve().parent.parent / "data" / name


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
    from . import plot as tmplot  # matplotlib loads only for this command

    mem = open_from(ctx)
    sized = {"dpi": dpi, **({"figsize": size} if size else {})}
    if probes_file is not None and kind != "divergence":
        raise TempomemError("probes: --probes applies to --kind divergence only")
    counts: dict[str, int] = {}
    if kind == "divergence":
        from .probes import divergence

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


# -- backfill and export -------------------------------------------------------------------------

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
    from .errors import BackfillError

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
@click.option("--format", "fmt", type=click.Choice(["parquet", "csv"]), default="parquet", show_default=True)
@json_option
@click.pass_context
def export(ctx: click.Context, out: str, fmt: str, as_json: bool) -> None:
    """Write every revision to a Parquet or CSV file that `tempomem backfill` reads back.

    tempomem export --format parquet memory.parquet
    """
    from .export import export as run_export

    rows = run_export(open_from(ctx), out, fmt)
    emit_value({"out": out, "format": fmt, "rows": rows}, as_json)


# -- analytics: diff, probes, reports, erasure ----------------------------------------------------

_CHANGED_SHOWN = ["recorded_at", "subject", "predicate", "before_object", "before_valid_from", "before_valid_to",
                  "after_object", "after_valid_from", "after_valid_to", "reason"]
_DIFF_SHOWN = {
    "created": ["recorded_at", "fact_id", "subject", "predicate", "object", "valid_from", "valid_to", "source"],
    "changed": _CHANGED_SHOWN,
    "retracted": ["retracted_at", "fact_id", "subject", "predicate", "object", "reason"],
    "new_entities": None,
    "forgotten_entities": None,
}


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


@cli.command("diff")
@click.option("--from", "from_at", required=True, help="Window start (inclusive), belief time.")
@click.option("--to", "to_at", required=True, help="Window end (exclusive), belief time.")
@click.option("--subject", "subjects", multiple=True, help="Only these subjects (repeatable).")
@click.option("--predicate", "predicates", multiple=True, help="Only these predicates (repeatable).")
@json_option
@click.pass_context
def diff_cmd(ctx: click.Context, from_at: str, to_at: str, subjects: tuple[str, ...], predicates: tuple[str, ...],
             as_json: bool) -> None:
    """What the store learned in the belief window [FROM, TO): created, changed, retracted, entities."""
    d = open_from(ctx).diff(from_at, to_at, subjects=list(subjects) or None, predicates=list(predicates) or None)
    if as_json:
        click.echo(json.dumps({name: _readable(getattr(d, name).drop("embedding", strict=False)).to_dicts()
                               for name in _DIFF_SHOWN}, default=str))
        return
    for name, columns in _DIFF_SHOWN.items():
        frame = getattr(d, name)
        click.echo(f"{name}: {frame.height}")
        if frame.height:
            emit(frame, False, columns)


@cli.command()
@click.argument("probes_file", required=False, type=click.Path(dir_okay=False))
@click.option("--summary", "summarize", is_flag=True, help="Print counts and rates per predicate and source.")
@json_option
@click.pass_context
def probe(ctx: click.Context, probes_file: str | None, summarize: bool, as_json: bool) -> None:
    """Divergence probes: what was believed at B about T vs what we now know.

    PROBES_FILE (CSV, Parquet, JSON Lines) has subject, predicate, valid_at, believed_at;
    without it, one probe is generated inside each window where a belief was wrong.
    """
    from .probes import divergence, summary

    result = divergence(open_from(ctx), read_frame(probes_file) if probes_file else None)
    emit(summary(result) if summarize else result, as_json)


@cli.command()
@click.option("--by", "by", multiple=True, default=("predicate",), show_default=True,
              help="Group by this column (repeatable): scope, subject, predicate, source, origin, link_type.")
@click.option("--threshold", default="1d", show_default=True, help="Lag counted as over (e.g. 6h, 1d, 2w).")
@json_option
@click.pass_context
def lag(ctx: click.Context, by: tuple[str, ...], threshold: str, as_json: bool) -> None:
    """Ingestion lag (recorded_at - valid_from) per group: percentiles, max, share over threshold."""
    from .reports import ingestion_lag

    emit(ingestion_lag(open_from(ctx), by=by, threshold=threshold), as_json)


@cli.command()
@json_option
@click.pass_context
def exposure(ctx: click.Context, as_json: bool) -> None:
    """Belief windows in which a superseded or retracted value was still served, longest first."""
    from .reports import exposure as exposure_report

    emit(exposure_report(open_from(ctx)), as_json,
         ["exposure", "exposure_from", "exposure_to", "subject", "predicate", "object", "status", "fact_id"])


@cli.command()
@click.argument("decisions_file", type=click.Path(dir_okay=False))
@json_option
@click.pass_context
def audit(ctx: click.Context, decisions_file: str, as_json: bool) -> None:
    """Audit agent decisions (decision_id, decided_at, subject, predicate, object_used) against memory."""
    from .reports import decision_audit

    emit(decision_audit(open_from(ctx), read_frame(decisions_file)), as_json)


@cli.command()
@click.argument("subject")
@click.option("--reason", required=True, help="Why the subject is erased (kept on the tombstones).")
@click.option("--scope", default=None, help="Only in this scope (default: every scope).")
@json_option
@click.pass_context
def forget(ctx: click.Context, subject: str, reason: str, scope: str | None, as_json: bool) -> None:
    """Erase SUBJECT from every file of the store, leaving hashed tombstones."""
    from .erasure import hash_subject

    mem = open_from(ctx)
    erased = mem.forget(subject, reason=reason, scope=scope)
    emit_value({"subject": hash_subject(mem.reader.storage.read_settings()["salt"], subject), "erased_facts": erased,
                "reason": reason}, as_json)


# The sequenced commands live in their own module, which adds them to `cli` when imported.
from . import cli_sequenced  # noqa: E402, F401
