"""The analytics commands: diff, probe, lag, exposure, audit, and forget (erasure)."""

from __future__ import annotations

import json

import click

from .base import (
    cli,
    emit,
    emit_value,
    json_option,
    open_from,
    read_frame,
    readable_frame,
)

_CHANGED_SHOWN = ["recorded_at", "subject", "predicate", "before_object", "before_valid_from", "before_valid_to",
                  "after_object", "after_valid_from", "after_valid_to", "reason"]
_DIFF_SHOWN = {
    "created": ["recorded_at", "fact_id", "subject", "predicate", "object", "valid_from", "valid_to", "source"],
    "changed": _CHANGED_SHOWN,
    "retracted": ["retracted_at", "fact_id", "subject", "predicate", "object", "reason"],
    "new_entities": None,
    "forgotten_entities": None,
}


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
        click.echo(json.dumps({name: readable_frame(getattr(d, name).drop("embedding", strict=False)).to_dicts()
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
    from ..probes import divergence, summary

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
    from ..reports import ingestion_lag

    emit(ingestion_lag(open_from(ctx), by=by, threshold=threshold), as_json)


@cli.command()
@json_option
@click.pass_context
def exposure(ctx: click.Context, as_json: bool) -> None:
    """Belief windows in which a superseded or retracted value was still served, longest first."""
    from ..reports import exposure as exposure_report

    emit(exposure_report(open_from(ctx)), as_json,
         ["exposure", "exposure_from", "exposure_to", "subject", "predicate", "object", "status", "fact_id"])


@cli.command()
@click.argument("decisions_file", type=click.Path(dir_okay=False))
@json_option
@click.pass_context
def audit(ctx: click.Context, decisions_file: str, as_json: bool) -> None:
    """Audit agent decisions (decision_id, decided_at, subject, predicate, object_used) against memory."""
    from ..reports import decision_audit

    emit(decision_audit(open_from(ctx), read_frame(decisions_file)), as_json)


@cli.command()
@click.argument("subject")
@click.option("--reason", required=True, help="Why the subject is erased (kept on the tombstones).")
@click.option("--scope", default=None, help="Only in this scope (default: every scope).")
@json_option
@click.pass_context
def forget(ctx: click.Context, subject: str, reason: str, scope: str | None, as_json: bool) -> None:
    """Erase SUBJECT from every file of the store, leaving hashed tombstones."""
    from ..erasure import hash_subject

    mem = open_from(ctx)
    erased = mem.forget(subject, reason=reason, scope=scope)
    emit_value({"subject": hash_subject(mem.reader.storage.read_settings()["salt"], subject), "erased_facts": erased,
                "reason": reason}, as_json)
