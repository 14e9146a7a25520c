"""`analyze --group-by op` on a synthetic launch table of a traced program.

The launch table stands in for what extract.read_report gives for a `profile --torch-ops` run: the
numbers are made up for the arithmetic (multiples of 32-byte sectors), not measurements. The plan's
configs are trace records (memtraffic.runfolder.trace), so each kernel inherits the minimum of its op's range.
"""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
from typer.testing import CliRunner

from memtraffic.analysis import analyze
from memtraffic.cli import app
from memtraffic.ncu.kernel_table import KernelTable
from memtraffic.ncu.metrics import METRICS
from memtraffic.ncu.report import range_label
from memtraffic.runfolder.trace import make_record


def _config(seq: int, op: str, read: int, write: int, kind: str = "op") -> dict:
    name = f"mt|op|{seq}|{op}" if kind == "op" else f"mt|region|{op}|{seq}"
    record = make_record(kind, seq, op, name, [{"shape": [8, 8], "dtype": "fp32"}], [], read, write, None)
    return {**record, "id": seq}  # numbered, as in a plan (plan_from_trace)


CONFIGS = [
    _config(0, "aten.mm.default", 3200, 1024),
    _config(1, "aten._softmax.default", 1024, 1024),
    _config(2, "aten._softmax.default", 1024, 1024),
    _config(3, "attn", 2048, 2048, kind="region"),
]


def _kernel(launch: int, stack: list[str], ld: int, st: int, dram_rd: int, dram_wr: int) -> dict:
    row = {alias: math.nan for alias in METRICS}
    row.update(report="synthetic.ncu-rep", launch=launch, range=range_label(stack) if stack else "",
               nvtx=" / ".join(stack), kernel=f"k{launch}", kernel_full=f"k{launch}", grid_size=1,
               block_size=1, device="GPU", passes=5, time=1000.0, l1_ld_bytes=ld, l1_st_bytes=st,
               req_ld_bytes=ld, req_st_bytes=st, l2_rd_sectors=ld / 32, l2_wr_sectors=st / 32,
               dram_rd_bytes=dram_rd, dram_wr_bytes=dram_wr)
    return row


LAUNCHES = pd.DataFrame([
    _kernel(0, ["mt|op|0|aten.mm.default"], 3200, 1024, 3200, 1024),             # at the minimum
    _kernel(1, ["mt|op|1|aten._softmax.default"], 2048, 1024, 1024, 1024),       # two passes over the input
    _kernel(2, ["mt|op|1|aten._softmax.default"], 2048, 1024, 1024, 1024),
    _kernel(3, ["mt|op|2|aten._softmax.default"], 1024, 1024, 1024, 1024),       # one pass
    _kernel(4, ["mt|region|attn|3"], 8192, 2048, 2048, 2048),                     # 4x loads, caches absorb
    _kernel(5, [], 640, 640, 640, 640),                                           # no range: a stray kernel
])


@pytest.fixture
def run(tmp_path, monkeypatch):
    (tmp_path / "plan.json").write_text(json.dumps({"configs": CONFIGS}))
    (tmp_path / "profile.ncu-rep").write_bytes(b"stands in; kernel_table is replaced")
    monkeypatch.setattr(analyze, "kernel_table", lambda *_a, **_k: KernelTable(LAUNCHES.copy(), False))
    return tmp_path


def test_op_types_sorted_by_excess_with_efficiency_per_level(run):
    table = analyze.analyze_path(run, group_by="op")
    assert list(table["op"]) == ["attn", "aten._softmax.default", "aten.mm.default",
                                 "(outside any op or region)"]
    attn, softmax, mm, outside = table.to_dict("records")
    # softmax: 2 calls, 3 kernels; minimum 2 x (1024 + 1024); L1 moved 4096+1024 loads, 3072 stores
    assert (softmax["calls"], softmax["n_kernels"], softmax["time_ns"]) == (2, 3, 3000)
    assert (softmax["min_read_bytes"], softmax["min_write_bytes"], softmax["min_bytes"]) == (2048, 2048, 4096)
    assert softmax["excess_l1_bytes"] == 5120 + 3072 - 4096
    assert softmax["excess_dram_bytes"] == 3072 + 3072 - 4096
    assert softmax["excess_bytes"] == softmax["excess_l1_bytes"] == softmax["excess_l2_bytes"]
    assert softmax["eff_l1_ld"] == pytest.approx(2048 / 5120)
    assert softmax["eff_l1_st"] == pytest.approx(2048 / 3072)
    assert softmax["eff_dram"] == pytest.approx(4096 / 6144)
    assert softmax["worst_range"] == "mt|op|1|aten._softmax.default" and "2 kernels" in softmax["diagnosis"]
    assert attn["excess_bytes"] == 8192 + 2048 - 4096 and attn["excess_dram_bytes"] == 0
    assert attn["eff_l1_ld"] == pytest.approx(0.25) and attn["eff_dram"] == pytest.approx(1.0)
    assert (mm["excess_bytes"], mm["eff_l2"], mm["diagnosis"]) == (0, 1.0, "")
    assert math.isnan(outside["min_bytes"]) and math.isnan(outside["excess_bytes"])
    assert outside["worst_range"] == ""


