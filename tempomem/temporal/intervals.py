"""Half-open valid intervals with SPEC §1's NULL conventions, on Python values.

A NULL start is the earliest instant and a NULL end "still true"; an interval with
``from >= to`` is empty and overlaps nothing (SPEC §1.1). ``tm_overlaps`` in ``macros.sql`` is
the same rule in SQL.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any


def start_key(t: datetime | None) -> tuple[int, datetime | None]:
    """A sort key for starts: NULL first."""
    return (0, None) if t is None else (1, t)


def starts_before(a: datetime | None, b: datetime | None) -> bool:
    """``a < b`` for two starts, NULL being the earliest."""
    if a is None:
        return b is not None
    return b is not None and a < b


def is_empty(lo: datetime | None, hi: datetime | None) -> bool:
    """The interval ``[lo, hi)`` contains no instant."""
    return lo is not None and hi is not None and lo >= hi


def overlap(a_from: datetime | None, a_to: datetime | None, b_from: datetime | None, b_to: datetime | None) -> bool:
    """``[a_from, a_to)`` and ``[b_from, b_to)`` share an instant."""
    if is_empty(a_from, a_to) or is_empty(b_from, b_to):
        return False
    return ((a_from is None or b_to is None or a_from < b_to)
            and (b_from is None or a_to is None or b_from < a_to))


def overlaps(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """The valid intervals of two states share an instant."""
    return overlap(a["valid_from"], a["valid_to"], b["valid_from"], b["valid_to"])
