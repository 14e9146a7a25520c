"""A row of the analyzed table (analysis.analyze): its columns, in table order, each with its type.

`Row` is the one place the columns are named: the table's column list (COLUMNS) is read from it, and every
reader of a row (findings, diff, floor, the tables and the HTML report) reads these typed keys. A number
that was not measured, or cannot be computed, is NaN (pandas' missing number), never absent.
Roofline figures, HTML reports and saved results.json files read the columns by name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict, cast

if TYPE_CHECKING:
    import pandas as pd

    from memtraffic.vocab.finding import Finding


class Analyzed(TypedDict):
    """The columns analyze computes (the table's first part)."""

    # What the row is: the run, its NVTX range ('' for a kernel outside every range), the config that ran
    # there ('' where the plan does not name the range), its kernels in launch order and the GPU.
    run: str
    range: str
    variant: str
    op: str
    shape: str  # '4096x4096'
    dtype: str
    params: dict[str, object]  # the variant's parameters, as the plan recorded them
    kernels: list[str]
    n_kernels: int
    device: str
    # Kernel time (ns; the sum of the range's kernels) and the bytes each level moved (L1: global loads and
    # stores through the LSU; L2: sectors from L1 x 32; DRAM), and the bytes the load and store instructions
    # asked for (with cp.async copies on the load side).
    time_ns: float
    l1_ld_bytes: float
    l1_st_bytes: float
    l2_rd_bytes: float
    l2_wr_bytes: float
    dram_rd_bytes: float
    dram_wr_bytes: float
    req_ld_bytes: float
    req_st_bytes: float
    # The minimum the op must read and write (op model, trace or --min-bytes).
    min_read_bytes: float
    min_write_bytes: float
    # Efficiency per level (minimum / moved; 1.00 is ideal) and amplification (its inverse); NaN where
    # either is unknown or the efficiency is not a result (no_efficiency says why).
    eff_l1_ld: float
    eff_l1_st: float
    eff_l2: float
    eff_dram: float
    amp_l1_ld: float
    amp_l1_st: float
    amp_l2: float
    amp_dram: float
    # Sector efficiency (bytes asked for / bytes L1 moved) and bandwidths (B/s) of the minimum and of DRAM.
    sector_eff_ld: float
    sector_eff_st: float
    bw_min_Bps: float
    bw_dram_Bps: float
    # FP32 instructions executed, the FLOPs they make (an FMA is two) and the op model's FLOPs.
    fadd: float
    fmul: float
    ffma: float
    hw_flops: float
    model_flops: float
    # The bytes the variant's own model predicts it moves at L1.
    pred_read_bytes: float
    pred_write_bytes: float
    # The findings' sentences in one line, and the findings.
    diagnosis: str
    findings: list[Finding]
    # The whole minimum, DRAM efficiency per direction, ncu's replay passes (NaN for a planned config with
    # no kernel), the report the row comes from, and its status (analyze.STATUSES).
    min_bytes: float
    eff_dram_rd: float
    eff_dram_wr: float
    passes: float
    report: str
    status: str
    # Each kernel's 'GRIDxBLOCK' (blocks x threads a block) in launch order: what the config launched (diff
    # pairs configs by it when their parameters are spelled differently).
    launch_dims: list[str]
    # Local-memory (spill) bytes at L1.
    local_ld_bytes: float
    local_st_bytes: float
    # The launch of the range's longest kernel: grid and block (None or NaN where the report lacks them),
    # registers, shared memory, waves, SMs, theoretical occupancy and the blocks per SM each resource allows.
    grid_size: float | None
    block_size: float | None
    registers: float
    shared_mem_per_block: float
    waves: float
    sm_count: float
    occupancy_pct: float
    limit_registers: float
    limit_shared_mem: float
    limit_blocks: float
    limit_warps: float
    # The time over a copy of the minimum at the measured copy roof (NaN without roofs or minimum).
    time_vs_copy: float
    # Launches that are not the program's work (autotuning, its cache flushes, launches outside every range
    # of a traced program; analysis.outside), left out of readable tables, and their kind ('' for work).
    outside_program: bool
    outside_kind: str
    # Where the time comes from (runfolder.timings: ncu's kernel replay, the kernel timer); NaN for a
    # planned config with no kernel.
    time_source: str | float
    # The efficiency columns left NaN because they are not results, each with why
    # (analysis.findings.NOT_A_RESULT).
    no_efficiency: dict[str, str]


class Counters(TypedDict):
    """The report's other metric aliases (ncu.metrics.METRICS, in its order), summed over a range's kernels
    where they are counts: the table's second part. NaN where the report did not collect one."""

    l1_ld_sectors: float
    l1_st_sectors: float
    l1_ld_requests: float
    l1_st_requests: float
    l1_ldgsts_bytes: float
    req_ldgsts_bytes: float
    l2_rd_sectors: float
    l2_wr_sectors: float
    hadd: float
    hmul: float
    hfma: float
    tc_ops_fp16: float
    tc_ops_bf16: float
    tc_ops_tf32: float
    l1_local_ld_bytes: float
    l1_local_st_bytes: float
    warps_active_pct: float
    peak_dram_bytes_per_cycle: float
    dram_cycles_per_s: float
    peak_l2_bytes_per_cycle: float
    l2_cycles_per_s: float
    peak_l1_bytes_per_cycle: float
    l1_cycles_per_s: float
    peak_ffma_per_cycle: float
    sm_cycles_per_s: float


class Row(Analyzed, Counters):
    """A row of the analyzed table: Analyzed's columns, Counters', then the reuse column."""

    # The range whose counters the row reuses (a repeat under profile --distinct), '' if measured.
    reuses: str


class TimingOnlyRow(Row):
    """A row of a timing-only run's table (analysis.timing_only_table.mark): Row, then its copy roof."""

    timing_only: bool
    copy_roof_Bps: float  # the measured device-to-device copy bandwidth of the run's GPU (NaN unknown)
    frac_copy_roof: float  # bw_min_Bps / copy_roof_Bps


COLUMNS: list[str] = list(Row.__annotations__)  # the table's columns, in order
ANALYZED: list[str] = list(Analyzed.__annotations__)  # the columns analyze computes (COLUMNS' first part)
TIMING_ONLY: list[str] = [c for c in TimingOnlyRow.__annotations__ if c not in Row.__annotations__]


def row_dicts(df: pd.DataFrame) -> list[Row]:
    """The analyzed table's rows, column -> value. pandas gives plain dicts; the table's columns are Row's
    (tests/analysis/test_row.py holds them to it on committed runs), so this is the one place they are
    taken as Rows."""
    return cast("list[Row]", frame_rows(df))


def frame_rows(df: pd.DataFrame) -> list[dict[str, object]]:
    """A table's rows (a per-op summary, a saved table), column -> value: its columns are names."""
    return cast("list[dict[str, object]]", df.to_dict("records"))
