"""What a backfill reports (SPEC §9): :class:`BackfillReport`, and the progress callback type."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import polars as pl

#: ``progress(stage, rows_done)``: how a load tells a bar (:mod:`tempomem.progress`) where it is.
Progress = Callable[[str, int], None]

REJECTED_SCHEMA = {"row": pl.Int64, "field": pl.String, "value": pl.String, "reason": pl.String}
FLAGS_SCHEMA = {"flag": pl.String, "count": pl.Int64, "example_row": pl.Int64}


@dataclass(frozen=True)
class BackfillReport:
    """What a backfill read, loaded, rejected and noticed (SPEC §9).

    ``rows_read`` = ``loaded`` + ``duplicates`` + ``rejected.height``. ``rejected`` has one row
    per rejected input row (``row`` 0-based, its first bad ``field``, the ``value`` as text and
    the ``reason``); ``flags`` one row per red flag raised (``flag``, ``count``,
    ``example_row``). ``revisions`` is how many revision rows were written.

    >>> report = mem.backfill([{"subject": "svc", "predicate": "owner", "object": "ana", "recorded_at": "2025-01-01"},
    ...                        {"subject": "svc", "predicate": "owner", "object": "bo", "recorded_at": "2999-01-01"}])
    >>> report.loaded, report.rejected["reason"].to_list()
    (1, ['belief_from_future: recorded_at is after the real clock (pass lenient=True to load it)'])
    """

    rows_read: int
    loaded: int
    rejected: pl.DataFrame
    fixed: int
    duplicates: int
    flags: pl.DataFrame
    revisions: int = 0
    origin: str = "backfill"
    written: bool = field(default=False)

    def flag_count(self, flag: str) -> int:
        """How many rows raised ``flag`` (0 when it was not raised)."""
        hit = self.flags.filter(pl.col("flag") == flag)
        return int(hit["count"][0]) if hit.height else 0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form (the CLI's ``--json``)."""
        return {
            "rows_read": self.rows_read, "loaded": self.loaded, "rejected": self.rejected.to_dicts(),
            "fixed": self.fixed, "duplicates": self.duplicates, "flags": self.flags.to_dicts(),
            "revisions": self.revisions, "origin": self.origin, "written": self.written,
        }

    def __repr__(self) -> str:
        lines = [
            f"BackfillReport ({self.origin}{'' if self.written else ', nothing written'})",
            f"  rows read   {self.rows_read:>10}",
            f"  loaded      {self.loaded:>10}   ({self.revisions} revisions)",
            f"  rejected    {self.rejected.height:>10}",
            f"  fixed spans {self.fixed:>10}",
            f"  duplicates  {self.duplicates:>10}",
        ]
        if self.flags.height:
            lines.append("  flags:")
            lines += [f"    {f:<28} {c:>8}  e.g. row {r}" for f, c, r in self.flags.iter_rows()]
        if self.rejected.height:
            lines.append("  rejected rows (first 10):")
            for row, fld, value, reason in self.rejected.head(10).iter_rows():
                shown = value if value is None or len(value) <= 40 else value[:37] + "..."
                lines.append(f"    row {row}: {fld} = {shown!r}: {reason}")
        return "\n".join(lines)
