"""The read side: the query forms of SPEC §6 run through the SQL macros, as Polars frames.

Each function takes a DuckDB connection on which :mod:`tempomem.connection` has bound a store.
The temporal logic is in ``macros.sql``; here we only add the caller's key filters, which are
fixed SQL fragments with bound parameters, never caller text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import duckdb
import polars as pl

from . import overlaps
from .connection import quote, sql_parts
from .errors import TempomemError
from .forks import check_polars
from .schema import FACT_COLUMNS

#: The named parts of queries.sql (check, diff, export, a fact's latest revision): ``{name: text}``.
QUERIES: dict[str, str] = sql_parts("queries.sql")

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
#: The columns of a frame of revisions (as_believed): a fact's, its revision and belief end.
_REVISION_COLUMNS = [*FACT_COLUMNS, "revision", "believed_until"]


def frame(con: duckdb.DuckDBPyConnection, query: str, params: dict[str, Any] | None = None) -> pl.DataFrame:
    """Run ``query`` with bound ``params`` and return the whole answer as a Polars frame."""
    check_polars()
    table = con.sql(query, params=params or {}).to_arrow_table()
    return pl.from_arrow(table)  # type: ignore[return-value]


def check_keys(**keys: Any) -> None:
    """Refuse a key argument (``subject``, ``predicate``, ``scope``) that is neither a string nor
    ``None``: a list or a number is not read as a key, nor reaches a reader as one.

    >>> check_keys(subject="svc", predicate=None)
    >>> check_keys(subject=["svc"])
    Traceback (most recent call last):
    tempomem.errors.TempomemError: subject: expected a string (or None for any), got list ['svc']
    """
    for name, value in keys.items():
        if value is not None and not isinstance(value, str):
            raise TempomemError(f"{name}: expected a string (or None for any), got {type(value).__name__} {value!r}")


def flag(value: object, name: str) -> bool:
    """``value`` if it is ``True`` or ``False``, else the error naming the argument: a string
    such as ``"no"`` is truthy, and a flag read from it would do the opposite of what it says.

    >>> flag(False, "strict")
    False
    >>> flag("no", "strict")
    Traceback (most recent call last):
    tempomem.errors.TempomemError: strict: expected True or False, got str 'no'
    """
    if not isinstance(value, bool):
        raise TempomemError(f"{name}: expected True or False, got {type(value).__name__} {value!r}")
    return value


def filtered(con: duckdb.DuckDBPyConnection, source: str, params: dict[str, Any],
             keys: dict[str, str | None], order: str = _KEY_ORDER, select: str = "*") -> pl.DataFrame:
    """The ``select`` columns of the rows of ``source`` (a macro call written in code, its values
    bound from ``params``) whose key columns equal the given ``keys`` (``None``: any), in
    ``order``; the query forms and :mod:`tempomem.sequenced` share it."""
    check_keys(**{k: v for k, v in keys.items() if k in ("scope", "subject", "predicate")})
    given = {k: v for k, v in keys.items() if v is not None}
    where = " AND ".join(_KEY_FILTERS[k] for k in given) or "true"
    return frame(con, f"SELECT {select} FROM {source} WHERE {where} {order}", {**params, **given})


def projection(columns: Sequence[str] | None, available: Sequence[str]) -> str:
    """The select list of a frame of the named ``columns`` of ``available`` (all: ``None``).
    DuckDB then decodes only those columns and the ones the query filters and sorts on."""
    if columns is None:
        return "*"
    if isinstance(columns, str) or not isinstance(columns, Sequence) or not columns:
        raise TempomemError(f"columns: expected a non-empty list of column names, got {columns!r}")
    for name in columns:
        if name not in available:
            raise TempomemError(f"columns: no column {name!r}; the frame's columns are {', '.join(available)}")
    if len(set(columns)) < len(columns):
        twice = next(c for c in columns if columns.count(c) > 1)
        raise TempomemError(f"columns: {twice!r} is named twice")
    return ", ".join(quote(c) for c in columns)


def as_of(con: duckdb.DuckDBPyConnection, valid_at: datetime, *, columns: Sequence[str] | None = None,
          **keys: str | None) -> pl.DataFrame:
    """Facts true at ``valid_at`` as best we know now (macro ``as_of``), their ``columns``."""
    return filtered(con, "as_of($valid_at)", {"valid_at": valid_at}, keys,
                    select=projection(columns, FACT_COLUMNS))


def as_believed(con: duckdb.DuckDBPyConnection, valid_at: datetime, believed_at: datetime, *,
                columns: Sequence[str] | None = None, **keys: str | None) -> pl.DataFrame:
    """Revisions believed at ``believed_at`` about ``valid_at`` (macro ``as_believed``), their
    ``columns``."""
    return filtered(con, "as_believed($valid_at, $believed_at)",
                    {"valid_at": valid_at, "believed_at": believed_at}, keys,
                    select=projection(columns, _REVISION_COLUMNS))


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
    return filtered(con, source, params, keys, order)


def timeline(con: duckdb.DuckDBPyConnection, subject: str, scope: str | None) -> pl.DataFrame:
    """Every revision of every fact of a subject, in belief order (macro ``timeline``)."""
    return filtered(con, "timeline($subject)", {"subject": subject}, {"scope": scope},
                     "ORDER BY recorded_at, fact_id, revision")


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
    busy, suspects = _suspects(con, multi_predicates)
    found = frame(con, QUERIES["problems"], {"multi": multi_predicates, "busy": busy, "suspects": suspects})
    table = pl.concat([found.cast(pl.String), file_problems([], stray_files).problems])
    return CheckReport(ok=table.is_empty(), problems=table)


def file_problems(missing_files: list[str], stray_files: list[str]) -> CheckReport:
    """Data files the newest version lists but the disk lacks (no other check can read the
    version then) and files on disk the log never referenced.

    >>> file_problems(["/s/a.parquet"], [])
    CheckReport(1 problems)
    shape: (1, 3)
    ┌──────────────┬─────────┬─────────────────────────────────┐
    │ kind         ┆ fact_id ┆ detail                          │
    │ ---          ┆ ---     ┆ ---                             │
    │ str          ┆ str     ┆ str                             │
    ╞══════════════╪═════════╪═════════════════════════════════╡
    │ missing_file ┆ null    ┆ /s/a.parquet is in the Delta l… │
    └──────────────┴─────────┴─────────────────────────────────┘
    """
    details = ([f"{p} is in the Delta log but not on disk: no read of the store works until it is restored "
                "from a copy" for p in missing_files]
               + [f"{p} is not in the Delta log; it is never read" for p in stray_files])
    kinds = ["missing_file"] * len(missing_files) + ["unreferenced_file"] * len(stray_files)
    table = pl.DataFrame({"kind": kinds, "fact_id": [None] * len(kinds), "detail": details},
                         schema={"kind": pl.String, "fact_id": pl.String, "detail": pl.String})
    return CheckReport(ok=table.is_empty(), problems=table)


def _suspects(con: duckdb.DuckDBPyConnection,
              multi_predicates: list[str]) -> tuple[list[int] | None, list[str] | None]:
    """The busy keys (hashed) and their facts whose values may overlap another's
    (:mod:`tempomem.overlaps`, which counts instead of pairing): the macro then pairs every
    revision of the other keys and only the suspects' of these. ``(None, None)``: no key is busy."""
    busy = [kh for (kh,) in con.sql(QUERIES["busy_keys"], params={"multi": multi_predicates,
                                                                 "busy_from": overlaps.BUSY_FROM}).fetchall()]
    if not busy:
        return None, None
    con.execute(QUERIES["overlap_candidates"], {"multi": multi_predicates, "busy": busy})
    try:
        overlaps.find(con)
        return busy, [fact for (fact,) in con.sql(
            "SELECT DISTINCT c.fact_id FROM _ov_candidates AS c SEMI JOIN _ov_found AS f ON f.i = c.i").fetchall()]
    finally:
        overlaps.drop(con)
