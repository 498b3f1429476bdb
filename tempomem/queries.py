"""The read side: the query forms of SPEC §6 run through the SQL macros, as Polars frames.

Each function takes a DuckDB connection on which :mod:`tempomem.connection` has bound a store.
The temporal logic is in ``macros.sql``; here we only add the caller's key filters, which are
fixed SQL fragments with bound parameters, never caller text.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa

#: Optional key filters: the SQL fragment used when the caller gives the value.
_KEY_FILTERS = {
    "scope": "scope = $scope",
    "subject": "subject = $subject",
    "predicate": "predicate = $predicate",
    # the trusted= policy of the query forms (tempomem.trust)
    "trusted_sources": "list_contains(CAST($trusted_sources AS VARCHAR[]), source)",
    "trusted_min_confidence": "confidence >= $trusted_min_confidence",
}
_KEY_ORDER = "ORDER BY scope, subject, predicate, valid_from NULLS FIRST, fact_id"


def frame(con: duckdb.DuckDBPyConnection, query: str, params: dict[str, Any] | None = None) -> pl.DataFrame:
    """Run ``query`` with bound ``params`` and return the whole answer as a Polars frame."""
    table = con.sql(query, params=params or {}).to_arrow_table()
    return pl.from_arrow(table)  # type: ignore[return-value]


def _filtered(con: duckdb.DuckDBPyConnection, source: str, params: dict[str, Any],
              keys: dict[str, str | None], order: str = _KEY_ORDER) -> pl.DataFrame:
    given = {k: v for k, v in keys.items() if v is not None}
    where = " AND ".join(_KEY_FILTERS[k] for k in given) or "true"
    return frame(con, f"SELECT * FROM {source} WHERE {where} {order}", {**params, **given})


def as_of(con: duckdb.DuckDBPyConnection, valid_at: datetime, **keys: str | None) -> pl.DataFrame:
    """Facts true at ``valid_at`` as best we know now (macro ``as_of``)."""
    return _filtered(con, "as_of($valid_at)", {"valid_at": valid_at}, keys)


def as_believed(con: duckdb.DuckDBPyConnection, valid_at: datetime, believed_at: datetime,
                **keys: str | None) -> pl.DataFrame:
    """Revisions believed at ``believed_at`` about ``valid_at`` (macro ``as_believed``)."""
    return _filtered(con, "as_believed($valid_at, $believed_at)",
                     {"valid_at": valid_at, "believed_at": believed_at}, keys)


def history(con: duckdb.DuckDBPyConnection, subject: str, predicate: str | None,
            scope: str | None, revisions: bool) -> pl.DataFrame:
    """Every fact (or every revision) of a key in belief order, retracted ones included."""
    if revisions:
        source = "timeline($subject)"
        keys = {"predicate": predicate, "scope": scope}
        order = "ORDER BY recorded_at, fact_id, revision"
    else:
        source = "history($subject, predicate := $predicate)"
        keys = {"scope": scope}
        order = "ORDER BY recorded_at, fact_id"
    params = {"subject": subject}
    if not revisions:
        params["predicate"] = predicate
    return _filtered(con, source, params, keys, order)


def timeline(con: duckdb.DuckDBPyConnection, subject: str, scope: str | None) -> pl.DataFrame:
    """Every revision of every fact of a subject, in belief order (macro ``timeline``)."""
    return _filtered(con, "timeline($subject)", {"subject": subject}, {"scope": scope},
                     "ORDER BY recorded_at, fact_id, revision")


def latest_states(con: duckdb.DuckDBPyConnection, *, subjects: list[str] | None = None,
                  predicates: list[str] | None = None, fact_id: str | None = None) -> list[dict[str, Any]]:
    """Latest revision of each fact of the given subjects and predicates (or of one fact).

    For the write path: each row keeps the latest revision's own ``recorded_at`` and adds
    ``first_recorded_at``. ``predicates=None`` means all of them. The caller keeps the rows of
    the keys it asked about.
    """
    if fact_id is not None:
        where, params = "fact_id = $fact_id", {"fact_id": fact_id}
    elif predicates is None:
        where, params = "subject IN (SELECT unnest($subjects))", {"subjects": subjects or []}
    else:
        where = "subject IN (SELECT unnest($subjects)) AND predicate IN (SELECT unnest($predicates))"
        params = {"subjects": subjects or [], "predicates": predicates}
    return _states(con.sql(
        f"SELECT * EXCLUDE (believed_until) FROM _tm_revisions WHERE {where} AND believed_until IS NULL",
        params=params,
    ).to_arrow_table())


# The stored facts an assertion batch can act on (SPEC §5): the believed facts of its keys whose
# valid interval overlaps the hull of the batch's intervals on that key. The others cannot
# take part: a different object that does not overlap changes nothing, and stored intervals
# only ever shrink within a commit. Every believed fact of a key is needed when a row of it has
# no start (the unknown-start rule asks whether any is believed) or when a stored fact has the
# object of a row (a duplicate merge applies the conflict rows to the merged fact's interval).
_WRITE_STATES_SQL = """
WITH k AS (
    SELECT b.scope, b.subject, b.predicate, bool_or(b.valid_from IS NULL) AS everything,
           min(b.valid_from) AS lo,
           CASE WHEN bool_or(b.valid_to IS NULL) THEN NULL ELSE max(b.valid_to) END AS hi,
           list(DISTINCT b.object) AS objects
    FROM _tm_batch AS b
    GROUP BY b.scope, b.subject, b.predicate
),
candidates AS (
    SELECT r.* EXCLUDE (believed_until), k.lo, k.hi,
           k.everything OR bool_or(list_contains(k.objects, r.object))
               OVER (PARTITION BY r.scope, r.subject, r.predicate) AS whole_key
    FROM _tm_revisions AS r
    JOIN k ON r.scope = k.scope AND r.subject = k.subject AND r.predicate = k.predicate
    WHERE r.believed_until IS NULL AND r.status NOT IN ('retracted', 'erased')
)
SELECT c.* EXCLUDE (lo, hi, whole_key) FROM candidates AS c
WHERE c.whole_key OR tm_overlaps(c.valid_from, c.valid_to, c.lo, c.hi)
"""
_BATCH_SCHEMA = pa.schema([("scope", pa.string()), ("subject", pa.string()), ("predicate", pa.string()),
                           ("object", pa.string()), ("valid_from", pa.timestamp("us", tz="UTC")),
                           ("valid_to", pa.timestamp("us", tz="UTC"))])


def write_states(con: duckdb.DuckDBPyConnection, assertions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Latest states of the stored facts that ``assertions`` (from ``writepath.new_assertion``)
    can act on, in the shape of :func:`latest_states`."""
    batch = pa.Table.from_pydict({name: [a[name] for a in assertions] for name in _BATCH_SCHEMA.names},
                                 schema=_BATCH_SCHEMA)
    con.register("_tm_batch", batch)
    try:
        return _states(con.sql(_WRITE_STATES_SQL).to_arrow_table())
    finally:
        con.unregister("_tm_batch")


