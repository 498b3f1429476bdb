"""The set-based write path: SPEC §5 over whole batches, in rounds (``rounds.sql``).

The caller binds two relations on a DuckDB connection that has ``macros.sql``'s interval
predicates (its part ``intervals``, ``connection.bind_events``):

``_tm_ops_in``  one row per operation, in batch order (``op``), with the columns of
                :data:`OP_COLUMNS`; its payload columns (:data:`PAYLOAD_COLUMNS`) are what a
                new fact stores beside its state;
``_tm_stored``  the latest stored revision (:data:`STORED_SCHEMA` rows) of every believed
                fact of the batch's keys, made by :func:`load_stored`.

:func:`apply` runs closed-form passes (``closedform.sql``: a key's operations of the shapes most
of a log has, in one pass whatever their number) and rounds for the rest (one operation of
every key at once), and returns the revision rows to commit, the fact each assertion landed on,
and the operations the write path refused. It commits nothing: the engine does
(:mod:`tempomem.engine`).
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from datetime import datetime
from functools import cache

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from .connection import sql_parts
from .ids import FACT_ID_MACRO
from .schema import EVENT_SCHEMA, WRITER_COLUMNS, positions
from .temporal import decisions

#: What ``_tm_ops_in`` gives for each operation (``kind`` is ``assert`` or ``correct``; a
#: correction names the assertion whose fact it retracts in ``target_op``). ``serial`` numbers
#: the id of the fact an assertion makes (unique in the batch; ids made at one instant sort by
#: it): ``op`` in a batch, the input row in a replay, whose ``op`` is numbered chunk by chunk.
OP_COLUMNS = ("op", "kind", "commit_time", "scope", "subject", "predicate", "object", "valid_from", "valid_to",
              "valid_from_inferred", "reference_time", "artifacts", "reason", "target_op", "serial")
# What the rounds keep of an operation: the key is `k` from `_tm_keys`, the serial is in `new_id`.
_OP_STATE_COLUMNS = tuple(c for c in OP_COLUMNS if c not in ("scope", "subject", "predicate", "serial"))
PAYLOAD_COLUMNS = ("text", "source", "confidence", "origin", "attributes", "embedding", "link_type", "weight")

#: What ``_tm_stored`` keeps of a stored revision (``schema.WRITER_COLUMNS``). Reading the store's
#: every row is what a large batch's load costs, and each column read adds to it (a tenth to a
#: fifth less, on a 14M-row store, without the ten left out).
STORED_SCHEMA = pa.schema([EVENT_SCHEMA.field(name) for name in WRITER_COLUMNS])

_STATE_COLUMNS = ("fact_id", "object", "valid_from", "valid_to", "valid_from_inferred", "retracted_at",
                  "superseded_at", "superseded_by", "status", "reason", "artifacts", "first_recorded_at")


#: After the first pass, a pass reads each key's next this many operations, four times as many
#: after a pass in which a key took all it read. A key with very many operations that cut into
#: its timeline ends its prefix every few dozen of them: reading all it has left in every pass
#: made a pass cost in proportion to the operations left, not to those taken.
WINDOW_FROM = 256
_UNBOUNDED = 2**31 - 1

#: Below this many operations left, a closed-form pass that takes anything pays: a pass then
#: costs about as many statements as a round, which is all a small round costs. Above it, a pass
#: reads every operation left, so it must take a round's worth (one per key left) to go on.
ALTERNATE_FROM = 10_000

#: A single-valued key with more than this many operations in a batch is busy: each pass
#: first decides its leading operations all at once (``closedform_busy.sql``), where the closed
#: form stops at every late operation that cuts into the timeline.
BUSY_FROM = 64
#: At most this many guesses a busy pass (see ``closedform_busy.sql``); what the last one has not
#: settled waits for the next pass.
BUSY_GUESSES = 8


@dataclass(frozen=True)
class Applied:
    """What a batch does, before anything is written."""

    #: One revision row per fact and commit, in ``EVENT_SCHEMA``, in the store's sort order.
    rows: pa.Table
    #: ``op``, ``fact_id``: the fact each assertion that was not refused landed on.
    landed: pa.Table
    #: ``op``, ``kind`` (``conflict``, ``clock`` or ``not_believed``), ``fact_id``, and for a
    #: conflict the other facts' ``conflict_ids`` and ``conflict_objects``: the refused.
    refused: pa.Table


@cache
def _statements() -> dict[str, list[str]]:
    """``rounds.sql`` and ``closedform.sql`` split into their named parts, each a list of statements."""
    parts = sql_parts("rounds.sql") | sql_parts("closedform.sql") | sql_parts("closedform_busy.sql")
    return {name: _split(body) for name, body in parts.items()}


def _run(con: duckdb.DuckDBPyConnection, part: str, params: dict[str, object] | None = None) -> None:
    """Run a part's statements in order, each bound to the ``params`` it names (``$name``)."""
    for statement in _statements()[part]:
        con.execute(statement, {k: v for k, v in (params or {}).items() if f"${k}" in statement} or None)


