"""Time values: everything a caller may pass becomes an aware UTC ``datetime`` (SPEC §2).

Accepted: ``datetime`` (naive means UTC), ``date``, and text in the one grammar of
:mod:`tempomem.timegrammar` (ISO 8601 with or without an offset, none meaning UTC; partial
dates such as ``"2024"`` and ``"2024-06"`` mean their earliest instant), the grammar backfill
and every frame reader use too. Values are kept to the microsecond, the resolution of the store.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta

from .errors import TempomemError, TimeParseError
from .timegrammar import parse_text

UTC = UTC
MICROSECOND = timedelta(microseconds=1)
#: The instant microsecond counts (ids, the store's int64 times, the spool's JSON) start from.
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

TimeLike = datetime | date | str


def to_utc(value: object, *, field: str = "time") -> datetime | None:
    """Return ``value`` as an aware UTC datetime; ``None`` stays ``None``.

    Raises :class:`TimeParseError` naming ``field`` and the reason when the value is not a
    time. A number is refused: without a unit nothing says it is seconds rather than
    milliseconds (backfill reads epochs with its ``epoch_unit``).

    >>> to_utc("2024-06")
    datetime.datetime(2024, 6, 1, 0, 0, tzinfo=datetime.timezone.utc)
    """
    if value is None:
        return None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    if isinstance(value, str):
        parsed = parse_text(value)
        if isinstance(parsed, str):
            raise TimeParseError(f"{field}: cannot read {value!r} as a time: {parsed}")
        return parsed
    if isinstance(value, int | float) and not isinstance(value, bool):
        raise TimeParseError(f"{field}: cannot read {value!r} as a time: a number is not a time here "
                             "(pass a datetime, a date or an ISO 8601 string)")
    raise TimeParseError(f"{field}: expected a datetime, date or ISO-8601 string, got {type(value).__name__} {value!r}")


def iso(value: datetime | None) -> str | None:
    """Format an aware datetime as an ISO-8601 UTC string ending in ``Z``."""
    if value is None:
        return None
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def system_clock() -> datetime:
    """The real wall clock, in UTC."""
    return datetime.now(UTC)


def clock_or_system(clock: Callable[[], datetime] | None) -> Callable[[], datetime]:
    """``clock`` (``tm.open(..., clock=)``), or the real one when ``None``; refused when it is
    not something to call, before a first write would find out."""
    if clock is not None and not callable(clock):
        raise TempomemError(f"clock: expected a function returning an aware datetime, got {type(clock).__name__}")
    return clock or system_clock
