"""The one run loader and the report read once: kernel tables beside the reports or in the user cache.

Every committed report's table gives exactly read_report's DataFrame; a table that is damaged or belongs
to other content is never used; nothing is written into a folder that is not a run memtraffic made.
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from report_bytes import report_bytes
from typer.testing import CliRunner

from memtraffic.cli import app
from memtraffic.ncu import report as ncu_report_module
from memtraffic.ncu.kernel_table import cached_table_path, file_digest, kernel_table, table_path
from memtraffic.ncu.report import read_report
from memtraffic.runfolder.load import load_run
from memtraffic.vocab.errors import ReportError

REPO = Path(__file__).resolve().parents[2]
REPORTS = sorted((REPO / "reports").rglob("*.ncu-rep"))
SEED = REPO / "reports" / "h100" / "seed_1048576x2_fp32"


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("MEMTRAFFIC_CACHE", str(folder))
    return folder


@pytest.fixture
def no_ncu_report(monkeypatch):
    """Reading a .ncu-rep now fails: what passes reads only tables."""
    def refuse(path):
        raise AssertionError(f"opened the report {path}")

    monkeypatch.setattr(ncu_report_module, "load_ncu_report", refuse)


def _lone_copy(report: Path, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    copy = folder / report.name
    shutil.copyfile(report, copy)
    return copy


@pytest.mark.parametrize("report", REPORTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_committed_report_has_a_table_equal_to_reading_it(report, cache, monkeypatch):
    assert table_path(report).is_file(), "run scripts/make_kernel_tables.py and commit the table"
    direct = read_report(report)
    monkeypatch.setattr(ncu_report_module, "load_ncu_report", lambda p: pytest.fail(f"opened {p}"))
    pd.testing.assert_frame_equal(kernel_table(report).kernels, direct)
    assert not cache.exists()  # the committed table was enough


def test_a_lone_report_is_read_once_then_from_the_cache(tmp_path, cache, monkeypatch):
    copy = _lone_copy(SEED / "profile.ncu-rep", tmp_path / "mine")
    first = kernel_table(copy)
    pd.testing.assert_frame_equal(first.kernels, read_report(copy))
    assert [p.name for p in (tmp_path / "mine").iterdir()] == ["profile.ncu-rep"]  # nothing written there
    assert cached_table_path(file_digest(copy)).is_file()
    monkeypatch.setattr(ncu_report_module, "load_ncu_report", lambda p: pytest.fail(f"opened {p}"))
    pd.testing.assert_frame_equal(kernel_table(copy).kernels, first.kernels)


def test_a_damaged_or_foreign_table_is_never_used(tmp_path, cache):
    copy = _lone_copy(SEED / "profile.ncu-rep", tmp_path / "run")
    expected = read_report(copy)
    foreign = table_path(REPO / "reports" / "h100" / "suite_4096x4096" / "profile.ncu-rep").read_bytes()
    table_path(copy).write_bytes(foreign)  # another report's table beside this one
    cached = cached_table_path(file_digest(copy))
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"\x1f\x8b not gzip")  # a corrupt cache entry
    pd.testing.assert_frame_equal(kernel_table(copy).kernels, expected)
    assert table_path(copy).read_bytes() == foreign  # the folder is not ours to rewrite
    doc = json.loads(gzip.decompress(cached.read_bytes()))  # the cache entry is whole again
    assert doc["report_sha256"] == file_digest(copy) and doc["rows"] == 3


def test_a_stale_metric_table_is_read_again(tmp_path, cache, monkeypatch):
    copy = _lone_copy(SEED / "profile.ncu-rep", tmp_path / "run")
    shutil.copyfile(table_path(SEED / "profile.ncu-rep"), table_path(copy))
    from memtraffic.ncu import kernel_table as run_module

    monkeypatch.setattr(run_module, "_kernels_version", lambda: {"time": "a metric table of another day"})
    opened = []
    real = ncu_report_module.load_ncu_report
    monkeypatch.setattr(ncu_report_module, "load_ncu_report", lambda p: (opened.append(p), real(p))[1])
    kernel_table(copy)
    assert opened == [copy]


def test_an_unwritable_cache_only_costs_a_reread(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("MEMTRAFFIC_CACHE", str(blocker))
    copy = _lone_copy(SEED / "profile.ncu-rep", tmp_path / "run")
    assert len(kernel_table(copy).kernels) == 3


def test_a_truncated_report_gives_the_same_errors_from_its_table(tmp_path, cache):
    data = report_bytes(SEED / "profile.ncu-rep")
    cut = tmp_path / "cut.ncu-rep"
    cut.write_bytes(data[: len(data) - 100])
    for _ in range(2):  # the report, then its cached table
        with pytest.raises(ReportError, match=f"{cut} is truncated or damaged: kernel launch #2"):
            kernel_table(cut)
        partial = kernel_table(cut, allow_partial=True)  # the damaged launch is returned for analysis to name
        assert (len(partial.kernels), partial.damaged) == (2, [2])


def test_load_run_of_a_folder_a_report_inside_it_and_a_lone_report(tmp_path):
    run = load_run(SEED)
    assert (run.name, run.reports, run.folder) == (SEED.name, [SEED / "profile.ncu-rep"], SEED)
    assert run.plan["configs"][0]["variant"] and run.meta["environment"]["gpu"]
    inside = load_run(SEED / "profile.ncu-rep")
    assert (inside.name, inside.plan) == (SEED.name, run.plan)
    lone = load_run(_lone_copy(SEED / "profile.ncu-rep", tmp_path / "x"))
    assert (lone.name, lone.plan, lone.meta, lone.folder) == ("profile", None, None, None)
    with pytest.raises(ReportError, match="no such file or folder"):
        load_run(tmp_path / "missing")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "plan.json").write_text("[1, 2]")
    with pytest.raises(ReportError, match="plan.json: holds a list, expected an object: the run folder is"):
        load_run(tmp_path / "bad")


def test_analyze_of_a_committed_run_reads_no_report(no_ncu_report):
    from memtraffic.analysis.analyze import analyze_path

    table = analyze_path(REPO / "reports" / "h100" / "source_seed_1048576x2_fp32")
    assert "worst line" in " ".join(table["diagnosis"])  # per-line rows come from the lines table too


# --- merge ------------------------------------------------------------------------------------------------


def _run_copy(tmp_path: Path, name: str) -> Path:
    copy = tmp_path / name
    shutil.copytree(SEED, copy, ignore=shutil.ignore_patterns("*.json.gz"))
    return copy


def test_merge_of_an_unreadable_report_is_one_line_and_writes_nothing(tmp_path, cache):
    junk = _run_copy(tmp_path, "junk")
    (junk / "profile.ncu-rep").write_text("junk\n")
    res = CliRunner().invoke(app, ["merge", str(junk), "--out", str(tmp_path / "merged")])
    assert res.exit_code == 1
    assert res.stderr.strip().splitlines() == [
        f"error: cannot merge {junk}: {junk / 'profile.ncu-rep'} holds no profiled kernel: it is not an "
        "Nsight Compute report, it is truncated, or ncu's filters matched no kernel; leave the run out, or "
        "measure it again"]
    assert not (tmp_path / "merged").exists()


def test_merge_of_a_truncated_report_refuses_before_writing(tmp_path, cache):
    cut = _run_copy(tmp_path, "cut")
    data = report_bytes(SEED / "profile.ncu-rep")
    (cut / "profile.ncu-rep").write_bytes(data[:50_000])
    res = CliRunner().invoke(app, ["merge", str(cut), "--out", str(tmp_path / "merged")])
    assert res.exit_code == 1
    assert res.stderr.strip() == (f"error: cannot merge {cut}: {cut / 'profile.ncu-rep'} is truncated or "
                                  "damaged: kernel launch #1 has no name or metrics; leave the run out, or "
                                  "measure it again")
    assert not (tmp_path / "merged").exists()


def test_merge_of_an_interrupted_run_names_the_configs_it_lacks(tmp_path, cache):
    cut = _run_copy(tmp_path, "cut")
    data = report_bytes(SEED / "profile.ncu-rep")
    (cut / "profile.ncu-rep").write_bytes(data[:50_000])
    meta = json.loads((cut / "run.json").read_text())
    (cut / "run.json").write_text(json.dumps({**meta, "interrupted": True}))
    out = tmp_path / "merged"
    res = CliRunner().invoke(app, ["merge", str(cut), "--out", str(out), "--format", "json"])
    assert res.exit_code == 1
    assert (f"warning: {cut / 'profile.ncu-rep'} is truncated or damaged: kernel launch #1 has no name or "
            "metrics (left out)") in res.stderr.splitlines()
    lacking = ["mt|softmax_tiled|1048576x2|fp32|BLOCK_M=128", "mt|torch_softmax|1048576x2|fp32"]
    assert (f"error: 2 configs ran but have no kernel in their reports (cut short?): {', '.join(lacking)}; "
            f"they are listed to rerun: `memtraffic measure --rerun {out}`") in res.stderr
    rows = json.loads(res.stdout)  # every planned config, marked
    assert [(r["variant"], r["status"]) for r in rows] == [
        ("softmax_naive", "partial"), ("softmax_tiled", "missing"), ("torch_softmax", "missing")]
    run = json.loads((out / "run.json").read_text())
    assert run["missing"] == lacking and run["rerun"] == lacking


def test_merge_keeps_the_tables_of_its_reports(tmp_path, cache, no_ncu_report):
    from memtraffic.analysis.merge import merge_runs

    out, _ = merge_runs([SEED], tmp_path / "merged", echo=lambda _line: None)
    copied = table_path(out / "part1-profile.ncu-rep").read_bytes()
    assert copied == table_path(SEED / "profile.ncu-rep").read_bytes()