def _split(body: str) -> list[str]:
    """Statements of a section: split at the semicolons that end a line (none is inside a string)."""
    return [s.strip() for s in re.split(r";\s*$", body, flags=re.MULTILINE) if _code(s)]


def _code(statement: str) -> bool:
    return any(line.strip() and not line.strip().startswith("--") for line in statement.splitlines())


def apply(con: duckdb.DuckDBPyConnection, rules: dict[str, tuple[str, str | None]], default_policy: str, *,
          ingested_at: datetime, origin: str | None = None, nonce: int | None = None,
          fold_new: bool = False) -> Applied:
    """Apply ``_tm_ops_in`` to ``_tm_stored`` (see the module doc); ``origin`` overrides every row's.
    ``fold_new``: write the revisions of the facts the batch makes folded (a replay's whole log).

    New fact ids are made from each operation's time and ``serial`` plus ``nonce`` (:func:`new_nonce`
    when not given): batches applied with one nonce and distinct serials never share an id.
    """
    _run(con, "setup")
    con.register("_tm_decisions_in", pa.table(dict(zip(("case_name", "rule", "action"),
                                                       zip(*decisions.rows(), strict=True), strict=True))))
    predicates = list(rules)
    con.register("_tm_rules_in", pa.table({
        "predicate": pa.array(predicates, pa.string()),
        "arity": pa.array([rules[p][0] for p in predicates], pa.string()),
        "rule": pa.array([decisions.rule_of(rules[p][0], rules[p][1] or default_policy) for p in predicates],
                         pa.string())}))
    # DuckDB answers an ASOF join whose left side it expects to be small with a nested loop. A
    # pass's late operations are often estimated that small while the key's ended facts number
    # thousands: the loop then grows with their product, pass after pass.
    con.execute("SET asof_loop_join_threshold = 0")
    try:
        _prepare(con, default_policy, new_nonce() if nonce is None else nonce)
        emitted = _apply_all(con)
        states = pa.concat_tables([t.cast(emitted[0].schema) for t in emitted])
        con.register("_tm_emitted", states.append_column("i", positions(states.num_rows)))
        out = con.sql(_statements()["output"][0], params={"origin": origin, "ingested_at": ingested_at,
                                                          "fold_new": fold_new})
        rows = out.to_arrow_table().cast(EVENT_SCHEMA)
        return Applied(rows, con.sql("SELECT op, fact_id FROM _tm_landed ORDER BY op").to_arrow_table(),
                       con.sql("SELECT * FROM _tm_refused ORDER BY op").to_arrow_table())
    finally:
        con.execute("RESET asof_loop_join_threshold")
        for name in ("_tm_decisions_in", "_tm_rules_in", "_tm_emitted"):
            con.unregister(name)
        for name in ("_tm_decisions", "_tm_ops", "_tm_payload", "_tm_state", "_tm_landed", "_tm_refused", "_tm_r",
                     "_tm_b", "_tm_landing", "_tm_acts", "_tm_final", "_tm_corrections", "_tm_u", "_tm_xk", "_tm_xb",
                     "_tm_xc", "_tm_xt", "_tm_xr", "_tm_xruns", "_tm_xa", "_tm_xe",
                     "_tm_xtaken", "_tm_busy", "_tm_yk", "_tm_yo", "_tm_yp", "_tm_ylevels", "_tm_yd", "_tm_yt",
                     "_tm_yj", "_tm_ychain"):
            con.execute(f"DROP TABLE IF EXISTS {name}")


