"""The docstring examples of the package, run as doctests.

Each docstring with examples runs in its module's namespace, on its own new store: ``mem`` (empty, its clock fixed at
2026-03-20 UTC, so that outputs do not depend on the day), ``folder`` (an empty temporary
folder, where the charts of ``tm.plot`` are written) and ``tm``. An example that cannot run
here says ``+SKIP`` and is listed in :data:`UNRUN` with the reason.
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

#: Modules left out: running ``python -m tempomem`` is the CLI's (test_cli).
SKIPPED = ("tempomem.__main__",)
MODULES = sorted(m.name for m in pkgutil.walk_packages(tm.__path__, "tempomem.") if m.name not in SKIPPED)
NOW = to_utc("2026-03-20T00:00:00Z")
#: The docstrings whose examples are skipped, and why; any other ``+SKIP`` fails the test.
UNRUN = {
    "tempomem.embed.SentenceTransformerEmbedder": "needs the embeddings extra (a model), not installed in the tests",
}


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


def test_only_the_listed_examples_are_skipped() -> None:
    skipped = {test.name for name in ["tempomem", *MODULES] for test in _examples(name)
               if any(example.options.get(doctest.SKIP) for example in test.examples)}
    assert skipped == set(UNRUN)
