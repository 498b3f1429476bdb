"""The notebooks are product: stored without outputs, and each runs headless top to bottom.

Each notebook asserts its key answers in its last cells, so a wrong answer fails here too. The
kernel is ``python3`` resolved to this interpreter (jupyter_client maps the kernelspec's
``python`` to ``sys.executable``), so the notebooks see the tempomem under test.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
NAMES = ["incident_reconstruction.ipynb", "divergence_evaluation.ipynb", "backfill.ipynb"]
PRESENT = [n for n in NAMES if (NOTEBOOKS / n).exists()]


def test_every_notebook_is_in_the_repository():
    assert sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")) == sorted(PRESENT)
    assert "incident_reconstruction.ipynb" in PRESENT


@pytest.mark.parametrize("name", PRESENT)
def test_notebook_is_stored_without_outputs(name):
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code, f"{name} has no code"
    stored = [c.get("id") for c in code if c.outputs or c.execution_count is not None]
    assert not stored, f"{name}: cells {stored} keep outputs; clear them before committing"


def test_python3_kernel_is_this_interpreter():
    spec = KernelSpecManager().get_kernel_spec("python3")
    assert spec.argv[0] in ("python", "python3", sys.executable)


@pytest.mark.parametrize("name", PRESENT)
def test_notebook_runs_and_its_answers_hold(name, tmp_path, monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the notebooks' stores land in the test's folder
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    client = NotebookClient(nb, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOKS)}})
    client.execute()  # raises CellExecutionError, with the failing cell, on any error or assert
    assert any(o.output_type == "stream" and "check out" in o.get("text", "")
               for c in nb.cells if c.cell_type == "code" for o in c.outputs), "the final check cell did not report"
