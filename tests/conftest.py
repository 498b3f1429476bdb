"""Shared fixtures: a settable store clock and a fresh store per test."""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path

import pytest

import tempomem as tm
from tempomem.times import to_utc

#: TEMPOMEM_HEAVY=1: the property, reliability and Spark tests run many more cases (CI runs the default).
HEAVY = os.environ.get("TEMPOMEM_HEAVY") == "1"


class TestClock:
    """A store clock the test moves by hand. Times stay in the past (before the real now)."""

    __test__ = False

    def __init__(self, start: str = "2026-01-01T00:00:00Z") -> None:
        self.now: datetime = to_utc(start)  # type: ignore[assignment]

    def __call__(self) -> datetime:
        return self.now

    def set(self, when: str | datetime) -> None:
        self.now = to_utc(when)  # type: ignore[assignment]

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


@pytest.fixture
def clock() -> TestClock:
    return TestClock()


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def mem(store_path: Path, clock: TestClock) -> tm.Memory:
    return tm.open(store_path, create=True, clock=clock)


def ts(text: str) -> datetime:
    """An aware UTC datetime from an ISO string, for expected values."""
    return to_utc(text)  # type: ignore[return-value]
