"""The ONE table of ncu metric names. Everything else in memtraffic uses the short aliases.

Units are as ncu reports them. Metric sets name the aliases collected together; `memtraffic measure`'s
default (--metrics auto) is `bytes` for every config, then `traffic` for those whose first look needs it.

Each alias has the H100's (gh100) ncu name, and, where other chips name the counter differently, exact
equivalents tried in order: another name or a sum of counters (every chip ncu 2025.3.1 knows has the
byte counters where it has the sector ones, so no alias needs sectors x 32). `resolve` picks, for one
chip's metric list, the first form the chip has; an alias no form fits is not measured there and gets a
note saying why (memtraffic.vocab.arch knows the chip). A report is read back through the same forms.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from memtraffic.vocab.arch import Chip
from memtraffic.vocab.finding import GOOD


@dataclass(frozen=True)
class Form:
    """An alias's value on a chip: the sum of these ncu names, times scale."""

    names: tuple[str, ...]
    scale: float = 1.0

    def __str__(self) -> str:
        text = " + ".join(self.names)
        return f"{text} x {self.scale:g}" if self.scale != 1 else text


@dataclass(frozen=True)
class Metric:
    alias: str
    ncu: str  # the name on gh100, where every committed run was measured
    unit: str
    description: str
    others: tuple[Form, ...] = ()  # exact equivalents on chips that lack `ncu`, in order of preference
    topic: str = ""  # what a note says is not measured ("DRAM bytes"); the description when empty

    @property
    def forms(self) -> tuple[Form, ...]:
        return (Form((self.ncu,)), *self.others)


