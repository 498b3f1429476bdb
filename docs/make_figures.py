"""Regenerate the README's pictures: each notebook's key charts, as PNGs in docs/.

    python docs/make_figures.py              # every figure
    python docs/make_figures.py --list       # what it would write, and from where

A notebook names its key charts itself: a code cell tagged ``figure:NAME`` (in the cell's
metadata) is written to ``docs/NAME.png`` from the PNG it shows. Each notebook runs top to
bottom in a fresh kernel, as ``tests/test_notebooks.py`` runs it, so a picture is always the
one a reader of the notebook gets. ``docs/bitemporal.png``, the README's first picture, comes
from the two CLI commands the README gives for it.
"""

from __future__ import annotations

import argparse
import base64
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
DOCS, NOTEBOOKS = ROOT / "docs", ROOT / "notebooks"
TAG = "figure:"
#: The README's CLI picture: the outage instant on the checkout-api instance type.
CLI_FIGURE = ["plot", "checkout-api", "instance_type", "--valid-at", "2026-03-15T08:00Z",
              "--believed-at", "2026-03-15T08:00Z", "--size", "7", "4.2"]


def tagged(path: Path) -> dict[str, int]:
    """The figures a notebook names: ``{name: cell index}``."""
    nb = nbformat.read(path, as_version=4)
    return {tag[len(TAG):]: i for i, cell in enumerate(nb.cells)
            for tag in cell.get("metadata", {}).get("tags", []) if tag.startswith(TAG)}


def run_notebook(path: Path, workdir: Path) -> nbformat.NotebookNode:
    """``path`` executed headless in a fresh ``python3`` kernel, from ``notebooks/``."""
    nb = nbformat.read(path, as_version=4)
    os.environ["MPLBACKEND"] = "Agg"
    os.environ["TMPDIR"] = str(workdir)  # the notebooks' stores land in a folder removed after
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    return nb


def png_of(cell: nbformat.NotebookNode) -> bytes:
    """The PNG a cell showed; a figure cell that shows none is an error."""
    for output in cell.get("outputs", []):
        data = output.get("data", {})
        if "image/png" in data:
            return base64.b64decode(data["image/png"])
    raise SystemExit(f"cell {cell.get('id')} is tagged as a figure but shows no PNG")


def figures_of(path: Path, workdir: Path) -> dict[str, bytes]:
    """Every tagged figure of one notebook, rendered."""
    wanted = tagged(path)
    if not wanted:
        return {}
    nb = run_notebook(path, workdir)
    return {name: png_of(nb.cells[i]) for name, i in wanted.items()}


def cli_figure(workdir: Path) -> bytes:
    """``docs/bitemporal.png`` as the README makes it: ``tempomem demo --keep`` then ``plot``."""
    store, out = workdir / "checkout.tm", workdir / "bitemporal.png"
    tempomem = [sys.executable, "-m", "tempomem"]
    subprocess.run([*tempomem, "demo", "--keep", str(store)], check=True, capture_output=True)
    subprocess.run([*tempomem, "--store", str(store), *CLI_FIGURE, "--out", str(out)], check=True,
                   capture_output=True)
    return out.read_bytes()


def main() -> None:
    """Write every figure (or, with ``--list``, name them)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="name the figures and their cells, write nothing")
    args = parser.parse_args()
    notebooks = sorted(NOTEBOOKS.glob("*.ipynb"))
    if args.list:
        print("docs/bitemporal.png  <- tempomem demo + tempomem plot (README)")
        for path in notebooks:
            for name, i in tagged(path).items():
                print(f"docs/{name}.png  <- notebooks/{path.name}, cell {i}")
        return
    with tempfile.TemporaryDirectory(prefix="tempomem-figures-") as tmp:
        work = Path(tmp)
        images = {"bitemporal": cli_figure(work)}
        for path in notebooks:
            images.update(figures_of(path, work))
    for name, png in images.items():
        (DOCS / f"{name}.png").write_bytes(png)
        print(f"wrote docs/{name}.png ({len(png):,} bytes)")


if __name__ == "__main__":
    main()
