"""The reading side needs no torch: analyze, roofline and report of every committed run, torch blocked.

A subprocess makes `import torch` and `import triton` fail, then runs the CLI. Its analysis must equal
the results.json that `memtraffic measure` saved beside each committed report (computed back then with
the kernels imported), and roofline/report must draw the same figures as a process that has torch.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from no_torch import cli_without_torch

REPO = Path(__file__).resolve().parent.parent
# ncu runs, not bench; first_profile_roofs was profiled with the committed roofs set aside, so its saved
# time_vs_copy used the roofs measured during that run
RUNS = sorted(p.parent for p in (REPO / "reports" / "h100").rglob("results.json")
              if "first_profile_roofs" not in p.parts)


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9, abs_tol=0)
    return a == b


def test_the_committed_runs_are_found():
    assert len(RUNS) >= 8


@pytest.mark.parametrize("run", RUNS, ids=lambda p: p.name)
def test_analysis_without_torch_equals_what_measure_saved(run):
    proc = cli_without_torch("analyze", str(run.relative_to(REPO)), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    saved = json.loads((run / "results.json").read_text())
    assert len(got) == len(saved)
    # rows follow the plan now; runs saved before kept kernels outside any range in launch order
    order = lambda r: (r["range"], ",".join(r["kernels"]), r["time_ns"])  # noqa: E731
    for g, s in zip(sorted(got, key=order), sorted(saved, key=order), strict=True):
        keys = [k for k in s if k not in ("run", "report", "diagnosis")]  # paths depend on the folder
        # an efficiency that is not a result (its counter cannot see the traffic, the bytes stay in a cache, a
        # zero minimum) is null now, with why in no_efficiency; runs saved before kept the ratio
        not_results = g.get("no_efficiency") or {}
        left = {k for k in keys if g.get(k) is None and k.replace("amp_", "eff_", 1) in not_results}
        diff = {k: (g.get(k), s[k]) for k in keys if k not in left and not _same(g.get(k), s[k])}
        assert not diff, (s["range"], diff)
        # the diagnosis is today's wording of the same numbers (findings were reworded and added since some
        # runs were saved): a row with findings then has findings now
        assert g["diagnosis"] or not s["diagnosis"], (s["range"], g["diagnosis"], s["diagnosis"])


@pytest.mark.parametrize("run", [r for r in RUNS if any(r.glob("*.ncu-rep"))], ids=lambda p: p.name)
def test_analysis_without_the_committed_tables_is_the_same(run, tmp_path, monkeypatch):
    """The run copied without its kernel tables: analyzed from the reports (first read, kept in the
    user cache), then from the cache with ncu_report unusable, equals the analysis from the tables, which
    the test above holds to results.json."""
    from memtraffic.analysis.analyze import analyze_path
    from memtraffic.ncu import report

    monkeypatch.setenv("MEMTRAFFIC_CACHE", str(tmp_path / "cache"))
    copy = tmp_path / run.name
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns("*.kernels.json.gz"))
    before = sorted(p.name for p in copy.iterdir())
    expected = analyze_path(run).drop(columns="report")
    first = analyze_path(copy).drop(columns="report")
    assert sorted(p.name for p in copy.iterdir()) == before  # nothing written into the folder
    assert any((tmp_path / "cache" / "reports").glob("*.kernels.json.gz"))

    def refuse(path):
        raise AssertionError(f"opened {path} again")

    monkeypatch.setattr(report, "load_ncu_report", refuse)
    again = analyze_path(copy).drop(columns="report")
    pd.testing.assert_frame_equal(first, expected)
    pd.testing.assert_frame_equal(again, expected)


@pytest.mark.slow
def test_roofline_and_report_without_torch(tmp_path):
    run = "reports/h100/suite_4096x4096"
    html = tmp_path / "roof.html"
    proc = cli_without_torch("roofline", run, "--out", str(html))
    assert proc.returncode == 0, proc.stderr
    assert html.stat().st_size > 10_000
    page = tmp_path / "seed.html"
    proc = cli_without_torch("report", "reports/h100/seed_1048576x2_fp32", "--out", str(page))
    assert proc.returncode == 0, proc.stderr
    assert "softmax_naive" in page.read_text()


def test_roofline_figure_is_the_same_with_and_without_torch(tmp_path):
    """The figure's data, drawn in a process without torch, equals the one drawn here (torch loaded)."""
    import torch  # noqa: F401 - this process has torch, the subprocess does not

    from memtraffic.analysis.analyze import analyze_path
    from memtraffic.views.roofline import roofline_figure

    code = ("import sys, json\nsys.modules['torch'] = sys.modules['triton'] = None\n"
            "from memtraffic.analysis.analyze import analyze_path\n"
            "from memtraffic.views.roofline import roofline_figure\n"
            "print(roofline_figure(analyze_path('reports/h100/suite_4096x4096')).to_json())")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr
    here = roofline_figure(analyze_path(REPO / "reports/h100/suite_4096x4096"))
    assert json.loads(proc.stdout)["data"] == json.loads(here.to_json())["data"]


def test_suite_order_matches_the_kernels_dict():
    from memtraffic.kernels import VARIANTS
    from memtraffic.vocab.configs import SHIPPED_VARIANTS

    assert tuple(VARIANTS) == SHIPPED_VARIANTS


def test_reading_modules_do_not_import_the_measuring_side():
    code = ("import sys\nimport memtraffic.analysis.analyze, memtraffic.ncu.report\n"
            "import memtraffic.views.roofline\n"
            "import memtraffic.views.html_report, memtraffic.vocab.ops, memtraffic.cli\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'triton') "
            "or m in ('memtraffic.kernels', 'memtraffic.collect.variants', 'memtraffic.collect.runner')))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
