"""The committed H100 runs of a torch.compile'd training step (scripts/gpu_compiled.sh), read back: every
Triton launch Inductor generated has a minimum and names the aten ops it fused, cuBLAS calls keep their
aten op's range, and the timing-only run has times, no per-level bytes."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from memtraffic.analysis.analyze import analyze_path
from memtraffic.analysis.timing_only_table import copy_roof
from memtraffic.runfolder.timings import TIMINGS_FILE

REPO = Path(__file__).resolve().parents[2]
TIMING_ONLY = REPO / "reports" / "h100" / "timing_only_layernorm_mlp_adamw"


@pytest.fixture(scope="module")
def timed():
    return analyze_path(TIMING_ONLY)


def test_the_timing_only_run_says_what_it_is():
    run = json.loads((TIMING_ONLY / "run.json").read_text())
    assert run["timing_only"] is True and run["reports"] == [TIMINGS_FILE] and run["returncode"] == 0
    assert run["environment"]["gpu"] == "NVIDIA H100 80GB HBM3" and run["environment"]["ncu"] is None


def test_every_inductor_launch_has_a_time_a_minimum_and_its_fused_ops(timed):
    triton = timed[timed["range"].str.startswith("mt|triton|")]
    steps = 3  # examples/compiled_step.py --steps 3
    assert len(triton) > 0 and len(triton) % steps == 0
    for r in triton.to_dict("records"):
        assert r["n_kernels"] == 1 and r["kernels"] == [r["op"]]  # the launch's own kernel, by its name
        assert r["time_ns"] > 0 and r["min_bytes"] > 0 and math.isfinite(r["frac_copy_roof"])
        fused = r["params"]["fused_aten"]
        if r["op"].startswith("triton_for_"):  # the optimizer's foreach kernels: their module names none
            assert fused == [] and r["params"]["fused_aten_note"]
            continue
        # Inductor names a kernel after the ops it fused: the two sources of the names agree
        assert fused and all(op.removeprefix("aten.") in r["op"] for op in fused), (r["op"], fused)


def test_cublas_calls_keep_their_aten_ranges_beside_the_compiled_kernels(timed):
    mm = timed[timed["op"].isin(["aten.mm.out", "aten.addmm.out"])]
    assert len(mm) > 0 and (mm["n_kernels"] >= 1).all() and (mm["model_flops"] > 0).all()
    assert not timed["op"].isin(["aten.native_layer_norm.default", "aten.gelu.default"]).any()  # compiled


def test_no_level_is_measured_and_every_row_says_so(timed):
    for column in ("l1_ld_bytes", "l2_rd_bytes", "dram_rd_bytes", "eff_l1_ld", "eff_l2", "eff_dram"):
        assert timed[column].isna().all()
    assert all(f[0].rule.startswith("timing_only_") for f in timed["findings"])
    assert timed["diagnosis"].str.startswith("timing only").all()
    roof = copy_roof("NVIDIA H100 80GB HBM3")
    ranged = timed[timed["min_bytes"].notna()]
    assert ranged["frac_copy_roof"].tolist() == pytest.approx((ranged["bw_min_Bps"] / roof).tolist())


COMPILED = REPO / "reports" / "h100" / "compiled_layernorm_mlp_adamw"


@pytest.fixture(scope="module")
def compiled():
    return analyze_path(COMPILED)


def test_every_inductor_kernel_of_the_compiled_step_has_a_minimum_and_its_fused_ops(compiled):
    """Plain `profile` of the compiled step under ncu: one range per Inductor launch, its minimum from its
    buffers, the aten ops it fused; the second step's launches reuse the first step's counters."""
    plan = json.loads((COMPILED / "plan.json").read_text())
    triton = [c for c in plan["configs"] if c["range"].split("|")[1] in ("triton", "rep")]
    assert triton and len(triton) == len(plan["configs"])
    for c in triton:
        assert c["min_read_bytes"] + c["min_write_bytes"] > 0, c["range"]
        fused = c["params"]["fused_aten"]
        assert fused == [] if c["op"].startswith("triton_for_") else fused and all(
            op.startswith("aten.") for op in fused), c["range"]
    measured = compiled[compiled["reuses"] == ""]
    assert len(measured) and (measured["n_kernels"] == 1).all()
    assert (compiled["status"] == "ok").all()
    assert set(compiled.loc[compiled["reuses"] != "", "reuses"]) <= set(measured["range"])


def test_no_efficiency_of_the_compiled_step_is_above_one_without_its_reason(compiled):
    levels = ["eff_l1_ld", "eff_l1_st", "eff_l2", "eff_dram", "eff_dram_rd", "eff_dram_wr"]
    checked = 0
    for r in compiled.to_dict("records"):
        above = [k for k in levels if r.get(k) is not None and math.isfinite(r[k]) and r[k] > 1.05]
        if above:
            checked += 1
            assert "below the minimum" in r["diagnosis"], (r["range"], above, r["diagnosis"])
    assert checked > 0  # the run has such rows: L2 held the output when the kernel ended
