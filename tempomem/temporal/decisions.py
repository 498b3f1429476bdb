"""SPEC §5 as a decision table: how a new assertion N treats each believed fact S of its key.

Lay :data:`DECISIONS` beside the SPEC's table: one row per case, one column per rule
(``single/last_write_wins``, ``single/reject``, ``multi``), an action in each cell. The
one-row path (:class:`tempomem.writepath.Batch`) looks cells up here; the set-based path
(``rounds.sql``) joins the same rows, registered by :mod:`tempomem.rounds`, so the two cannot
drift.

The actions, in the order the write path applies them (SPEC §5, "Order of rules"):

``merge``             N is a duplicate: it merges into the earliest-recorded such S (artifacts
                      added, unknowns filled) and the other cases then apply to the merged S;
``refuse``            the whole batch fails with ``ConflictError`` (the ``reject`` policy);
``close_new``         N is stored already closed at the start of the earliest such S;
``close_existing``    S is closed at N's start, superseded by N;
``retract_existing``  S is retracted: a correction found through a change;
``store``             nothing happens to S (N is stored unless it merged).

>>> from datetime import UTC, datetime
>>> later = datetime(2025, 1, 1, tzinfo=UTC)
>>> action(case_of("a", None, None, "b", later, None), rule_of("single", "last_write_wins"))
'close_new'
>>> action("different_object_same_start", "multi")
'store'
"""

from __future__ import annotations

from datetime import datetime

from .intervals import overlap, starts_before

RULES = ("single/last_write_wins", "single/reject", "multi")

DECISIONS: dict[str, tuple[str, str, str]] = {
    # case                           single/last_write_wins  single/reject  multi
    "same_object_overlap":          ("merge",                "merge",       "merge"),
    "different_object_apart":       ("store",                "store",       "store"),
    "different_object_s_earlier":   ("close_existing",       "refuse",      "store"),
    "different_object_n_earlier":   ("close_new",            "refuse",      "store"),
    "different_object_same_start":  ("retract_existing",     "refuse",      "store"),
    "same_object_apart":            ("store",                "store",       "store"),
}
ACTIONS = ("merge", "refuse", "close_new", "close_existing", "retract_existing", "store")


def rule_of(arity: str, policy: str) -> str:
    """The table's column for a predicate: ``multi`` has no policy."""
    return "multi" if arity == "multi" else f"single/{policy}"


def action(case: str, rule: str) -> str:
    """The cell of :data:`DECISIONS` for ``case`` under ``rule``."""
    return DECISIONS[case][RULES.index(rule)]


def case_of(n_object: str, n_from: datetime | None, n_to: datetime | None,
            s_object: str, s_from: datetime | None, s_to: datetime | None) -> str:
    """The row of the table a pair (N, S) falls in; ``tm_case`` in ``rounds.sql`` is its twin."""
    same = n_object == s_object
    if not overlap(n_from, n_to, s_from, s_to):
        return "same_object_apart" if same else "different_object_apart"
    if same:
        return "same_object_overlap"
    if starts_before(s_from, n_from):
        return "different_object_s_earlier"
    if starts_before(n_from, s_from):
        return "different_object_n_earlier"
    return "different_object_same_start"


def rows() -> list[tuple[str, str, str]]:
    """The table as (case, rule, action) rows, the shape ``rounds.sql`` joins."""
    return [(case, rule, cells[i]) for case, cells in DECISIONS.items() for i, rule in enumerate(RULES)]
