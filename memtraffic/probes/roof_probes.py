"""Measuring this GPU's roofs: bandwidths and FLOP rates reached by simple kernels (CUDA events,
warm-up, median of repeats), and ncu's theoretical peaks from a one-kernel probe, cached per device
name, and written to the user cache or a committed reference. The roofs file itself (names, an entry
and its check, the committed references) is memtraffic.vocab.roofs; reading the cache,
memtraffic.host.roofs_cache.
"""

from __future__ import annotations

import functools
import math
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memtraffic.collect.cuda_timing import time_cuda
from memtraffic.host.gpu import require_gpu
from memtraffic.host.machine import environment, utc_now
from memtraffic.host.roofs_cache import cache_file, find_roofs, read_cache
from memtraffic.ncu.chips import peak_names
from memtraffic.ncu.command import build_ncu_command
from memtraffic.ncu.metrics import METRIC_SETS, METRICS
from memtraffic.vocab.errors import GpuNotFoundError, NcuError, ReportError
from memtraffic.vocab.files import write_json
from memtraffic.vocab.roofs import (
    COMMITTED_DIR,
    ROOFS,
    RoofsEntry,
    device_slug,
    theoretical_from_metrics,
)

if TYPE_CHECKING:
    import torch

# A tiny kernel to profile: peaks are properties of the device and its clocks, not of the kernel.
_PROBE_CODE = "import torch; x = torch.ones(1 << 24, device='cuda'); y = x * 2; torch.cuda.synchronize()"


def ncu_probe_command(ncu: str, report_base: Path, python: str = sys.executable,
                      names: list[str] | None = None) -> list[str]:
    """The ncu command that records the `peaks` metrics (`names`: those of this GPU's chip, default the
    H100's) for one launch of a tiny kernel."""
    metrics = names or [METRICS[a].ncu for a in METRIC_SETS["peaks"]]
    return build_ncu_command(ncu, metrics, report_base, [python, "-c", _PROBE_CODE], nvtx_include=(),
                             launch_count=1)


# A launch's floor as analyze's times count it: ncu's gpu__time_duration of a kernel with nothing to do
# (torch's fill_ of one element: one block), median of LAUNCH_PROBES launches after a first one.
LAUNCH_PROBES = 20
_LAUNCH_CODE = ("import torch; x = torch.zeros(1, device='cuda')\n"
                f"for _ in range({LAUNCH_PROBES + 1}): x.fill_(1.0)\n"
                "torch.cuda.synchronize()")
LAUNCH_METHOD = (f"ncu gpu__time_duration.sum of a 1-element torch fill_ (one block), median of "
                 f"{LAUNCH_PROBES} launches (--cache-control all --clock-control none)")


def ncu_launch_command(ncu: str, report_base: Path, python: str = sys.executable) -> list[str]:
    """The ncu command that times LAUNCH_PROBES launches of a kernel with nothing to do."""
    return build_ncu_command(ncu, [METRICS["time"].ncu], report_base, [python, "-c", _LAUNCH_CODE],
                             nvtx_include=(), launch_skip=1, launch_count=LAUNCH_PROBES)


def ncu_launch_floor(timeout_s: float = 300) -> tuple[float | None, str]:
    """(seconds, note): the median ncu time of a kernel with nothing to do; None and why when ncu fails."""
    import statistics

    from memtraffic.ncu.kernel_table import kernel_table

    ncu = _find_ncu()
    if ncu is None:
        return None, "ncu not found (put Nsight Compute's ncu on PATH for the launch floor)"
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "launch"
        try:
            proc = subprocess.run(ncu_launch_command(ncu, base), capture_output=True, text=True,
                                  timeout=timeout_s)
            times = kernel_table(base.with_suffix(".ncu-rep")).kernels["time"].dropna()
        except (OSError, subprocess.TimeoutExpired, ReportError) as err:
            return None, f"ncu launch probe failed: {err}"
    if proc.returncode != 0 or times.empty:
        return None, f"ncu launch probe failed (exit {proc.returncode})"
    return float(statistics.median(times)) * 1e-9, LAUNCH_METHOD


def _find_ncu() -> str | None:
    from memtraffic.ncu.command import find_ncu

    try:
        return str(find_ncu())
    except NcuError:
        return None


def read_report_metrics(path: Path, aliases: list[str]) -> dict[str, float]:
    """alias -> value of the first kernel in an .ncu-rep (missing metrics are left out)."""
    from memtraffic.ncu.report import alias_value, import_ncu_report  # pip package, else ncu's own copy

    ctx = import_ncu_report().load_report(str(path))
    if ctx.num_ranges() == 0 or ctx.range_by_idx(0).num_actions() == 0:
        raise ReportError(f"{path} holds no profiled kernel")
    action = ctx.range_by_idx(0).action_by_idx(0)
    out = {}
    for alias in aliases:
        value = alias_value(action, METRICS[alias])  # whatever name this GPU's chip gives it
        if math.isfinite(value):
            out[alias] = value
    return out


