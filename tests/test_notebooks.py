"""The notebooks are product: stored without outputs, and each runs headless top to bottom.

Each notebook asserts its key answers in its last cells, so a wrong answer fails here too. The
kernel is ``python3`` resolved to this interpreter (jupyter_client maps the kernelspec's
``python`` to ``sys.executable``), so the notebooks see the tempomem under test.
"""

from __future__ import annotations

import base64
import struct
import sys
from pathlib import Path

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
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
    # its key charts (cells tagged figure:NAME) show a PNG the size of the committed docs/NAME.png
    for cell in nb.cells:
        for tag in cell.get("metadata", {}).get("tags", []):
            if tag.startswith("figure:"):
                shown = [base64.b64decode(o["data"]["image/png"]) for o in cell.outputs
                         if "image/png" in o.get("data", {})]
                committed = ROOT / "docs" / f"{tag[len('figure:'):]}.png"
                assert shown and committed.exists(), f"{name}: {tag} shows no PNG or {committed} is missing"
                assert _png_size(shown[0]) == _png_size(committed.read_bytes()), \
                    f"{committed} is stale: python docs/make_figures.py"


def _png_size(png: bytes) -> tuple[int, int]:
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", png[16:24])


def test_every_figure_is_in_the_readme():
    readme = (ROOT / "README.md").read_text()
    figures = sorted(p.name for p in (ROOT / "docs").glob("*.png"))
    assert figures and all(f"](docs/{name})" in readme for name in figures), figures
