"""The ONE table of ncu metric names. Everything else in memtraffic uses the short aliases.

Units are as ncu reports them. Metric sets name the aliases collected together; `traffic` is the
default of `memtraffic measure`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    alias: str
    ncu: str
    unit: str
    description: str


_TABLE = [
    Metric("time", "gpu__time_duration.sum", "ns", "kernel duration"),
    # L1/LSU: what the global load/store instructions moved through L1 (sector granularity, 32 B).
    Metric("l1_ld_bytes", "l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum", "byte", "L1 global load bytes"),
    Metric("l1_st_bytes", "l1tex__t_bytes_pipe_lsu_mem_global_op_st.sum", "byte", "L1 global store bytes"),
    Metric("l1_ld_sectors", "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", "sector", "L1 global load sectors"),
    Metric("l1_st_sectors", "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum", "sector", "L1 global store sectors"),
    Metric("l1_ld_requests", "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", "request", "L1 global load requests"),
    Metric("l1_st_requests", "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum", "request", "L1 global store requests"),
    # Bytes the instructions asked for (useful bytes); over L1 bytes it is the sector efficiency.
    Metric("req_ld_bytes", "smsp__sass_data_bytes_mem_global_op_ld.sum", "byte", "bytes requested by global loads"),
    Metric("req_st_bytes", "smsp__sass_data_bytes_mem_global_op_st.sum", "byte", "bytes requested by global stores"),
    # L2: sectors requested by L1 (tex unit), 32 B each.
    Metric("l2_rd_sectors", "lts__t_sectors_srcunit_tex_op_read.sum", "sector", "L2 read sectors from L1"),
    Metric("l2_wr_sectors", "lts__t_sectors_srcunit_tex_op_write.sum", "sector", "L2 write sectors from L1"),
    Metric("dram_rd_bytes", "dram__bytes_read.sum", "byte", "DRAM bytes read"),
    Metric("dram_wr_bytes", "dram__bytes_write.sum", "byte", "DRAM bytes written"),
    # Hardware-counted FP32 work (thread-level, predicated on). Special functions (exp, tanh) are not here.
    Metric("fadd", "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum", "inst", "FP32 adds"),
    Metric("fmul", "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum", "inst", "FP32 multiplies"),
    Metric("ffma", "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum", "inst", "FP32 fused multiply-adds"),
]

METRICS: dict[str, Metric] = {m.alias: m for m in _TABLE}

METRIC_SETS: dict[str, list[str]] = {
    "traffic": [
        "time",
        "l1_ld_bytes", "l1_st_bytes", "l1_ld_sectors", "l1_st_sectors", "l1_ld_requests", "l1_st_requests",
        "req_ld_bytes", "req_st_bytes",
        "l2_rd_sectors", "l2_wr_sectors",
        "dram_rd_bytes", "dram_wr_bytes",
    ],
    "flops": ["time", "fadd", "fmul", "ffma"],
}
METRIC_SETS["roofline"] = METRIC_SETS["traffic"] + ["fadd", "fmul", "ffma"]

# ncu name -> alias, for reading reports.
ALIAS_OF: dict[str, str] = {m.ncu: m.alias for m in _TABLE}
