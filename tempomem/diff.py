"""``mem.diff``: what the store learned in a belief-time window, as five Polars frames (SPEC §8).

The events come from the ``memory_diff`` macro in ``macros.sql`` (one row per event, with a
``bucket`` column), filtered by the ``diff`` query of ``queries.sql``; this module only
validates the arguments, binds the optional key filters as parameters and splits the rows into
the frames of :class:`MemoryDiff`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

import polars as pl

from .erasure import hash_subject
from .errors import TempomemError
from .queries import QUERIES, frame
from .schema import FACT_COLUMNS
from .times import TimeLike, to_utc

if TYPE_CHECKING:
    from .reader import Reader

#: Columns of ``MemoryDiff.changed``, in order (SPEC §8).
CHANGED_COLUMNS = [
    "before_fact_id", "before_object", "before_valid_from", "before_valid_to",
    "after_fact_id", "after_object", "after_valid_from", "after_valid_to",
    "subject", "predicate", "recorded_at", "reason",
]
NEW_ENTITY_COLUMNS = ["scope", "subject", "recorded_at"]
FORGOTTEN_COLUMNS = ["scope", "subject", "recorded_at", "reason"]
_BUCKET_COLUMNS = {
    "created": FACT_COLUMNS,
    "changed": CHANGED_COLUMNS,
    "retracted": FACT_COLUMNS,
    "new_entities": NEW_ENTITY_COLUMNS,
    "forgotten_entities": FORGOTTEN_COLUMNS,
}

# Rows of a bucket in event order (sorted in Polars, per bucket: DuckDB would sort the wide rows).
_ORDER = ["event_at", "fact_id", "before_fact_id", "subject"]


@dataclass(frozen=True)
class MemoryDiff:
    """What the store learned in ``[from_at, to_at)`` of belief time (SPEC §8).

    ``created`` and ``retracted`` have the ``facts`` columns, ``changed`` the before/after
    columns, ``new_entities`` (``scope``, ``subject``, ``recorded_at``) and
    ``forgotten_entities`` (``scope``, hashed ``subject``, ``recorded_at``, ``reason``).
    """

    created: pl.DataFrame
    changed: pl.DataFrame
    retracted: pl.DataFrame
    new_entities: pl.DataFrame
    forgotten_entities: pl.DataFrame

    def __repr__(self) -> str:
        counts = ", ".join(f"{f.name}={getattr(self, f.name).height}" for f in fields(self))
        return f"MemoryDiff({counts})"


def _names(values: str | Iterable[str] | None, field: str) -> list[str] | None:
    if values is None:
        return None
    items = [values] if isinstance(values, str) else list(values)
    bad = [v for v in items if not isinstance(v, str)]
    if bad:
        raise TempomemError(f"{field}: expected strings, got {bad[0]!r}")
    return items


def diff(reader: Reader, from_at: TimeLike, to_at: TimeLike, *, subjects: str | Iterable[str] | None = None,
         predicates: str | Iterable[str] | None = None) -> MemoryDiff:
    """What the store learned in the belief-time window ``[from_at, to_at)``.

    Every fact event lies in exactly one of ``created``, ``changed`` and ``retracted`` and in
    exactly one window, so the diffs of adjacent windows concatenate to the diff of their union.
    """
    lo = to_utc(from_at, field="from_at")
    hi = to_utc(to_at, field="to_at")
    if lo is None or hi is None:
        raise TempomemError("from_at, to_at: both window bounds are required")
    if hi < lo:
        raise TempomemError(f"to_at: {hi.isoformat()} is before from_at {lo.isoformat()}")
    names = _names(subjects, "subjects")
    if names is not None:
        salt = reader.storage.read_settings()["salt"]
        names = names + [hash_subject(salt, n) for n in names]
    params = {"from_at": lo, "to_at": hi, "subjects": names, "predicates": _names(predicates, "predicates")}
    events = reader.read(frame, QUERIES["diff"], params)
    return MemoryDiff(**{bucket: _bucket(events, bucket, columns) for bucket, columns in _BUCKET_COLUMNS.items()})


def _bucket(events: pl.DataFrame, bucket: str, columns: list[str]) -> pl.DataFrame:
    """One bucket's rows, in event order: sorted with its own columns only (a gather of the
    changed rows' few columns, not of every fact column)."""
    keys = [k for k in _ORDER if k not in columns]
    return (events.filter(pl.col("bucket") == bucket).select(*columns, *keys)
            .sort(_ORDER, nulls_last=True).select(columns))
