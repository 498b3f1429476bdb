"""Divergence probes (SPEC §10): did the memory's belief at B about T match what we now know?

A probe is ``(subject, predicate, valid_at, believed_at)``. For a whole frame of probes,
:func:`divergence` answers both questions in one DuckDB interval join of the probes (an Arrow
table) against ``revisions``: the latest revision of each fact gives the ``as_of`` answer (what
we now know held at ``valid_at``), the revision that was the belief at ``believed_at`` gives the
``as_believed`` answer. :func:`summary` turns the result into rates per predicate and source.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import duckdb
import polars as pl

from .connection import quote, sql_parts
from .errors import TempomemError
from .inputs import ROW, registered
from .queries import frame

if TYPE_CHECKING:
    from .store import Memory

#: The kinds of a probe, in the order they are decided.
KINDS = ("same", "not_yet_known", "corrected", "learned_late")

#: The named parts of analytics.sql (the SQL of divergence and ingestion lag, which Spark runs
#: too, tempomem.spark): ``{name: text}``.
ANALYTICS: dict[str, str] = sql_parts("analytics.sql")

# The answers to each probe of the table `_tm_probes`, shared with the decision audit
# (analytics.sql explains them).
ANSWERS_SQL = ANALYTICS["answers"]

# The two answers of each probe as single values, and whether they differ.
_OBJECTS_SQL = ANSWERS_SQL + ANALYTICS["objects"]

_DIVERGENCE = _OBJECTS_SQL + ANALYTICS["divergence"]

# An event is a probe about its own instant: what held then, and what was believed then.
_AT_EVENTS = _OBJECTS_SQL + """
SELECT a._tm_row, a.as_of_object, a.as_believed_object, a.diverged FROM answered AS a
"""
# The events as probes. Their key columns keep the caller's names, which cannot be bound as
# parameters: they enter as quoted identifiers (as inputs.register quotes them), never as text.
_EVENT_PROBES = """
CREATE OR REPLACE TEMP VIEW _tm_probes AS
SELECT e._tm_row, coalesce(e.scope, 'default') AS scope, e.{subject} AS subject, e.{predicate} AS predicate,
       e.{at} AS valid_at, e.{at} AS believed_at
