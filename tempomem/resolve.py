"""``backfill(resolve=True)``: replay checked rows through the write path (SPEC §5, §9).

Rows are applied in ``recorded_at`` order, one :class:`~tempomem.writepath.Batch` per distinct
belief time (that time is the batch's commit time); a row's ``retracted_at`` becomes a
correction of the fact it landed on, at that time. Supersession, duplicates and unknown starts
are therefore derived exactly as the write path derives them. Every resulting revision row is
written in one Delta commit, and the store clock does not move. This is the write path's
per-operation logic, so it runs in Python row by row: use it for histories that need
resolving, and ``resolve=False`` for bulk loads.
"""

from __future__ import annotations

from datetime import datetime
from itertools import groupby
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow as pa

from . import queries
from .errors import TempomemError
from .schema import EVENT_SCHEMA, SORT_KEYS
from .writepath import Batch, new_assertion

if TYPE_CHECKING:
    from .backfill import Progress
    from .store import Memory

_ASSERTED = ("subject", "predicate", "object", "valid_from", "valid_to", "scope", "source", "confidence", "text",
             "artifacts", "link_type", "weight", "embedding")


def replay(mem: Memory, con: duckdb.DuckDBPyConnection, settings: dict[str, Any], *, origin: str,
           ingested_at: datetime, notify: Progress) -> int:
    """Apply ``_bf_rows`` through the write path; commit the revisions; return how many.

    A row the write path refuses (a ``ConflictError`` under a ``reject`` policy, a store clock
    behind an existing fact) raises :class:`TempomemError` naming the input row, and nothing
    is written.
    """
    from .backfill import _last_api_us, commit_rows

    rows = con.sql("SELECT * FROM _bf_rows ORDER BY recorded_at, __row").to_arrow_table().to_pylist()
    events = sorted([(r["recorded_at"], 0, i) for i, r in enumerate(rows)]
                    + [(r["retracted_at"], 1, i) for i, r in enumerate(rows) if r["retracted_at"] is not None])
    subjects = sorted({r["subject"] for r in rows})
    states = {s["fact_id"]: s for s in queries.latest_states(con, subjects=subjects)}
    rules = {p: (d["arity"], d["policy"]) for p, d in settings["predicates"].items()}
    landed: dict[int, str] = {}
    out: list[dict[str, Any]] = []
    for commit_time, group in groupby(events, key=lambda e: e[0]):
        batch = Batch(states.values(), commit_time=commit_time, rules=rules, default_policy=settings["policy"])
        for _, kind, i in group:
            row = rows[i]
            try:
                if kind == 0:
                    values = {k: row[k] for k in _ASSERTED if row.get(k) is not None}
                    new = new_assertion(values, row=row["__row"])
                    new["valid_from_inferred"] = bool(row["valid_from_inferred"])
                    new["attributes"], new["origin"] = row["attributes"], origin
                    if row["reason"] is not None and new["valid_to"] is not None:
                        new["reason"] = row["reason"]
                    landed[i] = batch.assert_fact(new)
                else:
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
    if not out:
        return 0
    last_api_us = _last_api_us(mem, con)
    commit_rows(mem, pa.Table.from_pylist(out, schema=EVENT_SCHEMA).sort_by(SORT_KEYS), last_api_us)
    return len(out)
