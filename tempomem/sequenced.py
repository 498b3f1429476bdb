"""Sequenced analytics (SPEC §12): the valid-time history of one belief, on bins or coalesced.

The temporal logic is the ``sequenced`` / ``tm_sequenced`` and ``coalesced`` macros of
``macros.sql``; here the caller's arguments are read and checked (so a bad window is a
:class:`TempomemError` naming the argument, not a DuckDB error) and bound as parameters, and
the optional key filters are added (fixed SQL fragments, pushed by DuckDB down to the scan).
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import polars as pl

from .errors import TempomemError
from .queries import filtered
from .times import TimeLike, to_utc

if TYPE_CHECKING:
    from .reader import Reader

#: The most bins one sequenced query may cut its window into.
MAX_BINS = 1_000_000

#: Units of ``every`` strings: calendar months, then fixed lengths.
_FIXED_UNITS = {"w": timedelta(weeks=1), "d": timedelta(days=1), "h": timedelta(hours=1),
                "m": timedelta(minutes=1), "s": timedelta(seconds=1), "ms": timedelta(milliseconds=1),
                "us": timedelta(microseconds=1)}
_EVERY_PART = re.compile(r"(\d+(?:\.\d+)?)(mo|ms|us|w|d|h|m|s)")

_SEQUENCED_ORDER = "ORDER BY bin_from, scope, subject, predicate, object, fact_id"


def parse_every(every: str | timedelta) -> str:
    """``every`` as the text of a DuckDB INTERVAL (``"<months> months <µs> microseconds"``).

    A ``timedelta`` or a string of one or more parts such as ``"1d"``, ``"6h"``, ``"15m"``,
    ``"1w"``, ``"1mo"`` (calendar months, added as DuckDB adds ``INTERVAL n MONTH``) or
    ``"1mo15d"``. Months are whole; the other units may be decimal (``"1.5h"``). Raises
    :class:`TempomemError` for anything else, or a step that is not positive.

    >>> parse_every("1mo")
    '1 months 0 microseconds'
    >>> parse_every("6h")
    '0 months 21600000000 microseconds'
    """
    if isinstance(every, timedelta):
        months, fixed = 0, every
    elif isinstance(every, str):
        text = every.strip().lower()
        parts = _EVERY_PART.findall(text)
        if not parts or "".join(n + u for n, u in parts) != text:
            raise TempomemError(f"every: expected a step such as '1d', '6h', '15m', '1w' or '1mo', got {every!r}")
        months, fixed = 0, timedelta()
        for number, unit in parts:
            if unit == "mo":
                if "." in number:
                    raise TempomemError(f"every: months are whole, got {every!r}")
                months += int(number)
            else:
                fixed += float(number) * _FIXED_UNITS[unit]
    else:
        raise TempomemError(f"every: expected a timedelta or a string such as '1d', got {type(every).__name__}")
    micros = fixed // timedelta(microseconds=1)
    if micros < 0 or (months == 0 and micros == 0):
        raise TempomemError(f"every: must be a positive step, got {every!r}")
    # Days are not a part of their own: the store's session runs in UTC, where a day is 24 hours.
    return f"{months} months {micros} microseconds"


def _window(reader: Reader, from_at: TimeLike, to_at: TimeLike, every: str | timedelta) -> dict[str, object]:
    """The checked, bound parameters of a sequenced query."""
    lo = to_utc(from_at, field="from_at")
    hi = to_utc(to_at, field="to_at")
    if lo is None or hi is None:
        raise TempomemError(f"{'from_at' if lo is None else 'to_at'}: a time is required")
    if lo >= hi:
        raise TempomemError(f"to_at: must be after from_at ({_iso(lo)}), got {_iso(hi)}")
    step = parse_every(every)
    with reader.lock:
        count = reader.connection().sql("SELECT tm_bin_count($lo, $hi, $step)",
                                        params={"lo": lo, "hi": hi, "step": step}).fetchall()[0][0]
    if count > MAX_BINS:
        raise TempomemError(f"every: {every!r} cuts [{_iso(lo)}, {_iso(hi)}) into more than {MAX_BINS:,} bins; "
                            "use a longer step or a shorter window")
    return {"from_at": lo, "to_at": hi, "every": step}


def sequenced(reader: Reader, from_at: TimeLike, to_at: TimeLike, every: str | timedelta, *,
              believed_at: TimeLike | None = None, subject: str | None = None, predicate: str | None = None,
              scope: str | None = None) -> pl.DataFrame:
    """The valid-time history of one belief on calendar bins (SPEC §12, macro ``sequenced``).

    ``[from_at, to_at)`` is cut into half-open bins ``[from_at + i·every, min(from_at +
    (i+1)·every, to_at))``, each bound one addition to ``from_at`` (monthly bins from
    2024-01-31 start on 01-31, 02-29, 03-31). One row per bin and per fact believed at
    ``believed_at`` (``None``: now; retracted and erased facts never count) whose valid
    interval overlaps the bin: ``bin_from``, ``bin_to``, ``fact_id``, ``scope``, ``subject``,
    ``predicate``, ``object`` and ``coverage``, the share of the bin the fact covers, in (0, 1].
    Ordered by ``bin_from``, ``scope``, ``subject``, ``predicate``, ``object``, ``fact_id``.
    ``every``: see :func:`parse_every`. Raises :class:`TempomemError` when ``from_at`` is not
    before ``to_at``, ``every`` is not a positive step, or there would be more than 1,000,000 bins.
    """
    params = _window(reader, from_at, to_at, every)
    params["believed_at"] = to_utc(believed_at, field="believed_at")
    return reader.read(filtered, "tm_sequenced($from_at, $to_at, $every, believed_at := $believed_at)", params,
                     {"subject": subject, "predicate": predicate, "scope": scope}, _SEQUENCED_ORDER)


def coalesced(reader: Reader, *, believed_at: TimeLike | None = None, subject: str | None = None,
              predicate: str | None = None, scope: str | None = None) -> pl.DataFrame:
    """The believed facts merged into maximal periods per value (SPEC §12, macro ``coalesced``).

    Facts believed at ``believed_at`` (``None``: now) with the same ``scope``, ``subject``,
    ``predicate`` and ``object`` whose valid intervals overlap or meet become one row
    (``NORMALIZE ON MEETS OR OVERLAPS``); a gap, however short, keeps two. Columns ``scope``,
    ``subject``, ``predicate``, ``object``, ``valid_from``, ``valid_to`` (NULL: unknown start,
    still true), ``facts`` (how many were merged) and ``fact_ids`` (by ``valid_from``, NULL
    first, then ``fact_id``). Ordered by ``scope``, ``subject``, ``predicate``, ``valid_from``
    (NULL first), ``object``. Facts with an empty valid interval take part in nothing.
    """
    # The macro's own order: asking for it again would sort every period a second time.
    return reader.read(filtered, "coalesced(believed_at := $believed_at)",
                     {"believed_at": to_utc(believed_at, field="believed_at")},
                     {"subject": subject, "predicate": predicate, "scope": scope}, "")


def _iso(t: datetime) -> str:
    return t.isoformat().replace("+00:00", "Z")
