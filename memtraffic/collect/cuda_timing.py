"""How long a call takes on a CUDA device (CUDA events, L2 flushed or not): `memtraffic bench` and the roof
probes. torch is imported on first use."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

_L2_FLUSH_BYTES = 256 * 2**20  # larger than any Hopper L2 (50-60 MB)
# About 0.5 ms at 2 GHz: longer than a launcher's host overhead, with room for a slow host (with 100 us, a
# sweep on the H100 once timed an 8 us kernel at 110-415 us in three configs; the cause was not isolated).
_SLEEP_CYCLES = 1_000_000


@dataclass
class Timing:
    median_ns: float
    reps: int


def time_cuda(fn: Callable[[], object], budget_s: float = 0.5, max_reps: int = 200, min_reps: int = 5,
              flush_l2: bool = True) -> Timing:
    """Median CUDA-event time of fn() after two warm-up calls (JIT, autotune, clocks, allocator).

    With flush_l2 a buffer larger than L2 is read (summed) before each call, outside the timed region,
    so every call starts with an L2 holding none of its data and no dirty lines. Zeroing the buffer
    instead would leave the L2 full of dirty lines that the timed call must write back to DRAM as it
    evicts them: on the H100 that added about 6.3 us to every call (a copy of 2 x 32 MB: 28.0 us zeroed,
    21.8 us read; reports/bench/2026-11-23-h100-flush). Repetitions fill
    budget_s.

    Before each start event the GPU is kept busy (torch.cuda._sleep) so the host has enqueued the
    call before the GPU reaches it: otherwise a microsecond kernel behind a slow Python launcher
    would be timed with the launcher's overhead.
    """
    import torch

    flush = torch.ones((_L2_FLUSH_BYTES if flush_l2 else 0) // 4, dtype=torch.float32, device="cuda")
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    once = max(time.perf_counter() - t0, 1e-6)
    reps = int(min(max_reps, max(min_reps, budget_s / once)))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for s, e in zip(starts, ends, strict=True):
        if flush_l2:
            flush.sum()  # reads 256 MB: the L2 ends up clean, holding none of fn's data
        torch.cuda._sleep(_SLEEP_CYCLES)
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    times = [s.elapsed_time(e) * 1e6 for s, e in zip(starts, ends, strict=True)]  # ms -> ns
    return Timing(statistics.median(times), reps)
