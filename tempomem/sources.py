"""Other memory systems' exports read as backfill input (SPEC §11): the readers behind
``mem.backfill(..., format=...)`` and :mod:`tempomem.importers`.

Each reader reads its source into Arrow and maps it to backfill's input columns with one DuckDB
statement (times parsed by :func:`tempomem.timegrammar.time_sql`), with
``origin = 'import:<format>'``. A source row that becomes two revisions gives two input rows
with the same ``fact_id`` and ``__row`` (the source row's 0-based position), so the report
names source rows.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import polars as pl
import pyarrow as pa

from .connection import new_connection, without_progress_bar
from .errors import TempomemError
from .timegrammar import time_sql


@dataclass(frozen=True)
class Source:
    """An export mapped to backfill's input: the rows, their ``origin``, and the importer's own
    flags and time unit."""

    rows: pa.Table
    origin: str
    flags: pl.DataFrame | None = None
    #: The unit of the source's bare numbers, when its format says (SPEC §2: never guessed).
    epoch_unit: str | None = None


def _with_columns(table: pa.Table, names: tuple[str, ...]) -> pa.Table:
    """Add the optional source columns a file lacks, as NULL text, so one statement fits all."""
    for name in names:
        if name not in table.column_names:
            table = table.append_column(name, pa.nulls(table.num_rows, pa.string()))
    return table.append_column("__row", pa.array(range(table.num_rows), pa.int64()))


def _column(values: list[Any]) -> pa.Array:
    """One source column; a column mixing types (SQLite allows it) becomes text."""
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([None if v is None else v.isoformat() if isinstance(v, datetime) else str(v)
                         for v in values], pa.string())


def _sqlite_table(path: str | os.PathLike[str], table: str) -> pa.Table:
    """All rows of ``table`` in a SQLite file, in rowid order."""
    if not os.path.isfile(path):
        raise TempomemError(f"data: no SQLite file {os.fspath(path)}")
    con = sqlite3.connect(f"file:{os.fspath(path)}?mode=ro", uri=True)
    try:
        names = [r[1] for r in con.execute("SELECT * FROM pragma_table_info(?)", (table,))]
        if not names:
            raise TempomemError(f"data: {os.fspath(path)} has no table {table!r}")
        quoted = ", ".join('"' + n.replace('"', '""') + '"' for n in names)
        rows = con.execute(f'SELECT {quoted} FROM "{table}" ORDER BY rowid').fetchall()
    except sqlite3.DatabaseError as exc:
        raise TempomemError(f"data: cannot read {os.fspath(path)} as SQLite: {exc}") from None
    finally:
        con.close()
    return pa.table({n: _column([r[i] for r in rows]) for i, n in enumerate(names)})


def _map(table: pa.Table, *queries: str, prepare: str | None = None) -> list[pa.Table]:
    """Run mapping queries over the source registered as ``src``, on one connection, after the
    statement ``prepare`` (a table the queries share, made once)."""
    con = new_connection()
    without_progress_bar(con)  # a long mapping would draw DuckDB's bar into the caller's output
    try:
        con.register("src", table)
        if prepare is not None:
            con.execute(prepare)
        return [con.sql(sql).to_arrow_table() for sql in queries]
    finally:
        con.close()


# -- Graphiti / Zep ---------------------------------------------------------------------------------

_GRAPHITI_OPTIONAL = ("uuid", "name", "source_node_uuid", "target_node_uuid", "group_id", "source_name",
                      "target_name", "fact", "episodes", "episode_uuids", "expired_at", "valid_at", "invalid_at",
                      "reference_time", "attributes", "created_at")


def _graphiti_sql() -> str:
    t = {c: time_sql(c, "VARCHAR") for c in ("created_at", "expired_at")}
    return f"""
