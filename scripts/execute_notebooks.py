"""Rebuild notebooks/*.ipynb from their jupytext sources (notebooks/*.py) and execute them in place, so the
committed notebooks carry their outputs (tests/test_notebooks.py re-executes them and compares).

    .venv/bin/python scripts/execute_notebooks.py [NAME ...]   # default: every notebook

Run it on a CPU machine with Chromium (the figures' PNGs come from kaleido): the committed outputs are
the CPU path's (notebook 03 then shows the committed H100 run instead of measuring).
"""

from __future__ import annotations

import sys
from pathlib import Path

import jupytext
import nbclient
import nbformat

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def execute(name: str) -> Path:
    nb = jupytext.read(NOTEBOOKS / f"{name}.py")
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    path = NOTEBOOKS / f"{name}.ipynb"
    nbformat.write(nb, path)
    return path


if __name__ == "__main__":
    for name in sys.argv[1:] or sorted(p.stem for p in NOTEBOOKS.glob("*.py")):
        print(f"wrote {execute(name)}")
