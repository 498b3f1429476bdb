"""Fact ids: one format, 14 hex digits of the creation time in µs then 15 of a serial that is
unique among the ids made at that microsecond, so that ids sort by creation. Made one at a time
by :func:`new_fact_id` (the one-row write path), in SQL by ``tm__fact_id`` (the set-based path
and backfill, where an id is a sort key), or by NumPy from the same two integers
(:func:`generated_ids`, where backfill's sort compared those instead)."""

from __future__ import annotations

import os
import re
import secrets
import threading
from datetime import datetime, timedelta

import numpy as np
import pyarrow as pa

from .errors import TempomemError
from .times import EPOCH

_id_lock = threading.Lock()
_HEX = re.compile("[0-9a-f]+")
_id_last = [0, 0]


def new_fact_id(at: datetime) -> str:
    """A fact id made at ``at``: its serial is a counter within the microsecond (16 bits), this
    process (12) and randomness (32), so that processes and threads never make the same one.

    >>> from datetime import UTC
    >>> fact_id = new_fact_id(datetime(1970, 1, 1, 0, 0, 0, 17, tzinfo=UTC))
    >>> len(fact_id), fact_id[:14]
    (29, '00000000000011')
    """
    us = int(at.timestamp() * 1_000_000)
    with _id_lock:
        if us <= _id_last[0]:
            _id_last[1] += 1
        else:
            _id_last[0], _id_last[1] = us, 0
        seq = _id_last[1]
    serial = (seq % 65536) << 44 | (os.getpid() % 4096) << 32 | secrets.randbits(32)
    return f"{us:014x}{serial:015x}"


def checked(fact_id: object) -> str:
    """``fact_id`` if it can be a fact id (a non-empty string), else the error naming it: a
    number or a list given as an id was a DuckDB conversion error or a TypeError in a commit.

    >>> checked("h-42")
    'h-42'
    >>> checked(42)
    Traceback (most recent call last):
    tempomem.errors.TempomemError: fact_id: expected a fact id (a string), got int 42
    """
    if not isinstance(fact_id, str) or not fact_id:
        raise TempomemError(f"fact_id: expected a fact id (a string), got {type(fact_id).__name__} {fact_id!r}")
    return fact_id


def made_at(fact_id: str) -> datetime | None:
    """The creation time an id in this format carries (``None`` for an id given in another):
    a hint where to look for a fact, since ids given to backfill may take any form.

    >>> made_at("00000000000011" + "0" * 15).isoformat(), made_at("h-42")
    ('1970-01-01T00:00:00.000017+00:00', None)
    """
    if len(fact_id) != 29 or not _HEX.fullmatch(fact_id):
        return None
    return EPOCH + timedelta(microseconds=int(fact_id[:14], 16))


# A time as µs since the epoch, clamped to the 14 hex digits of an id (0 .. 2^56 - 1). A row's
# fact id: the given one, else 14 hex digits of that and 15 of (nonce + row) as the serial:
# unique in the load and in the order of (recorded_at, row). One hex conversion of a 117-bit
# number whose leading 1 is dropped (fixed width without lpad; about half the cost of format()).
FACT_ID_MACRO = """
CREATE OR REPLACE TEMP MACRO tm__id_us(t) AS least(greatest(epoch_us(t), 0), 72057594037927935);
CREATE OR REPLACE TEMP MACRO tm__fact_id(given, recorded_at, row_, nonce) AS
coalesce(given, lower(substr(to_hex((CAST(1 AS HUGEINT) << 116)
    + (CAST(tm__id_us(recorded_at) AS HUGEINT) << 60) + nonce + row_), 2)))
"""

#: Two lowercase hex digits per byte value, as the two bytes of a little-endian uint16.
_HEX_PAIRS = np.array([ord(f"{b:02x}"[0]) | ord(f"{b:02x}"[1]) << 8 for b in range(256)], dtype="<u2")


def generated_ids(us: pa.Array, serial: pa.Array) -> pa.Array:
    """The ids ``tm__fact_id`` makes, as one Arrow string array: 14 lowercase hex digits of
    ``us`` (< 2^56) then 15 of ``serial`` (< 2^60), for the whole batch at once: each
    big-endian byte becomes its two digits by one table lookup (no Python per row; about a
    third of the CPU of the SQL macro).

    >>> generated_ids(pa.array([1]), pa.array([255])).to_pylist()
    ['000000000000010000000000000ff']
    """
    n = len(us)
    digits = np.empty((n, 29), np.uint8)
    us_bytes = us.to_numpy().astype(">u8").view(np.uint8).reshape(n, 8)
    serial_bytes = serial.to_numpy().astype(">u8").view(np.uint8).reshape(n, 8)
    digits[:, :14] = _HEX_PAIRS[us_bytes[:, 1:]].view(np.uint8)  # the top byte of us is 0
    digits[:, 14:] = _HEX_PAIRS[serial_bytes].view(np.uint8)[:, 1:]  # so is serial's top digit
    offsets = np.arange(0, 29 * (n + 1), 29, dtype=np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(digits))