def ncu_theoretical(timeout_s: float = 300) -> tuple[dict[str, float], str]:
    """(peaks, note). Never raises: without ncu, or when it fails, peaks are empty and the note says why."""
    ncu = _find_ncu()
    if ncu is None:
        return {}, "ncu not found (put Nsight Compute's ncu on PATH for theoretical peaks)"
    try:
        device: str | None = current_device()
    except GpuNotFoundError:  # ncu's own error about the GPU is the clearer note
        device = None
    names, missing = peak_names(device)
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "peaks"
        cmd = ncu_probe_command(ncu, base, names=names)
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        except (OSError, subprocess.TimeoutExpired) as err:
            return {}, f"ncu probe failed: {err}"
        report = base.with_suffix(".ncu-rep")
        if proc.returncode != 0 or not report.exists():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            return {}, f"ncu probe failed (exit {proc.returncode}): {tail[0][:200]}"
        try:
            values = read_report_metrics(report, METRIC_SETS["peaks"])
        except Exception as err:  # noqa: BLE001 - a note, not a failure of the measured roofs
            return {}, f"cannot read the ncu probe report: {type(err).__name__}: {err}"
    peaks = theoretical_from_metrics(values)
    note = f"{Path(ncu).name} --clock-control none: per-cycle peaks x clock rates ({len(peaks)} roofs)"
    return peaks, "; ".join([note, *missing])


# ----------------------------------------------------------------------------------------------------
# Where measured roofs are written


def write_cache(entry: RoofsEntry, path: Path | None = None) -> Path:
    """Add or replace this device's entry; other devices' entries are kept. Atomic replace."""
    data = read_cache(path)  # without a path: roofs.json, else the older ceilings.json
    data[entry["device"]] = entry
    return write_json(path or cache_file(), data, sort_keys=True)


def write_reference(entry: RoofsEntry, directory: Path | None = None) -> Path:
    """reports/roofs/<device>.json, to commit beside the reference runs."""
    directory = directory or COMMITTED_DIR
    return write_json(directory / f"{device_slug(entry['device'])}.json", dict(entry), sort_keys=True)


# ----------------------------------------------------------------------------------------------------
# Measured roofs (CUDA)


def current_device() -> str:
    """The name of CUDA device 0, whose roofs are measured, or GpuNotFoundError."""
    return require_gpu(f"measuring roofs needs one; roofline can still use the cached ({cache_file()}) "
                       "or committed (reports/roofs/) roofs of known devices")


def median_time_s(fn: Callable[[], object], repeats: int) -> float:
    """Median CUDA-event time of fn() in seconds; no L2 flush: a roof is measured warm."""
    return time_cuda(fn, min_reps=repeats, max_reps=repeats, flush_l2=False).median_ns * 1e-9


@functools.cache
def _triton_kernels() -> tuple[Any, Any]:  # Triton's JITFunctions, untyped
    """The two Triton kernels, defined on first use so importing this module stays light."""
    import triton
    import triton.language as tl

    @triton.jit  # type: ignore[untyped-decorator]  # Triton kernels: their parameters are Triton's to type
    def l2_copy_kernel(src, dst, n_chunks, iters, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
        # Program p copies chunk (p + i) mod n_chunks at step i: at any step the programs touch
        # distinct chunks, and over the steps each walks the whole working set, which fits in L2.
        # .cg keeps the loads and stores out of L1, so what is timed is L2.
        pid = tl.program_id(0)
        offs = tl.arange(0, BLOCK)
        for i in range(iters):
            base = ((pid + i) % n_chunks) * BLOCK
            x = tl.load(src + base + offs, cache_modifier=".cg")
            tl.store(dst + base + offs, x, cache_modifier=".cg")

    @triton.jit  # type: ignore[untyped-decorator]
    def fma_kernel(x_ptr, out_ptr, iters, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
        # Four independent FMA chains per element keep the FMA pipes busy despite each FMA's latency;
        # each loop step is 4 FFMAs = 8 FLOPs per element. Loads and stores are negligible.
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs)
        a0 = x
        a1 = x + 1.0
        a2 = x + 2.0
        a3 = x + 3.0
        for _ in range(iters):
            a0 = tl.fma(a0, 0.999, 0.001)
            a1 = tl.fma(a1, 0.999, 0.001)
            a2 = tl.fma(a2, 0.999, 0.001)
            a3 = tl.fma(a3, 0.999, 0.001)
        tl.store(out_ptr + offs, a0 + a1 + a2 + a3)

    return l2_copy_kernel, fma_kernel


@functools.cache
def _chase_kernel() -> Any:  # Triton's JITFunction, untyped
    import triton
    import triton.language as tl

    @triton.jit
    def chase_kernel(next_ptr, out_ptr, steps):  # type: ignore[no-untyped-def]
        # One program follows the links: each load's address is the value the load before returned.
        i = tl.load(next_ptr).to(tl.int64) * 0  # 0, as a run-time value
        for _ in range(steps):
            i = tl.load(next_ptr + i).to(tl.int64)
        tl.store(out_ptr, i)  # the launch must compute where the walk ends: nothing is skipped

    return chase_kernel


def pointer_cycle(n: int, device: str, seed: int = 0) -> torch.Tensor:
    """int32 next-indices of one random cycle through all n elements."""
    import torch

    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed)).to(device)
    nxt = torch.empty(n, dtype=torch.int32, device=device)
    nxt[order] = torch.roll(order, -1).to(torch.int32)
    return nxt