def test_cli_group_by_op_json_and_table(run):
    res = CliRunner().invoke(app, ["analyze", str(run), "--group-by", "op", "--format", "json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert [r["op"] for r in rows[:2]] == ["attn", "aten._softmax.default"]
    assert rows[1]["excess_bytes"] == 4096 and isinstance(rows[1]["excess_bytes"], int)
    assert rows[-1]["excess_bytes"] is None
    res = CliRunner().invoke(app, ["analyze", str(run), "--group-by", "op", "--wide"])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[0].startswith("floor: GPU time ")  # memtraffic floor's summary first
    start = lines.index("") + 1  # then the table
    assert lines[start + 3].split()[:3] == ["aten._softmax.default", "2", "3"]
    assert "  attn (worst: call 3):" in res.stdout and "mt|" not in res.stdout


def test_unknown_group_by_is_a_usage_error(run):
    res = CliRunner().invoke(app, ["analyze", str(run), "--group-by", "layer"])
    assert res.exit_code == 2
    assert res.stderr == "error: unknown --group-by 'layer': use one of range, kernel, op\n"


def test_a_traced_programs_default_output_is_the_summary_then_the_worst_calls(run):
    from memtraffic.views.tables import op_calls_table

    table, _ = analyze.analyze_reports([run / "profile.ncu-rep"], json.loads((run / "plan.json").read_text()))
    text = op_calls_table(table, n=2)
    summary, _, calls = text.partition("the 2 calls with the most excess, of 5 (all: --all-calls")
    assert summary.splitlines()[0].split()[:2] == ["op", "calls"]
    # the region (8192 + 2048 L1 bytes against 4096) and softmax #1 (2 kernels) exceed most
    rows = [line for line in calls.splitlines() if line.startswith(("region", "aten"))]
    assert [r.split()[0:2] for r in rows[:2]] == [["region", "attn"], ["aten._softmax.default", "#1"]]
    assert "kernels k1, k2" in calls


def test_a_kernel_list_names_each_kernel_once_with_its_count():
    names = ["multi_tensor_apply_kernel"] * 52 + ["reduce_kernel", "multi_tensor_apply_kernel"]
    assert analyze.kernel_list(names) == "53 x multi_tensor_apply_kernel, reduce_kernel"


def test_a_per_op_efficiency_above_one_shows_the_call_that_explains_it(tmp_path, monkeypatch):
    configs = [_config(0, "aten.nll_loss_forward.default", 6400, 64)]
    configs[0]["min_note"] = "targets on the GPU not read (no device sync): counts every row, an upper bound"
    (tmp_path / "plan.json").write_text(json.dumps({"configs": configs}))
    (tmp_path / "profile.ncu-rep").write_bytes(b"stands in")
    launches = pd.DataFrame([_kernel(0, ["mt|op|0|aten.nll_loss_forward.default"], 640, 64, 640, 64)])
    monkeypatch.setattr(analyze, "kernel_table", lambda *_a, **_k: KernelTable(launches.copy(), False))
    (row,) = analyze.analyze_path(tmp_path, group_by="op").to_dict("records")
    assert math.isnan(row["eff_l1_ld"]) and row["no_efficiency"]["eff_l1_ld"] == "cached"  # 10x: not a result
    assert row["diagnosis"].startswith("below the minimum at L1 ld, L2, DRAM, DRAM rd: the minimum is an "
                                       "upper bound (targets on the GPU not read")


def test_a_first_look_names_the_op_types_whose_l1_excess_the_full_set_would_explain():
    """A committed --metrics traffic run of a transformer block (H100): with the counters that only the
    full set has blanked, as a first look (--metrics bytes) leaves them, the op types below 0.9 L1
    efficiency are named, largest L1 excess first; with them, none (the run already says why)."""
    from memtraffic.analysis.per_op import needs_full_look, summarize
    from memtraffic.api import analyze as analyze_run

    table = analyze_run("reports/h100/floor_eager_block")
    assert needs_full_look(table) == []
    first = table.assign(req_ld_bytes=math.nan, req_st_bytes=math.nan)
    named = needs_full_look(first)
    summary = summarize(first).set_index("op")
    low = summary[(summary["eff_l1_ld"] < 0.9) | (summary["eff_l1_st"] < 0.9)]
    assert set(named) == set(low.index) and 0 < len(named) <= 8
    assert list(summary.loc[named, "excess_l1_bytes"]) == sorted(summary.loc[named, "excess_l1_bytes"],
                                                                  reverse=True)
    assert needs_full_look(first, top=2) == named[:2]
