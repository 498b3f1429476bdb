"""Fact states for the one-row write path (:mod:`tempomem.staterows`): read from the store by
key, held between commits, and the few a commit can act on picked out of a key's many."""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .connection import new_connection
from .ids import made_at
from .keyindex import KeyIndex
from .schema import EVENT_COLUMNS, WRITER_COLUMNS, column_micros
from .staterows import UNBELIEVED, from_rows, latest, latest_believed, latest_revision, micros
from .temporal.intervals import overlap
from .times import UTC

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
_EARLIEST = datetime.min.replace(tzinfo=UTC)
_MIN_US, _MAX_US = np.iinfo(np.int64).min, np.iinfo(np.int64).max
#: A key loaded with more believed facts than this keeps them as rows (:class:`KeyFacts`), each
#: made a state only when a commit can touch it: making 100k states took a first commit 1.4 s.
_ROWS_FROM = 256
_KEY_NAMES = ["scope", "subject", "predicate"]
_UNREAD = [c for c in EVENT_COLUMNS if c not in WRITER_COLUMNS]
# The rows of many keys, read straight from the version's files, not through the views: a
# writer then binds nothing when the version moves, and the key filter prunes row groups by
# their statistics. Only the columns a writer acts on are decoded (schema.WRITER_COLUMNS).
_SELECTED = ", ".join(f"e.{name}" for name in WRITER_COLUMNS)
_KEYS_SQL = f"""
SELECT {_SELECTED} FROM read_parquet($files) AS e
SEMI JOIN _tm_cache_keys AS k ON k.scope = e.scope AND k.subject = e.subject AND k.predicate = e.predicate
WHERE list_contains($subjects, e.subject)"""
# A fact's key, found reading as few columns as it can: by a made id's time first (ids.made_at),
# which DuckDB tests before it decodes any id, then by id; on its latest revision's row groups
# only, which no fold ended (queries.sql, latest_revision). On 14M revisions written before the
# files kept Bloom filters of `fact_id` (a32d888; a store has them after its next fold) the time
# finds the key in 77 ms against 184 by id alone; on files with them it costs 2 ms more (17
# against 15), which is kept for the stores not yet folded.
_KEY_OF_MADE_SQL = """SELECT e.scope, e.subject, e.predicate FROM read_parquet($files) AS e
WHERE e.first_recorded_at = $made AND e.fact_id = $fact_id AND e.folded_until IS NULL LIMIT 1"""
_KEY_OF_SQL = """SELECT e.scope, e.subject, e.predicate FROM read_parquet($files) AS e
WHERE e.fact_id = $fact_id AND e.folded_until IS NULL LIMIT 1"""


def _key(state: dict[str, Any]) -> Key:
    return state["scope"], state["subject"], state["predicate"]


def _believed(state: dict[str, Any]) -> bool:
    return state["status"] not in UNBELIEVED


