"""The one time grammar of SPEC §2, for Python and for DuckDB SQL alike.

A time given as text is read here and nowhere else: :func:`parse_text` (Python: the API and the
CLI, through :func:`tempomem.times.to_utc`) and :func:`time_sql` / :func:`reason_sql` (DuckDB:
backfill, the importers, probe and decision frames) are both rendered from the same regular
expressions (which Python's ``re`` and DuckDB's RE2 read alike) and the same table of checks
(:data:`CHECKS`: a condition in each language beside one reason). ``tests/test_time_grammar.py``
feeds one table of cases through every entry point.

Accepted text (leading and trailing blanks ignored):

* ISO 8601 dates, extended or basic: ``2024-06-01`` / ``20240601``, week dates ``2024-W23-1`` /
  ``2024W231``, ordinal dates ``2024-153`` / ``2024153``; the partial dates ``2024``,
  ``2024-06`` and ``2024-W23`` mean their earliest instant (``2024-06`` is June, never 2024 + 6).
* A time of day after ``T`` (or a space) on a full date: ``hh``, ``hh:mm``, ``hh:mm:ss`` or
  basic ``hhmm``, ``hhmmss``, with a decimal fraction of seconds (``.`` or ``,``; digits past
  the microsecond are cut, never rounded up into the next microsecond).
* An offset on a time of day: ``Z``, ``±hh``, ``±hh:mm``, ``±hhmm``, from ``-12:00`` to
  ``+14:00`` (the offsets real time zones use); none means UTC.
* A bare number (``1717236000``, ``-5.5``) only where the caller names its unit
  (``epoch_unit``: ``s``, ``ms``, ``us``): without one nothing says it is seconds rather than
  milliseconds, and ``20240601`` would become 1970-08-23. A text of 4, 7 or 8 digits is an
  ISO 8601 date (year, ordinal, calendar) even then.

Refused, each with its reason: a day, week, hour or offset that does not exist (``2024-02-30``,
``T25:00``, ``T24:00``), a leap second ``23:59:60`` (no UTC timestamp here can hold it), a time
on a partial date, an offset without a time, exponents (``1e9``), time-zone names, empty text,
and any instant outside years 0001–9999 (UTC), which no Python or Polars reader could hold.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

#: Microseconds per unit of a bare number; the factor enters SQL as a literal from this table.
EPOCH_FACTORS = {"s": 1_000_000, "ms": 1_000, "us": 1}
#: The stored range: 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999Z, in µs since 1970.
MIN_US = -62_135_596_800_000_000
MAX_US = 253_402_300_799_999_999

_BLANK = "[ \t\r\n]*"
_OFFSET = "(?P<offset>(?P<zulu>[Zz])|(?P<sign>[+-])(?P<ohour>[0-9]{2})(?::?(?P<ominute>[0-9]{2}))?)"
#: Every ISO 8601 form of the grammar. All groups are named (RE2 numbers them as Python does);
#: ``b``-prefixed groups are the basic-format spelling of the same field.
ISO_PATTERN = (
    _BLANK
    + "(?P<year>[0-9]{4})"
    + "(?:-(?P<month>[0-9]{2})(?:-(?P<day>[0-9]{2}))?"
    + "|-W(?P<week>[0-9]{2})(?:-(?P<weekday>[0-9]))?"
    + "|-(?P<yday>[0-9]{3})"
    + "|(?P<bmonth>[0-9]{2})(?P<bday>[0-9]{2})"
    + "|W(?P<bweek>[0-9]{2})(?P<bweekday>[0-9])?"
    + "|(?P<byday>[0-9]{3}))?"
    + "(?:[Tt ](?P<hour>[0-9]{2})"
    + "(?::(?P<minute>[0-9]{2})(?::(?P<second>[0-9]{2})(?:[.,](?P<fraction>[0-9]+))?)?"
    + "|(?P<bminute>[0-9]{2})(?:(?P<bsecond>[0-9]{2})(?:[.,](?P<bfraction>[0-9]+))?)?)?"
    + ")?" + _OFFSET + "?"
    + _BLANK
)
#: A bare number: an epoch in ``epoch_unit`` (at most 20 integer and 9 fraction digits).
NUMBER_PATTERN = _BLANK + "[+-]?[0-9]{1,20}(?:[.][0-9]{1,9})?" + _BLANK
_EXPONENT_PATTERN = _BLANK + "[+-]?[0-9]*[.]?[0-9]+[eE][+-]?[0-9]+" + _BLANK
#: The common full forms that DuckDB's own cast reads exactly as the grammar does (calendar
#: date, hh:mm[:ss[.ffffff]], Z or an offset in range): the fast path of :func:`time_sql`.
#: The cast still refuses a day that does not exist; everything else goes the long way.
FAST_PATTERN = (
    "[0-9]{4}-[0-9]{2}-[0-9]{2}(?:[T ](?:[01][0-9]|2[0-3]):[0-5][0-9](?::[0-5][0-9](?:[.][0-9]{1,6})?)?"
    "(?:Z|[+](?:0[0-9]|1[0-3]):[0-5][0-9]|[+]14:00|-(?:0[0-9]|1[01]):[0-5][0-9]|-12:00)?)?"
)

_ISO = re.compile(ISO_PATTERN)
_NUMBER = re.compile(NUMBER_PATTERN)
_EXPONENT = re.compile(_EXPONENT_PATTERN)
#: The groups in RE2's order, the field names of DuckDB's ``regexp_extract`` struct.
GROUPS = [name for name, _ in sorted(_ISO.groupindex.items(), key=lambda item: item[1])]
assert len(GROUPS) == _ISO.groups, "every group of ISO_PATTERN must be named"
#: A field and the groups spelling it (at most one of them matches).
_FIELDS = {"year": ("year",), "month": ("month", "bmonth"), "day": ("day", "bday"), "week": ("week", "bweek"),
           "weekday": ("weekday", "bweekday"), "yday": ("yday", "byday"), "hour": ("hour",),
           "minute": ("minute", "bminute"), "second": ("second", "bsecond"), "fraction": ("fraction", "bfraction"),
           "offset": ("offset",), "zulu": ("zulu",), "sign": ("sign",), "ohour": ("ohour",),
           "ominute": ("ominute",)}

EMPTY = "empty text is not a time"
NOT_ISO = "not an ISO 8601 date or time (such as 2024-06-01, 2024-06-01T12:00:00Z or 20240601T120000+0200)"
EXPONENT = "a number with an exponent is not a time (an epoch is plain digits, read with epoch_unit)"
BARE_NUMBER = ("a bare number is not a time without its unit: nothing says seconds rather than "
               "milliseconds (backfill reads epochs with epoch_unit='s', 'ms' or 'us')")
OUT_OF_RANGE = "outside the years 0001-9999 (UTC) that a stored time can hold"


@dataclass(frozen=True)
class Parts:
    """The fields of one ISO match as integers (``None`` when absent); ``raw`` keeps the text."""

    year: int
    month: int | None
    day: int | None
    week: int | None
    weekday: int | None
    yday: int | None
    hour: int | None
    minute: int | None
    second: int | None
    offset: bool
    ohour: int | None
    ominute: int | None
    raw: dict[str, str]


def _days_in_month(p: Parts) -> int:
    return calendar.monthrange(p.year, p.month or 1)[1]


def _weeks(p: Parts) -> int:
    return date(p.year, 12, 28).isocalendar().week


def _ydays(p: Parts) -> int:
    return 366 if calendar.isleap(p.year) else 365


def _offset_minutes(p: Parts) -> int:
    magnitude = (p.ohour or 0) * 60 + (p.ominute or 0)
    return -magnitude if p.raw["sign"] == "-" else magnitude


#: The checks of an ISO match, in order: (Python condition, SQL condition, reason). The first
#: that holds rejects the value with its reason; ``{field}`` in a reason is the text as given.
#: In SQL, ``{name}`` is that field as an INTEGER (NULL when absent); ``{dim}``, ``{weeks}``,
#: ``{ydays}`` and ``{offset_min}`` are the helpers of the same names. Conditions guard
#: their own fields (each runs only after the ones above it failed).
CHECKS: list[tuple[Callable[[Parts], bool], str, str]] = [
    (lambda p: p.year < 1, "{year} < 1", "year {year} is before year 0001"),
    (lambda p: p.month is not None and not 1 <= p.month <= 12,
     "{month} NOT BETWEEN 1 AND 12", "month {month} is not 01-12"),
    (lambda p: p.day is not None and not 1 <= p.day <= _days_in_month(p),
     "{day} NOT BETWEEN 1 AND {dim}", "day {day} does not exist in {year}-{month}"),
    (lambda p: p.weekday is not None and not 1 <= p.weekday <= 7,
     "{weekday} NOT BETWEEN 1 AND 7", "weekday {weekday} is not 1-7 (Monday-Sunday)"),
    (lambda p: p.week is not None and not 1 <= p.week <= _weeks(p),
     "{week} NOT BETWEEN 1 AND {weeks}", "week {week} does not exist in {year}"),
    (lambda p: p.yday is not None and not 1 <= p.yday <= _ydays(p),
     "{yday} NOT BETWEEN 1 AND {ydays}", "day {yday} of the year does not exist in {year}"),
    (lambda p: p.hour is not None and p.day is None and p.weekday is None and p.yday is None,
     "{hour} IS NOT NULL AND {day} IS NULL AND {weekday} IS NULL AND {yday} IS NULL",
     "a time of day needs a full date (YYYY-MM-DD, YYYY-Www-D or YYYY-DDD)"),
    (lambda p: p.hour is not None and p.hour > 23, "{hour} > 23", "hour {hour} is not 00-23"),
    (lambda p: p.minute is not None and p.minute > 59, "{minute} > 59", "minute {minute} is not 00-59"),
    (lambda p: p.second == 60, "{second} = 60",
     "second 60 (a leap second) cannot be stored: stored UTC times have no leap seconds"),
    (lambda p: p.second is not None and p.second > 59, "{second} > 59", "second {second} is not 00-59"),
    (lambda p: p.offset and p.hour is None, "{hour} IS NULL AND {has_offset}",
     "an offset needs a time of day (such as 2024-06-01T00:00+02:00)"),
    (lambda p: p.ominute is not None and p.ominute > 59, "{ominute} > 59", "offset minute {ominute} is not 00-59"),
    (lambda p: p.offset and not -720 <= _offset_minutes(p) <= 840, "{offset_min} NOT BETWEEN -720 AND 840",
     "offset {offset} is outside -12:00 to +14:00, the offsets of real time zones"),
]


# -- Python ---------------------------------------------------------------------------------

def parse_text(text: str, epoch_unit: str | None = None) -> datetime | str:
    """``text`` as an aware UTC datetime, or the reason it is not a time (a ``str``).

    >>> parse_text("20240601T120000Z")
    datetime.datetime(2024, 6, 1, 12, 0, tzinfo=datetime.timezone.utc)
    >>> parse_text("2024-02-30")
    'day 30 does not exist in 2024-02'
    """
    if not text.strip(" \t\r\n"):
        return EMPTY
    match = _ISO.fullmatch(text)
    if match:
        return _iso_instant(match.groupdict())
    if _NUMBER.fullmatch(text):
        if epoch_unit is None:
            return BARE_NUMBER
        us = int((Decimal(text.strip(" \t\r\n")) * EPOCH_FACTORS[epoch_unit]).to_integral_value("ROUND_FLOOR"))
        return _from_us(us)
    if _EXPONENT.fullmatch(text):
        return EXPONENT
    return NOT_ISO


def _iso_instant(groups: dict[str, str | None]) -> datetime | str:
    raw = {f: "".join(groups[g] or "" for g in spelled) for f, spelled in _FIELDS.items()}

    def number(name: str) -> int | None:
        return int(raw[name]) if raw[name] else None

    p = Parts(year=int(raw["year"]), month=number("month"), day=number("day"), week=number("week"),
              weekday=number("weekday"), yday=number("yday"), hour=number("hour"), minute=number("minute"),
              second=number("second"), offset=bool(raw["offset"]), ohour=number("ohour"),
              ominute=number("ominute"), raw=raw)
    for condition, _sql, reason in CHECKS:
        if condition(p):
            return reason.format(**raw)
    if p.week is not None:
        day = date.fromisocalendar(p.year, p.week, p.weekday or 1)
    elif p.yday is not None:
        day = date(p.year, 1, 1) + timedelta(days=p.yday - 1)
    else:
        day = date(p.year, p.month or 1, p.day or 1)
    fraction = int((raw["fraction"] + "000000")[:6])
    seconds = (p.hour or 0) * 3600 + (p.minute or 0) * 60 + (p.second or 0) - _offset_minutes(p) * 60
    return _from_us((day.toordinal() - _EPOCH_ORDINAL) * 86_400_000_000 + seconds * 1_000_000 + fraction)


_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _from_us(us: int) -> datetime | str:
    if not MIN_US <= us <= MAX_US:
        return OUT_OF_RANGE
    return _EPOCH + timedelta(microseconds=us)


# -- DuckDB SQL -----------------------------------------------------------------------------

_NUMERIC = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
            "UBIGINT", "UHUGEINT", "FLOAT", "DOUBLE")


def _literal(text: str) -> str:
    """One of this module's constants as a SQL string literal (never caller text)."""
    return "'" + text.replace("'", "''") + "'"


