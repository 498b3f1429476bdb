"""Typed-link traversal in time: ``tm.graph.traverse`` and the multi-hop dependency question.

Both run one SQL macro of ``macros.sql`` (``tm_traverse``, ``dependency_changes``; the calls and
the in-memory stand-ins are in ``graph.sql``): a recursive query over one time slice (SPEC §6
as_believed semantics), so every hop sees the same instant and belief. Edges are facts whose
object is an entity (the subject of some fact), walked subject -> object only; see the macros
for why.

Speed: each hop of ``tm_traverse`` asks ``tm_out_links(entity_id)`` for the candidate links
out of an entity. In tempomem's own connection that is answered from an adjacency array held
in memory (every possible link sorted by source entity, with offsets: CSR), rebuilt with the
in-memory index whenever the store version changes; a hop then costs the links it follows,
not a scan of the million links of the store. The slice test stays in SQL.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa

from .connection import sql_parts
from .errors import TempomemError
from .queries import frame
from .recall import indexed_version, prepared_connection
from .schema import LINK_TYPES
from .times import TimeLike, to_utc

if TYPE_CHECKING:
    from .store import Memory

#: Hop multiplier per link type: causal and entity links spread more, semantic ones less.
DEFAULT_MULTIPLIERS: dict[str, float] = {"causal": 1.5, "entity": 1.2, "temporal": 1.0, "semantic": 0.8}

_MAX_DEPTH = 10

#: The named parts of graph.sql: ``{name: text}``.
_SQL = sql_parts("graph.sql")


@dataclass
class _Adjacency:
    """Every possible link of one store version, by source entity: links ``offsets[i]:offsets[i+1]``
    leave the entity numbered ``i`` in ``_tm_entities``."""

    con: duckdb.DuckDBPyConnection
    version: int
    offsets: np.ndarray
    links: pa.StructArray

    def out_links(self, entity_ids: pa.Array | pa.ChunkedArray) -> pa.ListArray:
        """``tm_out_links`` for a vector of entity ids: one list of link rows per id, in one gather."""
        ids = entity_ids.combine_chunks() if isinstance(entity_ids, pa.ChunkedArray) else entity_ids
        present = ids.is_valid().to_numpy(zero_copy_only=False)
        at = ids.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        first = self.offsets[at]
        counts = np.where(present, self.offsets[at + 1] - first, 0)
        bounds = np.concatenate([[0], np.cumsum(counts)])
        # Positions of every requested link: each id's run first..first+count, laid end to end.
        take = np.repeat(first - bounds[:-1], counts) + np.arange(bounds[-1])
        mask = pa.array(~present) if not present.all() else None
        return pa.ListArray.from_arrays(pa.array(bounds, pa.int32()), self.links.take(pa.array(take)), mask=mask)


def _prepared(mem: Memory) -> duckdb.DuckDBPyConnection:
    """tempomem's connection with its index, ``_tm_entities`` and ``tm_out_links`` in memory and
    up to date (hold ``mem.reader.lock``)."""
    reader = mem.reader
    con = prepared_connection(reader)
    version = indexed_version(reader)
    adjacency: _Adjacency | None = reader.caches.get("graph")
    if adjacency is not None and adjacency.con is con and adjacency.version == version:
        return con
    con.execute(_SQL["entities"])
    links = con.sql(_SQL["links"]).to_arrow_table()
    entities = con.sql("SELECT count(*) FROM _tm_entity_cache").fetchall()[0][0]
    sources = links["src_id"].to_numpy()
    offsets = np.searchsorted(sources, np.arange(entities + 1), side="left").astype(np.int64)
    rows = links.drop_columns(["src_id"])
    fresh = _Adjacency(con, version, offsets,
                       pa.StructArray.from_arrays([c.combine_chunks() for c in rows.columns], names=rows.column_names))
    if adjacency is None or adjacency.con is not con:
        # The SQL definition of tm_out_links gives way to the in-memory one (same rows): a
        # function that reads whatever adjacency is current, so later versions only swap data.
        row_type = con.sql("SELECT l.* EXCLUDE (src_id) FROM _tm_links AS l LIMIT 0")
        con.execute("DROP MACRO tm_out_links")
        con.create_function(
            "tm_out_links", lambda ids: reader.caches["graph"].out_links(ids), [duckdb.sqltype("INTEGER")],
            duckdb.list_type(duckdb.struct_type(dict(zip(row_type.columns, row_type.types, strict=True)))),
            type="arrow", side_effects=False)
    reader.caches["graph"] = fresh
    return con


def _multipliers(given: Mapping[str, float] | None) -> dict[str, float]:
    merged = dict(DEFAULT_MULTIPLIERS)
    for link_type, factor in (given or {}).items():
        if link_type not in LINK_TYPES:
            raise TempomemError(f"multipliers: unknown link_type {link_type!r}; use {', '.join(LINK_TYPES)}")
        if isinstance(factor, bool) or not isinstance(factor, int | float) or not factor >= 0:
            raise TempomemError(f"multipliers: {link_type} must be a number >= 0, got {factor!r}")
        merged[link_type] = float(factor)
    return merged


def _depth(depth: Any) -> int:
    if isinstance(depth, bool) or not isinstance(depth, int) or not 1 <= depth <= _MAX_DEPTH:
        raise TempomemError(f"depth: must be an integer from 1 to {_MAX_DEPTH}, got {depth!r}")
    return depth


def _name(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise TempomemError(f"{field}: must be a non-empty entity name, got {value!r}")
    return value


def _predicates(predicates: str | Sequence[str] | None) -> list[str] | None:
    if predicates is None:
        return None
    return [predicates] if isinstance(predicates, str) else [str(p) for p in predicates]


def traverse(mem: Memory, start: str, depth: int = 2, *, valid_at: TimeLike | None = None,
             believed_at: TimeLike | None = None, multipliers: Mapping[str, float] | None = None,
             predicates: str | Sequence[str] | None = None) -> pl.DataFrame:
    """Entities reached from ``start`` in at most ``depth`` hops over the links in force.

    The slice is (``valid_at``, ``believed_at``), both defaulting to the store clock's now;
    a link that ended, was retracted or was not yet believed is not walked. Each hop is worth
    ``weight`` × the multiplier of its ``link_type`` (``multipliers`` overrides some of the
    defaults causal 1.5, entity 1.2, temporal 1.0, semantic 0.8). ``predicates`` optionally
    keeps only links with those predicates. Result columns: ``entity``, ``depth`` (fewest
    hops), ``score`` (best path: product of its hop values), ``path`` (that path's fact_ids),
    best score first.

    >>> _ = mem.assert_fact("checkout-api", "depends_on", "payments-db", valid_from="2026-01-01", link_type="causal")
    >>> _ = mem.assert_fact("payments-db", "engine", "postgres", valid_from="2026-01-01")  # an entity: it has facts
    >>> tm.graph.traverse(mem, "checkout-api", depth=2, valid_at="2026-03-15").select("entity", "depth", "score").rows()
    [('payments-db', 1, 1.5)]
    """
    factors = _multipliers(multipliers)
    now = mem.now()
    at: datetime = to_utc(valid_at, field="valid_at") or now  # type: ignore[assignment]
    believed: datetime = to_utc(believed_at, field="believed_at") or now  # type: ignore[assignment]
    with mem.reader.lock:
        return frame(
            _prepared(mem), _SQL["traverse"],
            {"start": _name(start, "start"), "depth": _depth(depth), "valid_at": at, "believed_at": believed,
             "types": list(factors), "factors": list(factors.values()), "predicates": _predicates(predicates)},
        )


def dependency_changes(mem: Memory, root: str, at: TimeLike, lookback: str = "24 hours", *, depth: int = 3,
                       believed_at: TimeLike | None = None,
                       predicates: str | Sequence[str] = ("depends_on",)) -> pl.DataFrame:
    """Which dependencies of ``root`` at ``at`` changed in ``[at - lookback, at)``, and were they known then?

    Dependencies are the entities reached from ``root`` over ``predicates`` links (default
    ``depends_on``) in at most ``depth`` hops, in the slice at ``at`` as known at
    ``believed_at`` (default: now). One row per change of a fact about a dependency whose
    valid start or end falls in the window: ``dependency``, ``depth``, ``via`` (fact_ids of
    the path), ``fact_id``, ``predicate``, ``object``, ``change`` (``started``/``ended``),
    ``changed_at``, ``learned_at`` (when the store first held that change) and
    ``known_at_time`` (``learned_at <= at``). ``lookback`` is a DuckDB interval text.

    >>> _ = mem.assert_fact("checkout-api", "depends_on", "payments-db", valid_from="2026-01-01")
    >>> _ = mem.assert_fact("payments-db", "version", "15", valid_from="2026-03-15T07:00Z")
    >>> changes = tm.graph.dependency_changes(mem, "checkout-api", "2026-03-15T08:00Z")
    >>> changes.select("dependency", "object", "change", "known_at_time").rows()  # learned on 03-20
    [('payments-db', '15', 'started', False)]
    """
    when = to_utc(at, field="at")
    if when is None:
        raise TempomemError("at: a time is required")
    if not isinstance(lookback, str) or not lookback.strip():
        raise TempomemError(f"lookback: expected an interval such as '24 hours', got {lookback!r}")
    believed = to_utc(believed_at, field="believed_at") or mem.now()
    with mem.reader.lock:
        con = _prepared(mem)
        try:
            con.sql("SELECT CAST($l AS INTERVAL)", params={"l": lookback}).fetchall()
        except Exception:
            raise TempomemError(f"lookback: cannot read {lookback!r} as an interval (e.g. '24 hours')") from None
        return frame(
            con, _SQL["dependency_changes"],
            {"root": _name(root, "root"), "at_time": when, "lookback": lookback, "depth": _depth(depth),
             "believed_at": believed, "predicates": _predicates(predicates)},
        )