def _apply_all(con: duckdb.DuckDBPyConnection) -> list[pa.Table]:
    """Apply ``_tm_ops``: closed-form passes and rounds, each pass's and round's changed states
    kept with their number (``round``, rising within every fact) as ``_tm_emitted`` wants them.

    A pass takes each key's operations up to and including the first late one that cuts into
    its timeline, so the next pass goes on from there; before it, a busy key's are decided all
    at once (:data:`BUSY_FROM`, ``closedform_busy.sql``, which says what ends its prefix). On
    other keys a correction, an unknown start, an end or a ``reject`` key ends a key's prefix
    before that operation: when a pass takes nothing off the busiest key, one round applies the
    next operation of every key; while a busy key may still be taken, so does a pass that takes
    nothing. Passes go on while they pay
    (:data:`ALTERNATE_FROM`); after that, plain rounds to the end. The first pass reads every
    operation; the next ones a window of each key's (:data:`WINDOW_FROM`), and what is left is
    renumbered sorted after a pass that took most of it, in place after one that took little.
    """
    emitted: list[pa.Table] = []
    offset = 0
    ops_left, keys_left, rounds_left = _left(con)
    # busy keys the busy pass may still take: it tries again after one round (a key's first
    # operation of unknown start, say, is a round's), not after two tries that took nothing
    busy = con.sql("SELECT count(*) FROM _tm_busy").fetchall()[0][0] > 0
    idle = 0
    window = _UNBOUNDED
    while True:
        taken_busy = 0
        if busy:
            if _busy_pass(con):
                offset, taken_busy, _ = _collect(con, emitted, offset, ops_left)
                ops_left, keys_left, rounds_left = _left(con)
                if ops_left == 0:
                    return emitted
                idle = 0
            else:
                idle += 1
                busy = idle < 2
        _run(con, "runs", {"window": window})
        offset, taken, busiest = _collect(con, emitted, offset, ops_left)
        window = 4 * window if busiest >= window else WINDOW_FROM
        ops_left, keys, last = _left(con)
        taken += taken_busy
        if not busy and (taken == 0 or (taken < keys_left and taken + ops_left >= ALTERNATE_FROM)):
            _rounds(con, emitted, offset, last)
            return emitted
        if last == 0:
            return emitted
        if taken == 0 or last == rounds_left:
            _rounds(con, emitted, offset, 1)
            offset, last = offset + 1, last - 1
            _run(con, "advance")
            ops_left, keys, _ = _left(con)
        keys_left, rounds_left = keys, last


def _left(con: duckdb.DuckDBPyConnection) -> tuple[int, int, int]:
    """Operations left, their keys, and the most a key has."""
    return con.sql("SELECT count(*), count(DISTINCT k), coalesce(max(round), 0) FROM _tm_ops").fetchall()[0]


def _collect(con: duckdb.DuckDBPyConnection, emitted: list[pa.Table], offset: int,
             ops_left: int) -> tuple[int, int, int]:
    """Keep a pass's changed states (``_tm_xe``) numbered after ``offset``, put them in
    ``_tm_state`` and take its operations off ``_tm_ops``; return the new offset, the operations
    taken and the most one key gave."""
    closed = con.sql("SELECT * FROM _tm_xe").to_arrow_table()
    emitted.append(closed.set_column(0, "round", pc.add(closed["round"], pa.scalar(offset, pa.int32()))))
    offset += con.sql("SELECT coalesce(max(round), 0) FROM _tm_xe").fetchall()[0][0]
    taken, busiest = con.sql("SELECT coalesce(sum(taken), 0), coalesce(max(taken), 0) FROM _tm_xtaken").fetchall()[0]
    _run(con, "keep_states")
    _run(con, "next_sorted" if 2 * taken >= ops_left else "next_in_place")
    return offset, taken, busiest


def _busy_pass(con: duckdb.DuckDBPyConnection) -> bool:
    """Decide the busy keys' leading operations (``closedform_busy.sql``); False when no busy key
    has an operation it can take now."""
    _run(con, "busy_setup")
    if con.sql("SELECT count(*) FROM _tm_yo").fetchall()[0][0] == 0:
        return False
    _run(con, "busy_frontier")
    while con.sql("SELECT count(*) FROM _tm_yj").fetchall()[0][0] > 0:
        _run(con, "busy_double")
    _run(con, "busy_seed")
    for guess in range(BUSY_GUESSES):
        _run(con, "busy_decide")
        wrong = con.sql("SELECT count(*) FROM _tm_yd WHERE NOT agrees").fetchall()[0][0]
        if wrong == 0 or guess == BUSY_GUESSES - 1:
            break
        _run(con, "busy_next")
    _run(con, "busy_emit")
    return True


def _rounds(con: duckdb.DuckDBPyConnection, emitted: list[pa.Table], offset: int, count: int) -> None:
    """Run rounds 1 to ``count``, keeping each one's changed states numbered after ``offset``."""
    for r in range(1, count + 1):
        _run(con, "round", {"round": r})
        # kept in Arrow: an INSERT per round into one DuckDB table cost a third of the rounds
        changed = con.sql("SELECT * FROM _tm_u").to_arrow_table()
        emitted.append(changed.add_column(0, "round", pa.array([offset + r] * changed.num_rows, pa.int32())))


def new_nonce() -> int:
    """A random serial base for new fact ids (``ids.FACT_ID_MACRO``): two loads of the same log
    never make the same ids."""
    return secrets.randbits(58)


