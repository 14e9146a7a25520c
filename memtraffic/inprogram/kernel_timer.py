"""Kernel times of a running program without counters (measuring side: imports torch).

`start(path)` (sitecustomize / launch.py call it under MEMTRAFFIC_TIMINGS=FILE) starts torch.profiler
with CUDA activity (Kineto over CUPTI's activity API: per-kernel device start and end times, which need
no performance-counter permission, unlike ncu) and mirrors every `mt|` NVTX range the program pushes
(ops, regions, Triton launches) into a profiler range of the same name (`_RecordFunctionFast`, the
record_function that Inductor uses and the op tracer does not see).
At exit it stops the profiler, exports its Chrome trace to a temporary file, joins each kernel to the
innermost range it was launched in (memtraffic.runfolder.timings.join_trace) and writes FILE.

Why the profiler and not CUDA events around each range: an event pair times the stream between two
points, gaps and launch latency included, which for a microsecond kernel is most of the interval;
CUPTI's activity records time each kernel on the device, as ncu's gpu__time_duration does.
"""

from __future__ import annotations

import atexit
import json
import os
import tempfile
import threading
import warnings
from collections.abc import Callable
from pathlib import Path

import torch
from torch._C._profiler import _RecordFunctionFast

from memtraffic.runfolder.timings import join_trace, write_timings

_local = threading.local()
_profiler: torch.profiler.profile | None = None


def _mirror_ranges() -> None:
    """torch.cuda.nvtx.range_push/pop also enter/exit a record_function for our `mt|` ranges, and
    memtraffic.region pushes through them."""
    nvtx = torch.cuda.nvtx
    push: Callable[[str], object] = nvtx.range_push
    pop: Callable[[], object] = nvtx.range_pop
    if not torch.cuda.is_available():  # a CPU build has no NVTX: the profiler's ranges only
        push, pop = (lambda msg: None), (lambda: None)

    def stack() -> list[_RecordFunctionFast | None]:
        if not hasattr(_local, "stack"):
            _local.stack = []
        found: list[_RecordFunctionFast | None] = _local.stack
        return found

    def range_push(msg: str) -> object:
        handle = None
        if isinstance(msg, str) and msg.startswith("mt|"):
            # the C++ fast path (Inductor's): record_function would be an aten op the op tracer traces
            handle = _RecordFunctionFast(msg)
            handle.__enter__()
        stack().append(handle)
        return push(msg)

    def range_pop() -> object:
        s = stack()
        handle = s.pop() if s else None
        if handle is not None:
            handle.__exit__(None, None, None)
        return pop()

    nvtx.range_push, nvtx.range_pop = range_push, range_pop
    from memtraffic.inprogram import regions

    regions.use_nvtx(nvtx.range_push, nvtx.range_pop)


def start(path: str | Path) -> None:
    """Time the rest of the program's kernels into the timings file at `path` (written at exit)."""
    global _profiler
    if _profiler is not None:
        return
    activities = [torch.profiler.ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    _mirror_ranges()
    _profiler = torch.profiler.profile(activities=activities)
    with warnings.catch_warnings():  # torch warns that a cycle keeps only its own events: we run one
        warnings.filterwarnings("ignore", message=".*Profiler clears events at the end of each cycle")
        _profiler.start()
    atexit.register(finish, Path(path))


def finish(path: Path) -> None:
    """Stop the profiler and write the timings file (see the module doc)."""
    global _profiler
    if _profiler is None:
        return
    prof, _profiler = _profiler, None
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    prof.stop()
    fd, tmp = tempfile.mkstemp(suffix=".json", prefix="memtraffic-kineto-")
    os.close(fd)
    try:
        prof.export_chrome_trace(tmp)
        events = json.loads(Path(tmp).read_text()).get("traceEvents", [])
    finally:
        os.unlink(tmp)
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    write_timings(path, join_trace(events), device)
