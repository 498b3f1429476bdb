"""A large ``assert_many`` on the set-based path (:mod:`tempomem.rounds`), in one commit.

The engine calls :func:`assert_set_based` under the writer lock for batches over
``engine.SET_BASED_FROM`` rows. The batch is all-or-nothing: a refused row raises its error
and nothing is written.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from . import rounds
from .errors import ClockError, ConflictError
from .schema import Fact, facts_from_table
from .staterows import latest
from .times import system_clock


class Engine(Protocol):
    """What the set-based path needs of :class:`tempomem.engine.Engine`, which calls it (so that
    this module need not import the engine back)."""

    def commit_time(self) -> datetime: ...
    def connection(self) -> duckdb.DuckDBPyConnection: ...
    def rules(self) -> tuple[dict[str, tuple[str, str | None]], str]: ...
    def commit(self, table: pa.Table, recorded_at: datetime) -> int: ...

_TS = pa.timestamp("us", tz="UTC")
OPS_SCHEMA = pa.schema([
    ("op", pa.int64()), ("kind", pa.string()), ("commit_time", _TS), ("scope", pa.string()),
    ("subject", pa.string()), ("predicate", pa.string()), ("object", pa.string()), ("valid_from", _TS),
    ("valid_to", _TS), ("valid_from_inferred", pa.bool_()), ("reference_time", _TS),
    ("artifacts", pa.list_(pa.string())), ("reason", pa.string()), ("target_op", pa.int64()),
    ("text", pa.string()), ("source", pa.string()), ("confidence", pa.float64()), ("origin", pa.string()),
    ("attributes", pa.string()), ("embedding", pa.list_(pa.float32())), ("link_type", pa.string()),
    ("weight", pa.float64()), ("serial", pa.int64()),
])


def ops_from_news(news: list[dict[str, Any]]) -> pa.Table:
    """Assertions validated row by row (``writepath.new_assertion``) as :func:`assert_set_based` reads them."""
    names = [n for n in OPS_SCHEMA.names if n not in ("kind", "commit_time", "target_op", "serial")]
    columns: dict[str, Any] = {name: [row.get(name) for row in news] for name in names if name != "op"}
    columns["op"] = list(range(len(news)))
    return pa.Table.from_pydict(columns, schema=pa.schema([OPS_SCHEMA.field(n) for n in names]))


def assert_set_based(engine: Engine, assertions: pa.Table) -> list[Fact]:
    """Apply checked assertions (:func:`ops_from_news` or ``assertion_columns.checked``) in
    ``op`` order, as one commit."""
    commit_time = engine.commit_time()
    n = assertions.num_rows
    ops = (assertions.append_column("kind", pa.array(["assert"] * n))
           .append_column("commit_time", pa.array([commit_time] * n, _TS))
           .append_column("target_op", pa.nulls(n, pa.int64()))
           .append_column("serial", assertions["op"])
           .select(OPS_SCHEMA.names).cast(OPS_SCHEMA))
    con = engine.connection()
    con.register("_tm_ops_in", ops)
    try:
        rounds.load_stored(con)
        rules, default_policy = engine.rules()
        applied = rounds.apply(con, rules, default_policy, ingested_at=system_clock())
        # Only the stored facts an assertion landed on: a key's other facts are not returned.
        con.register("_tm_landed_in", applied.landed)
        stored = con.sql("SELECT s.* FROM _tm_stored AS s SEMI JOIN _tm_landed_in AS l ON l.fact_id = s.fact_id"
                         ).to_arrow_table()
    finally:
        con.unregister("_tm_ops_in")
        con.unregister("_tm_landed_in")
        rounds.drop_stored(con)
    if applied.refused.num_rows:
        _raise_refused(applied.refused, ops)
    if applied.rows.num_rows:
        engine.commit(applied.rows, commit_time)
    return _landed_facts(applied, stored)


def _raise_refused(refused: pa.Table, ops: pa.Table) -> None:
    first = refused.slice(0, 1).to_pylist()[0]
    row = ops.slice(first["op"], 1).to_pylist()[0]
    where = f"row {first['op']}, " if ops.num_rows > 1 else ""
    if first["kind"] == "conflict":
        raise ConflictError(f"{where}overlapping value: {row['subject']} {row['predicate']} {row['object']!r} "
                            f"overlaps {first['conflict_objects']} (fact {first['conflict_ids']}) and the "
                            "predicate's policy is reject")
    raise ClockError(f"{where}fact {first['fact_id']}: its latest revision was recorded at or after this commit; "
                     "the store clock is behind it")


def _landed_facts(applied: rounds.Applied, stored: pa.Table) -> list[Fact]:
    """Each assertion's fact as it now stands: its newest row written, else as stored. Arrow
    only, as :func:`tempomem.schema.facts_from_table` is (a forked writer cannot run Polars)."""
    newest = latest(applied.rows)
    untouched = stored.filter(pc.invert(pc.is_in(stored["fact_id"], value_set=newest["fact_id"])))
    now = pa.concat_tables([newest.select(rounds.STORED_SCHEMA.names).cast(rounds.STORED_SCHEMA),
                            untouched.cast(rounds.STORED_SCHEMA)])
    landed = applied.landed.sort_by("op")
    facts = now.take(pc.index_in(landed["fact_id"], value_set=now["fact_id"]))
    recorded = facts.schema.get_field_index("recorded_at")
    return facts_from_table(facts.set_column(recorded, "recorded_at", facts["first_recorded_at"]))
