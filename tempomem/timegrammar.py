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
  ``2024-06`` and ``2024-W23`` mean their earliest instant.
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
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

#: Microseconds per unit of a bare number; the factor enters SQL as a literal from this table.
EPOCH_FACTORS = {"s": 1_000_000, "ms": 1_000, "us": 1}
#: The stored range: 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999Z, in µs since 1970.
MIN_US = -62_135_596_800_000_000
MAX_US = 253_402_300_799_999_999

_BLANK = "[ \t\r\n]*"
_OFFSET = "(?P<offset>[Zz]|(?P<sign>[+-])(?P<ohour>[0-9]{2})(?::?(?P<ominute>[0-9]{2}))?)"
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
#: The fields of a match, each the text of the groups spelling it (at most one matches).
_FIELDS = {"y": ("year",), "mo": ("month", "bmonth"), "d": ("day", "bday"), "w": ("week", "bweek"),
           "wd": ("weekday", "bweekday"), "yd": ("yday", "byday"), "h": ("hour",), "mi": ("minute", "bminute"),
           "s": ("second", "bsecond"), "f": ("fraction", "bfraction"), "off": ("offset",), "sg": ("sign",),
           "oh": ("ohour",), "om": ("ominute",)}

EMPTY = "empty text is not a time"
NOT_ISO = "not an ISO 8601 date or time (such as 2024-06-01, 2024-06-01T12:00:00Z or 20240601T120000+0200)"
EXPONENT = "a number with an exponent is not a time (an epoch is plain digits, read with epoch_unit)"
BARE_NUMBER = ("a bare number is not a time without its unit: nothing says seconds rather than "
               "milliseconds (give datetimes or ISO 8601 text; backfill reads epochs with epoch_unit='s', 'ms' "
               "or 'us')")
OUT_OF_RANGE = "outside the years 0001-9999 (UTC) that a stored time can hold"

Fields = dict[str, str]


def _offset_minutes(f: Fields) -> int:
    magnitude = int(f["oh"] or 0) * 60 + int(f["om"] or 0)
    return -magnitude if f["sg"] == "-" else magnitude


def _weeks(year: str) -> int:
    return date(int(year), 12, 28).isocalendar().week


#: The checks of an ISO match, in order: (Python condition, SQL condition, reason). The first
#: that holds refuses the value with its reason, ``{field}`` being that field's text as given.
#: Both conditions read the fields as text ('' when absent): two-digit fields compare as text
#: exactly as numbers do. Each runs only on matches the checks above it let through.
CHECKS: list[tuple[Callable[[Fields], bool], str, str]] = [
    (lambda f: f["y"] == "0000", "c.y = '0000'", "year {y} is before year 0001"),
    (lambda f: f["mo"] != "" and not "01" <= f["mo"] <= "12",
     "c.mo <> '' AND c.mo NOT BETWEEN '01' AND '12'", "month {mo} is not 01-12"),
    (lambda f: f["d"] != "" and not 1 <= int(f["d"]) <= calendar.monthrange(int(f["y"]), int(f["mo"]))[1],
     "c.d <> '' AND try_strptime(c.y || '-' || c.mo || '-' || c.d, '%Y-%m-%d') IS NULL",
     "day {d} does not exist in {y}-{mo}"),
    (lambda f: f["wd"] != "" and not "1" <= f["wd"] <= "7",
     "c.wd <> '' AND c.wd NOT BETWEEN '1' AND '7'", "weekday {wd} is not 1-7 (Monday-Sunday)"),
    (lambda f: f["w"] != "" and not 1 <= int(f["w"]) <= _weeks(f["y"]),
     "c.w <> '' AND (c.w = '00' OR c.w > '53' OR c.w = '53' AND week(make_date(CAST(c.y AS INTEGER), 12, 28)) < 53)",
     "week {w} does not exist in {y}"),
    (lambda f: f["yd"] != "" and not 1 <= int(f["yd"]) <= 365 + calendar.isleap(int(f["y"])),
     "c.yd <> '' AND try_strptime(c.y || '-' || c.yd, '%Y-%j') IS NULL",
     "day {yd} of the year does not exist in {y}"),
    (lambda f: f["h"] != "" and f["d"] == f["wd"] == f["yd"] == "",
     "c.h <> '' AND c.d = '' AND c.wd = '' AND c.yd = ''",
     "a time of day needs a full date (YYYY-MM-DD, YYYY-Www-D or YYYY-DDD)"),
    (lambda f: f["h"] > "23", "c.h > '23'", "hour {h} is not 00-23"),
    (lambda f: f["mi"] > "59", "c.mi > '59'", "minute {mi} is not 00-59"),
    (lambda f: f["s"] == "60", "c.s = '60'",
     "second 60 (a leap second) cannot be stored: stored UTC times have no leap seconds"),
    (lambda f: f["s"] > "59", "c.s > '59'", "second {s} is not 00-59"),
    (lambda f: f["off"] != "" and f["h"] == "", "c.off <> '' AND c.h = ''",
     "an offset needs a time of day (such as 2024-06-01T00:00+02:00)"),
    (lambda f: f["om"] > "59", "c.om > '59'", "offset minute {om} is not 00-59"),
    (lambda f: not -720 <= _offset_minutes(f) <= 840,
     "(c.sg = '+' AND c.oh || c.om > '1400' OR c.sg = '-' AND c.oh || c.om > '1200')",
     "offset {off} is outside -12:00 to +14:00, the offsets of real time zones"),
]
#: The checks DuckDB's strptime does not make itself (it rolls week 53 and offset minute 60
#: over, and knows nothing of partial dates or the offset range): the value path needs only these.
_STRPTIME_MISSES = (4, 6, 11, 12, 13)


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
        groups = match.groupdict()
        return _iso_instant({name: "".join(groups[g] or "" for g in spelled) for name, spelled in _FIELDS.items()})
    if _NUMBER.fullmatch(text):
        if epoch_unit is None:
            return BARE_NUMBER
        us = int((Decimal(text.strip(" \t\r\n")) * EPOCH_FACTORS[epoch_unit]).to_integral_value("ROUND_FLOOR"))
        return _from_us(us)
    if _EXPONENT.fullmatch(text):
        return EXPONENT
    return NOT_ISO


