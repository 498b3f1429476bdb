"""The public API as data: ``tempomem.__all__`` and the signatures SPEC §7 and §12–13 name.

``tests/fixtures/api_snapshot.json`` holds this surface as it was before the layout change
(issue 18); ``test_layout.py`` compares against it, so a move cannot rename or reshape what
code outside the project calls. Regenerate the file only for an intended API change:
``python tests/api_surface.py > tests/fixtures/api_snapshot.json``.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from typing import Any

import tempomem as tm
import tempomem.spark  # SPEC §13; needs the [spark] extra (sqlglot), which the test command installs

#: SPEC §7 and §12–13, by where they live.
MEMORY_METHODS = (
    "declare", "assert_fact", "assert_many", "invalidate", "correct", "get", "current", "as_of",
    "as_believed", "history", "timeline", "diff", "backfill", "forget", "connect", "sql", "check",
    "sequenced", "coalesced", "embed", "recall", "now",
)
FUNCTIONS = {
    "open": tm.open,
    "probes.divergence": tm.probes.divergence,
    "probes.at_events": tm.probes.at_events,
    "reports.ingestion_lag": tm.reports.ingestion_lag,
    "reports.exposure": tm.reports.exposure,
    "reports.decision_audit": tm.reports.decision_audit,
    "reports.displacements": tm.reports.displacements,
    "graph.traverse": tm.graph.traverse,
    # In __all__ as modules; their functions are called from outside too.
    "graph.dependency_changes": tm.graph.dependency_changes,
    "importers.graphiti": tm.importers.graphiti,
    "importers.mem0": tm.importers.mem0,
    "importers.sqlite4ts": tm.importers.sqlite4ts,
    "importers.generic": tm.importers.generic,
    "export.export": tm.export.export,
    "spark.register": tm.spark.register,
    "spark.divergence": tm.spark.divergence,
    "spark.ingestion_lag": tm.spark.ingestion_lag,
}
#: The result types whose fields callers read.
RECORDS = ("Fact", "BackfillReport", "MemoryDiff", "CheckReport")


def _signature(fn: Any) -> str:
    # Parameter names, kinds and defaults; annotations are left out (they are text under
    # ``from __future__ import annotations`` and may be respelled without changing the API).
    params = inspect.signature(fn).parameters.values()
    return str(inspect.Signature([p.replace(annotation=inspect.Parameter.empty) for p in params]))


def surface() -> dict[str, Any]:
    """The API as JSON-ready data."""
    return {
        "__all__": sorted(tm.__all__),
        "signatures": {
            **{name: _signature(fn) for name, fn in FUNCTIONS.items()},
            **{f"Memory.{name}": _signature(getattr(tm.Memory, name)) for name in MEMORY_METHODS},
        },
        "fields": {name: [f.name for f in dataclasses.fields(getattr(tm, name))] for name in RECORDS},
    }


if __name__ == "__main__":
    print(json.dumps(surface(), indent=2, sort_keys=True))
