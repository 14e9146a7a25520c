"""This GPU's roofs: bandwidths and FLOP rates, measured once and cached per device name.

Two kinds, always kept apart:
- measured: what simple kernels reach here (CUDA events, warm-up, median of repeats);
- ncu theoretical: per-cycle peaks times clock rates, read from an Nsight Compute report
  (the same expressions ncu's own roofline sections use), when ncu is available.

Where they live: a user cache (~/.cache/memtraffic/ceilings.json, or $MEMTRAFFIC_CACHE/ceilings.json),
and committed reference values under reports/ceilings/<device>.json written by `memtraffic ceilings
--save-reference` on a real GPU. Numbers are never typed in by hand.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from memtraffic.core.errors import GpuNotFoundError, NcuError, ReportError, UsageError
from memtraffic.core.units import fmt_rate
from memtraffic.ncu.chips import peak_names
from memtraffic.ncu.metrics import METRIC_SETS, METRICS

# Roof key -> (label, unit). Bandwidths count read + write bytes.
ROOFS: dict[str, tuple[str, str]] = {
    "dram_Bps": ("DRAM bandwidth", "B/s"),
    "l2_Bps": ("L2 bandwidth", "B/s"),
    "l1_Bps": ("L1 bandwidth", "B/s"),
    "fp32_flops": ("FP32 FMA, CUDA cores", "FLOP/s"),
    "bf16_tc_flops": ("BF16 tensor cores", "FLOP/s"),
    "fp16_tc_flops": ("FP16 tensor cores", "FLOP/s"),
}
BANDWIDTH_OF_LEVEL = {"dram": "dram_Bps", "l2": "l2_Bps", "l1": "l1_Bps"}
KINDS = {"measured": "measured", "ncu_theoretical": "ncu theoretical"}

REPO_ROOT = Path(__file__).resolve().parents[2]
COMMITTED_DIR = REPO_ROOT / "reports" / "ceilings"


# ----------------------------------------------------------------------------------------------------
# Where ceilings are stored


def cache_file() -> Path:
    """$MEMTRAFFIC_CACHE/ceilings.json, else $XDG_CACHE_HOME (or ~/.cache)/memtraffic/ceilings.json."""
    root = os.environ.get("MEMTRAFFIC_CACHE")
    if root:
        return Path(root).expanduser() / "ceilings.json"
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "memtraffic" / "ceilings.json"


def device_slug(device: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'NVIDIA_H100_80GB_HBM3' (a file name)."""
    return re.sub(r"[^A-Za-z0-9.-]+", "_", device).strip("_")


def _read_json(path: Path, advice: str = "delete it or re-run 'memtraffic ceilings --refresh'") -> Any:
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        what = f"{err.msg}, line {err.lineno}" if isinstance(err, json.JSONDecodeError) else "binary data"
        raise ReportError(f"{path} is not valid JSON ({what}): {advice}") from None
    except OSError as err:
        raise ReportError(f"cannot read {path}: {err.strerror}") from None


def _check_entry(entry: Any, where: Path) -> dict[str, Any]:
    if not isinstance(entry, dict) or not isinstance(entry.get("device"), str) or not isinstance(
        entry.get("measured", {}), dict
    ):
        raise ReportError(f"{where} does not hold ceilings (an object with 'device' and 'measured'): "
                          "write it with 'memtraffic ceilings --format json'")
    return entry


def read_cache(path: Path | None = None) -> dict[str, dict[str, Any]]:
    """device name -> ceilings entry; empty when there is no cache yet."""
    path = path or cache_file()
    if not path.exists():
        return {}
    data = _read_json(path)
    if not isinstance(data, dict):
        raise ReportError(f"{path} is not a ceilings cache: delete it or re-run "
                          "'memtraffic ceilings --refresh'")
    return {dev: _check_entry(e, path) for dev, e in data.items()}


def write_cache(entry: Mapping[str, Any], path: Path | None = None) -> Path:
    """Add or replace this device's entry; other devices' entries are kept. Atomic replace."""
    path = path or cache_file()
    data = read_cache(path)
    data[entry["device"]] = dict(entry)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)
    return path


