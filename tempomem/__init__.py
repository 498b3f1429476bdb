"""tempomem: bitemporal memory for AI agents.

Every fact has a valid time (when it was true in the world) and a belief time (when the
memory held it), so "what was true at T", "what did the agent believe at B" and "since when
do we know it was wrong" are one query each.

>>> import tempomem as tm
>>> mem = tm.open("memory.tm", create=True)  # doctest: +SKIP
"""

from . import importers
from .backfill import BackfillReport
from .errors import BackfillError, ClockError, ConflictError, FactNotFoundError, TempomemError, TimeParseError
from .queries import CheckReport
from .schema import Fact
from .store import Memory, open

__all__ = [
    "BackfillError",
    "BackfillReport",
    "CheckReport",
    "ClockError",
    "ConflictError",
    "Fact",
    "FactNotFoundError",
    "Memory",
    "TempomemError",
    "TimeParseError",
    "importers",
    "open",
]
__version__ = "0.1.0"