def chase(nxt: torch.Tensor, steps: int) -> torch.Tensor:
    """The index reached after `steps` links from element 0 (1-element int64 tensor); works under
    TRITON_INTERPRET."""
    import torch

    out = torch.empty(1, dtype=torch.int64, device=nxt.device)
    _chase_kernel()[(1,)](nxt, out, steps, num_warps=1)
    return out


def measure_dram_latency(torch: types.ModuleType, n: int = 1 << 25) -> tuple[float, str]:
    """Seconds per dependent load over a random cycle of n int32 (128 MiB: beyond an H100's 50 MB L2)."""
    nxt = pointer_cycle(n, "cuda")
    short, long = 10_000, 200_000
    chase(nxt, 10)  # compile
    t_short = median_time_s(lambda: chase(nxt, short), repeats=5)
    t_long = median_time_s(lambda: chase(nxt, long), repeats=5)
    return (t_long - t_short) / (long - short), (
        f"Triton pointer chase, one program, random cycle over {4 * n / 2**20:.0f} MiB of int32 (TLB misses "
        f"included): (median time of {long} steps - of {short}) / {long - short}, median of 5")


FMA_CHAINS = 4  # FFMAs per element per loop step in fma_kernel


def l2_copy(src: torch.Tensor, dst: torch.Tensor, iters: int, programs: int, block: int) -> None:
    """Copy src (n_chunks x block elements) into dst `iters` times over; works under TRITON_INTERPRET."""
    l2_kernel, _ = _triton_kernels()
    n_chunks = src.numel() // block
    if programs > n_chunks:
        raise ValueError("programs must not exceed the number of chunks (each step touches distinct chunks)")
    l2_kernel[(programs,)](src, dst, n_chunks, iters, BLOCK=block, num_warps=8)