FROM _tm_events_in AS e
"""
#: The columns at_events adds to an events frame.
EVENT_COLUMNS = ("as_of_object", "as_believed_object", "diverged")

#: The named parts of probes.sql (the probes divergence makes itself): ``{name: text}``.
PROBES: dict[str, str] = sql_parts("probes.sql")


def generate(mem: Memory) -> pl.DataFrame:
    """The probes :func:`divergence` uses when given none: one inside each window of a wrong belief.

    Columns ``probe_id`` (``learned_late:<fact_id>`` or ``retraction:<fact_id>``), ``scope``,
    ``subject``, ``predicate``, ``valid_at``, ``believed_at``.
    """
    with mem.reader.lock:
        return frame(mem.reader.connection(), PROBES["generated"])


def divergence(mem: Memory, probes: Any = None) -> pl.DataFrame:
    """Compare, per probe, what the memory believed at ``believed_at`` with what we now know.

    ``probes``: a frame with ``subject``, ``predicate``, ``valid_at``, ``believed_at`` (and
    optionally ``scope``, ``probe_id``); ``None`` generates them (:func:`generate`). The result
    keeps the probe columns and adds ``source``, ``as_of_object``, ``as_believed_object``
    (multi-valued answers sorted and joined by ``" | "``, NULL when nothing holds),
    ``diverged`` and ``kind`` (``same``, ``not_yet_known``, ``corrected``, ``learned_late``).

    >>> _ = mem.assert_fact("acct-7", "iban", "FR76 3000", valid_from="2026-03-01")  # learned 03-20
    >>> probe = {"subject": "acct-7", "predicate": "iban", "valid_at": "2026-03-05"}
    >>> result = tm.probes.divergence(mem, [{**probe, "believed_at": "2026-03-10"},
    ...                                     {**probe, "believed_at": "2026-03-25"}])
    >>> result.select("believed_at", "as_of_object", "as_believed_object", "kind").rows()  # probes as given
    [('2026-03-10', 'FR76 3000', None, 'not_yet_known'), ('2026-03-25', 'FR76 3000', 'FR76 3000', 'same')]
    """
    if probes is None:
        probes = generate(mem)
    with mem.reader.lock, registered(mem.reader.connection(), probes, field="probes", name="_tm_probes",
                               required=("subject", "predicate", "valid_at", "believed_at"),
                               times=("valid_at", "believed_at"), optional=("scope",)) as (con, original):
        answers = frame(con, _DIVERGENCE)
    return original.join(answers, on=ROW, how="left", maintain_order="left").drop(ROW)


def at_events(mem: Memory, events: Any, *, at: str = "at", subject: str = "subject",
              predicate: str = "predicate") -> pl.DataFrame:
    """Join any event log to the memory: what held, and what was believed, at each event's instant.

    ``events`` (tool calls, messages, alerts, payments: a Polars, pandas or Arrow frame, a
    DuckDB relation or a list of dicts) has an instant column and the key columns, named by
    ``at``, ``subject`` and ``predicate``. The result is ``events`` unchanged, every column in
    order and every row in order, plus ``as_of_object`` (what we now know held at the instant),
    ``as_believed_object`` (what the memory believed at that instant about it) and
    ``diverged``, as in :func:`divergence`: NULL when nothing holds, a multi-valued key's
    values sorted and joined by ``" | "``, NULL counting as a value in ``diverged``. A
    ``scope`` column gives each event's scope (a NULL one, and every event of a frame without
    the column, is in scope ``default``). Raises :class:`TempomemError` naming a missing
    column, an unreadable instant, or a column the result would add.

    >>> _ = mem.assert_fact("checkout-api", "region", "eu-west-1", valid_from="2026-03-01")
    >>> alerts = [{"service": "checkout-api", "predicate": "region", "fired_at": t}
    ...           for t in ("2026-03-10", "2026-03-21")]
    >>> tm.probes.at_events(mem, alerts, at="fired_at", subject="service").select(
    ...     "fired_at", "as_of_object", "as_believed_object", "diverged").rows()
    [('2026-03-10', 'eu-west-1', None, True), ('2026-03-21', 'eu-west-1', 'eu-west-1', False)]
    """
    names = {"at": at, "subject": subject, "predicate": predicate}
    if len(set(names.values())) < len(names):
        raise TempomemError(f"events: at, subject and predicate must name three columns, got {names}")
    with mem.reader.lock, _events_registered(mem, events, names) as (con, original):
        con.execute(_EVENT_PROBES.format(**{k: quote(v) for k, v in names.items()}))
        try:
            answers = frame(con, _AT_EVENTS)
        finally:
            con.execute("DROP VIEW IF EXISTS _tm_probes")
    return original.join(answers, on=ROW, how="left", maintain_order="left").drop(ROW)


@contextmanager
def _events_registered(mem: Memory, events: Any, names: dict[str, str]
                       ) -> Iterator[tuple[duckdb.DuckDBPyConnection, pl.DataFrame]]:
    """The events as the table ``_tm_events_in`` (:func:`tempomem.inputs.registered`), refusing a
    column that the result would add."""
    try:
        with registered(mem.reader.connection(), events, field="events", name="_tm_events_in",
                        required=(names["at"], names["subject"], names["predicate"]), times=(names["at"],),
                        optional=("scope",)) as (con, original):
            taken = [c for c in EVENT_COLUMNS if c in original.columns]
            if taken:
                raise TempomemError(f"events: has a column {taken[0]!r}, which the result adds; rename it")
            yield con, original
    except pl.exceptions.DuplicateError:  # the row number registered() adds
        raise TempomemError(f"events: has a column {ROW!r}, which tempomem uses; rename it") from None


def summary(result: pl.DataFrame) -> pl.DataFrame:
    """Counts and divergence rate per ``predicate`` and ``source`` of a :func:`divergence` result.

    Columns: ``predicate``, ``source``, ``probes``, ``diverged``, ``divergence_rate`` and one
    count per kind (``same``, ``not_yet_known``, ``corrected``, ``learned_late``).

    >>> _ = mem.assert_fact("acct-7", "iban", "FR76 3000", valid_from="2026-03-01")  # learned 03-20
    >>> _ = mem.assert_fact("acct-8", "iban", "DE89 3704", valid_from="2026-03-01")
    >>> tm.probes.summary(tm.probes.divergence(mem)).select("predicate", "probes", "divergence_rate").rows()
    [('iban', 2, 1.0)]
    """
    return (
        result.group_by("predicate", "source")
        .agg(
            pl.len().alias("probes"),
            pl.col("diverged").sum().alias("diverged"),
            *[(pl.col("kind") == k).sum().alias(k) for k in KINDS],
        )
        .with_columns((pl.col("diverged") / pl.col("probes")).alias("divergence_rate"))
        .select("predicate", "source", "probes", "diverged", "divergence_rate", *KINDS)
        .sort("predicate", "source", nulls_last=True)
    )
