"""The write path of SPEC §5 as pure functions over fact states.

A *state* is a dict with the event columns of a fact's latest revision, plus
``first_recorded_at`` (when the fact was first recorded) and ``_stored_revision`` /
``_stored_recorded_at`` (its latest stored revision, ``None`` for a fact born in this commit).
:class:`Batch` applies operations in order to the states of one commit and yields the new
revision rows: only each fact's final state within the commit becomes a belief, and repeats the
stored revision it follows in its ``prev_*`` columns.

Nothing here touches storage or SQL; the store loads the states and commits the rows.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from .errors import ClockError, ConflictError, FactNotFoundError, TempomemError
from .ids import new_fact_id
from .schema import ARITIES, FACT_COLUMNS, FLOAT32_MAX, LINK_TYPES, MAX_WEIGHT, POLICIES, PREVIOUS, PREVIOUS_COLUMNS
from .temporal import decisions
from .temporal.intervals import overlaps, start_key
from .times import to_utc

#: What a state carries into its new revision row (the rest is derived in :meth:`Batch.rows`).
_ROW_FIELDS = (*FACT_COLUMNS, "first_recorded_at")
_NO_PREVIOUS = (None,) * len(PREVIOUS)

def _believed(state: dict[str, Any]) -> bool:
    return state["status"] not in ("retracted", "erased")


def _case(n: dict[str, Any], s: dict[str, Any]) -> str:
    return decisions.case_of(n["object"], n["valid_from"], n["valid_to"], s["object"], s["valid_from"], s["valid_to"])


# -- validation of one input row --------------------------------------------------------------

_ASSERT_FIELDS = {
    "subject", "predicate", "object", "valid_from", "valid_to", "scope", "source", "confidence",
    "text", "artifact", "artifacts", "reference_time", "link_type", "weight", "embedding",
}


def _where(row: int | None) -> str:
    return "" if row is None else f"row {row}, "


def _clean_string(value: Any, field: str, row: int | None, *, required: bool = True) -> str | None:
    """``value`` as a field's text. Text of white space alone (what ``str.strip()`` removes) is
    no value, as backfill reads it: a required field refuses it, an optional one takes its
    default (``None`` here), so that no path stores a blank the others would read as missing."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        if required:
            raise TempomemError(f"{_where(row)}{field}: required, got nothing")
        return None
    if not isinstance(value, str):
        raise TempomemError(f"{_where(row)}{field}: expected a string, got {type(value).__name__} {value!r}")
    if not value.strip():
        if required:
            raise TempomemError(f"{_where(row)}{field}: must not be empty")
        return None
    if "\x00" in value:
        raise TempomemError(f"{_where(row)}{field}: contains a NUL character")
    return value


def _clean_number(value: Any, field: str, row: int | None, lo: float, hi: float) -> float:
    try:
        if isinstance(value, bool):  # float(True) is 1.0: a flag is not a number
            raise TypeError
        number = float(value)
    except (TypeError, ValueError):
        raise TempomemError(f"{_where(row)}{field}: expected a number, got {value!r}") from None
    if math.isnan(number) or not lo <= number <= hi:
        raise TempomemError(f"{_where(row)}{field}: must be between {lo} and {hi}, got {value!r}")
    return number


def _time(value: Any, field: str, row: int | None) -> datetime | None:
    try:
        return to_utc(value, field=field)
    except TempomemError as exc:
        raise type(exc)(f"{_where(row)}{exc}") from None


