"""The sequenced commands of the CLI (SPEC §12): ``tempomem sequenced`` and ``tempomem coalesced``.

Registered on the ``tempomem`` group when :mod:`tempomem.cli` imports this module; tables
and ``--json`` as every other command, user errors as one line and exit status 1.
"""

from __future__ import annotations

import click

from .base import cli, emit, json_option, open_from

_SEQUENCED_SHOWN = ["bin_from", "bin_to", "subject", "predicate", "object", "coverage", "fact_id"]
_COALESCED_SHOWN = ["subject", "predicate", "object", "valid_from", "valid_to", "facts", "fact_ids"]


def _believed_at(fn: click.decorators.FC) -> click.decorators.FC:
    return click.option("--believed-at", default=None, help="Rewind the belief to this time (default: now).")(fn)


def _keys(fn: click.decorators.FC) -> click.decorators.FC:
    fn = click.option("--predicate", default=None, help="Only this predicate.")(fn)
    return click.option("--subject", default=None, help="Only this subject.")(fn)


@cli.command("sequenced")
@click.option("--from", "from_at", required=True, help="Window start (inclusive), valid time.")
@click.option("--to", "to_at", required=True, help="Window end (exclusive), valid time.")
@click.option("--every", required=True, help="Bin length: 1d, 6h, 15m, 1w, 1mo (calendar months), 1mo15d, ...")
@_believed_at
@_keys
@json_option
@click.pass_context
def sequenced_cmd(ctx: click.Context, from_at: str, to_at: str, every: str, believed_at: str | None,
                  subject: str | None, predicate: str | None, as_json: bool) -> None:
    """The believed facts on the bins of [FROM, TO): one row per bin and fact, with its coverage.

    tempomem sequenced --from 2026-03-01 --to 2026-04-01 --every 1d --subject checkout-api
    """
    df = open_from(ctx).sequenced(from_at, to_at, every, believed_at=believed_at, subject=subject,
                                  predicate=predicate)
    emit(df, as_json, _SEQUENCED_SHOWN)


@cli.command("coalesced")
@_believed_at
@_keys
@json_option
@click.pass_context
def coalesced_cmd(ctx: click.Context, believed_at: str | None, subject: str | None, predicate: str | None,
                  as_json: bool) -> None:
    """The believed facts of each value merged into maximal periods (overlapping or meeting).

    tempomem coalesced --subject checkout-api --believed-at 2026-03-15T08:00Z
    """
    df = open_from(ctx).coalesced(believed_at=believed_at, subject=subject, predicate=predicate)
    emit(df, as_json, _COALESCED_SHOWN)
