"""Each diagnosis rule on a committed report that triggers it: the rule applies to that row and says
exactly these sentences; diagnose() is the rules' sentences in RULES' order, joined with '; '."""

from __future__ import annotations

from typing import Any

import pytest

import memtraffic.analysis.analyze as analyze_module
from memtraffic.analysis.analyze import analyze_path
from memtraffic.analysis.findings import RULES, diagnose, findings

SEED = "reports/h100/seed_1048576x2_fp32"
NAIVE = "mt|softmax_naive|1048576x2|fp32|num_warps=4"
TILED = "mt|softmax_tiled|1048576x2|fp32|BLOCK_M=128"
L2_NOTE = "(cached before the kernel, not flushed)"

# rule, (run, group_by, --min-bytes, range, kernel or None), its sentences on that row
CASES: list[tuple[str, tuple[str, str, list[str] | None, str, str | None], list[str]]] = [
    ("role", ("reports/h100/long_rows_16384x131072", "kernel", None, "mt|softmax_split|16384x131072|fp32",
              "vectorized_elementwise_kernel"),
     ["helper kernel of its range (2 kernels): the range's minimum is counted on _softmax_split_kernel"]),
    ("spills", ("reports/h100/spills_softmax_naive_2048x16384", "range", None,
                "mt|softmax_naive|2048x16384|fp32|num_warps=1", None),
     ["spills at 64 registers a thread: 1.02 GB of local memory through L1 (loads 618.40 MB, stores "
      "401.60 MB, 3.8x the minimum)"]),
    ("lsu_bypass", ("reports/h100/matmul_4096x4096x4096", "range", None,
                    "mt|matmul_torch|4096x4096x4096|bf16", None),
     ["loads/stores bypass the LSU counters (TMA or other async copies): read the L2 and DRAM levels"]),
    ("sector_waste", (SEED, "range", None, NAIVE, None),
     ["loads and stores use 8 of every 32 bytes per sector: neighbouring threads should touch neighbouring "
      "addresses"]),
    ("redundant_requests", (SEED, "range", None, NAIVE, None),
     ["each input byte requested 4x (33.55 MB for a minimum of 8.39 MB): several warps or programs load the "
      "same data, or the kernel makes several passes"]),
    ("predicted_passes", ("reports/h100/split_8192x32768_bf16", "range", None,
                          "mt|softmax_online|8192x32768|bf16", None),
     ["each input byte loaded 2x (1.07 GB for a minimum of 536.87 MB), as the variant's model predicts: "
      "passes over memory its algorithm makes"]),
    ("kernel_passes", ("reports/h100/long_rows_16384x131072", "range", None,
                       "mt|softmax_split|16384x131072|fp32", None),
     ["2 kernels in this range: each is a pass over memory"]),
    ("caches_absorb", (SEED, "range", None, NAIVE, None),
     ["L1/L2 absorb the extra loads before DRAM (DRAM read efficiency 1.00), but time pays: the minimum's "
      "16.78 MB in 632.7 us is 26.52 GB/s"]),
    ("dram_excess", ("reports/h100/spills_softmax_naive_2048x16384", "range", None,
                     "mt|softmax_naive|2048x16384|fp32|num_warps=1", None), ["DRAM moves 4.6x the minimum"]),
    ("bound_below_minimum", ("reports/h100/profile_train_step", "range", None,
                             "mt|op|0|aten.embedding.default", None),
     ["below the minimum at DRAM: the minimum is an upper bound (index on the GPU not read (no device sync): "
      "assumes distinct indices, an upper bound)"]),
    ("l2_below_minimum", (SEED, "range", ["softmax_tiled=10MB:8MB"], TILED, None),
     ["below the minimum at L1 ld, L2, DRAM, DRAM rd: the call moved less than its minimum through L2, so "
      "the minimum over-counts it (a data-dependent op, an input used only in part, or data the op skips); "
      "read it as a bound this call beats"]),
    ("l1_loads_below_minimum", (SEED, "range", ["softmax_tiled=10MB:0"], TILED, None),
     ["L1 load bytes below the minimum (0.84x): loads that bypass the LSU path (TMA) are not in these "
      "counters"]),
    ("l1_stores_below_minimum", (SEED, "range", ["softmax_tiled=0:10MB"], TILED, None),
     ["L1 store bytes below the minimum (0.84x): stores that bypass the LSU path (TMA) are not in these "
      "counters"]),
    ("dram_reads_below_minimum", ("reports/h100/profile_full_train_step", "kernel", None,
                                  "mt|op|69|aten.nll_loss_backward.default", "vectorized_elementwise_kernel"),
     [f"DRAM reads below the minimum: part of the input was served from L2 {L2_NOTE}"]),
    ("dram_below_minimum", (SEED, "range", None, TILED, None),
     ["DRAM writes below the minimum: output still in L2 when the kernel ended"]),
    ("time", (SEED, "range", None, NAIVE, None),
     ["time 113x a copy of the minimum (5.6 us at the measured 3.00 TB/s): the bytes are at the minimum only "
      "from L2 on: L1 loads move 16x their minimum, and those requests take the time; the copy roof needs "
      "556.72 KB in flight (3.00 TB/s x 185 ns DRAM latency), 2.06 B for each of the 270,336 resident "
      "threads, whose load instructions ask 0.25 B a thread (33.55 MB over 4,194,304 warp requests)"]),
]


