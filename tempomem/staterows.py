"""States from stored rows: the shape the one-row write path works on, and the conversions.

A *state* is a dict with the event columns of a fact's latest revision, plus
``first_recorded_at`` and ``_stored_revision`` / ``_stored_recorded_at`` (its latest stored
revision; ``None`` for a fact born in the commit), the shape :class:`writepath.Batch` works on.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from .connection import sql_parts
from .schema import Fact, instants
from .times import EPOCH, MICROSECOND, system_clock

#: The statuses of a fact no longer believed.
UNBELIEVED = ("retracted", "erased")
_LATEST_REVISION = sql_parts("queries.sql")["latest_revision"]


def micros(t: datetime) -> int:
    """Microseconds since the epoch of an aware datetime."""
    return (t - EPOCH) // MICROSECOND


def as_fact(state: dict[str, Any]) -> Fact:
    """The :class:`Fact` a state stands for (``recorded_at`` is when the fact was first recorded)."""
    return Fact.from_row({**state, "recorded_at": state["first_recorded_at"],
                          "ingested_at": state.get("ingested_at") or system_clock()})


def from_rows(table: pa.Table) -> list[dict[str, Any]]:
    """States from latest-revision rows, converted a column at a time (zoned times through
    :func:`schema.instants`, each distinct instant made once): a row at a time, a key of 100k
    facts took 1.6 s to load, a third of it giving each time its zone."""
    table = (table.append_column("_stored_revision", table["revision"]).drop_columns(["revision"])
             .append_column("_stored_recorded_at", table["recorded_at"]))
    artifacts = table["artifacts"]
    table = table.set_column(table.schema.get_field_index("artifacts"), "artifacts",
                             pc.if_else(pc.is_null(artifacts), pa.scalar([], artifacts.type), artifacts))
    names = table.column_names
    columns = [instants(table[f.name]) if pa.types.is_timestamp(f.type) and f.type.tz is not None
               else table[f.name].to_pylist() for f in table.schema]
    return [dict(zip(names, values, strict=True)) for values in zip(*columns, strict=True)]


def latest_revision(con: duckdb.DuckDBPyConnection, files: Sequence[str], fact_id: str) -> dict[str, Any] | None:
    """The latest revision of the fact ``fact_id`` in ``files`` (a version's data files),
    whatever its status, as a state; ``None`` when no file holds it (``queries.sql``, part
    ``latest_revision``)."""
    if not files:
        return None
    states = from_rows(con.sql(_LATEST_REVISION, params={"files": list(files), "fact_id": fact_id}).to_arrow_table())
    return states[0] if states else None


def latest_believed(rows: pa.Table) -> pa.Table:
    """Of the rows of some facts, each fact's latest revision, where it is still believed."""
    rows = latest(rows)
    return rows.filter(pc.invert(pc.is_in(rows["status"], pa.array(UNBELIEVED))))


def latest(rows: pa.Table) -> pa.Table:
    """Of the rows of some facts, each fact's latest revision, in the rows' order (found on two
    columns, not by sorting every column)."""
    newest = rows.group_by("fact_id", use_threads=False).aggregate([("revision", "max")])
    place = pc.index_in(rows["fact_id"], value_set=newest["fact_id"])
    return rows.filter(pc.equal(rows["revision"], pc.take(newest["revision_max"], place)))
