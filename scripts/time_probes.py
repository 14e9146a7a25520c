"""Measure the two numbers the time diagnosis needs besides the roofs, or add them to a ceilings file.

  python scripts/time_probes.py measure OUT_DIR      (GPU + ncu) writes OUT_DIR/time_probes.json:
    launch_s        median ncu gpu__time_duration.sum of an empty one-program Triton kernel, 20 launches
                    (ncu with measure's flags: --cache-control all --clock-control none): a launch's floor
                    as analyze's times count it;
    dram_latency_s  a dependent-load (pointer-chase) Triton kernel, one program, over a random cycle of
                    32M int32 (128 MiB, beyond the 50 MB L2; TLB misses included): (time of 200k steps -
                    time of 10k steps) / 190k steps, CUDA events, median of 5.
  python scripts/time_probes.py merge PROBES.json [CEILINGS.json]   adds both to the device's ceilings
    (default reports/ceilings/<device>.json) under 'measured', with their method and date.

memtraffic.analysis.timing reads them from the ceilings' 'measured' entries. Numbers come from here only.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

METHOD = {
    "launch_s": "ncu gpu__time_duration.sum of an empty 1-program Triton kernel, median of 20 launches "
                "(--cache-control all --clock-control none)",
    "dram_latency_s": "Triton pointer chase, 1 program, random cycle over 128 MiB of int32, "
                      "(200k - 10k steps) time difference / 190k, CUDA events, median of 5",
}

_EMPTY_PROGRAM = """
import torch, triton, triton.language as tl
@triton.jit
def _empty(x):
    pass
x = torch.zeros(1, device="cuda")
for _ in range(21):
    _empty[(1,)](x)
torch.cuda.synchronize()
"""


def launch_floor_s(out: Path) -> float:
    """Median gpu__time_duration of the empty kernel's launches (the first, which compiles, skipped)."""
    from memtraffic.ncu.command import find_ncu
    from memtraffic.ncu.run import kernel_table

    report = out / "empty_kernel"
    argv = [str(find_ncu()), "--metrics", "gpu__time_duration.sum", "--cache-control", "all",
            "--clock-control", "none", "--launch-skip", "1", "-f", "-o", str(report),
            sys.executable, "-c", _EMPTY_PROGRAM]
    subprocess.run(argv, check=True)
    times = kernel_table(report.with_suffix(".ncu-rep")).kernels["time"].dropna()
    return float(statistics.median(times)) * 1e-9


def cycle(n: int, device: str, seed: int = 0) -> torch.Tensor:
    """int32 next-indices of one random cycle through all n elements."""
    import torch

    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed)).to(device)
    nxt = torch.empty(n, dtype=torch.int32, device=device)
    nxt[order] = torch.roll(order, -1).to(torch.int32)
    return nxt


def chase(nxt: torch.Tensor, steps: int) -> torch.Tensor:
    """Follow `steps` links from element 0 in one program, each load waiting for the one before; returns
    the index reached (a 1-element int64 tensor), which the launch must compute, so nothing is skipped."""
    import torch
    import triton
    import triton.language as tl

    global _chase_kernel
    if _chase_kernel is None:
        @triton.jit
        def _chase(next_ptr, out_ptr, steps):
            i = tl.load(next_ptr).to(tl.int64) * 0  # start at 0, as a run-time value
            for _ in range(steps):
                i = tl.load(next_ptr + i).to(tl.int64)
            tl.store(out_ptr, i)

        _chase_kernel = _chase
    out = torch.empty(1, dtype=torch.int64, device=nxt.device)
    _chase_kernel[(1,)](nxt, out, steps, num_warps=1)
    return out


_chase_kernel = None


def dram_latency_s() -> float:
    import torch

    nxt = cycle(1 << 25, "cuda")  # 128 MiB: beyond the 50 MB L2

    def run(steps: int) -> float:
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        chase(nxt, steps)
        stop.record()
        torch.cuda.synchronize()
        return start.elapsed_time(stop) * 1e-3

    run(10)  # compile
    short, long = 10_000, 200_000
    diffs = [run(long) - run(short) for _ in range(5)]
    return statistics.median(diffs) / (long - short)


def measure(out: Path) -> Path:
    import torch

    from memtraffic.core.rundir import utc_now

    out.mkdir(parents=True, exist_ok=True)
    probes = {"device": torch.cuda.get_device_name(), "date": utc_now()[:10],
              "launch_s": launch_floor_s(out), "dram_latency_s": dram_latency_s(), "method": METHOD}
    path = out / "time_probes.json"
    path.write_text(json.dumps(probes, indent=2) + "\n")
    print(json.dumps(probes, indent=2))
    return path


def merge(probes_path: Path, ceilings_path: Path | None = None) -> Path:
    """The ceilings file with the probes' numbers added under 'measured' (and their method, date)."""
    from memtraffic.core.roofs import COMMITTED_DIR, device_slug, load_ceilings_file, write_reference

    probes = json.loads(probes_path.read_text())
    ceilings_path = ceilings_path or COMMITTED_DIR / f"{device_slug(probes['device'])}.json"
    entry = load_ceilings_file(ceilings_path, probes["device"])
    if entry["device"] != probes["device"]:
        raise SystemExit(f"{probes_path} is for {probes['device']}, {ceilings_path} for {entry['device']}")
    for key in ("launch_s", "dram_latency_s"):
        entry.setdefault("measured", {})[key] = probes[key]
        entry.setdefault("method", {})[key] = f"{probes['method'][key]} ({probes['date']})"
    return write_reference(entry, ceilings_path.parent)


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "measure":
        measure(Path(argv[1]))
        return 0
    if len(argv) in (2, 3) and argv[0] == "merge":
        print(merge(Path(argv[1]), Path(argv[2]) if len(argv) == 3 else None))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
