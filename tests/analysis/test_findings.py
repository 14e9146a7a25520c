"""Each efficiency check on a committed report that triggers it: the check finds its rule on that row,
said in exactly this sentence; diagnose() gives the checks' findings in CHECKS' order, as records."""

from __future__ import annotations

from functools import cache

import pandas as pd
import pytest

from memtraffic.analysis.analyze import analyze_path
from memtraffic.analysis.findings import CHECKS, RULES, diagnose, say
from memtraffic.vocab.finding import Subject

SEED = "reports/h100/seed_1048576x2_fp32"
NAIVE = "mt|softmax_naive|1048576x2|fp32|num_warps=4"
TILED = "mt|softmax_tiled|1048576x2|fp32|BLOCK_M=128"
LONG = ("reports/h100/long_rows_16384x131072", "kernel", None, "mt|softmax_split|16384x131072|fp32")
SPILLS = ("reports/h100/spills_softmax_naive_2048x16384", "range", None,
          "mt|softmax_naive|2048x16384|fp32|num_warps=1", None)
STEP = ("reports/h100/profile_full_train_step", "kernel", None, "mt|op|69|aten.nll_loss_backward.default",
        "vectorized_elementwise_kernel")

# check, rule, (run, group_by, --min-bytes, range, kernel or None), the rule's sentence on that row
CASES: list[tuple[str, str, tuple[str, str, tuple[str, ...] | None, str, str | None], str]] = [
    ("helper_kernel", "helper_kernel", (*LONG, "vectorized_elementwise_kernel"),
     "helper kernel of 2 in its range: the minimum is counted on _softmax_split_kernel"),
    ("main_kernel", "main_kernel", STEP,
     "main kernel of 2 in its range: the range's whole minimum is counted here"),
    ("spills", "spills", SPILLS,
     "spills 1.02 GB to local memory (3.8x the minimum): fewer live values or registers"),
    ("lsu_bypass", "lsu_bypass", ("reports/h100/matmul_4096x4096x4096", "range", None,
                                  "mt|matmul_torch|4096x4096x4096|bf16", None),
     "loads and stores bypass the L1 (LSU) counters (TMA or other async copies): judge by L2, DRAM and "
     "FLOPs"),
    ("sector_waste", "sector_waste", (SEED, "range", None, NAIVE, None),
     "loads and stores use 8 of every 32-byte sector: adjacent threads should touch adjacent addresses"),
    ("redundant_requests", "redundant_requests", (SEED, "range", None, NAIVE, None),
     "each input byte requested 4x: warps or programs repeat it, or the kernel makes passes"),
    ("predicted_passes", "predicted_passes", ("reports/h100/split_8192x32768_bf16", "range", None,
                                              "mt|softmax_online|8192x32768|bf16", None),
     "each input byte moves 2x at L1, as the variant's model predicts: passes it makes"),
    ("kernel_passes", "kernel_passes", ("reports/h100/long_rows_16384x131072", "range", None,
                                        "mt|softmax_split|16384x131072|fp32", None),
     "2 kernels, each a pass over memory: fusing them saves passes"),
    ("caches_absorb", "caches_absorb", ("reports/h100/split_8192x32768_bf16", "range", None,
                                        "mt|softmax_online|8192x32768|bf16", None),
     "L1 and L2 absorb the extra loads before DRAM, but time pays (2.88 TB/s of minimum bytes)"),
    ("dram_excess", "dram_excess", SPILLS, "DRAM moves 4.6x the minimum"),
    ("bound_below_minimum", "bound_below_minimum", ("reports/h100/profile_train_step", "range", None,
                                                    "mt|op|0|aten.embedding.default", None),
     "below the minimum at DRAM: the minimum is an upper bound (index on the GPU not read (no device sync): "
     "assumes distinct indices, an upper bound)"),
    ("l2_below_minimum", "l2_below_minimum", (SEED, "range", ("softmax_tiled=10MB:8MB",), TILED, None),
     "below the minimum at L1 ld, L2, DRAM, DRAM rd: the minimum over-counts this call, a bound it beats"),
    ("l1_loads_below_minimum", "l1_loads_below_minimum", (SEED, "range", ("softmax_tiled=10MB:0",), TILED,
                                                          None),
     "L1 loads 0.84x the minimum: loads through TMA are not in these counters"),
    ("l1_stores_below_minimum", "l1_stores_below_minimum", (SEED, "range", ("softmax_tiled=0:10MB",), TILED,
                                                            None),
     "L1 stores 0.84x the minimum: stores through TMA are not in these counters"),
    ("dram_reads_below_minimum", "dram_reads_below_minimum", STEP,
     "DRAM reads below the minimum: part of the input came from L2 (not flushed before)"),
    ("dram_writes_below_minimum", "dram_writes_below_minimum", (SEED, "range", None, TILED, None),
     "DRAM writes below the minimum: the output was still in L2 when the kernel ended"),
    ("time", "l1_requests", (SEED, "range", None, NAIVE, None),
     "time 113x a copy of the minimum: the L1 requests take it (16x the minimum)"),
]