def _is_numeric(duck_type: str) -> bool:
    t = duck_type.upper()
    return t in _NUMERIC or t.startswith("DECIMAL")


def time_sql(col: str, duck_type: str, epoch_unit: str | None = None) -> str:
    """SQL turning column ``col`` (a quoted identifier) of ``duck_type`` into TIMESTAMPTZ, or NULL.

    Text follows the grammar of this module; numbers are epochs in ``epoch_unit`` (NULL without
    one); naive timestamps and dates are UTC; anything outside years 0001–9999 is NULL. The
    common full ISO forms are one regular-expression test and DuckDB's cast; the rest is one
    ``regexp_extract`` and arithmetic on its fields. :func:`reason_sql` says why a NULL is one.
    Assumes a connection in UTC (every tempomem connection is).
    """
    t = duck_type.upper()
    if t.startswith("TIMESTAMP") or t == "DATE":
        return _in_range(f"CAST({col} AS TIMESTAMPTZ)")
    if _is_numeric(t):
        if epoch_unit is None:
            return "CAST(NULL AS TIMESTAMPTZ)"
        factor = EPOCH_FACTORS[epoch_unit]
        return _in_range(f"CAST(try(make_timestamp(CAST(round(CAST({col} AS DOUBLE) * {factor}) AS BIGINT))) "
                         "AS TIMESTAMPTZ)")
    if t != "VARCHAR":
        return "CAST(NULL AS TIMESTAMPTZ)"
    slow = f"CASE WHEN regexp_full_match({col}, {_literal(ISO_PATTERN)}) THEN {_iso_sql(col, 'value')}"
    if epoch_unit is not None:
        factor = EPOCH_FACTORS[epoch_unit]
        us = f"floor(CAST(trim({col}, {_BLANKS}) AS DECIMAL(38, 9)) * {factor})"
        slow += (f" WHEN regexp_full_match({col}, {_literal(NUMBER_PATTERN)}) THEN CASE WHEN {us} "
                 f"BETWEEN {MIN_US} AND {MAX_US} THEN CAST(make_timestamp(CAST({us} AS BIGINT)) AS TIMESTAMPTZ) END")
    slow += " END"
    return (f"CASE WHEN regexp_full_match({col}, {_literal(FAST_PATTERN)}) "
            f"THEN {_in_range(f'TRY_CAST({col} AS TIMESTAMPTZ)')} ELSE {slow} END")