def fma_chain(x: torch.Tensor, iters: int, block: int) -> torch.Tensor:
    """out[i] = sum over 4 chains of iters steps a <- 0.999 a + 0.001; works under TRITON_INTERPRET."""
    import torch

    _, fma_kernel = _triton_kernels()
    out = torch.empty_like(x)
    fma_kernel[(x.numel() // block,)](x, out, iters, BLOCK=block, num_warps=4)
    return out


def measure_dram(torch: types.ModuleType, budget_bytes: int = 2 * 2**30) -> tuple[float, str]:
    free, _ = torch.cuda.mem_get_info()
    nbytes = min(budget_bytes, int(free * 0.4))  # src + dst must fit with room to spare
    nbytes -= nbytes % 2**20
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    src.fill_(1)
    t = median_time_s(lambda: dst.copy_(src), repeats=20)
    return 2 * nbytes / t, f"{nbytes / 2**30:.2f} GiB device-to-device copy_, read + write, median of 20"


def measure_l2(torch: types.ModuleType, sm_count: int, set_bytes: int = 4 * 2**20) -> tuple[float, str]:
    block = 2048
    n = set_bytes // 4
    src = torch.rand(n, device="cuda")
    dst = torch.empty_like(src)
    n_chunks = n // block
    programs = min(n_chunks, 4 * sm_count)
    iters = 2000  # ~16 GB moved per launch: milliseconds, so launch overhead is negligible
    t = median_time_s(lambda: l2_copy(src, dst, iters, programs, block), repeats=10)
    if not torch.equal(src, dst):
        raise RuntimeError("the L2 copy kernel produced a wrong result; its bandwidth would be meaningless")
    moved = 2 * programs * iters * block * 4
    return moved / t, (f"Triton copy, {2 * set_bytes / 2**20:.0f} MiB working set (src + dst) re-read "
                       f"{iters} times, .cg loads/stores (L1 bypassed), read + write, median of 10")


def measure_fp32(torch: types.ModuleType, sm_count: int) -> tuple[float, str]:
    block = 1024
    x = torch.rand(sm_count * 8 * block, device="cuda")
    iters = 4096
    t = median_time_s(lambda: fma_chain(x, iters, block), repeats=10)
    flops = 2 * FMA_CHAINS * iters * x.numel()
    return flops / t, (f"Triton kernel, {FMA_CHAINS} chains of {iters} FFMA per element, 2 FLOPs per FMA, "
                       "median of 10")


def measure_matmul(torch: types.ModuleType, dtype: torch.dtype, n: int = 8192) -> tuple[float, str]:
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    t = median_time_s(lambda: a @ b, repeats=10)
    return 2 * n**3 / t, f"torch.matmul {n}x{n}x{n}, 2*M*N*K FLOPs, median of 10"


def measure_roofs(with_ncu: bool = True,
                     progress: Callable[[str], None] = lambda s: None) -> RoofsEntry:
    """Measure every roof on GPU 0 and return a roofs entry (not yet cached)."""
    import torch

    device = current_device()
    sm_count = torch.cuda.get_device_properties(0).multi_processor_count
    measured: dict[str, float] = {}
    method: dict[str, str] = {}
    steps: list[tuple[str, Callable[[], tuple[float, str]]]] = [
        ("dram_Bps", lambda: measure_dram(torch)),
        ("l2_Bps", lambda: measure_l2(torch, sm_count)),
        ("fp32_flops", lambda: measure_fp32(torch, sm_count)),
        ("bf16_tc_flops", lambda: measure_matmul(torch, torch.bfloat16)),
        ("fp16_tc_flops", lambda: measure_matmul(torch, torch.float16)),
        ("dram_latency_s", lambda: measure_dram_latency(torch)),  # Little's law (analysis.time_notes)
    ]
    for key, step in steps:
        progress(f"measuring {ROOFS[key][0] if key in ROOFS else 'DRAM latency'}")
        measured[key], method[key] = step()
        torch.cuda.empty_cache()
    entry: RoofsEntry = {
        "device": device,
        "measured": measured,
        "method": method,
        "environment": environment(device),
        "date": utc_now()[:10],
        "ncu_theoretical": {},
        "ncu_note": "not asked for (--no-ncu)",
    }
    if with_ncu:
        progress("reading theoretical peaks with ncu")
        entry["ncu_theoretical"], entry["ncu_note"] = ncu_theoretical()
        progress("timing a launch with nothing to do under ncu")
        floor, note = ncu_launch_floor()
        if floor is not None:
            measured["launch_s"], method["launch_s"] = floor, note
        else:
            entry["ncu_note"] += f"; {note}"
    return entry


def get_roofs(refresh: bool = False, with_ncu: bool = True,
                 progress: Callable[[str], None] = lambda s: None) -> tuple[RoofsEntry, bool]:
    """(entry, from_cache): this GPU's cached roofs, or freshly measured and cached ones."""
    device = current_device()
    if not refresh:
        cached = read_cache().get(device)
        if cached is not None:
            return cached, True
    entry = measure_roofs(with_ncu=with_ncu, progress=progress)
    write_cache(entry)
    return entry, False


def roofs_for_floor(device: str, echo: Callable[[str], None],
                    measure: Callable[[], RoofsEntry] | None = None) -> RoofsEntry | None:
    """Roofs for the floor of a run on `device` (`profile` and `measure` call it after the run, outside
    ncu): None when the device has some already (the user cache, then reports/roofs/), else measured
    once now (measure_roofs: about 20 s) and cached, said in one line (what, how long, where). A
    measurement that fails is one warning: the run stands, without a floor until `memtraffic roofs`."""
    if not device or find_roofs(device) is not None:
        return None
    measure = measure or measure_roofs
    t0 = time.perf_counter()
    try:
        entry = measure()
        path = write_cache(entry)
    except Exception as err:  # noqa: BLE001 - the run is measured and saved; only its floor waits
        echo(f"warning: no roofs for {device} ({type(err).__name__}: {err}): the floor needs them; "
             "`memtraffic roofs` measures them")
        return None
    echo(f"measured the roofs of {entry['device']} (copy and L2 bandwidth, FP32 and tensor-core FLOP/s, "
         f"DRAM latency, an empty kernel's time) for the floor in {time.perf_counter() - t0:.1f} s, cached "
         f"in {path}; once a GPU (--no-roofs skips it)")
    return entry
