"""Reading a run from a GPU that lacks some counters: committed H100 runs with a chip's missing aliases
removed from the launch table (as a report from that GPU would lack them) still analyze, group, render
and plot; absent levels read n/a, efficiencies use what exists, the diagnosis fits the GPU.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import memtraffic.analysis.analyze as analysis
from memtraffic.ncu.chips import chip_metric_names
from memtraffic.ncu.kernel_table import KernelTable, kernel_table
from memtraffic.ncu.metrics import METRIC_SETS, resolve
from memtraffic.views.tables import render_results, results_table
from memtraffic.vocab import arch

REPO = Path(__file__).resolve().parents[2]
SUITE = REPO / "reports" / "h100" / "suite_4096x4096"
MATMUL = REPO / "reports" / "h100" / "matmul_4096x4096x4096"
MODEL = REPO / "reports" / "h100" / "profile_torch_model"
GPU_OF = {"gb20b": "NVIDIA GB10", "tu104": "Tesla T4", "ga102": "NVIDIA GeForce RTX 3080 Ti",
          "tu117": "NVIDIA GeForce GTX 1650"}


def missing_aliases(chip: str) -> list[str]:
    res = resolve(METRIC_SETS["roofline"], chip_metric_names(chip), arch.CHIPS[chip])
    return [r.alias for r in res.items if r.form is None]


def as_if_on(monkeypatch, chip: str) -> None:
    """Reports read as that chip's GPU would have written them: its missing aliases gone, its name."""

    def read(path, allow_partial=False):
        table = kernel_table(path, allow_partial=allow_partial)
        df = table.kernels.drop(columns=missing_aliases(chip)).assign(device=GPU_OF[chip])
        return KernelTable(df, table.source_counters)

    monkeypatch.setattr(analysis, "kernel_table", read)


def test_the_chips_lack_what_the_issue_says():
    assert missing_aliases("gb20b") == ["dram_rd_bytes", "dram_wr_bytes"]
    assert missing_aliases("ga102") == ["l1_ldgsts_bytes"]
    assert missing_aliases("tu104") == ["l1_ldgsts_bytes", "req_ldgsts_bytes", "tc_ops_bf16", "tc_ops_tf32"]


@pytest.mark.parametrize("chip", sorted(GPU_OF))
@pytest.mark.parametrize("group_by", ["range", "kernel"])
def test_a_suite_without_a_chips_counters_keeps_the_levels_it_has(monkeypatch, chip, group_by):
    h100 = analysis.analyze_path(SUITE, group_by=group_by)
    as_if_on(monkeypatch, chip)
    table = analysis.analyze_path(SUITE, group_by=group_by)
    assert len(table) == len(h100) and list(table.columns[:len(analysis.COLUMNS)]) == analysis.COLUMNS
    for column in ("l1_ld_bytes", "l1_st_bytes", "l2_rd_bytes", "eff_l1_ld", "eff_l2", "sector_eff_st"):
        assert table[column].equals(h100[column])
    text = results_table(table, group_by)
    dram = table["dram_rd_bytes"]
    if chip == "gb20b":
        assert dram.isna().all() and table["eff_dram"].isna().all() and table["bw_dram_Bps"].isna().all()
        header, _, first = text.splitlines()[1:4]
        assert header.split()[9:11] == ["DRAM", "rd+wr"] and header.split()[-4:-2] == ["eff", "DRAM"]
        assert first.split()[-8] == "n/a" and first.split()[-2] == "n/a"  # DRAM bytes, eff DRAM
        assert not any("DRAM" in d for d in table["diagnosis"])
    else:
        assert dram.equals(h100["dram_rd_bytes"]) and "n/a" not in text


def test_without_ldgsts_counters_the_requested_bytes_are_the_loads_alone(monkeypatch):
    as_if_on(monkeypatch, "tu104")
    table = analysis.analyze_path(SUITE)
    assert table["req_ldgsts_bytes"].isna().all() and table["l1_ldgsts_bytes"].isna().all()
    # The suite's softmax kernels issue no LDGSTS on the H100 either: requested bytes are the same.
    assert table["req_ld_bytes"].equals(analysis.analyze_path(SUITE)["req_ld_bytes"])


def test_no_tma_explanation_on_a_gpu_without_tma(monkeypatch):
    h100 = analysis.analyze_path(MATMUL)
    assert any("(TMA or other async copies)" in d for d in h100["diagnosis"])
    as_if_on(monkeypatch, "ga102")
    table = analysis.analyze_path(MATMUL)
    assert not any("TMA or" in d or "(TMA)" in d for d in table["diagnosis"])
    assert any("(async copies; ga102 has no TMA)" in d for d in table["diagnosis"])


@pytest.mark.parametrize("chip", ["gb20b", "ga102"])
def test_per_op_tables_of_a_traced_program(monkeypatch, chip):
    # Measured roofs (and the time notes they allow) exist for the H100 only: compare without them.
    monkeypatch.setattr(analysis, "find_roofs", lambda device: None)
    h100 = analysis.analyze_path(MODEL, group_by="op")
    as_if_on(monkeypatch, chip)
    table = analysis.analyze_path(MODEL, group_by="op")
    assert set(table["op"]) == set(h100["op"])
    lines = render_results(table, "table", group_by="op").splitlines()
    h100_lines = render_results(h100, "table", group_by="op").splitlines()
    if chip == "gb20b":
        assert table["dram_rd_bytes"].isna().all() and table["eff_dram"].isna().all()
        assert lines[0].split()[-2:] == ["eff", "DRAM"]  # no per-direction DRAM efficiency to show
        assert all(line.split()[-1] == "n/a" for line in lines[2:len(table) + 2])
    else:  # ga102 lacks only the informative L1 LDGSTS.ACCESS bytes: the same table
        assert lines == h100_lines


def test_the_roofline_names_a_level_it_cannot_draw(monkeypatch):
    from memtraffic.views.roofline import roofline_points

    as_if_on(monkeypatch, "gb20b")
    points = roofline_points(analysis.analyze_path(SUITE))
    assert set(points["level"]) == {"l1", "l2"}
    assert "DRAM: not measured on this GPU, no points" in points.attrs["notes"]
    assert all(math.isfinite(x) for x in points["intensity"])


def test_the_roofs_of_a_gpu_without_dram_counters_are_named():
    from memtraffic.ncu.chips import peak_names

    names, notes = peak_names("NVIDIA GB10")
    assert "dram__bytes.sum.peak_sustained" not in names and "lts__t_bytes.sum.peak_sustained" in names
    assert notes == ["DRAM roof: gb20b shares memory with the CPU; ncu has no DRAM byte counter on it"]
    assert peak_names("NVIDIA H100 80GB HBM3")[1] == [] and peak_names("Unknown GPU")[1] == []