def reason_sql(col: str, duck_type: str, epoch_unit: str | None = None) -> str:
    """SQL: why ``time_sql`` of ``col`` is NULL (the reasons :func:`parse_text` gives), else NULL.

    Meant for the rows already found unreadable: it is dearer than :func:`time_sql`.
    """
    t = duck_type.upper()
    value = time_sql(col, duck_type, epoch_unit)
    if t.startswith("TIMESTAMP") or t == "DATE":
        return f"CASE WHEN {col} IS NOT NULL AND {value} IS NULL THEN {_literal(OUT_OF_RANGE)} END"
    if _is_numeric(t):
        if epoch_unit is None:
            return f"CASE WHEN {col} IS NOT NULL THEN {_literal(BARE_NUMBER)} END"
        return f"CASE WHEN {col} IS NOT NULL AND {value} IS NULL THEN {_literal(OUT_OF_RANGE)} END"
    if t != "VARCHAR":
        return f"CASE WHEN {col} IS NOT NULL THEN {_literal('expected a time, got a value of type ' + t)} END"
    number = (_literal(BARE_NUMBER) if epoch_unit is None
              else f"CASE WHEN {value} IS NULL THEN {_literal(OUT_OF_RANGE)} END")
    return (f"CASE WHEN {col} IS NULL THEN NULL "
            f"WHEN trim({col}, {_BLANKS}) = '' THEN {_literal(EMPTY)} "
            f"WHEN regexp_full_match({col}, {_literal(ISO_PATTERN)}) THEN {_iso_sql(col, 'reason')} "
            f"WHEN regexp_full_match({col}, {_literal(NUMBER_PATTERN)}) THEN {number} "
            f"WHEN regexp_full_match({col}, {_literal(_EXPONENT_PATTERN)}) THEN {_literal(EXPONENT)} "
            f"ELSE {_literal(NOT_ISO)} END")


