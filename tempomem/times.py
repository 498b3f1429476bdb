"""Time values: everything a caller may pass becomes an aware UTC ``datetime`` (SPEC §2).

Accepted: ``datetime`` (naive means UTC), ``date``, ISO-8601 strings with or without an
offset (none means UTC) and partial dates (``"2024"``, ``"2024-06"``: the earliest instant).
Values are kept to the microsecond, the resolution of the store.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta

from .errors import TimeParseError

UTC = UTC
MICROSECOND = timedelta(microseconds=1)

_YEAR = re.compile(r"^\d{4}$")
_YEAR_MONTH = re.compile(r"^(\d{4})-(\d{2})$")

TimeLike = datetime | date | str


def to_utc(value: object, *, field: str = "time") -> datetime | None:
    """Return ``value`` as an aware UTC datetime; ``None`` stays ``None``.

    Raises :class:`TimeParseError` naming ``field`` when the value is not a time.

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
        return _parse_string(value, field)
    raise TimeParseError(f"{field}: expected a datetime, date or ISO-8601 string, got {type(value).__name__} {value!r}")


def _parse_string(text: str, field: str) -> datetime:
    s = text.strip()
    try:
        if _YEAR.match(s):
            return datetime(int(s), 1, 1, tzinfo=UTC)
        ym = _YEAR_MONTH.match(s)
        if ym:
            return datetime(int(ym.group(1)), int(ym.group(2)), 1, tzinfo=UTC)
        if s.endswith(("z", "Z")):
            s = s[:-1] + "+00:00"
        return to_utc(datetime.fromisoformat(s), field=field)  # type: ignore[return-value]
    except ValueError as exc:
        raise TimeParseError(f"{field}: cannot read {text!r} as a time ({exc})") from None


def iso(value: datetime | None) -> str | None:
    """Format an aware datetime as an ISO-8601 UTC string ending in ``Z``."""
    if value is None:
        return None
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def system_clock() -> datetime:
    """The real wall clock, in UTC."""
    return datetime.now(UTC)
