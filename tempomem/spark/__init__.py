"""tempomem on Apache Spark (SPEC §13): the views, macros and analytics over a store's Delta table.

``register(spark, path)`` puts on a SparkSession what ``mem.connect()`` puts on a DuckDB
connection: the temp views ``facts`` and ``revisions`` and the SQL functions of SPEC §6 and §12,
their SQL derived from the package's ``.sql`` files (:mod:`tempomem.spark.port`). Writes stay
with tempomem's own engine. Needs the extra ``tempomem[spark]`` (pyspark, sqlglot).

Example (needs a JVM, so not run as a doctest)::

    from pyspark.sql import SparkSession
    import tempomem.spark as tms
    spark = SparkSession.builder.getOrCreate()
    tms.register(spark, "/data/agent-memory")
    spark.sql("SELECT subject, object FROM as_of(TIMESTAMP'2026-03-01')").show()
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

try:
    import sqlglot  # noqa: F401 (the port needs it; say which extra brings it)
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError("tempomem.spark needs the spark extra: pip install 'tempomem[spark]'") from exc

from ..errors import TempomemError
from ..probes import ANALYTICS
from ..reports import lag_report_sql, parse_duration
from . import delta, port

__all__ = ["divergence", "ingestion_lag", "register"]

#: The probe columns divergence needs (SPEC §10); `scope` and `probe_id` are optional.
PROBE_COLUMNS = ("subject", "predicate", "valid_at", "believed_at")
_ROW = "_tm_row"
_DURATIONS = ("p50", "p90", "p99", "max")


def register(spark: Any, path: str, *, version: int | None = None) -> None:
    """Register the store at ``path`` on ``spark``: views ``facts``, ``revisions``, functions
    ``tm_contains``, ``tm_overlaps``, ``tm_allen``, ``tm_is_empty`` and table functions
    ``current_facts()``, ``as_of``, ``as_believed``, ``history``, ``timeline``, ``memory_diff``,
    ``sequenced``, ``coalesced`` (SPEC §13). ``version`` reads that version of the Delta table.

    Sets the session time zone to UTC (tempomem's times are UTC instants) and ANSI
    ``size(NULL) = NULL`` (as DuckDB's ``len``). Raises :class:`TempomemError` naming ``path``
    or ``version`` when there is no such store or version.
    """
    if version is not None and (not isinstance(version, int) or isinstance(version, bool) or version < 0):
        raise TempomemError(f"version: expected a table version (an integer >= 0), got {version!r}")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    spark.conf.set("spark.sql.legacy.sizeOfNull", "false")
    events = delta.read_events(spark, str(path), version)
    events.createOrReplaceTempView("_tm_events")
    # DuckDB binds `_tm_fresh_events` to the files holding rows written since a fold, to spare a
    # scan; the views filter those rows themselves, so the whole table is equally right.
    events.createOrReplaceTempView("_tm_fresh_events")
    for file in port.FILES:
        for ported in port.port_file(file):
            spark.sql(ported.spark)


def divergence(spark: Any, probes: Any) -> Any:
    """SPEC §10's divergence on Spark: ``probes`` (a Spark DataFrame with ``subject``,
    ``predicate``, ``valid_at``, ``believed_at``, optionally ``scope`` and ``probe_id``) with
    ``source``, ``as_of_object``, ``as_believed_object``, ``diverged`` and ``kind`` added, rows
    in input order. Needs :func:`register` first. Raises :class:`TempomemError` naming a missing
    column.
    """
    columns = list(probes.columns)
    missing = [c for c in PROBE_COLUMNS if c not in columns]
    if missing:
        raise TempomemError(f"probes: no {missing[0]!r} column (columns: {', '.join(columns) or 'none'})")
    if _ROW in columns:
        raise TempomemError(f"probes: has a column {_ROW!r}, which tempomem uses; rename it")
    from pyspark.sql import functions as F

    # the row number must not change between the two reads of the probes (their answers and
    # the join back), so the numbered probes are materialized once
    numbered = probes.withColumn(_ROW, F.monotonically_increasing_id()).localCheckpoint()
    scope = F.col("scope").cast("string") if "scope" in columns else F.lit(None).cast("string")
    numbered.select(
        _ROW, scope.alias("scope"), F.col("subject").cast("string").alias("subject"),
        F.col("predicate").cast("string").alias("predicate"),
        F.col("valid_at").cast("timestamp").alias("valid_at"),
        F.col("believed_at").cast("timestamp").alias("believed_at"),
    ).createOrReplaceTempView("_tm_probes")
    answers = spark.sql(_divergence_sql())
    return numbered.join(answers, on=_ROW, how="left").orderBy(_ROW).drop(_ROW)


def _divergence_sql() -> str:
    return port.port_query(ANALYTICS["answers"] + ANALYTICS["objects"] + ANALYTICS["divergence"])


def ingestion_lag(spark: Any, by: Sequence[str] | str = ("predicate",), threshold: str | timedelta = "1d") -> Any:
    """SPEC §10's ingestion lag on Spark: one row per group of ``by`` with ``count``, ``p50``,
    ``p90``, ``p99`` (nearest rank), ``max`` (day-time intervals), ``share_over_threshold`` and
    ``inferred``, as ``tm.reports.ingestion_lag``. Needs :func:`register` first. Raises
    :class:`TempomemError` naming ``by`` or ``threshold`` when it is bad.
    """
    from pyspark.sql import functions as F

    query = port.port_query(lag_report_sql(by))
    limit_us = parse_duration(threshold) // timedelta(microseconds=1)
    report = spark.sql(query, args={"limit_us": limit_us})
    # micros to Spark's day-time interval (Polars durations on the DuckDB side), exactly
    return report.select(*[
        F.expr(f"timestamp_micros(`{c}`) - timestamp_micros(0)").alias(c) if c in _DURATIONS else F.col(f"`{c}`")
        for c in report.columns])
