"""Time values accepted wherever a time is taken (SPEC §2)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import pytest
from conftest import ts

import tempomem as tm
from tempomem.times import iso, to_utc


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2024", "2024-01-01T00:00:00Z"),
        ("2024-06", "2024-06-01T00:00:00Z"),
        ("2024-06-05", "2024-06-05T00:00:00Z"),
        ("2024-06-05T10:30:00", "2024-06-05T10:30:00Z"),  # no offset: UTC
        ("2024-06-05T10:30:00Z", "2024-06-05T10:30:00Z"),
        ("2024-06-05T10:30:00-07:00", "2024-06-05T17:30:00Z"),
        ("2024-06-05 10:30:00.123456+02:00", "2024-06-05T08:30:00.123456Z"),
        (datetime(2024, 6, 5, 10, 30), "2024-06-05T10:30:00Z"),  # naive datetime: UTC
        (datetime(2024, 6, 5, 10, 30, tzinfo=timezone(timedelta(hours=9))), "2024-06-05T01:30:00Z"),
        (date(2024, 6, 5), "2024-06-05T00:00:00Z"),
    ],
)
def test_accepted_times(value, expected):
    got = to_utc(value)
    assert got.tzinfo == UTC
    assert iso(got) == expected


@pytest.mark.parametrize("value", ["", "2024-13", "June 5th", "2024-06-05T25:00", 20240605, 3.5])
def test_unreadable_time_is_a_typed_error_naming_the_field(value):
    with pytest.raises(tm.TimeParseError, match="valid_from"):
        to_utc(value, field="valid_from")


def test_none_stays_none():
    assert to_utc(None) is None


def test_clock_behind_a_fact_refuses_the_revision(mem, clock):
    """A backfilled revision later than the store clock cannot be followed by an earlier one."""
    report = mem.backfill([{"subject": "k", "predicate": "p", "object": "a", "valid_from": "2025-01",
                            "recorded_at": "2026-05-01T00:00:00Z"}])
    assert report.loaded == 1
    fact_id = mem.history("k")["fact_id"][0]
    clock.set("2026-03-01")  # behind the backfilled belief, and backfill did not move the clock
    with pytest.raises(tm.ClockError, match="behind"):
        mem.invalidate(fact_id, at="2025-06", reason="ended")
    assert mem.history("k", revisions=True).height == 1
    clock.set("2026-06-01")
    assert mem.invalidate(fact_id, at="2025-06", reason="ended").valid_to == ts("2025-06")
