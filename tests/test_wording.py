"""What a user reads says nothing of where this project is developed: no file outside reports/ (which
keeps the measurements' own notes) speaks of the machines it is built on."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# written in two pieces so that this file does not find itself
PHRASES = ("device " + "machine", "this project's " + "machines")


def test_no_file_outside_reports_speaks_of_our_machines():
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True,
                           check=True).stdout.split()
    found = []
    for name in files:
        if name.startswith("reports/") or not (REPO / name).is_file():
            continue
        try:
            text = (REPO / name).read_text(encoding="utf-8").lower()
        except UnicodeDecodeError:  # a binary file (a figure, a report)
            continue
        found += [f"{name}: {p}" for p in PHRASES if p in text]
    assert not found


def test_a_skipped_test_says_what_it_needs():
    """conftest.py's reasons for the gpu and ncu markers, as pytest -rs prints them."""
    text = (REPO / "tests" / "conftest.py").read_text()
    assert 'reason="needs an NVIDIA GPU and ncu (Nsight Compute)"' in text
    assert 'reason="needs an NVIDIA GPU (CUDA) with torch\'s CUDA build"' in text
    for path in (REPO / "tests").rglob("*.py"):
        assert "not on this " + "machine" not in path.read_text(), path
