"""The committed H100 runs of a torch.compile'd training step (scripts/gpu_compiled.sh), read back: every
Triton launch Inductor generated has a minimum and names the aten ops it fused, cuBLAS calls keep their
aten op's range, and the timing-only run has times, no per-level bytes."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from memtraffic.analysis.analyze import analyze_path
from memtraffic.analysis.timings import NO_LEVELS, copy_roof
from memtraffic.core.timings import TIMINGS_FILE

REPO = Path(__file__).resolve().parent.parent
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
    assert timed["diagnosis"].str.startswith(NO_LEVELS).all()
    roof = copy_roof("NVIDIA H100 80GB HBM3")
    ranged = timed[timed["min_bytes"].notna()]
    assert ranged["frac_copy_roof"].tolist() == pytest.approx((ranged["bw_min_Bps"] / roof).tolist())