def _prepare(con: duckdb.DuckDBPyConnection, default_policy: str, nonce: int) -> None:
    """The tables the rounds read and write, from ``_tm_ops_in`` and ``_tm_stored``."""
    default_rule = decisions.rule_of("single", default_policy)
    con.execute("CREATE OR REPLACE TEMP TABLE _tm_decisions AS SELECT * FROM _tm_decisions_in")
    # A new fact's id sorts by its commit time, then by its place in the batch (ids.py).
    con.execute(FACT_ID_MACRO)
    con.execute(f"""
        CREATE OR REPLACE TEMP TABLE _tm_ops AS
        WITH numbered AS (  -- on narrow rows: a window sorts every column it carries
            SELECT o.op, y.k, CAST(row_number() OVER (PARTITION BY y.k ORDER BY o.op) AS INTEGER) AS round
            FROM _tm_ops_in AS o
            JOIN _tm_keys AS y ON y.scope = o.scope AND y.subject = o.subject AND y.predicate = o.predicate
        )
        SELECT {', '.join(f'o.{c}' for c in _OP_STATE_COLUMNS)}, n.k, n.round,
               coalesce(r.arity, 'single') AS arity, coalesce(r.rule, $default_rule) AS rule,
               tm__fact_id(NULL, o.commit_time, o.serial, $nonce) AS new_id
        FROM _tm_ops_in AS o
        JOIN numbered AS n ON n.op = o.op
        LEFT JOIN _tm_rules_in AS r ON r.predicate = o.predicate""",
                {"default_rule": default_rule, "nonce": nonce})
    con.execute("CREATE OR REPLACE TEMP TABLE _tm_busy AS SELECT DISTINCT k FROM _tm_ops "
                "WHERE round > $busy AND rule <> 'multi'", {"busy": BUSY_FROM})
    con.execute(f"CREATE OR REPLACE TEMP TABLE _tm_payload AS SELECT op, {', '.join(PAYLOAD_COLUMNS)} "
                "FROM _tm_ops_in WHERE kind = 'assert'")
    # A stored fact's `f` is its negated place in `_tm_stored`: a window numbering the rows
    # would gather every column into one thread.
    con.execute(f"""
        CREATE OR REPLACE TEMP TABLE _tm_state AS
        SELECT -(s.rowid + 1) AS f, s.fact_id, y.k, {', '.join(f's.{c}' for c in _STATE_COLUMNS[1:])},
               s.recorded_at AS last_recorded_at, false AS emitted
        FROM _tm_stored AS s
        JOIN _tm_keys AS y ON y.scope = s.scope AND y.subject = s.subject AND y.predicate = s.predicate""")
    con.execute("CREATE OR REPLACE TEMP TABLE _tm_landed (op BIGINT, fact_id VARCHAR, f BIGINT)")
    con.execute("CREATE OR REPLACE TEMP TABLE _tm_refused "
                "(op BIGINT, kind VARCHAR, fact_id VARCHAR, conflict_ids VARCHAR, conflict_objects VARCHAR)")


def load_stored(con: duckdb.DuckDBPyConnection) -> None:
    """Make ``_tm_keys`` (the keys of ``_tm_ops_in``, numbered ``k`` in the store's sort order)
    and ``_tm_stored`` from ``_tm_events`` (the latest revision of each believed fact of those
    keys). :func:`drop_stored` removes them."""
    con.execute("""
        CREATE OR REPLACE TEMP TABLE _tm_keys AS
        SELECT scope, subject, predicate, row_number() OVER (ORDER BY scope, subject, predicate) AS k
        FROM (SELECT DISTINCT scope, subject, predicate FROM _tm_ops_in)""")
    # Each fact's latest revision found on narrow rows (a window would sort every column), then
    # those revisions' STORED_SCHEMA columns. A row whose belief end a fold stored is never a
    # fact's latest: its row groups, which a fold or a replay writes apart, are skipped unread.
    con.execute(f"""
        CREATE OR REPLACE TEMP TABLE _tm_stored AS
        WITH mine AS MATERIALIZED (
            SELECT {', '.join(f'e.{name}' for name in STORED_SCHEMA.names)} FROM _tm_events AS e
            SEMI JOIN _tm_keys AS k ON k.scope = e.scope AND k.subject = e.subject AND k.predicate = e.predicate
            WHERE e.folded_until IS NULL
        )
        SELECT m.* FROM mine AS m
        SEMI JOIN (SELECT fact_id, max(revision) AS revision FROM mine GROUP BY fact_id) AS l
               ON l.fact_id = m.fact_id AND l.revision = m.revision
        WHERE m.status NOT IN ('retracted', 'erased')""")


def drop_stored(con: duckdb.DuckDBPyConnection) -> None:
    """Drop what :func:`load_stored` made."""
    for name in ("_tm_keys", "_tm_stored"):
        con.execute(f"DROP TABLE IF EXISTS {name}")