WITH e AS (
    SELECT *, {t['created_at']} AS created_t, {t['expired_at']} AS expired_t,
           coalesce(source_name, source_node_uuid) AS subject_, coalesce(target_name, target_node_uuid) AS object_,
           coalesce(episodes, episode_uuids) AS artifacts_
    FROM src
),
-- Graphiti edits an edge in place: expired_at is when the end became known. Before it the
-- edge was believed open-ended; from it, closed at invalid_at. Expired with no invalid_at,
-- it stopped being believed with no end: a retraction.
believed_open AS (SELECT *, expired_t > created_t AS later_end FROM e)
SELECT __row, uuid AS fact_id, group_id AS scope, subject_ AS subject, name AS predicate, object_ AS object,
       fact AS text, valid_at AS valid_from,
       CASE WHEN later_end THEN NULL ELSE invalid_at END AS valid_to,
       created_at AS recorded_at,
       CASE WHEN later_end AND invalid_at IS NULL THEN expired_at END AS retracted_at,
       CASE WHEN later_end AND invalid_at IS NULL THEN 'expired in Graphiti with no invalid_at' END
           AS retraction_reason,
       artifacts_ AS artifacts, attributes, source_node_uuid, target_node_uuid, reference_time
FROM believed_open
UNION ALL BY NAME
SELECT __row, uuid AS fact_id, group_id AS scope, subject_ AS subject, name AS predicate, object_ AS object,
       fact AS text, valid_at AS valid_from, invalid_at AS valid_to, expired_at AS recorded_at,
       'expired in Graphiti' AS reason, artifacts_ AS artifacts, attributes, source_node_uuid, target_node_uuid,
       reference_time
FROM believed_open WHERE later_end AND invalid_at IS NOT NULL
ORDER BY __row, recorded_at
"""


_GRAPHITI_DEFAULTED_SQL = """
SELECT 'valid_at_is_reference_time' AS flag, count(*) AS count, min(__row) AS example_row
FROM (SELECT __row, {valid} AS v, {ref} AS r FROM src) WHERE v = r HAVING count(*) > 0
"""


def _read_graphiti(path: str | os.PathLike[str]) -> pa.Table:
    """Edges from a JSON array, an object with an ``edges`` list, or JSON Lines."""
    try:
        text = open(path, encoding="utf-8").read()
    except OSError as exc:
        raise TempomemError(f"data: cannot read {os.fspath(path)}: {exc.strerror}") from None
    try:
        parsed = json.loads(text)
        # a dict is {"edges": [...]} or the only line of a JSON Lines file: one edge
        edges = (parsed["edges"] if "edges" in parsed else [parsed]) if isinstance(parsed, dict) else parsed
    except json.JSONDecodeError:
        try:
            edges = [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError as exc:
            raise TempomemError(f"data: {os.fspath(path)} is neither JSON nor JSON Lines: {exc}") from None
    if not isinstance(edges, list) or not all(isinstance(e, dict) for e in edges):
        raise TempomemError(f"data: {os.fspath(path)} should hold a list of Graphiti edges")
    names = list(dict.fromkeys(k for e in edges for k in e))
    columns = {}
    for name in names:
        values = [e.get(name) for e in edges]
        if name == "attributes":  # a free-form object: kept as JSON text
            values = [None if v is None else json.dumps(v, sort_keys=True) for v in values]
        if name in ("episodes", "episode_uuids"):
            columns[name] = pa.array(values, pa.list_(pa.string()))
        else:
            columns[name] = _column([None if v is None else v if isinstance(v, list) else str(v) for v in values])
    for name in ("episodes", "episode_uuids"):  # both lists, so COALESCE(episodes, episode_uuids) binds
        if name not in columns:
            columns[name] = pa.nulls(len(edges), pa.list_(pa.string()))
    return _with_columns(pa.table(columns) if names else pa.table({"uuid": pa.array([], pa.string())}),
                         _GRAPHITI_OPTIONAL)


def _read_graphiti_edges(path: str | os.PathLike[str]) -> Source:
    """Backfill input from a Graphiti edges export."""
    source = _read_graphiti(path)
    rows, defaulted = _map(source, _graphiti_sql(), _GRAPHITI_DEFAULTED_SQL.format(
        valid=time_sql("valid_at", "VARCHAR"), ref=time_sql("reference_time", "VARCHAR")))
    flags = pl.from_arrow(defaulted)
    return Source(rows, "import:graphiti", flags)  # type: ignore[arg-type]


# -- mem0 ------------------------------------------------------------------------------------------

_MEM0_OPTIONAL = ("old_memory", "new_memory", "prev_value", "new_value", "created_at", "updated_at", "timestamp",
                  "is_deleted", "actor_id", "role", "id")


def _mem0_events_sql() -> str:
    """The history's events with their parsed times, as ``events``: what the mapping and the
    orphan flag both read (each time parsed once)."""
    return f"""
