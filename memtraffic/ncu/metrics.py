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
    Metric("l1_ld_sectors", "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", "sector",
           "L1 global load sectors"),
    Metric("l1_st_sectors", "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum", "sector",
           "L1 global store sectors"),
    Metric("l1_ld_requests", "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", "request",
           "L1 global load requests"),
    Metric("l1_st_requests", "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum", "request",
           "L1 global store requests"),
    # Bytes the instructions asked for (useful bytes); over L1 bytes it is the sector efficiency.
    Metric("req_ld_bytes", "smsp__sass_data_bytes_mem_global_op_ld.sum", "byte",
           "bytes requested by global loads"),
    Metric("req_st_bytes", "smsp__sass_data_bytes_mem_global_op_st.sum", "byte",
           "bytes requested by global stores"),
    # cp.async (LDGSTS) global->shared copies, which Triton's pipelined loops use. l1tex's op_ld bytes above
    # already include them (H100, ncu 2025.3.1); the SASS op_ld bytes do not, so analyze adds
    # req_ldgsts_bytes to req_ld_bytes. l1_ldgsts_bytes (the LDGSTS.ACCESS part of op_ld) is informative.
    Metric("l1_ldgsts_bytes", "l1tex__t_bytes_pipe_lsu_mem_global_op_ldgsts_cache_access.sum", "byte",
           "L1 global bytes of LDGSTS (cp.async) that access L1"),
    Metric("req_ldgsts_bytes", "smsp__sass_data_bytes_mem_global_op_ldgsts.sum", "byte",
           "bytes requested by LDGSTS (cp.async) instructions"),
    # L2: sectors requested by L1 (tex unit), 32 B each.
    Metric("l2_rd_sectors", "lts__t_sectors_srcunit_tex_op_read.sum", "sector", "L2 read sectors from L1"),
    Metric("l2_wr_sectors", "lts__t_sectors_srcunit_tex_op_write.sum", "sector", "L2 write sectors from L1"),
    Metric("dram_rd_bytes", "dram__bytes_read.sum", "byte", "DRAM bytes read"),
    Metric("dram_wr_bytes", "dram__bytes_write.sum", "byte", "DRAM bytes written"),
    # Hardware-counted FP32 work (thread-level, predicated on). Special functions (exp, tanh) are not here.
    Metric("fadd", "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum", "inst", "FP32 adds"),
    Metric("fmul", "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum", "inst", "FP32 multiplies"),
    Metric("ffma", "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum", "inst", "FP32 fused multiply-adds"),
    # Half-precision CUDA-core work, counted per thread instruction (a packed HFMA2 is one instruction).
    Metric("hadd", "smsp__sass_thread_inst_executed_op_hadd_pred_on.sum", "inst", "FP16/BF16 adds"),
    Metric("hmul", "smsp__sass_thread_inst_executed_op_hmul_pred_on.sum", "inst", "FP16/BF16 multiplies"),
    Metric("hfma", "smsp__sass_thread_inst_executed_op_hfma_pred_on.sum", "inst",
           "FP16/BF16 fused multiply-adds"),
    # Tensor cores: sm__ops_path_tensor_* count math ops whatever the MMA instruction's shape (HMMA, or
    # Hopper's HGMMA with its variable N), which warp-instruction counters (sm__inst_executed_pipe_tensor*)
    # cannot: their FLOPs per instruction depend on the shape. FLOPs per op are checked on a GPU
    # (tests/test_ceilings.py::test_tensor_ops_per_matmul_flop), not assumed.
    Metric("tc_ops_fp16", "sm__ops_path_tensor_src_fp16.sum", "op", "tensor-core math ops, FP16 inputs"),
    Metric("tc_ops_bf16", "sm__ops_path_tensor_src_bf16_dst_fp32.sum", "op",
           "tensor-core math ops, BF16 inputs"),
    Metric("tc_ops_tf32", "sm__ops_path_tensor_src_tf32_dst_fp32.sum", "op",
           "tensor-core math ops, TF32 inputs"),
    # Theoretical peaks (ncu's own roofline sections use these): per-cycle peak x clock rate.
    # .sum.peak_sustained already sums over all units (SMs, L2 slices, DRAM channels).
    Metric("peak_dram_bytes_per_cycle", "dram__bytes.sum.peak_sustained", "byte/cycle",
           "DRAM peak bytes per cycle"),
    Metric("dram_cycles_per_s", "dram__cycles_elapsed.avg.per_second", "cycle/second", "DRAM clock"),
    Metric("peak_l2_bytes_per_cycle", "lts__t_bytes.sum.peak_sustained", "byte/cycle",
           "L2 peak bytes per cycle"),
    Metric("l2_cycles_per_s", "lts__cycles_elapsed.avg.per_second", "cycle/second", "L2 clock"),
    Metric("peak_l1_bytes_per_cycle", "l1tex__t_bytes.sum.peak_sustained", "byte/cycle",
           "L1 peak bytes per cycle"),
    Metric("l1_cycles_per_s", "l1tex__cycles_elapsed.avg.per_second", "cycle/second", "L1 clock"),
    Metric("peak_ffma_per_cycle", "sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained",
           "inst/cycle", "FP32 FMA peak thread instructions per cycle, all SMs"),
    Metric("sm_cycles_per_s", "sm__cycles_elapsed.avg.per_second", "cycle/second", "SM clock"),
]

METRICS: dict[str, Metric] = {m.alias: m for m in _TABLE}

METRIC_SETS: dict[str, list[str]] = {
    "traffic": [
        "time",
        "l1_ld_bytes", "l1_st_bytes", "l1_ld_sectors", "l1_st_sectors", "l1_ld_requests", "l1_st_requests",
        "req_ld_bytes", "req_st_bytes", "l1_ldgsts_bytes", "req_ldgsts_bytes",
        "l2_rd_sectors", "l2_wr_sectors",
        "dram_rd_bytes", "dram_wr_bytes",
    ],
    # The bytes of each level and nothing else: ncu collects them in one replay pass where 'traffic' takes
    # six (H100, ncu 2025.3.1, 2026-11-23: reports/h100/metric_passes; within 'traffic' the L1 request
    # counters cost two passes, LDGSTS one), so ncu's part of a config is ~4x shorter
    # (reports/h100/bytes_vs_traffic). Two ncu processes on two GPUs take turns only in the passes after
    # the first (reports/h200x2/pair_probe: one metric, one pass, no slowdown).
    "bytes": ["time", "l1_ld_bytes", "l1_st_bytes", "l2_rd_sectors", "l2_wr_sectors", "dram_rd_bytes",
              "dram_wr_bytes"],
    "flops": [
        "time", "fadd", "fmul", "ffma", "hadd", "hmul", "hfma", "tc_ops_fp16", "tc_ops_bf16", "tc_ops_tf32",
    ],
    # Constants of the device and its clocks, not of the kernel: any kernel's report yields the roofs.
    "peaks": [
        "peak_dram_bytes_per_cycle", "dram_cycles_per_s", "peak_l2_bytes_per_cycle", "l2_cycles_per_s",
        "peak_l1_bytes_per_cycle", "l1_cycles_per_s", "peak_ffma_per_cycle", "sm_cycles_per_s",
    ],
}
METRIC_SETS["roofline"] = METRIC_SETS["traffic"] + METRIC_SETS["flops"][1:]

# ncu name -> alias, for reading reports.
ALIAS_OF: dict[str, str] = {m.ncu: m.alias for m in _TABLE}
