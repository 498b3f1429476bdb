"""The docstring examples of the package, run as doctests.

Each docstring with examples runs in its module's namespace, on its own new store: ``mem`` (empty, its clock fixed at
2026-03-20 UTC, so that outputs do not depend on the day), ``folder`` (an empty temporary
folder) and ``tm``. An example that cannot run here (it needs a file or another system's
export) says ``+SKIP``.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil
import tempfile
from pathlib import Path

import pytest

import tempomem as tm
from tempomem.times import to_utc

#: Modules left out: they load what a doctest run should not (matplotlib's charts are tested
#: in test_plot; the CLI in test_cli).
SKIPPED = ("tempomem.plot", "tempomem.plot_sequenced", "tempomem.figures", "tempomem.__main__")
MODULES = sorted(m.name for m in pkgutil.walk_packages(tm.__path__, "tempomem.") if m.name not in SKIPPED)
NOW = to_utc("2026-03-20T00:00:00Z")


def _examples(name: str) -> list[doctest.DocTest]:
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    return [t for t in finder.find(module, name) if t.examples]


@pytest.mark.parametrize("name", ["tempomem", *MODULES])
def test_docstring_examples(name: str) -> None:
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in _examples(name):
        with tempfile.TemporaryDirectory(prefix="tempomem-doctest-") as tmp:
            folder = Path(tmp)
            test.globs.update(tm=tm, folder=folder)
            if any("mem" in example.source for example in test.examples):  # a store only where one is used
                test.globs["mem"] = tm.open(folder / "store", create=True, clock=lambda: NOW)
            runner.run(test)
    failed, attempted = runner.summarize(verbose=False)
    assert failed == 0, f"{failed} of {attempted} examples failed in {name} (see the output above)"