_BLANKS = "' ' || chr(9) || chr(10) || chr(13)"


def _in_range(ts: str) -> str:
    return (f"CASE WHEN {ts} BETWEEN TIMESTAMPTZ '0001-01-01 00:00:00+00' "
            f"AND TIMESTAMPTZ '9999-12-31 23:59:59.999999+00' THEN {ts} END")


def _iso_sql(col: str, want: str) -> str:
    """SQL over one ISO match of ``col``: its instant (``want="value"``) or the first failing
    check's reason (``"reason"``). The match is extracted once, in a lambda over it."""
    names = ", ".join(_literal(g) for g in GROUPS)
    raw = {f: " || ".join(f"g.{g}" for g in spelled) for f, spelled in _FIELDS.items()}
    ints = {f: f"CAST(nullif({r}, '') AS INTEGER)" for f, r in raw.items() if f not in ("fraction", "offset", "zulu",
                                                                                         "sign")}
    y, m = ints["year"], f"coalesce({ints['month']}, 1)"
    helpers = {
        "dim": f"day(last_day(make_date({y}, {m}, 1)))",
        "weeks": f"week(make_date({y}, 12, 28))",
        "ydays": f"(CASE WHEN day(last_day(make_date({y}, 2, 1))) = 29 THEN 366 ELSE 365 END)",
        "offset_min": (f"(CASE WHEN g.sign = '-' THEN -1 ELSE 1 END * (coalesce({ints['ohour']}, 0) * 60 "
                       f"+ coalesce({ints['ominute']}, 0)))"),
        "has_offset": "g.offset <> ''",
    }
    fields = {**ints, **helpers}
    checks = [(sql.format(**fields), reason) for _, sql, reason in CHECKS]
    if want == "reason":
        parts = " ".join(f"WHEN {cond} THEN {_reason_sql(reason, raw)}" for cond, reason in checks)
        body = f"CASE {parts} ELSE CASE WHEN ({_instant_us(ints, helpers)}) NOT BETWEEN {MIN_US} AND {MAX_US} " \
               f"THEN {_literal(OUT_OF_RANGE)} END END"
    else:
        # A CASE chain, not an OR: DuckDB runs each WHEN only on the rows the ones above let
        # through, so no helper (make_date) meets a field an earlier check refused.
        refused = " ".join(f"WHEN {cond} THEN NULL" for cond, _ in checks)
        us = _instant_us(ints, helpers)
        body = (f"CASE {refused} WHEN ({us}) BETWEEN {MIN_US} AND {MAX_US} "
                f"THEN CAST(make_timestamp(CAST({us} AS BIGINT)) AS TIMESTAMPTZ) END")
    return (f"list_transform([regexp_extract({col}, {_literal('^' + ISO_PATTERN + '$')}, [{names}])], "
            f"lambda g: {body})[1]")