def new_assertion(values: dict[str, Any], row: int | None = None) -> dict[str, Any]:
    """Validate one assertion's arguments and return a fresh state (no id, no times yet)."""
    unknown = set(values) - _ASSERT_FIELDS
    if unknown:
        raise TempomemError(f"{_where(row)}{sorted(unknown)[0]}: not a field of an assertion")
    subject = _clean_string(values.get("subject"), "subject", row)
    predicate = _clean_string(values.get("predicate"), "predicate", row)
    obj = _clean_string(values.get("object"), "object", row)
    scope = _clean_string(values.get("scope"), "scope", row, required=False) or "default"
    source = _clean_string(values.get("source"), "source", row, required=False) or "user"
    text = _clean_string(values.get("text"), "text", row, required=False)
    link_type = _clean_string(values.get("link_type"), "link_type", row, required=False) or "entity"
    if link_type not in LINK_TYPES:
        raise TempomemError(f"{_where(row)}link_type: must be one of {', '.join(LINK_TYPES)}, got {link_type!r}")
    confidence = values.get("confidence")
    confidence = 0.9 if confidence is None else _clean_number(confidence, "confidence", row, 0.0, 1.0)
    weight = values.get("weight")
    weight = 1.0 if weight is None else _clean_number(weight, "weight", row, 0.0, MAX_WEIGHT)
    valid_from = _time(values.get("valid_from"), "valid_from", row)
    valid_to = _time(values.get("valid_to"), "valid_to", row)
    if valid_from is not None and valid_to is not None and valid_from > valid_to:
        raise TempomemError(
            f"{_where(row)}valid_to: {valid_to.isoformat()} is before valid_from {valid_from.isoformat()}")
    artifacts: list[str] = []
    for name in ("artifact", "artifacts"):
        given = values.get(name)
        if given is None:
            continue
        for item in [given] if isinstance(given, str) else list(given):
            artifacts.append(_clean_string(item, name, row))  # type: ignore[arg-type]
    embedding = values.get("embedding")
    if embedding is not None:
        embedding = [_clean_number(x, "embedding", row, -FLOAT32_MAX, FLOAT32_MAX) for x in embedding]
    return {
        "scope": scope, "subject": subject, "predicate": predicate, "object": obj,
        "text": text if text is not None else f"{subject} {predicate} {obj}",
        "valid_from": valid_from, "valid_to": valid_to,
        "valid_from_inferred": valid_from is None,
        "retracted_at": None, "superseded_at": None, "superseded_by": None,
        "status": "live" if valid_to is None else "ended", "reason": None,
        "source": source, "confidence": confidence, "origin": "api",
        "artifacts": list(dict.fromkeys(artifacts)), "attributes": None, "embedding": embedding,
        "link_type": link_type, "weight": weight,
        "reference_time": _time(values.get("reference_time"), "reference_time", row),
    }


def clean_reason(reason: Any) -> str:
    if not isinstance(reason, str) or not reason.strip():
        raise TempomemError("reason: a non-empty reason is required")
    return _clean_string(reason, "reason", None)  # type: ignore[return-value]


def check_declaration(predicate: Any, arity: Any, policy: Any) -> None:
    """What ``declare`` (and ``tm.open(predicates=, policy=)``, before it makes a store) refuses."""
    if not isinstance(predicate, str) or not predicate.strip():
        raise TempomemError("predicate: must be a non-empty string")
    if arity not in ARITIES:
        raise TempomemError(f"arity: must be one of {', '.join(ARITIES)}, got {arity!r}")
    check_policy(policy)


def check_policy(policy: Any) -> None:
    """A policy of single-valued predicates (a predicate's, or the store's default); ``None``: none given."""
    if policy is not None and policy not in POLICIES:
        raise TempomemError(f"policy: must be one of {', '.join(POLICIES)}, got {policy!r}")


# -- one commit -------------------------------------------------------------------------------


Key = tuple[str, str, str]