def write_reference(entry: Mapping[str, Any], directory: Path | None = None) -> Path:
    """reports/ceilings/<device>.json, to commit beside the reference runs."""
    directory = directory or COMMITTED_DIR
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{device_slug(entry['device'])}.json"
    path.write_text(json.dumps(dict(entry), indent=2, sort_keys=True) + "\n")
    return path


def load_ceilings_file(path: Path, device: str | None = None) -> dict[str, Any]:
    """A file holding one entry (reports/ceilings/*.json) or a cache (device -> entry)."""
    if not path.exists():
        raise UsageError(f"ceilings file {path} does not exist")
    data = _read_json(path, "give --ceilings a file written by 'memtraffic ceilings --format json' "
                            "(or one of reports/ceilings/)")
    if isinstance(data, dict) and "device" in data:
        return _check_entry(data, path)
    if isinstance(data, dict) and data:
        entries = {dev: _check_entry(e, path) for dev, e in data.items()}
        if device in entries:
            return entries[device]
        if len(entries) == 1:
            return next(iter(entries.values()))
        raise UsageError(f"{path} holds ceilings for {', '.join(entries)}, not for {device!r}")
    raise ReportError(f"{path} does not hold ceilings: write it with 'memtraffic ceilings --format json'")


def find_ceilings(device: str, cache: Path | None = None,
                  committed: Path | None = None) -> dict[str, Any] | None:
    """This device's ceilings: the user cache first (measured on this machine), then committed ones."""
    # ncu's display name and torch's device name are the driver's same string; compare slugs anyway
    # so that spacing or case never hides a device's ceilings.
    key = device_slug(device).lower()
    entry = next((e for dev, e in read_cache(cache).items() if device_slug(dev).lower() == key), None)
    if entry is not None:
        return entry
    folder = committed or COMMITTED_DIR
    paths = [p for p in folder.glob("*.json") if p.stem.lower() == key] if folder.is_dir() else []
    return _check_entry(_read_json(paths[0]), paths[0]) if paths else None


# ----------------------------------------------------------------------------------------------------
# ncu theoretical peaks


def theoretical_from_metrics(values: Mapping[str, float]) -> dict[str, float]:
    """Peaks from the `peaks` metric set (alias -> value): per-cycle peak x cycles per second.

    FP32: 2 FLOPs per FFMA, as ncu's roofline section counts it. Missing or NaN inputs leave the
    roof out rather than guess it.
    """

    def get(alias: str) -> float | None:
        v = values.get(alias)
        return float(v) if v is not None and math.isfinite(float(v)) and float(v) > 0 else None

    out: dict[str, float] = {}
    pairs = {
        "dram_Bps": ("peak_dram_bytes_per_cycle", "dram_cycles_per_s", 1.0),
        "l2_Bps": ("peak_l2_bytes_per_cycle", "l2_cycles_per_s", 1.0),
        "l1_Bps": ("peak_l1_bytes_per_cycle", "l1_cycles_per_s", 1.0),
        "fp32_flops": ("peak_ffma_per_cycle", "sm_cycles_per_s", 2.0),
    }
    for key, (per_cycle, rate, factor) in pairs.items():
        a, b = get(per_cycle), get(rate)
        if a is not None and b is not None:
            out[key] = factor * a * b
    return out


# A tiny kernel to profile: peaks are properties of the device and its clocks, not of the kernel.
_PROBE_CODE = "import torch; x = torch.ones(1 << 24, device='cuda'); y = x * 2; torch.cuda.synchronize()"