def _iso_instant(f: Fields) -> datetime | str:
    for condition, _sql, reason in CHECKS:
        if condition(f):
            return reason.format(**f)
    year = int(f["y"])
    if f["w"]:
        day = date.fromisocalendar(year, int(f["w"]), int(f["wd"] or 1))
    elif f["yd"]:
        day = date(year, 1, 1) + timedelta(days=int(f["yd"]) - 1)
    else:
        day = date(year, int(f["mo"] or 1), int(f["d"] or 1))
    seconds = int(f["h"] or 0) * 3600 + int(f["mi"] or 0) * 60 + int(f["s"] or 0) - _offset_minutes(f) * 60
    fraction = int((f["f"] + "000000")[:6])
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
_BLANKS = "' ' || chr(9) || chr(10) || chr(13)"


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
    ``regexp_extract`` whose fields, spelled out in full, DuckDB's strptime reads.
    :func:`reason_sql` says why a NULL is one. Assumes a connection in UTC (every tempomem
    connection is).
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
    slow = f"CASE WHEN regexp_full_match({col}, {_literal(ISO_PATTERN)}) THEN {_over_fields(col, _ISO_VALUE)}"
    if epoch_unit is not None:
        us = f"floor(CAST(trim({col}, {_BLANKS}) AS DECIMAL(38, 9)) * {EPOCH_FACTORS[epoch_unit]})"
        slow += (f" WHEN regexp_full_match({col}, {_literal(NUMBER_PATTERN)}) THEN CASE WHEN {us} "
                 f"BETWEEN {MIN_US} AND {MAX_US} THEN CAST(make_timestamp(CAST({us} AS BIGINT)) AS TIMESTAMPTZ) END")
    slow += " END"
    return (f"CASE WHEN regexp_full_match({col}, {_literal(FAST_PATTERN)}) "
            f"THEN {_in_range(f'TRY_CAST({col} AS TIMESTAMPTZ)')} ELSE {slow} END")