def _states(table: pa.Table) -> list[dict[str, Any]]:
    """Write-path states from latest-revision rows.

    Timestamps cross as naive values and get their UTC zone here: pyarrow converts zoned
    timestamps to Python through a time-zone lookup per value, ten times slower.
    """
    zoned = [f.name for f in table.schema if pa.types.is_timestamp(f.type) and f.type.tz is not None]
    naive = table.cast(pa.schema([pa.field(f.name, pa.timestamp(f.type.unit)) if f.name in zoned else f
                                  for f in table.schema]))
    rows = naive.to_pylist()
    for row in rows:
        for name in zoned:
            if row[name] is not None:
                row[name] = row[name].replace(tzinfo=UTC)
        row["_stored_revision"] = row.pop("revision")
        row["_stored_recorded_at"] = row["recorded_at"]
        row["artifacts"] = list(row["artifacts"] or [])
    return rows


def last_api_commit(con: duckdb.DuckDBPyConnection) -> datetime | None:
    """The latest belief time written by the write path (backfilled times do not count)."""
    return con.sql("SELECT max(recorded_at) FROM _tm_events WHERE origin = 'api'").fetchall()[0][0]


@dataclass(frozen=True)
class CheckReport:
    """What :meth:`Memory.check` found: ``ok`` is true when ``problems`` is empty."""

    ok: bool
    problems: pl.DataFrame

    def __repr__(self) -> str:
        if self.ok:
            return "CheckReport(ok: no problems)"
        return f"CheckReport({self.problems.height} problems)\n{self.problems}"


def problems(con: duckdb.DuckDBPyConnection, multi_predicates: list[str],
             stray_files: list[str]) -> CheckReport:
    """Invariant violations (macro ``tm_problems``, view ``_tm_previous_problems``) plus data files
    the log never referenced."""
    found = frame(con, """SELECT * FROM (SELECT * FROM tm_problems(CAST($multi AS VARCHAR[]))
                                         UNION ALL SELECT * FROM _tm_previous_problems)
                          ORDER BY kind, fact_id""", {"multi": multi_predicates})
    strays = pl.DataFrame(
        {"kind": ["unreferenced_file"] * len(stray_files), "fact_id": [None] * len(stray_files),
         "detail": [f"{p} is not in the Delta log; it is never read" for p in stray_files]},
        schema={"kind": pl.String, "fact_id": pl.String, "detail": pl.String},
    )
    table = pl.concat([found.cast(pl.String), strays])
    return CheckReport(ok=table.is_empty(), problems=table)