def ncu_probe_command(ncu: str, report_base: Path, python: str = sys.executable,
                      names: list[str] | None = None) -> list[str]:
    """The ncu command that records the `peaks` metrics (`names`: those of this GPU's chip, default the
    H100's) for one launch of a tiny kernel."""
    metrics = ",".join(names or [METRICS[a].ncu for a in METRIC_SETS["peaks"]])
    return [ncu, "--metrics", metrics, "--clock-control", "none", "--launch-count", "1",
            "--force-overwrite", "--export", str(report_base), python, "-c", _PROBE_CODE]


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
        except Exception as err:  # noqa: BLE001 - a note, not a failure of the measured ceilings
            return {}, f"cannot read the ncu probe report: {type(err).__name__}: {err}"
    peaks = theoretical_from_metrics(values)
    note = f"{Path(ncu).name} --clock-control none: per-cycle peaks x clock rates ({len(peaks)} roofs)"
    return peaks, "; ".join([note, *missing])


# ----------------------------------------------------------------------------------------------------
# Measured ceilings (CUDA)


def _require_cuda():
    import torch

    if not torch.cuda.is_available():
        raise GpuNotFoundError(
            "measuring ceilings needs a CUDA GPU and none is visible; roofline can still use the cached "
            f"({cache_file()}) or committed (reports/ceilings/) ceilings of known devices"
        )
    return torch


def median_time_s(fn: Callable[[], Any], repeats: int) -> float:
    """Median CUDA-event time of fn() in seconds; no L2 flush: a roof is measured warm."""
    from memtraffic.measure.gpu import time_cuda

    return time_cuda(fn, min_reps=repeats, max_reps=repeats, flush_l2=False).median_ns * 1e-9


@functools.cache
def _triton_kernels():
    """The two Triton kernels, defined on first use so importing this module stays light."""
    import triton
    import triton.language as tl

    @triton.jit
    def l2_copy_kernel(src, dst, n_chunks, iters, BLOCK: tl.constexpr):
        # Program p copies chunk (p + i) mod n_chunks at step i: at any step the programs touch
        # distinct chunks, and over the steps each walks the whole working set, which fits in L2.
        # .cg keeps the loads and stores out of L1, so what is timed is L2.
        pid = tl.program_id(0)
        offs = tl.arange(0, BLOCK)
        for i in range(iters):
            base = ((pid + i) % n_chunks) * BLOCK
            x = tl.load(src + base + offs, cache_modifier=".cg")
            tl.store(dst + base + offs, x, cache_modifier=".cg")

    @triton.jit
    def fma_kernel(x_ptr, out_ptr, iters, BLOCK: tl.constexpr):
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


FMA_CHAINS = 4  # FFMAs per element per loop step in fma_kernel


def l2_copy(src, dst, iters: int, programs: int, block: int) -> None:
    """Copy src (n_chunks x block elements) into dst `iters` times over; works under TRITON_INTERPRET."""
    l2_kernel, _ = _triton_kernels()
    n_chunks = src.numel() // block
    if programs > n_chunks:
        raise ValueError("programs must not exceed the number of chunks (each step touches distinct chunks)")
    l2_kernel[(programs,)](src, dst, n_chunks, iters, BLOCK=block, num_warps=8)