_TABLE = [
    Metric("time", "gpu__time_duration.sum", "ns", "kernel duration"),
    # L1/LSU: what the global load/store instructions moved through L1 (sector granularity, 32 B).
    Metric("l1_ld_bytes", "l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum", "byte", "L1 global load bytes",
           (), "L1 load bytes"),
    Metric("l1_st_bytes", "l1tex__t_bytes_pipe_lsu_mem_global_op_st.sum", "byte", "L1 global store bytes",
           (), "L1 store bytes"),
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
    # Turing, Ampere and Ada have no l1tex counter of LDGSTS.ACCESS (ncu 2025.3.1's lists); Turing has no
    # LDGSTS at all.
    Metric("l1_ldgsts_bytes", "l1tex__t_bytes_pipe_lsu_mem_global_op_ldgsts_cache_access.sum", "byte",
           "L1 global bytes of LDGSTS (cp.async) that access L1",
           (), "L1 bytes of LDGSTS.ACCESS (cp.async through L1)"),
    Metric("req_ldgsts_bytes", "smsp__sass_data_bytes_mem_global_op_ldgsts.sum", "byte",
           "bytes requested by LDGSTS (cp.async) instructions", (), "bytes requested by LDGSTS (cp.async)"),
    # L2: sectors requested by L1 (tex unit), 32 B each.
    Metric("l2_rd_sectors", "lts__t_sectors_srcunit_tex_op_read.sum", "sector", "L2 read sectors from L1"),
    Metric("l2_wr_sectors", "lts__t_sectors_srcunit_tex_op_write.sum", "sector", "L2 write sectors from L1"),
    # RTX 50xx (gb20x) name DRAM bytes dram__bytes_op_read/write; the unified-memory chips have none.
    Metric("dram_rd_bytes", "dram__bytes_read.sum", "byte", "DRAM bytes read",
           (Form(("dram__bytes_op_read.sum",)),), "DRAM bytes"),
    Metric("dram_wr_bytes", "dram__bytes_write.sum", "byte", "DRAM bytes written",
           (Form(("dram__bytes_op_write.sum",)),), "DRAM bytes"),
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
    # (tests/probes/test_roof_probes.py::test_tensor_ops_per_matmul_flop), not assumed.
    # Ampere, Ada and Blackwell split FP16 inputs by accumulator (dst_fp16 + dst_fp32); Turing counts FP16
    # with an FP32 accumulator in src_fp16_bf16_tf32_dst_fp32, which is FP16 alone there (Turing's tensor
    # cores take no BF16 or TF32).
    Metric("tc_ops_fp16", "sm__ops_path_tensor_src_fp16.sum", "op", "tensor-core math ops, FP16 inputs",
           (Form(("sm__ops_path_tensor_src_fp16_dst_fp16.sum", "sm__ops_path_tensor_src_fp16_dst_fp32.sum")),
            Form(("sm__ops_path_tensor_src_fp16_dst_fp16.sum",
                  "sm__ops_path_tensor_src_fp16_bf16_tf32_dst_fp32.sum"))),
           "tensor-core FP16 ops"),
    Metric("tc_ops_bf16", "sm__ops_path_tensor_src_bf16_dst_fp32.sum", "op",
           "tensor-core math ops, BF16 inputs", (), "tensor-core BF16 ops"),
    Metric("tc_ops_tf32", "sm__ops_path_tensor_src_tf32_dst_fp32.sum", "op",
           "tensor-core math ops, TF32 inputs", (), "tensor-core TF32 ops"),
    # Local memory (register spills, per-thread arrays indexed at run time): what local loads and stores
    # moved through L1, beside the global bytes above. Never compulsory: analyze counts them as excess
    # against the minimum. The part that misses L1 is inside the L2 and DRAM bytes (those counters do not
    # split local from global).
    Metric("l1_local_ld_bytes", "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum", "byte",
           "L1 local-memory load bytes (spills)", (), "L1 local-memory bytes"),
    Metric("l1_local_st_bytes", "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum", "byte",
           "L1 local-memory store bytes (spills)", (), "L1 local-memory bytes"),
    # Achieved occupancy: warps resident per active cycle, % of the SM's maximum. The theoretical
    # occupancy and what limits it are launch statistics (LAUNCH_STATS below), recorded for free.
    Metric("warps_active_pct", "sm__warps_active.avg.pct_of_peak_sustained_active", "%",
           "achieved occupancy (active warps, % of the maximum per SM)"),
    # Theoretical peaks (ncu's own roofline sections use these): per-cycle peak x clock rate.
    # .sum.peak_sustained already sums over all units (SMs, L2 slices, DRAM channels).
    Metric("peak_dram_bytes_per_cycle", "dram__bytes.sum.peak_sustained", "byte/cycle",
           "DRAM peak bytes per cycle", (), "DRAM roof"),
    Metric("dram_cycles_per_s", "dram__cycles_elapsed.avg.per_second", "cycle/second", "DRAM clock", (),
           "DRAM roof"),
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

@dataclass(frozen=True)
class MetricSet:
    """Aliases collected together, and the line --metrics help and `memtraffic metrics` say of them."""

    name: str
    aliases: list[str]
    description: str


_TRAFFIC = [
    "time",
    "l1_ld_bytes", "l1_st_bytes", "l1_ld_sectors", "l1_st_sectors", "l1_ld_requests", "l1_st_requests",
    "req_ld_bytes", "req_st_bytes", "l1_ldgsts_bytes", "req_ldgsts_bytes",
    "l2_rd_sectors", "l2_wr_sectors",
    "dram_rd_bytes", "dram_wr_bytes",
]
_FLOPS = ["time", "fadd", "fmul", "ffma", "hadd", "hmul", "hfma", "tc_ops_fp16", "tc_ops_bf16", "tc_ops_tf32"]

# The ONE table of metric sets: a new set is one entry here (and a test in tests/ncu/test_chips.py).
SETS: list[MetricSet] = [
    MetricSet("traffic", _TRAFFIC, "bytes, sectors and requests per level, and the bytes the instructions "
              "asked for (six replay passes a kernel; measure's default measures it again where a first look "
              "needs it)"),
    # The bytes of each level and nothing else: ncu collects them in one replay pass where 'traffic' takes
    # six (H100, ncu 2025.3.1, 2026-11-23: reports/h100/metric_passes; within 'traffic' the L1 request
    # counters cost two passes, LDGSTS one), so ncu's part of a config is ~4x shorter
    # (reports/h100/bytes_vs_traffic). Two ncu processes on two GPUs take turns only in the passes after
    # the first (reports/h200x2/pair_probe: one metric, one pass, no slowdown).
    MetricSet("bytes", ["time", "l1_ld_bytes", "l1_st_bytes", "l2_rd_sectors", "l2_wr_sectors",
                        "dram_rd_bytes", "dram_wr_bytes"],
              "L1, L2 and DRAM bytes only, no request counters (one replay pass a kernel: the first look of "
              "profile and measure; for large sweeps and --gpus)"),
    # Why time sits above a copy of the minimum when bytes do not: spills and achieved occupancy. A set of
    # its own: beside 'traffic' or 'bytes' it costs replay passes of its own (H100, ncu 2025.3.1,
    # 2026-11-25: reports/h100/spills_passes, run.json 'passes'; tests/analysis/test_time_notes.py
    # reads them).
    MetricSet("spills", ["time", "l1_local_ld_bytes", "l1_local_st_bytes", "warps_active_pct"],
              "local-memory (spill) bytes through L1 and achieved occupancy"),
    MetricSet("flops", _FLOPS, "FP32 and FP16/BF16 instructions and tensor-core ops"),
    # Constants of the device and its clocks, not of the kernel: any kernel's report yields the roofs.
    MetricSet("peaks", ["peak_dram_bytes_per_cycle", "dram_cycles_per_s", "peak_l2_bytes_per_cycle",
                        "l2_cycles_per_s", "peak_l1_bytes_per_cycle", "l1_cycles_per_s",
                        "peak_ffma_per_cycle", "sm_cycles_per_s"],
              "the device's theoretical peaks per cycle and its clocks (for the roofs)"),
    MetricSet("roofline", _TRAFFIC + _FLOPS[1:], "traffic and flops together"),
]
METRIC_SETS: dict[str, list[str]] = {s.name: s.aliases for s in SETS}

# A first look measures the one-pass set: one replay pass a kernel against six for 'traffic' (a GPT-2
# step on an H100, 2026-11-26: 30.6 s against 57.3 s, the program alone 15.5 s; reports/h100/speed).
FIRST_LOOK = "bytes"
# The set that says why bytes exceed the minimum (sectors, requests, bytes the instructions asked for).
FULL_LOOK = "traffic"
# --metrics auto (measure's default): a first look with FIRST_LOOK for every config, then a second pass with
# FULL_LOOK for the configs whose first look it leaves unexplained: analysis.findings.needs_full_set picks
# them (analysis.first_look.remeasure), by the rule SECOND_PASS_RULE says.
AUTO = "auto"
SECOND_PASS_RULE = (f"L1 load or store efficiency below {GOOD} in the first look, not as the variant's model "
                    f"predicts: {FULL_LOOK} tells why")


@dataclass(frozen=True)
class Remeasure:
    """The configs a first look leaves to the second pass of --metrics auto: range -> its first look's L1
    load and store efficiencies (None where unknown), the launches the first look profiled per range (a
    config counts as measured whole again with at least as many), and the rule that picked them."""

    why: Mapping[str, tuple[float | None, float | None]]
    launches: Mapping[str, int]
    rule: str = SECOND_PASS_RULE


def sets_help() -> str:
    """The metric sets, each with its line, for --metrics and --set help: 'traffic (...), bytes (...)'."""
    return "; ".join(f"{s.name}: {s.description}" for s in SETS)

def base_name(metric: str) -> str:
    """'dram__bytes_read.sum' -> 'dram__bytes_read': the part ncu's query lists."""
    return metric.split(".", 1)[0]


@dataclass(frozen=True)
class Resolved:
    """An alias on one chip: the form ncu collects (None: not measured there) and, if None, why."""

    alias: str
    form: Form | None
    note: str = ""


@dataclass
class Resolution:
    """A metric set on one chip: per alias what is collected, the ncu names, one note per topic."""

    items: list[Resolved]
    names: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _why(metric: Metric, chip: Chip | None) -> str:
    """Why `metric` has no counter on `chip` (None: a GPU that memtraffic cannot name)."""
    if chip is None:
        return f"ncu offers none of {', '.join(str(f) for f in metric.forms)} on this GPU"
    where = f"{chip.name} ({chip.arch}, {chip.sm})"
    if (metric.alias.startswith("dram") or metric.alias.startswith("peak_dram")) and chip.unified_memory:
        return f"{chip.name} shares memory with the CPU; ncu has no DRAM byte counter on it"
    if "ldgsts" in metric.alias:
        if not chip.has_ldgsts:
            return (f"{where} has no cp.async (LDGSTS comes with sm_80): its loads are plain loads, "
                    "counted in the L1 load bytes")
        return (f"ncu has no l1tex counter of LDGSTS.ACCESS on {where}: the cp.async part of the L1 load "
                "bytes is not split out")
    if metric.alias.startswith("tc_ops"):
        if not chip.tensor_cores:
            return f"{where} has no tensor cores"
        if chip.arch == "Turing":
            return f"{where} tensor cores take no BF16 or TF32 inputs"
    return f"ncu offers no {base_name(metric.ncu)} or equivalent on {where}"


def resolve(aliases: Sequence[str], available: Collection[str] | None, chip: Chip | None = None
            ) -> Resolution:
    """Each alias on a chip whose base metric names are `available` (None: the gh100 names, unchecked).

    An alias no form fits is left out of the ncu names with a note; aliases sharing a topic (DRAM read
    and write) share one note.
    """
    offered = None if available is None else set(available)
    out = Resolution([])
    topics: set[str] = set()
    for alias in aliases:
        metric = METRICS[alias]
        form = metric.forms[0] if offered is None else next(
            (f for f in metric.forms if all(base_name(n) in offered for n in f.names)), None)
        if form is None:
            topic = metric.topic or metric.description
            note = f"{topic}: {_why(metric, chip)}"
            out.items.append(Resolved(alias, None, note))
            if topic not in topics:
                topics.add(topic)
                out.notes.append(note)
            continue
        out.items.append(Resolved(alias, form))
        out.names += [n for n in form.names if n not in out.names]
    return out


# What ncu records about each launch whatever the metrics asked for (report reading keeps them).
LAUNCH_GRID = "launch__grid_size"
LAUNCH_BLOCK = "launch__block_size"
DEVICE_NAME = "device__attribute_display_name"
REPLAY_PASSES = "profiler__replayer_passes"
# Launch statistics ncu records for every launch at no replay cost (the Launch Statistics and Occupancy
# sections' inputs; absent from `ncu --query-metrics`, so they are no aliases): column -> ncu name.
# The occupancy limits are blocks per SM that each resource allows; the smallest one limits.
LAUNCH_STATS = {
    "registers": "launch__registers_per_thread",
    "shared_mem_per_block": "launch__shared_mem_per_block",
    "waves": "launch__waves_per_multiprocessor",
    "sm_count": "launch__sm_count",
    "occupancy_pct": "sm__maximum_warps_per_active_cycle_pct",  # theoretical occupancy
    "limit_registers": "launch__occupancy_limit_registers",
    "limit_shared_mem": "launch__occupancy_limit_shared_mem",
    "limit_blocks": "launch__occupancy_limit_blocks",
    "limit_warps": "launch__occupancy_limit_warps",
}

# Per-instruction metrics of the SourceCounters section (memtraffic lines; memtraffic/analysis/lines.py
# says what each counts). Values are per PC, joined by correlation id.
REQUESTS = "memory_l1_tag_requests_global"
SECTORS = "memory_l2_theoretical_sectors_global"
IDEAL = "memory_l2_theoretical_sectors_global_ideal"
NCU_EXCESSIVE = "derived__memory_l2_theoretical_sectors_global_excessive"
ACCESS_BITS = "memory_access_size_type"
ACCESS_TYPE = "memory_access_type"
INST = "inst_executed"
THREAD_INST = "thread_inst_executed_true"
LOCAL_SECTORS = "memory_l2_theoretical_sectors_local"  # local-memory (spill) sectors per instruction