CREATE TEMP TABLE events AS
WITH h AS (
    SELECT __row, CAST(coalesce(id, memory_id || ':' || __row) AS VARCHAR) AS eid, CAST(memory_id AS VARCHAR) AS mid,
           CAST(coalesce(new_memory, new_value) AS VARCHAR) AS memory_text, upper(CAST(event AS VARCHAR)) AS ev,
           -- the event time: ADD may only have created_at; an UPDATE or DELETE's created_at is the
           -- memory's creation, so only updated_at (or an old file's timestamp) dates it.
           CAST(CASE WHEN upper(CAST(event AS VARCHAR)) = 'ADD'
                     THEN coalesce(updated_at, created_at, "timestamp")
                     ELSE coalesce(updated_at, "timestamp") END AS VARCHAR) AS event_raw,
           CAST(actor_id AS VARCHAR) AS actor_id, CAST(role AS VARCHAR) AS role
    FROM src
)
SELECT *, {time_sql("event_raw", "VARCHAR")} AS event_t FROM h
"""


_MEM0_SQL = """
WITH chain AS (
    SELECT *, lead(ev) OVER w AS next_ev, lead(event_t) OVER w AS next_t, lead(eid) OVER w AS next_id,
           lag(ev) OVER w IN ('ADD', 'UPDATE') AS follows_belief
    FROM events WHERE event_t IS NOT NULL AND ev IN ('ADD', 'UPDATE', 'DELETE')
    WINDOW w AS (PARTITION BY mid ORDER BY event_t, CASE ev WHEN 'ADD' THEN 0 WHEN 'UPDATE' THEN 1 ELSE 2 END, __row)
),
opened AS (
    -- A belief opened while another value was believed starts at the event (inferred), as
    -- the write path would place it; otherwise its start is unknown.
    SELECT *, CASE WHEN coalesce(follows_belief, false) THEN event_t END AS start_t
    FROM chain WHERE ev IN ('ADD', 'UPDATE')
)
SELECT __row, eid AS fact_id, mid AS subject, 'memory' AS predicate, memory_text AS object,
       start_t AS valid_from, true AS valid_from_inferred, event_raw AS recorded_at,
       CASE WHEN next_ev = 'DELETE' OR next_t = event_t THEN next_t END AS retracted_at,
       CASE WHEN next_ev = 'DELETE' THEN 'deleted in mem0'
            WHEN next_t = event_t THEN 'replaced by mem0 event ' || next_id || ' at the same instant' END
           AS retraction_reason,
       CAST(NULL AS VARCHAR) AS superseded_by, CAST(NULL AS VARCHAR) AS status,
       CAST(NULL AS TIMESTAMPTZ) AS valid_to, CAST(NULL AS VARCHAR) AS reason, ev AS mem0_event, actor_id, role