class Batch:
    """The operations of one commit, applied in order to in-memory fact states.

    ``states`` maps fact_id to the latest state of every fact of the keys the commit touches,
    as loaded from the store. ``arity`` and ``policy`` give each predicate's rules.
    """

    def __init__(self, states: Iterable[dict[str, Any]], *, commit_time: datetime,
                 rules: dict[str, tuple[str, str]], default_policy: str) -> None:
        self.commit_time = commit_time
        self.rules = rules
        self.default_policy = default_policy
        self.states: dict[str, dict[str, Any]] = {}
        self.by_key: dict[Key, list[str]] = {}
        # What each stored fact's new revision will name as its previous one: the state as
        # loaded (as last written, recorded then), before this commit's operations change it.
        self.previous: dict[str, tuple[Any, ...]] = {}
        for state in states:
            self._add(state)
            if state["_stored_revision"] is not None:
                stored = dict(state, recorded_at=state["_stored_recorded_at"])
                self.previous[state["fact_id"]] = tuple(stored[name] for name in PREVIOUS)
        self.touched: dict[str, None] = {}  # insertion-ordered set

    def _add(self, state: dict[str, Any]) -> None:
        self.states[state["fact_id"]] = state
        self.by_key.setdefault((state["scope"], state["subject"], state["predicate"]), []).append(state["fact_id"])

    def _rule(self, predicate: str) -> tuple[str, str]:
        arity, policy = self.rules.get(predicate, ("single", None))
        return arity, policy or self.default_policy

    def _believed_of(self, key: Key) -> list[dict[str, Any]]:
        states = [self.states[i] for i in self.by_key.get(key, ())]
        believed = [s for s in states if _believed(s)]
        return sorted(believed, key=lambda s: (s["first_recorded_at"], s["fact_id"]))

    def _touch(self, state: dict[str, Any]) -> None:
        stored_at = state.get("_stored_recorded_at")
        if stored_at is not None and stored_at >= self.commit_time:
            raise ClockError(
                f"fact {state['fact_id']}: its latest revision was recorded at {stored_at.isoformat()}, "
                f"not before this commit at {self.commit_time.isoformat()}; the store clock is behind it"
            )
        self.touched[state["fact_id"]] = None

    # assert ---------------------------------------------------------------------------------
    def assert_fact(self, new: dict[str, Any]) -> str:
        """Apply one validated assertion (from :func:`new_assertion`); return the fact id it lands on."""
        key: Key = (new["scope"], new["subject"], new["predicate"])
        arity, policy = self._rule(new["predicate"])
        rule = decisions.rule_of(arity, policy)
        believed = self._believed_of(key)
        reference = new.pop("reference_time") or self.commit_time
        if new["valid_from"] is None and arity == "single" and believed:
            ends_before_reference = new["valid_to"] is not None and new["valid_to"] <= reference
            if not ends_before_reference:
                new["valid_from"] = reference

        duplicate = next((s for s in believed if decisions.action(_case(new, s), rule) == "merge"), None)
        if duplicate is not None:
            subject_state = self._merge(duplicate, new)
        else:
            subject_state = self._create(new)
        self._resolve_conflicts(subject_state, believed, rule)
        return subject_state["fact_id"]

    def _merge(self, state: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
        merged_artifacts = list(dict.fromkeys([*state["artifacts"], *new["artifacts"]]))
        changed = merged_artifacts != state["artifacts"]
        state["artifacts"] = merged_artifacts
        if state["valid_from"] is None and new["valid_from"] is not None and not new["valid_from_inferred"]:
            state["valid_from"], state["valid_from_inferred"], changed = new["valid_from"], False, True
        if state["valid_to"] is None and new["valid_to"] is not None:
            state["valid_to"], state["status"], changed = new["valid_to"], "ended", True
        if changed:
            self._touch(state)
        return state

    def _create(self, new: dict[str, Any]) -> dict[str, Any]:
        state = dict(new)
        state["fact_id"] = new_fact_id(self.commit_time)
        state["first_recorded_at"] = self.commit_time
        state["_stored_revision"] = None
        state["_stored_recorded_at"] = None
        self._add(state)
        self._touch(state)
        return state

    def _resolve_conflicts(self, n: dict[str, Any], believed: list[dict[str, Any]], rule: str) -> None:
        """The table's conflict cells for the (merged) N against the key's other believed facts."""
        acts = [(s, decisions.action(_case(n, s), rule)) for s in believed if s["fact_id"] != n["fact_id"]]
        refused = [s for s, act in acts if act == "refuse"]
        if refused:
            ids = ", ".join(s["fact_id"] for s in refused)
            raise ConflictError(
                f"overlapping value: {n['subject']} {n['predicate']} {n['object']!r} overlaps "
                f"{', '.join(repr(s['object']) for s in refused)} (fact {ids}) and the predicate's policy is reject"
            )
        later = [s for s, act in acts if act == "close_new"]
        if later:  # N is about an earlier time: it ends where the first later value begins
            first = min(later, key=lambda s: start_key(s["valid_from"]))
            n["valid_to"] = first["valid_from"]
            n["status"] = "superseded"
            n["superseded_by"] = first["fact_id"]
            n["superseded_at"] = self.commit_time
            n["reason"] = f"superseded by fact {first['fact_id']} ({first['object']})"
            self._touch(n)
        for s, act in acts:
            if act == "close_existing":
                s["valid_to"] = n["valid_from"]
                s["status"] = "superseded"
                s["superseded_by"] = n["fact_id"]
                s["superseded_at"] = self.commit_time
                s["reason"] = f"superseded by fact {n['fact_id']} ({n['object']})"
                self._touch(s)
            elif act == "retract_existing":  # the old value was never true
                s["retracted_at"] = self.commit_time
                s["status"] = "retracted"
                s["reason"] = f"replaced by fact {n['fact_id']} ({n['object']}) with the same valid_from"
                self._touch(s)

    # invalidate and correct ----------------------------------------------------------------
    def _existing(self, fact_id: str) -> dict[str, Any]:
        state = self.states.get(fact_id)
        if state is None:
            raise FactNotFoundError(f"fact_id: no fact {fact_id!r} in this store")
        if not _believed(state):
            raise TempomemError(f"fact_id: fact {fact_id} is {state['status']}; it can no longer be changed")
        return state

    def invalidate(self, fact_id: str, at: datetime, reason: str) -> str:
        state = self._existing(fact_id)
        if state["valid_from"] is not None and at < state["valid_from"]:
            raise TempomemError(
                f"at: {at.isoformat()} is before the fact's valid_from {state['valid_from'].isoformat()}"
            )
        old_end = state["valid_to"]
        arity, _ = self._rule(state["predicate"])
        if arity == "single" and (old_end is None or at > old_end):
            moved = dict(state, valid_to=at)
            key = (state["scope"], state["subject"], state["predicate"])
            clash = [s for s in self._believed_of(key)
                     if s["fact_id"] != fact_id and s["object"] != state["object"] and overlaps(s, moved)]
            if clash:
                raise ConflictError(
                    f"overlapping value: ending fact {fact_id} at {at.isoformat()} would overlap "
                    f"{', '.join(repr(s['object']) for s in clash)} (fact {', '.join(s['fact_id'] for s in clash)})"
                )
        state["valid_to"] = at
        state["status"] = "ended"
        state["reason"] = reason
        self._touch(state)
        return fact_id

    def correct(self, fact_id: str, reason: str) -> str:
        state = self._existing(fact_id)
        state["retracted_at"] = self.commit_time
        state["status"] = "retracted"
        state["reason"] = reason
        self._touch(state)
        return fact_id

    # output ---------------------------------------------------------------------------------
    def rows(self, ingested_at: datetime) -> list[dict[str, Any]]:
        """One new revision row per touched fact: its final state in this commit."""
        out = []
        for fact_id in self.touched:
            state = self.states[fact_id]
            state["ingested_at"] = ingested_at
            row = {k: state.get(k) for k in _ROW_FIELDS}
            row["revision"] = (state["_stored_revision"] or 0) + 1
            row.update(zip(PREVIOUS_COLUMNS, self.previous.get(fact_id, _NO_PREVIOUS), strict=True))
            row["folded"] = False
            row["recorded_at"] = self.commit_time
            row["ingested_at"] = ingested_at
            out.append(row)
        return out
