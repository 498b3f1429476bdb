"""Shared helpers of the analytics tests: a settable clock and a store opened on it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

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