class KeyFacts:
    """The believed states of one key, so that a commit on a key of many facts (a status
    re-asserted for years) finds the few its rows can touch without weighing, or even making,
    a state of every fact of the key in Python.

    Two layers: the states made (``put`` by commits, or made from the rows on demand), their
    starts kept sorted for bisection; and the rows the key was loaded from (``rows``: its latest
    believed revisions, as Arrow), each made a state only when a commit can touch it, found by
    comparing their bounds a column at a time. A fact is in one layer: putting or dropping a
    fact of the rows takes it out of them.
    """

    def __init__(self, rows: pa.Table | None = None) -> None:
        self._made: dict[str, dict[str, Any]] = {}
        self._bounded: list[tuple[datetime, str]] = []  # (start, fact id) of made states with both bounds
        self._unbounded: set[str] = set()  # no start or no end: few, weighed one by one
        self._span = timedelta(0)  # at least the longest bounded interval made (it never shrinks)
        self._rows = rows
        if rows is not None:
            self._starts = _micros(rows["valid_from"], _MIN_US)
            self._ends = _micros(rows["valid_to"], _MAX_US)
            self._unmade = np.ones(rows.num_rows, dtype=bool)
            self._place = {fact_id: i for i, fact_id in enumerate(rows["fact_id"].to_pylist())}

    def put(self, state: dict[str, Any]) -> None:
        """Hold ``state``, in place of the fact's earlier one."""
        fact_id, lo, hi = state["fact_id"], state["valid_from"], state["valid_to"]
        self.drop(fact_id)
        self._made[fact_id] = state
        if lo is None or hi is None:
            self._unbounded.add(fact_id)
        else:
            insort(self._bounded, (lo, fact_id))
            self._span = max(self._span, hi - lo)

    def drop(self, fact_id: str) -> None:
        """No longer hold the fact (no longer believed)."""
        if self._rows is not None and fact_id in self._place:
            self._unmade[self._place[fact_id]] = False
        old = self._made.pop(fact_id, None)
        if old is None:
            return
        if fact_id in self._unbounded:
            self._unbounded.discard(fact_id)
        else:
            del self._bounded[bisect_left(self._bounded, (old["valid_from"], fact_id))]

    def fact_ids(self) -> list[str]:
        """The ids of the facts held."""
        return list(self._made) + ([] if self._rows is None else
                                   self._rows["fact_id"].filter(self._unmade).to_pylist())

    def get(self, fact_id: str) -> dict[str, Any] | None:
        """The fact's state, if held."""
        if fact_id not in self._made and self._rows is not None:
            place = self._place.get(fact_id)
            if place is not None and self._unmade[place]:
                self._make(np.array([place]))
        return self._made.get(fact_id)

    def states(self) -> list[dict[str, Any]]:
        """Every state held."""
        if self._rows is not None:
            self._make(np.flatnonzero(self._unmade))
        return list(self._made.values())

    def overlapping(self, lo: datetime | None, hi: datetime | None) -> list[dict[str, Any]]:
        """The states whose interval overlaps ``[lo, hi)``: of the rows, those whose bounds do
        (an empty interval overlaps nothing); of the states made, a bounded one that does starts
        at or after ``lo`` less the longest span, and before ``hi``."""
        if self._rows is not None and not (lo is not None and hi is not None and lo >= hi):
            lo_us = _MIN_US if lo is None else micros(lo)
            hi_us = _MAX_US if hi is None else micros(hi)
            self._make(np.flatnonzero(self._unmade & (self._starts < hi_us) & (lo_us < self._ends)
                                      & (self._starts < self._ends)))
        first = 0 if lo is None or lo - _EARLIEST <= self._span else bisect_left(self._bounded, (lo - self._span,))
        last = len(self._bounded) if hi is None else bisect_left(self._bounded, (hi,))
        candidates = [self._made[i] for _, i in self._bounded[first:last]]
        candidates.extend(self._made[i] for i in self._unbounded)
        return [s for s in candidates if overlap(s["valid_from"], s["valid_to"], lo, hi)]

    def _make(self, places: np.ndarray) -> None:
        if len(places):
            assert self._rows is not None
            for state in from_rows(self._rows.take(places)):
                self.put(state)


def _micros(column: pa.ChunkedArray, null: int) -> np.ndarray:
    return pc.fill_null(column_micros(column), null).to_numpy()


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
        out.update((s["fact_id"], s) for s in (held[key].states() if key in held else []))
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
                cached = held.get(state["fact_id"])
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
        found = {}
        for fact_id in fact_ids:
            key = self._key_of.get(fact_id) or (self._key_of_fact(files, fact_id) if files else None)
            if key is not None:
                keys.add(key)
                found[fact_id] = key
        missing = [k for k in keys if k not in self._keys]
        if missing:
            self._load(files, missing)
        for fact_id, key in found.items():
            state = self._keys[key].get(fact_id)
            if state is None:  # no longer believed: its latest revision says why
                state = latest_revision(self._reader(), files, fact_id)
            out[fact_id] = state
        return out

    def _key_of_fact(self, files: list[str], fact_id: str) -> Key | None:
        """The key of a fact not held: a scan of as little as it can (no index has fact ids)."""
        made = made_at(fact_id)
        found = [] if made is None else self._reader().execute(
            _KEY_OF_MADE_SQL, {"files": files, "fact_id": fact_id, "made": made}).fetchall()
        found = found or self._reader().execute(_KEY_OF_SQL, {"files": files, "fact_id": fact_id}).fetchall()
        return found[0] if found else None

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
        rows = latest_believed(rows)
        for key in self._crowded(rows):
            mine = pc.and_(pc.and_(pc.equal(rows["scope"], key["scope"]), pc.equal(rows["subject"], key["subject"])),
                           pc.equal(rows["predicate"], key["predicate"]))
            held = self._keys[_key(key)] = KeyFacts(rows.filter(mine))
            self._key_of.update(dict.fromkeys(held.fact_ids(), _key(key)))
            rows = rows.filter(pc.invert(mine))
        for state in from_rows(rows):
            self._put(state)

    @staticmethod
    def _crowded(rows: pa.Table) -> list[dict[str, str]]:
        """The keys of more than ``_ROWS_FROM`` of ``rows``: few, if any."""
        if rows.num_rows <= _ROWS_FROM:
            return []
        counts = rows.group_by(_KEY_NAMES, use_threads=False).aggregate([("fact_id", "count")])
        return counts.filter(pc.greater(counts["fact_id_count"], _ROWS_FROM)).select(_KEY_NAMES).to_pylist()

    def _keyed_rows(self, files: list[str], keys: list[Key]) -> pa.Table:
        """The rows of ``keys`` in ``files``, in one DuckDB query."""
        con = self._reader()
        con.register("_tm_cache_keys", pa.table(dict(zip(_KEY_NAMES,
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
