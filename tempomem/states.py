"""Fact states for the one-row write path: read from the store by key, cached between commits.

A *state* is a dict with the event columns of a fact's latest revision, plus
``first_recorded_at`` and ``_stored_revision`` / ``_stored_recorded_at`` (its latest stored
revision; ``None`` for a fact born in the commit), the shape :class:`writepath.Batch` works on.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from .connection import new_connection
from .keyindex import KeyIndex
from .schema import EVENT_COLUMNS, WRITER_COLUMNS, Fact, instants
from .temporal.intervals import overlap
from .times import MICROSECOND, UTC, system_clock

if TYPE_CHECKING:
    from .storage import Storage
    from .writepath import Batch

Key = tuple[str, str, str]

#: More cached keys than this and the cache starts again: it serves agents' small commits,
#: whose keys repeat, not a scan of the store.
_MAX_KEYS = 200_000
#: Rows another writer appended beyond this many are not read key by key: the cache empties.
_MAX_FOREIGN_ROWS = 100_000

#: Up to this many keys are read through the key index; more in one DuckDB query.
_INDEXED_KEYS = 64
_UNBELIEVED = ("retracted", "erased")
_EARLIEST = datetime.min.replace(tzinfo=UTC)
_UNREAD = [c for c in EVENT_COLUMNS if c not in WRITER_COLUMNS]
# The rows of many keys, read straight from the version's files, not through the views: a
# writer then binds nothing when the version moves, and the key filter prunes row groups by
# their statistics. Only the columns a writer acts on are decoded (schema.WRITER_COLUMNS).
_SELECTED = ", ".join(f"e.{name}" for name in WRITER_COLUMNS)
_KEYS_SQL = f"""
SELECT {_SELECTED} FROM read_parquet($files) AS e
SEMI JOIN _tm_cache_keys AS k ON k.scope = e.scope AND k.subject = e.subject AND k.predicate = e.predicate
WHERE list_contains($subjects, e.subject)"""
_FACT_SQL = f"""
SELECT {_SELECTED} FROM read_parquet($files) AS e WHERE e.fact_id = $fact_id ORDER BY e.revision DESC LIMIT 1"""


def micros(t: datetime) -> int:
    """Microseconds since the epoch of an aware datetime."""
    return (t - datetime.fromtimestamp(0, UTC)) // MICROSECOND


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


def latest_believed(rows: pa.Table) -> pa.Table:
    """Of the rows of some facts, each fact's latest revision, where it is still believed."""
    rows = latest(rows)
    return rows.filter(pc.invert(pc.is_in(rows["status"], pa.array(_UNBELIEVED))))


def latest(rows: pa.Table) -> pa.Table:
    """Of the rows of some facts, each fact's latest revision, in the rows' order (found on two
    columns, not by sorting every column)."""
    newest = rows.group_by("fact_id", use_threads=False).aggregate([("revision", "max")])
    place = pc.index_in(rows["fact_id"], value_set=newest["fact_id"])
    return rows.filter(pc.equal(rows["revision"], pc.take(newest["revision_max"], place)))


def _key(state: dict[str, Any]) -> Key:
    return state["scope"], state["subject"], state["predicate"]


def _believed(state: dict[str, Any]) -> bool:
    return state["status"] not in _UNBELIEVED


class KeyFacts:
    """The believed states of one key by fact id, with their starts kept sorted, so that a
    commit on a key of many facts (a status re-asserted for years) finds the few its rows can
    touch by bisection, not by weighing every fact of the key in Python."""

    def __init__(self) -> None:
        self.by_id: dict[str, dict[str, Any]] = {}
        self._bounded: list[tuple[datetime, str]] = []  # (start, fact id) of facts with both bounds
        self._unbounded: set[str] = set()  # no start or no end: few, weighed one by one
        self._span = timedelta(0)  # at least the longest bounded interval held (it never shrinks)

    def put(self, state: dict[str, Any]) -> None:
        """Hold ``state``, in place of the fact's earlier one."""
        fact_id, lo, hi = state["fact_id"], state["valid_from"], state["valid_to"]
        self.drop(fact_id)
        self.by_id[fact_id] = state
        if lo is None or hi is None:
            self._unbounded.add(fact_id)
        else:
            insort(self._bounded, (lo, fact_id))
            self._span = max(self._span, hi - lo)

    def drop(self, fact_id: str) -> None:
        """No longer hold the fact (no longer believed)."""
        old = self.by_id.pop(fact_id, None)
        if old is None:
            return
        if fact_id in self._unbounded:
            self._unbounded.discard(fact_id)
        else:
            del self._bounded[bisect_left(self._bounded, (old["valid_from"], fact_id))]

    def overlapping(self, lo: datetime | None, hi: datetime | None) -> list[dict[str, Any]]:
        """The states whose interval overlaps ``[lo, hi)``: a bounded fact that does starts at or
        after ``lo`` less the longest span, and before ``hi``."""
        first = 0 if lo is None or lo - _EARLIEST <= self._span else bisect_left(self._bounded, (lo - self._span,))
        last = len(self._bounded) if hi is None else bisect_left(self._bounded, (hi,))
        candidates = [self.by_id[i] for _, i in self._bounded[first:last]]
        candidates.extend(self.by_id[i] for i in self._unbounded)
        return [s for s in candidates if overlap(s["valid_from"], s["valid_to"], lo, hi)]


