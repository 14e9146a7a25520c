"""The committed `memtraffic profile` runs: memtraffic's numbers are the ones ncu itself prints.

reports/h100/profile_* were made by scripts/make_profile_reports.sh on an H100 (ncu 2025.3.1,
2026-11-23), which also saved `ncu --import R --page raw --csv --print-units base` beside each report
(ncu_raw.csv.gz).
Every kernel's counters as memtraffic reads them equal that print, and the analysis joins each kernel
to the op or region the program recorded, with the minimum the tracer computed from the tensors.
"""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path

import pytest

from memtraffic.analysis.analyze import analyze_path
from memtraffic.ncu.metrics import METRICS
from memtraffic.ncu.report import read_report

REPO = Path(__file__).resolve().parents[2]
RUNS = [REPO / "reports" / "h100" / name for name in ("profile_torch_model", "profile_cupy_region")]
# scripts/make_torch_ops_report.sh: examples/train_step.py's second step (until committed: skipped)
TRAIN_STEP = REPO / "reports" / "h100" / "profile_train_step"
RUNS += [TRAIN_STEP] if TRAIN_STEP.is_dir() else []
needs_train_step = pytest.mark.skipif(not TRAIN_STEP.is_dir(), reason="run scripts/make_torch_ops_report.sh "
                                      "on an H100 and commit reports/h100/profile_train_step")
# Counters memtraffic collects in every run (the traffic set), compared kernel by kernel.
ALIASES = ["time", "l1_ld_bytes", "l1_st_bytes", "l2_rd_sectors", "l2_wr_sectors", "dram_rd_bytes",
           "dram_wr_bytes", "req_ld_bytes", "req_st_bytes"]


def ncu_raw(run: Path) -> list[dict[str, str]]:
    """ncu's own rows: header, a units row, then one row per kernel launch in ID order."""
    with gzip.open(run / "ncu_raw.csv.gz", "rt", newline="") as f:
        rows = list(csv.reader(f))
    header, kernels = rows[0], rows[2:]
    return [dict(zip(header, r, strict=True)) for r in kernels]


def _number(text: str) -> float:
    return float(text.replace(",", ""))


@pytest.mark.parametrize("run", RUNS, ids=lambda p: p.name)
def test_every_counter_equals_what_ncu_prints(run):
    ours = read_report(run / "profile.ncu-rep").to_dict("records")
    theirs = ncu_raw(run)
    assert len(ours) == len(theirs) >= 8
    for k, (o, t) in enumerate(zip(ours, theirs, strict=True)):
        assert int(t["ID"]) == o["launch"] == k
        assert t["Kernel Name"].startswith(("void ", o["kernel"])) and o["kernel"] in t["Kernel Name"]
        for alias in ALIASES:
            assert o[alias] == _number(t[METRICS[alias].ncu]), (k, alias)


def test_torch_ops_join_each_kernel_to_its_op_with_the_tracers_minimum():
    run = RUNS[0]
    rows = {r["range"]: r for r in analyze_path(run).to_dict("records")}
    trace = {c["range"]: c for c in json.loads((run / "plan.json").read_text())["configs"]}
    # every profiled kernel ran inside a traced op's range
    assert rows and set(rows) <= set(trace)
    # examples/torch_model.py: x is 4096x1024 fp32; softmax reads and writes it once
    (softmax,) = [r for r in rows.values() if r["op"] == "aten._softmax.default"]
    assert softmax["min_read_bytes"] == softmax["min_write_bytes"] == 4096 * 1024 * 4
    # in-place relu_ reads and writes its 1024x4096 tensor once
    (relu,) = [r for r in rows.values() if r["op"] == "aten.relu_.default"]
    assert relu["min_read_bytes"] == relu["min_write_bytes"] == 4096 * 1024 * 4
    # the linear layer: addmm reads x (4096x1024), W (1024x1024) and the bias, writes 4096x1024
    (addmm,) = [r for r in rows.values() if r["op"] == "aten.addmm.default"]
    assert addmm["min_read_bytes"] == (4096 * 1024 + 1024 * 1024 + 1024) * 4
    assert addmm["model_flops"] == 2 * 4096 * 1024 * 1024
    # the measured bytes of each op's kernel are the report's (the same numbers ncu prints)
    raw = {int(t["ID"]): t for t in ncu_raw(run)}
    launches = read_report(run / "profile.ncu-rep")
    softmax_launch = launches[launches["range"] == softmax["range"]].iloc[0]
    assert softmax["l1_ld_bytes"] == _number(raw[int(softmax_launch["launch"])][METRICS["l1_ld_bytes"].ncu])


