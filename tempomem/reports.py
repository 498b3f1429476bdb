"""Reports over a whole store (SPEC §10): ingestion lag, exposure windows, decision audit and
displacements of trusted facts. Each is one DuckDB query (plus, for percentiles, one Polars
aggregation): ingestion lag's in ``analytics.sql`` (Spark runs it too), the others in
``reports.sql``. Retracted and erased facts never count as knowledge.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import polars as pl

from .connection import sql_parts
from .errors import TempomemError
from .inputs import ROW, registered
from .probes import ANALYTICS, ANSWERS_SQL
from .queries import frame
from .schema import FACT_COLUMNS

if TYPE_CHECKING:
    from .store import Memory

#: The named parts of reports.sql (exposure, the decision audit, displacements): ``{name: text}``.
REPORTS: dict[str, str] = sql_parts("reports.sql")

#: Columns ``ingestion_lag`` may group by.
LAG_GROUPS = ("scope", "subject", "predicate", "source", "origin", "link_type")
#: Decision verdicts, in the order they are decided.
VERDICTS = ("unknown", "mismatch", "wrong", "stale", "ok")

_UNITS = {"w": "weeks", "d": "days", "h": "hours", "m": "minutes", "s": "seconds", "ms": "milliseconds",
          "us": "microseconds"}
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(us|ms|w|d|h|m|s)")


def parse_duration(value: str | timedelta, field: str = "threshold") -> timedelta:
    """A duration from a ``timedelta`` or text such as ``"1d"``, ``"6h"``, ``"1d12h"``, ``"90s"``.

    >>> parse_duration("1d12h")
    datetime.timedelta(days=1, seconds=43200)
    """
    if isinstance(value, timedelta):
        return value
    text = value.strip().lower() if isinstance(value, str) else ""
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise TempomemError(f"{field}: expected a duration such as '1d', '6h' or '1d12h', got {value!r}")
    return sum((timedelta(**{_UNITS[u]: float(n)}) for n, u in parts), timedelta())


# -- ingestion lag -----------------------------------------------------------------------------

# The population of ingestion lag (one row per believed fact, `lag_us` NULL for an unknown or
# inferred start) and the report over it: analytics.sql, which Spark runs too.
_LAGS = ANALYTICS["lags"]
_LAG_REPORT = ANALYTICS["lag_report"]


def _groups(by: Sequence[str] | str) -> list[str]:
    groups = [by] if isinstance(by, str) else list(by)
    unknown = [g for g in groups if g not in LAG_GROUPS]
    if unknown:
        raise TempomemError(f"by: cannot group by {unknown[0]!r}; choose from {', '.join(LAG_GROUPS)}")
    return groups


def fact_lags(mem: Memory, by: Sequence[str] = ("predicate",)) -> pl.DataFrame:
    """The facts :func:`ingestion_lag` measures, one row each: the ``by`` columns and ``lag``.

    ``lag`` (a Polars duration) is ``recorded_at − valid_from``, null for a fact whose start is
    unknown or inferred. Retracted and erased facts are not rows. ``tm.plot.ingestion_lag``
    draws this frame, so the chart and the report count the same facts.

    >>> _ = mem.backfill([
    ...     {"subject": "svc-a", "predicate": "region", "object": "eu-west-1", "valid_from": "2026-03-01",
    ...      "recorded_at": "2026-03-01T06:00Z"},
    ...     {"subject": "svc-b", "predicate": "region", "object": "us-east-1", "valid_from": "2026-03-01",
    ...      "recorded_at": "2026-03-03"}])
    >>> tm.reports.fact_lags(mem).sort("lag").rows()
    [('region', datetime.timedelta(seconds=21600)), ('region', datetime.timedelta(days=2))]
    """
    groups = _groups(by)
    # the group names are checked against LAG_GROUPS: fixed identifiers, never user text
    query = _LAGS.format(groups=", ".join(f"f.{g}" for g in groups) or "NULL AS _all")
    with mem.reader.lock:
        out = frame(mem.reader.connection(), query)
    return out.select(*groups, lag=pl.col("lag_us").cast(pl.Duration("us")))


def ingestion_lag(mem: Memory, by: Sequence[str] = ("predicate",), threshold: str | timedelta = "1d") -> pl.DataFrame:
    """How long after a fact started did the memory learn it: ``recorded_at − valid_from``.

    Over believed facts with a known, non-inferred start; one row per group of ``by`` with
    ``count``, ``p50``, ``p90``, ``p99`` (nearest rank), ``max`` (Polars durations),
    ``share_over_threshold`` (lag strictly over ``threshold``) and ``inferred`` (facts left
    out for having no real start). A fact recorded before its start has a negative lag.

    >>> _ = mem.backfill([
    ...     {"subject": "svc-a", "predicate": "region", "object": "eu-west-1", "valid_from": "2026-03-01",
    ...      "recorded_at": "2026-03-01T06:00Z"},
    ...     {"subject": "svc-b", "predicate": "region", "object": "us-east-1", "valid_from": "2026-03-01",
    ...      "recorded_at": "2026-03-03"}])
    >>> lag = tm.reports.ingestion_lag(mem, threshold="1d")
    >>> lag.select("predicate", "count", "p50", "max", "share_over_threshold").rows()
    [('region', 2, datetime.timedelta(seconds=21600), datetime.timedelta(days=2), 0.5)]
    """
    query = lag_report_sql(by)
    limit_us = parse_duration(threshold) // timedelta(microseconds=1)
    with mem.reader.lock:
        out = frame(mem.reader.connection(), query, {"limit_us": limit_us})
    return out.with_columns(pl.col(c).cast(pl.Duration("us")) for c in ("p50", "p90", "p99", "max"))


def lag_report_sql(by: Sequence[str] | str) -> str:
    """The ingestion-lag query of analytics.sql grouped by ``by`` (names checked against
    LAG_GROUPS), with the bound parameter ``$limit_us``: DuckDB's text, which tempomem.spark ports.

    >>> "GROUP BY l.predicate" in lag_report_sql(("predicate",))
    True
    """
    groups = _groups(by)
    # the group names are checked against LAG_GROUPS: fixed identifiers, never user text
    return _LAG_REPORT.format(
        lags=_LAGS.format(groups=", ".join(f"f.{g}" for g in groups) or "NULL AS _all"),
        keys="".join(f"l.{g}, " for g in groups),
        group_by=("GROUP BY " + ", ".join(f"l.{g}" for g in groups)) if groups else "",
        order_by=("ORDER BY " + ", ".join(f"r.{g} NULLS LAST" for g in groups)) if groups else "",
    )


# -- exposure ----------------------------------------------------------------------------------


def exposure(mem: Memory) -> pl.DataFrame:
    """For each superseded or retracted fact, the belief window in which it was served though wrong.

    ``exposure_from`` is the later of the successor's ``valid_from`` and the fact's
    ``recorded_at`` (for a retraction, its ``recorded_at``), ``exposure_to`` the successor's
    ``recorded_at`` (or ``retracted_at``), ``exposure`` their difference; then the fact
    columns. Windows of zero or negative length are left out; longest first.

    >>> _ = mem.backfill([  # eu-west-1 until 03-05, which the memory learned on 03-08
    ...     {"subject": "svc", "predicate": "region", "object": "eu-west-1", "valid_from": "2026-03-01",
    ...      "recorded_at": "2026-03-01"},
    ...     {"subject": "svc", "predicate": "region", "object": "us-east-1", "valid_from": "2026-03-05",
    ...      "recorded_at": "2026-03-08"}], resolve=True)
    >>> tm.reports.exposure(mem).select("subject", "object", "exposure").rows()
    [('svc', 'eu-west-1', datetime.timedelta(days=3))]
    """
    with mem.reader.lock:
        rows = frame(mem.reader.connection(), REPORTS["exposure"])
    return (
        rows.with_columns((pl.col("exposure_to") - pl.col("exposure_from")).alias("exposure"))
        .filter(pl.col("exposure") > timedelta(0))
        .select("exposure_from", "exposure_to", "exposure", *FACT_COLUMNS)
        .sort(["exposure", "fact_id"], descending=[True, False])
    )


# -- decision audit ----------------------------------------------------------------------------

# The audit: the answers of analytics.sql to the decisions as probes, then the verdicts.
_AUDIT = ANSWERS_SQL + REPORTS["audit"]


def decision_audit(mem: Memory, decisions: Any) -> pl.DataFrame:
    """Judge agent decisions against what the memory believed then and what we know now.

    ``decisions``: a frame with ``decision_id``, ``decided_at``, ``subject``, ``predicate``,
    ``object_used`` (optionally ``scope``). Adds ``believed_object`` (believed at
    ``decided_at`` about ``decided_at``), ``true_object`` (what we now know held then) and
    ``verdict``, decided in order: ``unknown`` (nothing believed), ``mismatch`` (the value used
    was not believed), ``wrong`` (it was later retracted), ``stale`` (the world had already
    changed and that was recorded later), ``ok``.

    >>> _ = mem.backfill([{"subject": "acct-7", "predicate": "iban", "object": "FR76", "valid_from": "2026-03-01",
    ...                    "recorded_at": "2026-03-01"}])
    >>> paid = {"decided_at": "2026-03-10", "subject": "acct-7", "predicate": "iban"}
    >>> decisions = [{**paid, "decision_id": "pay-1", "object_used": "FR76"},
    ...              {**paid, "decision_id": "pay-2", "object_used": "DE89"},
    ...              {**paid, "decision_id": "pay-3", "object_used": "FR76", "decided_at": "2026-02-10"}]
    >>> tm.reports.decision_audit(mem, decisions).select("decision_id", "believed_object", "verdict").rows()
    [('pay-1', 'FR76', 'ok'), ('pay-2', 'FR76', 'mismatch'), ('pay-3', None, 'unknown')]
    """
    with mem.reader.lock, registered(mem.reader.connection(), decisions, field="decisions", name="_tm_decisions",
                               required=("decision_id", "decided_at", "subject", "predicate", "object_used"),
                               times=("decided_at",), optional=("scope",)) as (con, original):
        con.execute(REPORTS["decision_probes"])
        try:
            verdicts = frame(con, _AUDIT)
        finally:
            con.execute("DROP VIEW IF EXISTS _tm_probes")
    return original.join(verdicts, on=ROW, how="left", maintain_order="left").drop(ROW)


# -- displacements -----------------------------------------------------------------------------


def displacements(mem: Memory, trusted_sources: Sequence[str] = ("tool_verified",),
                  min_confidence: float = 0.9) -> pl.DataFrame:
    """Facts of a less trusted source (or lower confidence) that superseded a trusted fact.

    The poisoned-memory pattern: an untrusted actor asserts a new value of a single-valued key
    (a destination account) and the trusted value is closed. A fact is trusted when its
    ``source`` is in ``trusted_sources`` and its ``confidence`` is at least ``min_confidence``.
    One row per displacement: the displacing fact (``fact_id`` … ``recorded_at`` = when it
    entered, ``status``) and the ``displaced_*`` fact.

    >>> _ = mem.assert_fact("acct-7", "iban", "FR76 3000", source="tool_verified", confidence=0.99)
    >>> _ = mem.assert_fact("acct-7", "iban", "DE89 3704", source="email", confidence=0.6)
    >>> tm.reports.displacements(mem).select("object", "source", "displaced_object", "displaced_source").rows()
    [('DE89 3704', 'email', 'FR76 3000', 'tool_verified')]
    """
    sources = [trusted_sources] if isinstance(trusted_sources, str) else list(trusted_sources)
    settings = mem.reader.storage.read_settings()
    multi = [p for p, d in settings["predicates"].items() if d["arity"] == "multi"]
    with mem.reader.lock:
        return frame(mem.reader.connection(), REPORTS["displacements"],
                     {"trusted": sources, "min_confidence": float(min_confidence), "multi": multi})
