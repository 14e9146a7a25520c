"""How much the same-size copy and the softmax kernels vary from one timing to the next, and with how
the L2 is flushed: the question behind 4096x4096 bf16's "% of copy" in the bench (issue 14), where the
copy took 25.3 and 26.9 us in the bench and 28.0 us in the sweeps of the same day while softmax_tiled
stayed at 27.5-28.0 us.

    python scripts/copy_spread.py OUT.json [--shape 4096x4096] [--dtype bf16] [--rounds 8]

Each round allocates fresh buffers (the copy's source and destination, the softmax input) and times
every subject (median of 200 calls, as memtraffic.measure.gpu.time_cuda) twice: with a 256 MB buffer zeroed
before each call (the bench's flush until 2026-11-23: it leaves the L2 full of dirty lines, which the
timed call then writes back to DRAM as it evicts them) and with the same buffer summed (a read flush,
the bench's since: it leaves clean lines). Prints per subject and flush the median, min and max over
rounds; OUT.json has every time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memtraffic.core.ops import parse_dtype, parse_shape, torch_dtype  # noqa: E402
from memtraffic.kernels import VARIANTS  # noqa: E402
from memtraffic.measure import gpu  # noqa: E402
from memtraffic.measure.gpu import environment  # noqa: E402

SUBJECTS = ["copy", "softmax_tiled", "softmax_split", "softmax_naive"]


def flush_time(fn, flush: torch.Tensor, how: str) -> float:
    """time_cuda's loop with the flush buffer zeroed ("zero") or summed ("read"): median ns."""
    fn()
    torch.cuda.synchronize()
    reps = 200
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for s, e in zip(starts, ends, strict=True):
        flush.zero_() if how == "zero" else flush.sum()
        torch.cuda._sleep(gpu._SLEEP_CYCLES)
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) * 1e6 for s, e in zip(starts, ends, strict=True))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--shape", default="4096x4096")
    parser.add_argument("--dtype", default="bf16")
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    shape, dtype = parse_shape(args.shape), torch_dtype(parse_dtype(args.dtype))
    flush = torch.ones(gpu._L2_FLUSH_BYTES // 4, dtype=torch.float32, device="cuda")
    times: dict[str, dict[str, list[float]]] = {s: {"zero": [], "read": []} for s in SUBJECTS}
    for _ in range(args.rounds):
        x = torch.randn(shape, dtype=dtype, device="cuda")
        src = torch.empty(x.numel() * x.element_size(), dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        calls = {"copy": lambda dst=dst, src=src: dst.copy_(src)}
        calls.update({name: (lambda name=name, x=x: VARIANTS[name].run(x)) for name in SUBJECTS[1:]})
        for name, fn in calls.items():
            for how in ("zero", "read"):
                times[name][how].append(flush_time(fn, flush, how))
    print(f"{args.shape} {args.dtype}, {args.rounds} rounds of fresh buffers; us (median / min / max)")
    for name in SUBJECTS:
        for how in ("zero", "read"):
            t = [v / 1e3 for v in times[name][how]]
            print(f"  {name:15s} {how}-flush  {statistics.median(t):7.2f} {min(t):7.2f} {max(t):7.2f}")
    args.out.write_text(json.dumps({"environment": environment(), "shape": args.shape, "dtype": args.dtype,
                                    "times_ns": times}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
