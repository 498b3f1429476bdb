"""``backfill(resolve=True)``: replay checked rows through the write path (SPEC §5, §9).

Rows are applied in ``recorded_at`` order, one :class:`~tempomem.writepath.Batch` per distinct
belief time (that time is the batch's commit time); a row's ``retracted_at`` becomes a
correction of the fact it landed on, at that time. Supersession, duplicates and unknown starts
are therefore derived exactly as the write path derives them. Every resulting revision row is
written in one Delta commit, and the store clock does not move. This is the write path's
per-operation logic, so it runs in Python row by row: use it for histories that need
resolving, and ``resolve=False`` for bulk loads.

An assertion the write path refuses (a conflict under a ``reject`` policy, a belief time not
after the fact's latest revision) is undone and its row reported as rejected; the other rows
load. Before each assertion the states it can change (those of its key) are copied, so undoing
it restores them exactly.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from datetime import datetime
from itertools import groupby
from typing import TYPE_CHECKING, Any

import duckdb
import polars as pl
import pyarrow as pa

from . import queries
from .errors import ClockError, ConflictError, TempomemError
from .schema import EVENT_SCHEMA, SORT_KEYS
from .writepath import Batch, Key, new_assertion

if TYPE_CHECKING:
    from .backfill import Progress
    from .store import Memory

_ASSERTED = ("subject", "predicate", "object", "valid_from", "valid_to", "scope", "source", "confidence", "text",
             "artifacts", "link_type", "weight", "embedding")
_FIELD_OF_MESSAGE = re.compile(r"^row \d+, (\w+): ")


@dataclass
class Replay:
    """The outcome of a replay before anything is written: revision rows and refused rows."""

    rows: list[dict[str, Any]]
    #: One row per refused input row: ``row``, ``field``, ``value``, ``reason`` (as ``BackfillReport.rejected``).
    rejected: pl.DataFrame

    def commit(self, mem: Memory, con: duckdb.DuckDBPyConnection) -> int:
        """Write the revision rows in one commit (the clock stays); return how many."""
        from .backfill import _last_api_us, commit_rows

        if not self.rows:
            return 0
        last_api_us = _last_api_us(mem, con)
        commit_rows(mem, pa.Table.from_pylist(self.rows, schema=EVENT_SCHEMA).sort_by(SORT_KEYS), last_api_us)
        return len(self.rows)


def replay(con: duckdb.DuckDBPyConnection, settings: dict[str, Any], *, origin: str, ingested_at: datetime,
           notify: Progress) -> Replay:
    """Apply ``_bf_rows`` through the write path; return the revisions to write and the refused rows.

    A refused assertion rejects its row (field ``object`` for a conflict, ``recorded_at`` for a
    belief time not after the fact's latest revision). A refused retraction (the fact it
    would retract is no longer believed) raises :class:`TempomemError` naming the input row.
    """
    rows = con.sql("SELECT * FROM _bf_rows ORDER BY recorded_at, __row").to_arrow_table().to_pylist()
    events = sorted([(r["recorded_at"], 0, i) for i, r in enumerate(rows)]
                    + [(r["retracted_at"], 1, i) for i, r in enumerate(rows) if r["retracted_at"] is not None])
    subjects = sorted({r["subject"] for r in rows})
    states = {s["fact_id"]: s for s in queries.latest_states(con, subjects=subjects)}
    rules = {p: (d["arity"], d["policy"]) for p, d in settings["predicates"].items()}
    landed: dict[int, str] = {}
    refused: list[dict[str, Any]] = []
    out: list[dict[str, Any]] = []
    for commit_time, group in groupby(events, key=lambda e: e[0]):
        batch = Batch(states.values(), commit_time=commit_time, rules=rules, default_policy=settings["policy"])
        for _, kind, i in group:
            row = rows[i]
            if kind == 0:
                try:
                    landed[i] = _assert_or_undo(batch, row, origin)
                except TempomemError as exc:
                    refused.append(_refusal(row, exc))
            elif i in landed:  # the retraction of a row whose assertion was refused is moot
                try:
                    batch.correct(landed[i], row["retraction_reason"] or row["reason"] or "retracted (backfill)")
                except TempomemError as exc:
                    raise TempomemError(f"backfill (resolve=True), row {row['__row']}: {exc}") from None
        for written in batch.rows(ingested_at=ingested_at):
            written["origin"] = origin
            state = batch.states[written["fact_id"]]
            state["_stored_revision"], state["_stored_recorded_at"] = written["revision"], commit_time
            out.append(written)
        states = batch.states
        notify("write", len(out))
    rejected = pl.DataFrame(refused, schema={"row": pl.Int64, "field": pl.String, "value": pl.String,
                                             "reason": pl.String})
    return Replay(out, rejected)


def _assert_or_undo(batch: Batch, row: dict[str, Any], origin: str) -> str:
    """Assert one input row; if the write path refuses it, restore the states it changed and re-raise."""
    values = {k: row[k] for k in _ASSERTED if row.get(k) is not None}
    new = new_assertion(values, row=row["__row"])
    new["valid_from_inferred"] = bool(row["valid_from_inferred"])
    new["attributes"], new["origin"] = row["attributes"], origin
    if row["reason"] is not None and new["valid_to"] is not None:
        new["reason"] = row["reason"]
    key: Key = (new["scope"], new["subject"], new["predicate"])
    before = list(batch.by_key.get(key, ()))
    saved = {fact_id: copy.deepcopy(batch.states[fact_id]) for fact_id in before}
    touched = {fact_id for fact_id in before if fact_id in batch.touched}
    try:
        return batch.assert_fact(new)
    except TempomemError:
        for fact_id in batch.by_key.get(key, ()):
            if fact_id not in saved:  # created by this assertion
                batch.states.pop(fact_id, None)
            if fact_id not in touched:
                batch.touched.pop(fact_id, None)
        for fact_id, state in saved.items():  # in place: later batches hold these same dicts
            batch.states[fact_id].clear()
            batch.states[fact_id].update(state)
        if before:
            batch.by_key[key] = before
        else:
            batch.by_key.pop(key, None)
        raise


def _refusal(row: dict[str, Any], exc: TempomemError) -> dict[str, Any]:
    """The rejected-row entry for an assertion the write path refused."""
    message = str(exc)
    if isinstance(exc, ConflictError):
        field, value = "object", row["object"]
    elif isinstance(exc, ClockError):
        field, value = "recorded_at", row["recorded_at"].isoformat()
    else:
        match = _FIELD_OF_MESSAGE.match(message)
        field = match.group(1) if match else "row"
        value = None if row.get(field) is None else str(row[field])
    return {"row": row["__row"], "field": field, "value": value, "reason": f"refused by the write path: {message}"}
