"""The typed errors of tempomem: every user mistake is one of these, never a deep traceback."""

from __future__ import annotations


class TempomemError(ValueError):
    """Base class of every error tempomem raises for bad input or a refused operation."""


class TimeParseError(TempomemError):
    """A time value could not be understood (SPEC §2)."""


class ConflictError(TempomemError):
    """A write would leave two values of a single-valued key at one instant (SPEC §5)."""


class FactNotFoundError(TempomemError, KeyError):
    """No fact has the given id. Also a ``KeyError``, as ``mem.get`` promises."""

    def __str__(self) -> str:  # KeyError would otherwise print the repr of its argument
        return str(self.args[0]) if self.args else ""


class ClockError(TempomemError):
    """The store clock is behind a revision it would have to follow (SPEC §1.4)."""


class BackfillError(TempomemError):
    """A strict backfill found rejected rows; ``.report`` holds the full report."""

    def __init__(self, message: str, report: object) -> None:
        super().__init__(message)
        self.report = report
