"""tempomem: bitemporal memory for AI agents.

Every fact has a valid time (when it was true in the world) and a belief time (when the
memory held it), so "what was true at T", "what did the agent believe at B" and "since when
do we know it was wrong" are one query each.

>>> import tempomem as tm
>>> mem = tm.open(folder / "memory.tm", create=True)
>>> f = mem.assert_fact("checkout-api", "instance_type", "m5.xlarge", valid_from="2026-03-10")
>>> mem.as_of("2026-03-15", "checkout-api")["object"].to_list()
['m5.xlarge']
"""

from . import export, graph, importers, probes, reports
from .backfill import BackfillReport
from .diff import MemoryDiff
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
    "MemoryDiff",
    "TempomemError",
    "TimeParseError",
    "export",
    "graph",
    "importers",
    "open",
    "probes",
    "reports",
]
__version__ = "0.1.0"

#: Submodules loaded on first use, so ``import tempomem`` stays light (``tm.plot`` loads matplotlib).
_LAZY_MODULES = ("plot",)


def __getattr__(name: str) -> object:
    if name in _LAZY_MODULES:
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'tempomem' has no attribute {name!r}")