def fma_chain(x, iters: int, block: int):
    """out[i] = sum over 4 chains of iters steps a <- 0.999 a + 0.001; works under TRITON_INTERPRET."""
    import torch

    _, fma_kernel = _triton_kernels()
    out = torch.empty_like(x)
    fma_kernel[(x.numel() // block,)](x, out, iters, BLOCK=block, num_warps=4)
    return out


def measure_dram(torch, budget_bytes: int = 2 * 2**30) -> tuple[float, str]:
    free, _ = torch.cuda.mem_get_info()
    nbytes = min(budget_bytes, int(free * 0.4))  # src + dst must fit with room to spare
    nbytes -= nbytes % 2**20
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    src.fill_(1)
    t = median_time_s(lambda: dst.copy_(src), repeats=20)
    return 2 * nbytes / t, f"{nbytes / 2**30:.2f} GiB device-to-device copy_, read + write, median of 20"


def measure_l2(torch, sm_count: int, set_bytes: int = 4 * 2**20) -> tuple[float, str]:
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


def measure_fp32(torch, sm_count: int) -> tuple[float, str]:
    block = 1024
    x = torch.rand(sm_count * 8 * block, device="cuda")
    iters = 4096
    t = median_time_s(lambda: fma_chain(x, iters, block), repeats=10)
    flops = 2 * FMA_CHAINS * iters * x.numel()
    return flops / t, (f"Triton kernel, {FMA_CHAINS} chains of {iters} FFMA per element, 2 FLOPs per FMA, "
                       "median of 10")


def measure_matmul(torch, dtype, n: int = 8192) -> tuple[float, str]:
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    t = median_time_s(lambda: a @ b, repeats=10)
    return 2 * n**3 / t, f"torch.matmul {n}x{n}x{n}, 2*M*N*K FLOPs, median of 10"


def measure_ceilings(with_ncu: bool = True,
                     progress: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    """Measure every roof on GPU 0 and return a ceilings entry (not yet cached)."""
    torch = _require_cuda()
    from memtraffic.measure.gpu import environment

    env = environment()
    measured: dict[str, float] = {}
    method: dict[str, str] = {}
    steps = [
        ("dram_Bps", lambda: measure_dram(torch)),
        ("l2_Bps", lambda: measure_l2(torch, env["sm_count"])),
        ("fp32_flops", lambda: measure_fp32(torch, env["sm_count"])),
        ("bf16_tc_flops", lambda: measure_matmul(torch, torch.bfloat16)),
        ("fp16_tc_flops", lambda: measure_matmul(torch, torch.float16)),
    ]
    for key, step in steps:
        progress(f"measuring {ROOFS[key][0]}")
        measured[key], method[key] = step()
        torch.cuda.empty_cache()
    entry: dict[str, Any] = {
        "device": env["device"],
        "measured": measured,
        "method": method,
        "environment": env,
        "date": env.pop("date"),
        "ncu_theoretical": {},
        "ncu_note": "not asked for (--no-ncu)",
    }
    if with_ncu:
        progress("reading theoretical peaks with ncu")
        entry["ncu_theoretical"], entry["ncu_note"] = ncu_theoretical()
    return entry


def current_device() -> str:
    return _require_cuda().cuda.get_device_name(0)


def get_ceilings(refresh: bool = False, with_ncu: bool = True,
                 progress: Callable[[str], None] = lambda s: None) -> tuple[dict[str, Any], bool]:
    """(entry, from_cache): this GPU's cached ceilings, or freshly measured and cached ones."""
    device = current_device()
    if not refresh:
        cached = read_cache().get(device)
        if cached is not None:
            return cached, True
    entry = measure_ceilings(with_ncu=with_ncu, progress=progress)
    write_cache(entry)
    return entry, False


# ----------------------------------------------------------------------------------------------------
# Showing them


def ceilings_rows(entry: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per roof: measured and ncu theoretical side by side (None where unknown)."""
    rows = []
    measured = entry.get("measured", {})
    theo = entry.get("ncu_theoretical", {})
    for key, (label, unit) in ROOFS.items():
        m, t = measured.get(key), theo.get(key)
        if m is None and t is None:
            continue
        rows.append({"roof": key, "label": label, "unit": unit, "measured": m, "ncu_theoretical": t,
                     "fraction": (m / t) if m and t else None,
                     "method": entry.get("method", {}).get(key, "")})
    return rows


def ceilings_table(entry: Mapping[str, Any]) -> str:
    from memtraffic.views.tables import text_table

    body = []
    for r in ceilings_rows(entry):
        body.append([r["label"], fmt_rate(r["measured"], r["unit"]),
                     fmt_rate(r["ncu_theoretical"], r["unit"]),
                     f"{100 * r['fraction']:.0f}%" if r["fraction"] else "-"])
    head = f"{entry['device']}" + (f", measured {entry['date']}" if entry.get("date") else "")
    text = head + "\n" + text_table(["roof", "measured", "ncu theoretical", "measured/theoretical"], body)
    methods = [f"  {ROOFS[k][0]}: {v}" for k, v in entry.get("method", {}).items() if k in ROOFS]
    if methods:
        text += "\n\nhow measured:\n" + "\n".join(methods)
    if entry.get("ncu_note"):
        text += f"\nncu theoretical: {entry['ncu_note']}"
    return text