FROM opened
UNION ALL BY NAME
-- the next ADD/UPDATE closes this value where it begins: a supersession, learned then (the
-- time written in full ISO form, which the check reads on its fast path; DuckDB's own text
-- form, '+00' for the offset, takes the grammar's slow one)
SELECT __row, eid AS fact_id, mid AS subject, 'memory' AS predicate, memory_text AS object,
       start_t AS valid_from, true AS valid_from_inferred,
       strftime(next_t, '%Y-%m-%dT%H:%M:%S.%fZ') AS recorded_at,
       next_t AS valid_to, next_id AS superseded_by, 'superseded' AS status,
       'updated in mem0 by event ' || next_id AS reason, ev AS mem0_event, actor_id, role
FROM opened WHERE next_ev IN ('ADD', 'UPDATE') AND next_t > event_t
UNION ALL BY NAME
-- ADD/UPDATE events without a readable time: backfill rejects them and says why
SELECT __row, eid AS fact_id, mid AS subject, 'memory' AS predicate, memory_text AS object,
       event_raw AS recorded_at, ev AS mem0_event, actor_id, role
FROM events WHERE event_t IS NULL AND ev IN ('ADD', 'UPDATE')
ORDER BY __row, recorded_at
"""


_MEM0_ORPHANS_SQL = """
SELECT 'unmatched_mem0_event' AS flag, count(*) AS count, min(__row) AS example_row
FROM (SELECT __row, ev, lag(ev) OVER (PARTITION BY mid ORDER BY event_t, __row) AS prev, event_t FROM events)
WHERE (ev = 'DELETE' AND (prev IS NULL OR prev = 'DELETE'))
   OR ev NOT IN ('ADD', 'UPDATE', 'DELETE') OR ev IS NULL
   OR (ev = 'DELETE' AND event_t IS NULL)
HAVING count(*) > 0
"""


def _read_mem0(path: str | os.PathLike[str]) -> Source:
    """Backfill input from a mem0 history file."""
    source = _with_columns(_sqlite_table(path, "history"), _MEM0_OPTIONAL)
    for needed in ("memory_id", "event"):
        if needed not in source.column_names:
            raise TempomemError(f"data: the history table has no {needed} column; is this a mem0 history file?")
    rows, orphans = _map(source, _MEM0_SQL, _MEM0_ORPHANS_SQL, prepare=_mem0_events_sql())
    flags = pl.from_arrow(orphans)
    return Source(rows, "import:mem0", flags)  # type: ignore[arg-type]


# -- four-timestamp SQLite ------------------------------------------------------------------------

_SQLITE4TS_OPTIONAL = ("scope", "text", "valid_from", "valid_to", "retracted_at", "source", "confidence",
                           "valid_from_inferred", "supersedes")

_SQLITE4TS_SQL = """
SELECT f.__row, CAST(f.id AS VARCHAR) AS fact_id, f.scope, f.subject, f.predicate, f.object, f.text,
       f.valid_from, f.valid_to, f.asserted_at AS recorded_at, f.retracted_at, f.source, f.confidence,
       f.valid_from_inferred,
       -- `supersedes` on the newer fact names the older one: the older one's superseded_by,
       -- known from when the newer one was asserted.
       CAST(n.id AS VARCHAR) AS superseded_by, n.asserted_at AS superseded_at_epoch
FROM src f
LEFT JOIN (SELECT DISTINCT ON (supersedes) id, supersedes, asserted_at FROM src
           WHERE supersedes IS NOT NULL ORDER BY supersedes, asserted_at, id) n
       ON CAST(n.supersedes AS VARCHAR) = CAST(f.id AS VARCHAR)
ORDER BY f.__row
"""


def _read_sqlite4ts(path: str | os.PathLike[str]) -> Source:
    """Backfill input from a four-timestamp SQLite file."""
    source = _with_columns(_sqlite_table(path, "facts"), _SQLITE4TS_OPTIONAL)
    [rows] = _map(source, _SQLITE4TS_SQL)
    rows = rows.rename_columns(["superseded_at" if c == "superseded_at_epoch" else c for c in rows.column_names])
    return Source(rows, "import:sqlite4ts", None, "s")


#: The importers ``mem.backfill(..., format=...)`` knows, each as the reader of its source.
FORMATS: dict[str, Callable[[str | os.PathLike[str]], Source]] = {
    "graphiti": _read_graphiti_edges, "mem0": _read_mem0, "sqlite4ts": _read_sqlite4ts}

__all__ = ["FORMATS", "Source"]