def relevant_states(held: Mapping[Key, KeyFacts], news: list[dict[str, Any]],
                    changed: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The states a commit can act on (SPEC §5), so that a key with many facts stays cheap.

    For an assertion: the believed facts of its key whose interval overlaps the hull of the
    batch's intervals on that key, grown to the intervals of the facts of a row's object that
    overlap it. The others cannot take part: a different object that does not overlap changes
    nothing, and stored intervals only ever shrink within a commit. A fact a row merges into has
    that row's object and overlaps it, and the conflict rows then weigh its interval (which a
    merge never widens) against the key's other facts: those overlapping it are in the grown
    hull. Every believed fact of a key is needed when a row of it has no start (the
    unknown-start rule asks whether any is believed). A changed fact (``changed``: the states of
    the facts a commit invalidates or corrects, any status) takes its whole key.
    """
    hulls: dict[Key, list[Any]] = {}
    for n in news:
        key = (n["scope"], n["subject"], n["predicate"])
        hull = hulls.setdefault(key, [False, n["valid_from"], n["valid_to"], set()])
        hull[0] = hull[0] or n["valid_from"] is None
        if hull[1] is not None and n["valid_from"] is not None:
            hull[1] = min(hull[1], n["valid_from"])
        hull[2] = None if hull[2] is None or n["valid_to"] is None else max(hull[2], n["valid_to"])
        hull[3].add(n["object"])
    whole = {_key(s) for s in changed.values()}
    whole.update(key for key, (no_start, _, _, _) in hulls.items() if no_start)
    out = {s["fact_id"]: s for s in changed.values()}
    for key in whole:
        out.update(held[key].by_id if key in held else {})
    for key, (_, lo, hi, objects) in hulls.items():
        if key in whole or key not in held:
            continue
        facts = held[key]
        near = facts.overlapping(lo, hi)
        for s in near:
            if s["object"] in objects:
                lo = None if lo is None or s["valid_from"] is None else min(lo, s["valid_from"])
                hi = None if hi is None or s["valid_to"] is None else max(hi, s["valid_to"])
        if (lo, hi) != tuple(hulls[key][1:3]):
            near = facts.overlapping(lo, hi)
        out.update((s["fact_id"], s) for s in near)
    return list(out.values())


class StateCache:
    """The believed latest states of keys, for the store version (and epoch) last seen."""

    def __init__(self) -> None:
        self.version = -1
        self.epoch: int | None = None
        self._keys: dict[Key, KeyFacts] = {}
        self._key_of: dict[str, Key] = {}
        self._con: duckdb.DuckDBPyConnection | None = None
        self._index = KeyIndex()

    def forget_all(self, version: int, epoch: int | None) -> None:
        """Start again at ``version`` (after a write whose rows the cache did not see)."""
        self.version, self.epoch = version, epoch
        self._keys.clear()
        self._key_of.clear()

    def sync(self, storage: Storage) -> None:
        """Bring the cache to the newest version: the rows appended since bring the keys it
        holds up to date (each fact's latest revision replaces an older one; a fact of the key
        it did not hold is new), so that writers taking turns do not read their keys again."""
        version = storage.latest_version()
        saved = storage.read_clock() or {}
        epoch = saved.get("epoch", 0)
        if version == self.version and epoch == self.epoch:
            return
        appended = None if epoch != self.epoch or self.version < 0 else storage.appended_files(self.version)
        foreign = None if appended is None else sum(rows for _, rows in appended)
        if foreign is None or foreign > _MAX_FOREIGN_ROWS:
            self.forget_all(version, epoch)
            return
        if appended and self._keys:
            files = [f for f, _ in appended]
            # Another writer's large batch is read for the keys held alone: each row made a
            # state cost ~10 µs, under the writer lock (90k rows: an assert_fact of 1.1 s).
            rows = (self._keyed_rows(files, list(self._keys)) if foreign > len(self._keys) else
                    self._reader().sql(f"SELECT {_SELECTED} FROM read_parquet($files) AS e",
                                       params={"files": files}).to_arrow_table())
            for state in from_rows(latest(rows)):
                held = self._keys.get(_key(state))
                if held is None:
                    continue
                cached = held.by_id.get(state["fact_id"])
                if cached is None or (cached["_stored_revision"] or 0) < state["_stored_revision"]:
                    self._put(state)
        self.version, self.epoch = version, epoch

    def load(self, storage: Storage, keys: set[Key], fact_ids: list[str]) -> dict[str, dict[str, Any]]:
        """Hold the believed facts of ``keys`` and of the keys of the facts ``fact_ids``, read
        from the store where not held; return the latest states of ``fact_ids`` (any status)."""
        out: dict[str, dict[str, Any]] = {}
        keys = set(keys)
        if len(self._keys) + len(keys) + len(fact_ids) > _MAX_KEYS:
            self.forget_all(self.version, self.epoch)
        files = list(storage.snapshot().files)
        for fact_id in fact_ids:
            if fact_id in self._key_of:
                key = self._key_of[fact_id]
                keys.add(key)
                out[fact_id] = self._keys[key].by_id[fact_id]
                continue
            found = [] if not files else from_rows(self._reader().sql(
                _FACT_SQL, params={"files": files, "fact_id": fact_id}).to_arrow_table())
            if found:
                out[fact_id] = found[0]
                keys.add(_key(found[0]))
        missing = [k for k in keys if k not in self._keys]
        if missing:
            self._load(files, missing)
        return out

    def relevant(self, news: list[dict[str, Any]], changed: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
        """The held states a commit of ``news`` and of the facts ``changed`` can act on
        (:func:`relevant_states`); their keys were loaded."""
        return relevant_states(self._keys, news, changed)

    def _reader(self) -> duckdb.DuckDBPyConnection:
        if self._con is None:
            self._con = new_connection()
        return self._con

    def _load(self, files: list[str], keys: list[Key]) -> None:
        for key in keys:
            self._keys[key] = KeyFacts()
        if not files:
            return
        if len(keys) <= _INDEXED_KEYS:
            rows = self._index.rows(files, keys, facts_only=True, unread=_UNREAD).drop_columns(_UNREAD)
        else:
            rows = self._keyed_rows(files, keys)
        for state in from_rows(latest_believed(rows)):
            self._put(state)

    def _keyed_rows(self, files: list[str], keys: list[Key]) -> pa.Table:
        """The rows of ``keys`` in ``files``, in one DuckDB query."""
        con = self._reader()
        con.register("_tm_cache_keys", pa.table(dict(zip(("scope", "subject", "predicate"),
                                                         map(list, zip(*keys, strict=True)), strict=True))))
        try:
            subjects = sorted({k[1] for k in keys})
            return con.sql(_KEYS_SQL, params={"files": files, "subjects": subjects}).to_arrow_table()
        finally:
            con.unregister("_tm_cache_keys")

    def _put(self, state: dict[str, Any]) -> None:
        key = _key(state)
        facts = self._keys.get(key)
        if facts is None:
            facts = self._keys[key] = KeyFacts()
        if _believed(state):
            facts.put(state)
            self._key_of[state["fact_id"]] = key
        else:
            facts.drop(state["fact_id"])
            self._key_of.pop(state["fact_id"], None)

    def written(self, file: str, rows: pa.Table) -> None:
        """The file a commit just wrote, and its rows: the key index need not read it back."""
        self._index.learn(file, rows)

    def committed(self, version: int, batch: Batch) -> None:
        """Take in what the one-row path just wrote: each touched fact's new latest state."""
        for fact_id in batch.touched:
            state = dict(batch.states[fact_id])
            if _key(state) not in self._keys:
                continue
            state["_stored_revision"] = (state["_stored_revision"] or 0) + 1
            state["_stored_recorded_at"] = state["recorded_at"] = batch.commit_time
            self._put(state)
        self.version = version