@cache
def _table(run: str, group_by: str, min_bytes: tuple[str, ...] | None) -> pd.DataFrame:
    return analyze_path(run, min_bytes=list(min_bytes) if min_bytes else None, group_by=group_by)


def _row(run: str, group_by: str, min_bytes: tuple[str, ...] | None, range_: str, kernel: str | None
         ) -> dict:
    rows = [r for r in _table(run, group_by, min_bytes).to_dict("records")
            if r["range"] == range_ and (kernel is None or kernel in r["kernels"])]
    assert rows, f"{run}: no row of {range_}"
    return rows[0]  # the first (a range measured twice has two rows alike)


@pytest.mark.parametrize(("check", "rule", "where", "said"), CASES, ids=[c[1] for c in CASES])
def test_each_check_on_a_committed_report(check, rule, where, said):
    r = _row(*where)
    found = [f for f in r["findings"] if f.rule == rule]
    assert [say(f) for f in found] == [said]
    assert RULES[rule].kind in ("efficiency", "time")
    assert found[0].subject.label() and "mt|" not in found[0].subject.label()


def test_every_check_has_a_case():
    """Each efficiency rule with a check has a case on a committed report (the time rules' own file tests
    theirs), but DRAM below the minimum without per-direction counters, which no committed run has."""
    assert set(CHECKS) == {c[0] for c in CASES} - {"time"} | {"dram_below_minimum"}
    assert all(rule.kind == "efficiency" and rule.find is not None for rule in CHECKS.values())


def test_dram_below_the_minimum_without_per_direction_counters():
    r = {"eff_dram": 2.0, "min_bytes": 2e6, "dram_rd_bytes": 6e5, "dram_wr_bytes": 4e5}
    [found] = diagnose(r)
    assert found.rule == "dram_below_minimum" and found.evidence["dram_bytes"] == 1e6
    assert say(found) == "DRAM below the minimum: input served from L2, or output still in L2 at the end"


def test_the_findings_are_the_checks_in_order_with_their_numbers():
    """The naive softmax of the seed run: four findings, in CHECKS' order, each with the numbers it rests
    on; the L1 amplification is the sector amplification times the requests per useful byte."""
    r = _row(SEED, "range", None, NAIVE, None)
    assert [f.rule for f in r["findings"]] == ["sector_waste", "redundant_requests",
                                               "dram_writes_below_minimum", "l1_requests"]
    assert r["findings"][0].subject == Subject(run="seed_1048576x2_fp32",
                                               config="softmax_naive 1048576x2 fp32 num_warps=4",
                                               kernel="_softmax_naive_kernel")
    requested = r["findings"][1].evidence
    assert requested["sector_x"] * requested["requested_x"] == pytest.approx(requested["l1_x"], rel=1e-3)
    assert (requested["sector_x"], requested["requested_x"]) == (4.0, 4.0)
    assert r["diagnosis"] == "; ".join(say(f) for f in r["findings"])


def test_a_row_no_check_applies_to_finds_nothing():
    assert diagnose({"range": "x"}) == []


def test_needs_full_set_leaves_out_what_the_model_predicts():
    """The second pass of --metrics auto: rows below 0.9 L1 efficiency, unless their L1 bytes are the
    variant's predicted traffic (within 1%) in each direction below 0.9; unknown efficiencies never."""
    import pandas as pd

    from memtraffic.analysis.findings import needs_full_set

    nan = float("nan")
    rows = pd.DataFrame([
        # eff_l1_ld, eff_l1_st, l1_ld, l1_st, pred_rd, pred_wr
        (0.33, 1.0, 300.0, 100.0, 300.0, 100.0),  # loads 3x, as predicted: explained
        (0.33, 1.0, 300.0, 100.0, 297.5, nan),  # within 1% of the prediction
        (0.33, 1.0, 300.0, 100.0, 290.0, 100.0),  # 3.4% off the prediction: the sectors may say why
        (0.33, 1.0, 300.0, 100.0, nan, nan),  # no model prediction
        (0.33, 0.5, 300.0, 200.0, 300.0, 100.0),  # loads predicted, stores not
        (1.0, 1.0, 100.0, 100.0, nan, nan),  # at the minimum
        (nan, nan, nan, nan, nan, nan),  # unknown
    ], columns=["eff_l1_ld", "eff_l1_st", "l1_ld_bytes", "l1_st_bytes", "pred_read_bytes",
                "pred_write_bytes"])
    assert needs_full_set(rows).tolist() == [False, False, True, True, True, False, False]
    assert needs_full_set(rows.drop(columns=["pred_read_bytes", "pred_write_bytes"])).tolist() == [
        True, True, True, True, True, False, False]
