"""`memtraffic floor` on the committed H100 runs: time against the floor per op type, the reason of each
recoverable time, the fused minimum beside the eager one and the DRAM bytes measured.

The floor runs (reports/h100/floor_{eager,compiled}_block: a transformer block's forward and backward,
made by scripts/gpu_floor.sh) carry tensor identities in their traces; older runs do not, and say so.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

import memtraffic
from memtraffic.analysis.floor import KINDS, floor_run, fused_minimum, row_floor
from memtraffic.cli import app

REPORTS = Path(__file__).resolve().parents[2] / "reports" / "h100"
EAGER, COMPILED = REPORTS / "floor_eager_block", REPORTS / "floor_compiled_block"
GELU = {way: REPORTS / f"floor_gelu_{way}" for way in ("eager", "triton", "compiled")}
runner = CliRunner()


def floor_json(run: Path) -> dict:
    result = runner.invoke(app, ["floor", str(run), "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


@pytest.mark.parametrize("run", [EAGER, COMPILED], ids=["eager", "compiled"])
def test_the_block_runs_meet_the_issue(run):
    f = floor_json(run)
    assert set(f) >= {"gpu_time_s", "floor_s", "by_op", "eager_min_bytes", "fused_min_bytes", "dram_bytes"}
    assert set(f["by_op"][0]) >= {"op", "time_s", "floor_s", "recoverable_s", "reason"}
    recoverable = sum(r["recoverable_s"] for r in f["by_op"])
    assert math.isclose(recoverable, f["gpu_time_s"] - f["floor_s"], rel_tol=0.01)
    for r in f["by_op"]:
        if r["time_s"] > 0.01 * f["gpu_time_s"] and r["recoverable_s"] > 0:
            assert r["reason"] and r["reason_kind"] in KINDS and r["reason_kind"] != "unknown", r
    assert f["fused_min_bytes"] <= f["eager_min_bytes"]
    assert f["gpu_time_s"] > f["floor_s"] > 0


def test_the_compiled_block_moves_at_least_its_fused_minimum_and_recovers_less_than_eager():
    eager, compiled = floor_json(EAGER), floor_json(COMPILED)
    assert compiled["dram_bytes"] >= compiled["fused_min_bytes"]
    assert compiled["gpu_time_s"] - compiled["floor_s"] < eager["gpu_time_s"] - eager["floor_s"]
    # the same program, the same region: inputs, parameters and gradients; only what fuses differs
    assert compiled["fused_min_bytes"] == pytest.approx(eager["fused_min_bytes"], rel=0.01)
    assert compiled["eager_min_bytes"] < eager["eager_min_bytes"]


def test_gelu_the_fused_minimum_is_one_read_and_one_write_whichever_way():
    mn = 4096 * 4096 * 4
    floors = {way: floor_run(run) for way, run in GELU.items()}
    assert {way: f.fused_min_bytes for way, f in floors.items()} == dict.fromkeys(GELU, 2 * mn)
    assert floors["eager"].eager_min_bytes == 18 * mn  # ten reads and eight writes of the tensor
    assert floors["eager"].dram_bytes > 6 * floors["triton"].dram_bytes  # each op a pass over memory


def test_runs_traced_before_identities_have_no_fused_minimum():
    f = memtraffic.floor(REPORTS / "profile_train_step")
    assert f.fused_min_bytes is None and "not known" in f.fused_note
    assert f.eager_min_bytes > 0 and f.dram_bytes > 0


# One committed run and op type per reason: the kind that holds most of its recoverable time.
REASONS = [
    ("spills_softmax_naive_2048x16384", "softmax", "spills"),
    ("compiled_layernorm_mlp_adamw", "triton_per_fused_sum_2", "launch"),
    ("floor_eager_block", "aten._scaled_dot_product_cudnn_attention_backward.default", "bytes"),
    ("floor_eager_block", "aten.mm.default", "compute"),
    ("profile_torch_model", "aten.sum.dim_IntList", "grid"),
    ("floor_eager_block", "aten.stack.default", "tail"),
    ("floor_compiled_block",
     "triton_red_fused_add_native_layer_norm_native_layer_norm_backward_view_6", "occupancy"),
    ("profile_torch_model", "aten.randn.default", "latency"),
    ("profile_cupy_region", "(outside any op or region)", "no minimum"),  # CuPy kernels beside regions
    ("timing_only_layernorm_mlp_adamw", "aten.randn.default", "timing only"),
]


@pytest.mark.parametrize(("run", "op", "kind"), REASONS, ids=[k for _, _, k in REASONS])
def test_each_reason_on_a_committed_run(run, op, kind):
    rows = {r.op: r for r in floor_run(REPORTS / run).by_op}
    assert rows[op].reason_kind == kind
    assert rows[op].recoverable_s > 0 and rows[op].reason


def test_a_floor_is_the_larger_of_the_copy_and_the_flops_at_their_roofs():
    roofs = {"dram_Bps": 3e12, "bf16_tc_flops": 7.5e14, "fp32_flops": 5e13}
    copy_bound = {"min_bytes": 3e6, "model_flops": 1e6, "dtype": "fp32"}
    flop_bound = {"min_bytes": 3e6, "model_flops": 1.5e9, "dtype": "bf16"}
    assert row_floor(copy_bound, roofs) == pytest.approx(1e-6)
    assert row_floor(flop_bound, roofs) == pytest.approx(2e-6)
    assert row_floor({"min_bytes": None}, roofs) is None


def test_the_table_has_a_summary_the_reasons_and_a_legend():
    result = runner.invoke(app, ["floor", str(EAGER)])
    assert result.exit_code == 0, result.output
    first = result.output.splitlines()[0]
    assert first.startswith("floor: GPU time ") and "recoverable" in first
    assert "minimum: eager " in result.output and ", fused " in result.output
    assert "recoverable = time - floor" in result.output  # the legend
    assert "aten.mm.default: compute-bound" in result.output


def test_a_bad_format_is_a_usage_error():
    result = runner.invoke(app, ["floor", str(EAGER), "--format", "csv"])
    assert result.exit_code == 2


JSON = st.recursive(st.none() | st.booleans() | st.integers(-5, 1 << 40) | st.floats() | st.text(max_size=3),
                    lambda inner: st.lists(inner, max_size=3), max_leaves=6)


@pytest.mark.slow
@given(st.lists(st.fixed_dictionaries({"reads": JSON, "writes": JSON, "min_read_bytes": st.integers(0, 99),
                                       "min_write_bytes": st.integers(0, 99)}), min_size=1, max_size=6))
def test_damaged_storage_pairs_are_left_out_never_fatal(records):
    fused = fused_minimum(records)
    assert fused is not None and fused.read_bytes >= 0 and fused.write_bytes >= 0
    assert fused.eager_bytes == sum(r["min_read_bytes"] + r["min_write_bytes"] for r in records)


def test_a_device_without_measured_roofs_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr("memtraffic.analysis.floor.find_ceilings", lambda device: None)
    f = floor_run(EAGER)
    assert f.floor_s == 0 and {r.reason_kind for r in f.by_op} == {"no roofs"}
    result = runner.invoke(app, ["floor", str(EAGER)])
    assert "no measured roofs for NVIDIA H100 80GB HBM3: every floor is 0" in result.output
    # the summary profile and analyze print shows no floor of 0 and no time recoverable from it
    summary = " ".join(f.summary().split())
    assert summary.startswith("floor: GPU time ")
    assert ("; no floor: no measured roofs for NVIDIA H100 80GB HBM3 (`memtraffic ceilings --refresh` "
            "measures them)") in summary
    assert "recoverable" not in summary and "hold" not in summary