def _diagnosed(monkeypatch: pytest.MonkeyPatch, run: str, group_by: str, min_bytes: list[str] | None
               ) -> list[tuple[dict[str, Any], tuple[str, str, Any], str]]:
    """Each row analyze diagnoses, with the context it gives (bound, role, roofs) and the line it wrote."""
    seen = []

    def record(r: dict[str, Any], bound: str = "", role: str = "", roofs: Any = None) -> str:
        line = diagnose(r, bound, role, roofs)
        seen.append((r, (bound, role, roofs), line))
        return line

    monkeypatch.setattr(analyze_module, "diagnose", record)
    table = analyze_path(run, min_bytes=min_bytes, group_by=group_by)
    # the table's line is diagnose's (a run measured with --source adds its worst source line after it)
    assert all(cell.startswith(line) for cell, (_, _, line) in zip(table["diagnosis"], seen, strict=True))
    return seen


@pytest.mark.parametrize(("rule", "where", "said"), CASES, ids=[c[0] for c in CASES])
def test_each_rule_on_a_committed_report(monkeypatch, rule, where, said):
    run, group_by, min_bytes, range_, kernel = where
    rows = [(r, ctx) for r, ctx, _ in _diagnosed(monkeypatch, run, group_by, min_bytes)
            if r["range"] == range_ and (kernel is None or kernel in r["kernels"])]
    assert rows, f"{run}: no row of {range_}"
    r, (bound, role, roofs) = rows[0]  # the first (a range measured twice has two rows alike)
    assert dict(findings(r, bound, role, roofs))[rule] == said


def test_every_rule_has_a_case_and_a_unique_name():
    names = [rule.name for rule in RULES]
    assert len(set(names)) == len(names)
    assert [c[0] for c in CASES] == names  # in RULES' order, one each


def test_the_line_is_the_rules_sentences_in_order(monkeypatch):
    """The naive softmax of the seed run: five rules, their sentences joined in RULES' order."""
    [(r, ctx, line)] = [x for x in _diagnosed(monkeypatch, SEED, "range", None) if x[0]["range"] == NAIVE]
    names = [name for name, _ in findings(r, *ctx)]
    assert names == ["sector_waste", "redundant_requests", "caches_absorb", "dram_below_minimum", "time"]
    assert line == "; ".join(s for _, said in findings(r, *ctx) for s in said)
    assert line.startswith("loads and stores use 8 of every 32 bytes per sector: neighbouring threads should "
                           "touch neighbouring addresses; each input byte requested")


def test_a_row_no_rule_applies_to_says_nothing():
    assert findings({"range": "x"}) == [] and diagnose({"range": "x"}) == ""


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
