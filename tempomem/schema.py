"""The shape of stored facts: the Arrow schema of a revision row and the ``tm.Fact`` record.

A store holds one Parquet row per *revision* of a fact (SPEC §4). Besides the ``facts``
columns and ``revision``, a stored row carries the few columns of the revision it follows
(``prev_*``, what ``memory_diff`` compares) and three columns the views derive belief time from
(``revisions.sql`` explains them): ``first_recorded_at``, ``folded`` and ``folded_until``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .times import EPOCH

SCHEMA_VERSION = 3

_TS = pa.timestamp("us", tz="UTC")

#: Columns of the ``facts`` view, in order (SPEC §4).
FACT_FIELDS: list[pa.Field] = [
    pa.field("fact_id", pa.string()),
    pa.field("scope", pa.string()),
    pa.field("subject", pa.string()),
    pa.field("predicate", pa.string()),
    pa.field("object", pa.string()),
    pa.field("text", pa.string()),
    pa.field("valid_from", _TS),
    pa.field("valid_to", _TS),
    pa.field("valid_from_inferred", pa.bool_()),
    pa.field("recorded_at", _TS),
    pa.field("retracted_at", _TS),
    pa.field("superseded_at", _TS),
    pa.field("superseded_by", pa.string()),
    pa.field("status", pa.string()),
    pa.field("reason", pa.string()),
    pa.field("source", pa.string()),
    pa.field("confidence", pa.float64()),
    pa.field("origin", pa.string()),
    pa.field("ingested_at", _TS),
    pa.field("artifacts", pa.list_(pa.string())),
    pa.field("attributes", pa.string()),
    pa.field("embedding", pa.list_(pa.float32())),
    pa.field("link_type", pa.string()),
    pa.field("weight", pa.float64()),
]
FACT_COLUMNS: list[str] = [f.name for f in FACT_FIELDS]
_FACT_TYPES = {f.name: f.type for f in FACT_FIELDS}

#: The columns of a revision that its successor repeats as ``prev_<name>`` (all NULL on a
#: fact's first revision). A revision never changes once written, so neither do these; a
#: belief-window question (what changed between two revisions) then reads only the rows
#: recorded in its window, instead of also finding each one's predecessor among every row
#: before it (macros.sql, ``memory_diff``).
PREVIOUS: tuple[str, ...] = ("object", "valid_from", "valid_to", "recorded_at", "retracted_at", "superseded_at",
                             "superseded_by", "status")
PREVIOUS_COLUMNS: list[str] = [f"prev_{name}" for name in PREVIOUS]

#: A stored row: the fact columns, the revision number, the previous revision's columns, and
#: what belief time is derived from: when the fact was first recorded (written with every
#: revision, so ``facts`` needs no aggregate), and, for rows rewritten by a fold, the row's
#: ``believed_until`` as it stood then.
EVENT_SCHEMA = pa.schema([*FACT_FIELDS, pa.field("revision", pa.int32()),
                          *[pa.field(f"prev_{n}", _FACT_TYPES[n]) for n in PREVIOUS],
                          pa.field("first_recorded_at", _TS), pa.field("folded", pa.bool_()),
                          pa.field("folded_until", _TS)])
EVENT_COLUMNS: list[str] = EVENT_SCHEMA.names
#: What a writer reads of a stored revision to act on its fact: the fact columns, the revision
#: number and when the fact was first recorded; not what the revision repeats of the one before
#: (``prev_*``) or the fold's marks. Decoding those ten too costs a fifth more of each read.
WRITER_COLUMNS: list[str] = [*FACT_COLUMNS, "revision", "first_recorded_at"]

#: Columns that may be written to Delta file statistics. Subject, object, text and
#: attribute values never are, so that erasure can remove them from the log (SPEC §3).
STATS_COLUMNS = ("revision", "valid_from", "valid_to", "recorded_at", "retracted_at", "ingested_at")

STATUSES = ("live", "ended", "superseded", "retracted", "erased")
LINK_TYPES = ("entity", "semantic", "temporal", "causal")
#: The largest link weight a write takes (every path: the write path, a large batch, backfill).
MAX_WEIGHT = 1e12
#: The largest number an embedding stores (FLOAT, 32 bits): a larger one, or an infinity, would be
#: stored as an infinity and make every recall score of the fact NaN.
FLOAT32_MAX = 3.4028234663852886e38
ARITIES = ("single", "multi")
POLICIES = ("last_write_wins", "reject")

#: Sort order of stored rows: a subject's revisions sit together, so point queries prune.
SORT_KEYS = [("scope", "ascending"), ("subject", "ascending"), ("predicate", "ascending"),
             ("fact_id", "ascending"), ("revision", "ascending")]


def _utc(value: Any) -> Any:
    if isinstance(value, datetime) and value.tzinfo is not UTC:
        return value.astimezone(UTC)
    return value


@dataclass(frozen=True)
class Fact:
    """One fact as stored: the ``facts`` columns as attributes, times as aware UTC datetimes."""

    fact_id: str
    scope: str
    subject: str
    predicate: str
    object: str | None
    text: str | None
    valid_from: datetime | None
    valid_to: datetime | None
    valid_from_inferred: bool
    recorded_at: datetime
    retracted_at: datetime | None
    superseded_at: datetime | None
    superseded_by: str | None
    status: str
    reason: str | None
    source: str | None
    confidence: float | None
    origin: str
    ingested_at: datetime
    artifacts: tuple[str, ...]
    attributes: str | None
    embedding: tuple[float, ...] | None
    link_type: str
    weight: float

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Fact:
        """Build a Fact from a mapping with at least the ``facts`` columns."""
        values = {name: row.get(name) for name in _FACT_FIELD_NAMES}
        for name in _FACT_TIME_FIELDS:
            values[name] = _utc(values[name])
        values["artifacts"] = tuple(values["artifacts"] or ())
        if values["embedding"] is not None:
            values["embedding"] = tuple(values["embedding"])
        return cls(**values)


_FACT_FIELD_NAMES = tuple(f.name for f in fields(Fact))
_FACT_TIME_FIELDS = tuple(f.name for f in FACT_FIELDS if pa.types.is_timestamp(f.type))


def facts_from_table(table: pa.Table) -> list[Fact]:
    """``Fact.from_row`` of every row of ``table``, converted a column at a time: a batch's
    facts cost what building the objects costs, not a mapping per row. Arrow only, no Polars:
    a writer process forked from one that ran Polars cannot run Polars (:mod:`tempomem.forks`),
    and its writes end here."""
    columns = []
    for name in _FACT_FIELD_NAMES:
        column = table.column(name)
        if name in _FACT_TIME_FIELDS:
            columns.append(instants(column))
        elif name == "artifacts":
            columns.append(_tuples(column, empty=()))
        elif name == "embedding":
            columns.append(_tuples(column, empty=None))
        else:
            columns.append(column.to_pylist())
    # Filled a dict at a time, not through Fact(): a frozen dataclass's __init__ sets each of
    # its 24 fields with object.__setattr__, which was half of what a 100k-row batch's facts cost.
    facts = []
    for values in zip(*columns, strict=True):
        fact = object.__new__(Fact)
        fact.__dict__.update(zip(_FACT_FIELD_NAMES, values, strict=True))
        facts.append(fact)
    return facts


def positions(n: int) -> pa.Array:
    """0 to ``n`` - 1 as int64, the column that numbers a table's rows (``__row``, ``op``, ``i``).
    Made by NumPy: pyarrow took ~90 ms to read a Python range of a million, NumPy makes it in ~10."""
    return pa.array(np.arange(n, dtype=np.int64))


def column_micros(column: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """A time column as int64 microseconds since the epoch, whatever its unit (NULL stays NULL)."""
    return pc.cast(pc.cast(column, _TS), pa.int64())


def instants(column: pa.ChunkedArray | pa.Array) -> list[datetime | None]:
    """A time column as aware UTC datetimes. A batch's times repeat (one commit, one
    ingestion, a few starts), so each distinct instant is made once and the rows take theirs
    by place: at 100k rows a third of the cost of making one per row."""
    micros = column_micros(column)
    distinct = pc.unique(micros).drop_null()
    made = np.array([None, *(EPOCH + timedelta(microseconds=us) for us in distinct.to_pylist())], dtype=object)
    place = pc.fill_null(pc.add(pc.index_in(micros, value_set=distinct), 1), 0)
    return made[place.to_numpy()].tolist()


def _tuples(column: pa.ChunkedArray, empty: tuple[()] | None) -> list[Any]:
    """A list column as tuples; a null or empty list is ``empty``. Most facts have no artifacts
    and no embedding: only the other rows' lists are converted."""
    values: list[Any] = [empty] * len(column)
    given = pc.greater(pc.fill_null(pc.list_value_length(column), 0), 0) if empty == () else pc.is_valid(column)
    for i, value in zip(pc.indices_nonzero(given).to_pylist(), column.filter(given).to_pylist(), strict=True):
        values[i] = tuple(value)
    return values
