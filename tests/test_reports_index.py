"""reports/ holds runs: every folder under reports/<group>/<name> is a run folder (or a folder of runs) that
`memtraffic analyze` reads, or has a README.md saying what it is; reports/README.md, written by
scripts/reports_index.py, names each one with its GPU, date, what it shows and the command that reads it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

import memtraffic

REPO = Path(__file__).resolve().parents[1]
FOLDERS = sorted(p for group in (REPO / "reports").iterdir() if group.is_dir()
                 for p in group.iterdir() if p.is_dir())


def _index():
    spec = importlib.util.spec_from_file_location("reports_index", REPO / "scripts" / "reports_index.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up
    spec.loader.exec_module(module)
    return module


INDEX = _index()
RUNS = [run for folder in FOLDERS for run in INDEX._runs_in(folder)]


def test_the_index_is_what_the_script_writes():
    assert (REPO / "reports" / "README.md").read_text() == INDEX.render(), \
        "run python scripts/reports_index.py and commit reports/README.md"


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_folder_is_a_run_or_has_a_readme_and_is_listed(folder):
    assert RUNS.count(folder) or any(r.parent == folder for r in RUNS) or (folder / "README.md").is_file()
    entry = INDEX.entry(folder)
    assert entry.gpu and entry.date and entry.shows and entry.read
    listed = (REPO / "reports" / "README.md").read_text()
    assert f"[{folder.name}]({folder.parent.name}/{folder.name})" in listed


def test_a_folder_that_is_no_run_and_has_no_readme_is_named(tmp_path):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "numbers.txt").write_text("1 2 3\n")
    INDEX.REPO = tmp_path  # names are made relative to it
    try:
        with pytest.raises(ValueError, match=r"^notes is no run folder and has no README.md: add one$"):
            INDEX.entry(tmp_path / "notes")
    finally:
        INDEX.REPO = REPO


@pytest.mark.slow
@pytest.mark.parametrize("run", RUNS, ids=lambda p: str(p.relative_to(REPO / "reports")))
def test_every_run_folder_is_read_by_the_commands_the_index_names(run):
    commands = INDEX.readers(run)
    assert commands
    if "analyze" in commands:
        table = memtraffic.analyze(run)
        assert len(table) > 0 and table["kernels"].map(len).sum() > 0
    if "lines" in commands:
        assert memtraffic.lines(run)
    if "floor" in commands:
        assert memtraffic.floor(run).gpu_time_s > 0
