"""Reading range-replay results: the committed reports of scripts/gpu_range_replay_reports.sh
(H100, 2026-11-26)."""

from __future__ import annotations

from pathlib import Path

import pytest

from memtraffic.ncu.report import RANGE_KERNEL, read_report

FIXTURES = Path(__file__).resolve().parents[2] / "reports" / "h100" / "range_replay_adam"


@pytest.fixture(scope="module")
def both():
    return (read_report(FIXTURES / "range" / "profile.ncu-rep"),
            read_report(FIXTURES / "kernel" / "profile.ncu-rep"))


def test_a_range_result_is_one_row_per_op_range(both):
    ranged, kernels = both
    assert len(ranged) == 16 and len(kernels) == 19  # 3 of the 16 ops launched two kernels
    assert set(ranged["kernel"]) == {RANGE_KERNEL} and ranged["grid_size"].isna().all()
    assert set(ranged["range"]) == set(kernels["range"])
    assert (ranged["passes"] == 3).all() and (kernels["passes"] == 1).all()


def test_a_range_sums_its_kernels_l1_bytes_exactly(both):
    ranged, kernels = both
    summed = kernels.groupby("range")[["l1_ld_bytes", "l1_st_bytes"]].sum()
    joined = ranged.set_index("range")[["l1_ld_bytes", "l1_st_bytes"]].join(summed, rsuffix="_kernels")
    assert (joined["l1_ld_bytes"] == joined["l1_ld_bytes_kernels"]).all()
    assert (joined["l1_st_bytes"] == joined["l1_st_bytes_kernels"]).all()
    # the foreach Adam ops: one range each, L1 loads as the kernel replay measured them
    foreach = joined[joined.index.str.contains("_foreach_addcdiv_")]
    assert foreach["l1_ld_bytes"].iloc[0] == 201523200


def test_dram_reads_of_a_two_kernel_range_keep_what_l2_held_between_them(both):
    """ncu flushes the caches once per range: the second kernel of aten.mm reads the first's output from
    L2, where kernel replay (a flush before each kernel) read it from DRAM. One-kernel ranges agree."""
    ranged, kernels = both
    per_range = kernels.groupby("range").agg(dram=("dram_rd_bytes", "sum"), n=("kernel", "size"))
    joined = ranged.set_index("range")[["dram_rd_bytes"]].join(per_range)
    single = joined[joined["n"] == 1]
    assert ((single["dram_rd_bytes"] - single["dram"]).abs() <= 0.01 * single["dram"] + 16384).all()
    double = joined[joined["n"] == 2]
    assert (double["dram_rd_bytes"] < double["dram"]).all()


def test_range_time_is_the_range_on_the_gpu_not_its_kernels(both):
    """gpu__time_duration of a range spans its push to its pop: ~0.2-0.3 ms of ncu's range overhead for a
    kernel of a few microseconds (committed H100 reports)."""
    ranged, kernels = both
    kernel_time = kernels.groupby("range")["time"].sum()
    assert (ranged.set_index("range")["time"] > kernel_time.reindex(ranged["range"])).all()
    assert ranged["time"].min() > 200_000 > kernel_time.min()  # nanoseconds