def _reason_sql(template: str, raw: dict[str, str]) -> str:
    """A reason template as SQL: literal pieces joined with the fields' text as given."""
    pieces = re.split(r"\{(\w+)\}", template)
    sql = [_literal(piece) if i % 2 == 0 else f"({raw[piece]})" for i, piece in enumerate(pieces) if piece or i % 2]
    return " || ".join(sql)


def _instant_us(ints: dict[str, str], helpers: dict[str, str]) -> str:
    """SQL: microseconds since 1970 of an ISO match whose checks passed (HUGEINT arithmetic)."""
    y = ints["year"]
    epoch_day = "DATE '1970-01-01'"
    jan4 = f"make_date({y}, 1, 4)"
    days = (f"CASE WHEN {ints['week']} IS NOT NULL THEN date_diff('day', {epoch_day}, {jan4}) - (isodow({jan4}) - 1) "
            f"+ ({ints['week']} - 1) * 7 + (coalesce({ints['weekday']}, 1) - 1) "
            f"WHEN {ints['yday']} IS NOT NULL THEN date_diff('day', {epoch_day}, make_date({y}, 1, 1)) "
            f"+ {ints['yday']} - 1 "
            f"ELSE date_diff('day', {epoch_day}, make_date({y}, coalesce({ints['month']}, 1), "
            f"coalesce({ints['day']}, 1))) END")
    fraction = "CAST(left(g.fraction || g.bfraction || '000000', 6) AS HUGEINT)"
    seconds = (f"coalesce({ints['hour']}, 0) * 3600 + coalesce({ints['minute']}, 0) * 60 "
               f"+ coalesce({ints['second']}, 0) - {helpers['offset_min']} * 60")
    return f"CAST({days} AS HUGEINT) * 86400000000 + CAST({seconds} AS HUGEINT) * 1000000 + {fraction}"


__all__ = ["CHECKS", "EPOCH_FACTORS", "ISO_PATTERN", "NUMBER_PATTERN", "parse_text", "reason_sql", "time_sql"]
