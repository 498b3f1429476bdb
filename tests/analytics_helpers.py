"""Shared helpers of the analytics tests: a settable clock and a store opened on it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from polars.testing import assert_frame_equal

import tempomem as tm

UTC = UTC


def at(text: str) -> datetime:
    """An aware UTC datetime from an ISO string (tests only)."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


class Clock:
    """A test clock: returns ``now`` until moved with :meth:`set` or :meth:`tick`."""

    def __init__(self, start: str = "2026-01-01T00:00:00") -> None:
        self.now = at(start)

    def __call__(self) -> datetime:
        return self.now

    def set(self, text: str) -> None:
        self.now = at(text)

    def tick(self, **delta: float) -> None:
        self.now += timedelta(**delta)


def new_store(path: Path, clock: Clock, **kwargs) -> tm.Memory:
    return tm.open(path / "store", create=True, clock=clock, **kwargs)


# `revisions` by its plain definition: a window over every raw row gives each revision's belief
# end and the columns of the revision before it, which a store keeps stored (prev_*).
PLAIN_REVISIONS = """
SELECT * EXCLUDE (first_recorded_at, folded, folded_until) REPLACE (
           lag(object) OVER w AS prev_object, lag(valid_from) OVER w AS prev_valid_from,
           lag(valid_to) OVER w AS prev_valid_to, lag(recorded_at) OVER w AS prev_recorded_at,
           lag(retracted_at) OVER w AS prev_retracted_at, lag(superseded_at) OVER w AS prev_superseded_at,
           lag(superseded_by) OVER w AS prev_superseded_by, lag(status) OVER w AS prev_status),
       lead(recorded_at) OVER w AS believed_until
FROM _tm_events
WINDOW w AS (PARTITION BY fact_id ORDER BY revision)
"""


def assert_previous_columns(mem: tm.Memory) -> None:
    """Every stored row's prev_* columns are the previous revision's (NULL on revision 1)."""
    con = mem.reader.connection()
    stored = con.sql("SELECT * EXCLUDE (first_recorded_at, folded, folded_until) FROM _tm_events "
                     "ORDER BY fact_id, revision").pl()
    plain = con.sql(f"SELECT * EXCLUDE (believed_until) FROM ({PLAIN_REVISIONS}) ORDER BY fact_id, revision").pl()
    assert_frame_equal(stored, plain)
