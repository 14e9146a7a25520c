"""The public Python API (memtraffic.__all__) gives the numbers the CLI prints, on committed real runs."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import memtraffic
from memtraffic.cli import app

REPO = Path(__file__).resolve().parent.parent
H100 = REPO / "reports" / "h100"


def _cli_json(*args: str):
    res = CliRunner().invoke(app, [*args, "--format", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def test_import_memtraffic_loads_neither_torch_nor_pandas_nor_plotly():
    code = ("import sys, memtraffic\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'triton', 'pandas', 'plotly'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_every_public_name_resolves():
    for name in memtraffic.__all__:
        assert getattr(memtraffic, name) is not None, name
    assert memtraffic.__version__ == memtraffic.__version__.strip() and "analyze" in memtraffic.__all__


@pytest.mark.parametrize("run", ["seed_1048576x2_fp32", "suite_4096x4096", "matmul_4096x4096x4096"])
def test_analyze_equals_the_cli_json(run):
    path = H100 / run
    table = memtraffic.analyze(memtraffic.load_run(path))
    assert memtraffic.records(table) == _cli_json("analyze", str(path))
    assert len(table) >= 1 and table["l1_ld_bytes"].notna().all()


def test_per_op_equals_the_cli_json():
    path = H100 / "profile_torch_model"
    got = memtraffic.records(memtraffic.per_op(path))
    want = _cli_json("analyze", str(path), "--group-by", "op")
    assert [r["op"] for r in got] == [r["op"] for r in want]
    for g, w in zip(got, want, strict=True):
        assert all(_same(g[k], w[k]) for k in w), g["op"]


def test_lines_equal_the_cli_json():
    path = H100 / "source_seed_1048576x2_fp32"
    from memtraffic.analysis.findings import to_dicts

    # the API gives the findings as records; the JSON writes them as dicts with their words
    assert [{**r, "findings": to_dicts(r["findings"])} for r in memtraffic.lines(path)] == _cli_json(
        "lines", str(path))


def test_load_run_reads_the_folder():
    run = memtraffic.load_run(H100 / "seed_1048576x2_fp32")
    assert run.name == "seed_1048576x2_fp32" and run.reports and run.reports[0].suffix == ".ncu-rep"
    assert run.plan is not None and run.plan["configs"] and run.meta is not None


def test_figures_draw_the_run():
    pytest.importorskip("plotly")
    table = memtraffic.analyze(H100 / "suite_4096x4096")
    fig = memtraffic.roofline(table, levels=("dram",))
    names = {t.name for t in fig.data}
    assert any(v in " ".join(filter(None, names)) for v in table["variant"])
    assert memtraffic.traffic(table).data


def test_floor_equals_the_cli_json():
    path = H100 / "floor_compiled_block"
    assert memtraffic.floor(path).to_dict() == _cli_json("floor", str(path))


def test_the_api_functions_of_the_other_commands_give_what_the_cli_prints():
    """diff, list --count and metrics: the api function a notebook calls, and the command's JSON."""
    from memtraffic import api
    from memtraffic.views.diff_table import records

    a, b = H100 / "diff_gelu_strided_4096x4096", H100 / "diff_gelu_coalesced_4096x4096"
    d = api.diff(a, b)
    cli = _cli_json("diff", str(a), str(b))
    assert {"rows": records(d), "fusion": [m.to_dict() for m in d.fusion]} == cli
    counts = api.count_grid(["softmax_tiled"], ["4096x4096", "1024x1024"], params=["num_warps=4,8"])
    assert counts == _cli_json("list", "--count", "softmax_tiled", "--shape", "4096x4096", "--shape",
                               "1024x1024", "--param", "num_warps=4,8")
    rows, line = api.metric_sets("ga102", set_name="bytes")
    assert line is None and rows == _cli_json("metrics", "--chip", "ga102", "--set", "bytes")
