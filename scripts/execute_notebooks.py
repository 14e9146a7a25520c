"""Rebuild notebooks/*.ipynb from their jupytext sources (notebooks/*.py) and execute them in place, so the
committed notebooks carry their outputs (tests/test_notebooks.py re-executes them and compares).

    .venv/bin/python scripts/execute_notebooks.py [NAME ...]   # default: every notebook

Run it on a CPU machine with Chromium (the figures' PNGs come from kaleido). Notebook 03's measuring cells
(tagged `gpu`) ran on an H100 (scripts/gpu_notebook03.sh): where there is no GPU, their committed outputs
are kept and every other cell is executed, reading the run those cells saved (reports/h100/lesson03_*).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import jupytext
import nbclient
import nbformat

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def _measures(cell) -> bool:
    return cell.cell_type == "code" and "gpu" in cell.metadata.get("tags", [])


def execute(name: str) -> Path:
    nb = jupytext.read(NOTEBOOKS / f"{name}.py")
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    path = NOTEBOOKS / f"{name}.ipynb"
    if shutil.which("nvidia-smi") is None and path.exists():  # no GPU here: keep what the GPU measured
        kept = {c.source: c for c in nbformat.read(path, as_version=4).cells if _measures(c)}
        for cell in nb.cells:
            if _measures(cell) and cell.source in kept:
                cell.outputs = kept[cell.source].outputs
    nbformat.write(nb, path)
    return path


if __name__ == "__main__":
    for name in sys.argv[1:] or sorted(p.stem for p in NOTEBOOKS.glob("*.py")):
        print(f"wrote {execute(name)}")