def reason_sql(col: str, duck_type: str, epoch_unit: str | None = None) -> str:
    """SQL: why :func:`time_sql` of ``col`` is NULL: the reason :func:`parse_text` gives.

    Only for the values ``time_sql`` refused (NULL for a NULL ``col``); on a readable value
    its answer means nothing. Put it in a ``CASE`` branch taken by those rows alone, so that
    DuckDB evaluates it for them only.
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
    checks = " ".join(f"WHEN {sql} THEN {_reason_sql(reason)}" for _, sql, reason in CHECKS)
    # A match that passes every check is refused only for its range (the rows this runs on
    # are those time_sql refused; the tests hold the two to that).
    iso = f"CASE {checks} ELSE {_literal(OUT_OF_RANGE)} END"
    return (f"CASE WHEN {col} IS NULL THEN NULL "
            f"WHEN trim({col}, {_BLANKS}) = '' THEN {_literal(EMPTY)} "
            f"WHEN regexp_full_match({col}, {_literal(ISO_PATTERN)}) THEN {_over_fields(col, iso)} "
            f"WHEN regexp_full_match({col}, {_literal(NUMBER_PATTERN)}) THEN {number} "
            f"WHEN regexp_full_match({col}, {_literal(_EXPONENT_PATTERN)}) THEN {_literal(EXPONENT)} "
            f"ELSE {_literal(NOT_ISO)} END")


def _in_range(ts: str) -> str:
    return (f"CASE WHEN {ts} BETWEEN TIMESTAMPTZ '0001-01-01 00:00:00+00' "
            f"AND TIMESTAMPTZ '9999-12-31 23:59:59.999999+00' THEN {ts} END")


def _over_fields(col: str, body: str) -> str:
    """SQL: ``body`` over ``c``, the fields of the ISO match of ``col`` as text ('' when absent).

    Extracted once, in lambdas over the one value: DuckDB binds every node of an expression
    at some cost, so the fields are named once rather than spelled out wherever used.
    """
    names = ", ".join(_literal(g) for g in GROUPS)
    fields = ", ".join(f"{_literal(name)}: {' || '.join(f'g.{g}' for g in spelled)}"
                       for name, spelled in _FIELDS.items())
    # the time of day and offset, spelled in full: " hh:mm:ss.ffffff+hh:mm"
    tail = ("' ' || left(g.hour || '00', 2) || ':' || left(g.minute || g.bminute || '00', 2) || ':' "
            "|| left(g.second || g.bsecond || '00', 2) || '.' || left(g.fraction || g.bfraction || '000000', 6) "
            "|| CASE WHEN g.sign = '' THEN '+00:00' ELSE g.sign || g.ohour || ':' || left(g.ominute || '00', 2) END")
    return (f"list_transform([regexp_extract({col}, {_literal('^' + ISO_PATTERN + '$')}, [{names}])], "
            f"lambda g: list_transform([{{{fields}, 'tail': {tail}}}], lambda c: {body})[1])[1]")


#: The instant of an ISO match whose fields passed the checks strptime does not make: each
#: kind of date spelled in full for strptime, which refuses a day, hour, minute or second that
#: does not exist.
_ISO_VALUE = (
    "CASE " + " ".join(f"WHEN {CHECKS[i][1]} THEN NULL" for i in _STRPTIME_MISSES)
    + " WHEN c.w <> '' THEN try_strptime(c.y || '-W' || c.w || '-' || left(c.wd || '1', 1) || c.tail, "
      "'%G-W%V-%u %H:%M:%S.%f%z') "
      "WHEN c.yd <> '' THEN try_strptime(c.y || '-' || c.yd || c.tail, '%Y-%j %H:%M:%S.%f%z') "
      "ELSE try_strptime(c.y || '-' || left(c.mo || '01', 2) || '-' || left(c.d || '01', 2) || c.tail, "
      "'%Y-%m-%d %H:%M:%S.%f%z') END"
)
# over the one value (a lambda), so that the range test does not spell the value out twice
_ISO_VALUE = (f"list_transform([{_ISO_VALUE}], lambda v: CASE WHEN v BETWEEN TIMESTAMPTZ '0001-01-01 00:00:00+00' "
              "AND TIMESTAMPTZ '9999-12-31 23:59:59.999999+00' THEN v END)[1]")


def _reason_sql(template: str) -> str:
    """A reason template as SQL: its literal pieces joined with the fields' text as given."""
    pieces = re.split(r"\{(\w+)\}", template)
    return " || ".join(_literal(piece) if i % 2 == 0 else f"c.{piece}" for i, piece in enumerate(pieces)
                       if piece or i % 2)


#: The macro ``tm__text_time(x)``: :func:`time_sql` of text ``x``, for the ``.sql`` files that
#: read times given as text (importers.sql, assertion_columns.sql).
TEXT_TIME_MACRO = f"CREATE OR REPLACE TEMP MACRO tm__text_time(x) AS {time_sql('x', 'VARCHAR')}"


__all__ = ["CHECKS", "EPOCH_FACTORS", "ISO_PATTERN", "NUMBER_PATTERN", "TEXT_TIME_MACRO", "parse_text", "reason_sql",
           "time_sql"]