def test_regions_carry_their_minimum_and_sum_their_kernels():
    run = RUNS[1]
    rows = {r["op"]: r for r in analyze_path(run).to_dict("records") if r["op"]}
    size = 8192 * 1024 * 4  # examples/cupy_region.py: one fp32 array in, one out
    for name in ("softmax_elementwise", "softmax_rawkernel"):
        assert rows[name]["min_read_bytes"] == rows[name]["min_write_bytes"] == size
    # the "copy" region was recorded with its bytes, but CuPy copies a contiguous array with
    # cudaMemcpy, not a kernel, so ncu profiled nothing inside it and it has no row
    plan = {c["op"]: c for c in json.loads((run / "plan.json").read_text())["configs"]}
    assert plan["copy"]["min_read_bytes"] == plan["copy"]["min_write_bytes"] == size
    assert "copy" not in rows
    assert rows["softmax_rawkernel"]["n_kernels"] == 1
    assert rows["softmax_elementwise"]["n_kernels"] > 1  # max, subtract+exp, sum, divide: several passes
    assert rows["softmax_elementwise"]["eff_l1_ld"] < rows["softmax_rawkernel"]["eff_l1_ld"] <= 1.0


def test_roofline_draws_the_traced_ops_that_have_flops_and_names_the_others():
    from memtraffic.views.roofline import roofline_points

    points = roofline_points(analyze_path(RUNS[0]), levels=("dram",))
    assert set(points["op"]) == {"aten.addmm.default"}  # the only op with a FLOP formula here
    assert points.iloc[0]["flops"] == 2 * 4096 * 1024 * 1024
    assert any("aten._softmax.default: no model FLOPs, not drawn" in n for n in points.attrs["notes"])


@needs_train_step
def test_train_step_per_op_efficiencies_above_one_say_why():
    """Every efficiency above 1.05 that the tables show, of an op type or of one call, has its reason
    beside it, said once; a row with a diagnosis also explains DRAM rd+wr above the minimum (output
    left in L2), which the tables show only inside eff DRAM."""
    from memtraffic.vocab.units import ABOVE

    by_op = analyze_path(TRAIN_STEP, group_by="op").to_dict("records")
    by_call = analyze_path(TRAIN_STEP).to_dict("records")
    assert len(by_op) >= 10
    for r in by_op + by_call:
        shown = ["eff_l1_ld", "eff_l1_st", "eff_l2", "eff_dram_rd"] + (["eff_dram"] if r["diagnosis"] else [])
        if any((r[k] or 0) > ABOVE for k in shown):
            assert "below the minimum" in r["diagnosis"] or "bypass" in r["diagnosis"], r
        notes = r["diagnosis"].split("; ")
        assert len(notes) == len(set(notes)), r["diagnosis"]


@needs_train_step
def test_train_step_ops_carry_their_rules():
    """examples/train_step.py: batch 4, seq 128, width 256, vocab 4096; ids and targets on the GPU."""
    plan = json.loads((TRAIN_STEP / "plan.json").read_text())["configs"]
    run = json.loads((TRAIN_STEP / "run.json").read_text())
    assert run["traced_from"] == "profiler window"
    assert sum(c["op"] == "aten.embedding.default" for c in plan) == 1  # the warm-up step is not planned
    (emb,) = [c for c in plan if c["op"] == "aten.embedding.default"]
    # GPU ids are not read: every one of the 512 lookups counted as a distinct row, and said so
    assert emb["min_read_bytes"] == 512 * 256 * 4 + 512 * 8 and "upper bound" in emb["min_note"]
    (nll,) = [c for c in plan if c["op"] == "aten.nll_loss_forward.default"]
    assert nll["min_read_bytes"] == 512 * 4 + 512 * 8  # one logit per row, not the 512x4096 logits
    (nll_bwd,) = [c for c in plan if c["op"] == "aten.nll_loss_backward.default"]
    assert nll_bwd["min_write_bytes"] == 512 * 4096 * 4
