"""The commands on facts: init, assert, invalidate, correct, the queries, recall, traverse, sql, check."""

from __future__ import annotations

import sys

import click
import polars as pl

from ..errors import TempomemError
from ..store import open as open_store
from .base import (
    AUDIT_COLUMNS,
    FACT_COLUMNS,
    cli,
    emit,
    emit_value,
    fact_dict,
    json_option,
    open_from,
    side_by_side,
)


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
    emit_value(fact_dict(fact), as_json)


@cli.command()
@click.argument("fact_id")
@click.option("--at", required=True, help="When the fact stopped being true (ISO-8601).")
@click.option("--reason", required=True)
@json_option
@click.pass_context
def invalidate(ctx: click.Context, fact_id: str, at: str, reason: str, as_json: bool) -> None:
    """Record that a fact ended in the world at --at."""
    emit_value(fact_dict(open_from(ctx).invalidate(fact_id, at=at, reason=reason)), as_json)


@cli.command()
@click.argument("fact_id")
@click.option("--reason", required=True)
@json_option
@click.pass_context
def correct(ctx: click.Context, fact_id: str, reason: str, as_json: bool) -> None:
    """Retract a fact as never true."""
    emit_value(fact_dict(open_from(ctx).correct(fact_id, reason=reason)), as_json)


@cli.command()
@click.argument("subject")
@json_option
@click.pass_context
def current(ctx: click.Context, subject: str, as_json: bool) -> None:
    """Facts about SUBJECT valid now and believed now."""
    emit(open_from(ctx).current(subject), as_json, FACT_COLUMNS)


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
        emit(mem.as_of(at, subject), as_json, FACT_COLUMNS)
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
    emit(df, as_json, AUDIT_COLUMNS if revisions else [*FACT_COLUMNS, "reason"])


@cli.command()
@click.argument("subject")
@json_option
@click.pass_context
def timeline(ctx: click.Context, subject: str, as_json: bool) -> None:
    """The audit view of SUBJECT: every revision, with status and reasons."""
    emit(open_from(ctx).timeline(subject), as_json, AUDIT_COLUMNS)


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
    from .. import graph

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
