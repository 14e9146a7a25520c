"""Kernel times without counters: the timings file of a timing-only run, and how it is made from a trace.

A timing-only run (`profile --timing-only`, or the fallback when ncu may not read the counters or is
missing) keeps the run folder's layout with `timings.json` where a `.ncu-rep` would be:

    {"format": 1, "source": "...", "device": "NVIDIA H100 80GB HBM3",
     "kernels": [{"launch": 0, "range": "mt|op|3|aten.mm.default", "nvtx": [...], "kernel": "...",
                  "time_ns": 1234, "stream": 7}, ...]}

one entry per kernel launch in launch order: its device time and the innermost `mt|` range it was
launched in ("" for none), so analysis joins it to the plan's minimum as it joins an ncu report's
kernels. No per-level bytes: the file has none to give.

`join_trace` makes the entries from a Chrome trace that torch.profiler (Kineto, CUPTI activity records)
exports: each kernel event's correlation id names the runtime or driver call that launched it
(cudaLaunchKernel, cuLaunchKernelEx...), and that call's CPU thread and start time place it inside the
`record_function` ranges the program had open (memtraffic.inprogram.kernel_timer mirrors every `mt|` NVTX
range into one). Torch-free.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypedDict, cast

from memtraffic.vocab.errors import ReportError
from memtraffic.vocab.files import read_json, write_json
from memtraffic.vocab.units import LIMIT

TIMINGS_FILE = "timings.json"
# A profile's kernel times, from a pass of the program without ncu (collect.profile.timing_pass).
KERNEL_TIMES_FILE = "kernel_times.json"
TIMINGS_FORMAT = 1
SOURCE = "torch.profiler (Kineto/CUPTI activity records): kernel device times, no counters"

# Where a row's time comes from: run.json's "time_source" (the run's) and the analyzed table's column of
# that name (each row's). The kernel timer times each kernel as it ran, with CUPTI's activity records: in
# a timing-only run, or in a pass of the program without ncu after a profile (`profile --time-from
# program`, the default), which gives every launch it can join its own time. ncu's kernel replay times a
# kernel with the caches flushed before it (`--time-from ncu`): an op that reads what the kernel before it
# just wrote reads it from L2 in the program and from DRAM under ncu (aten.mse_loss, H100, 2026-11-28:
# 28.7 us under ncu, 23.2 us in the program). ncu's range replay gives a range only the range's duration,
# about 200 us for an op whose kernels take 1-2 us (H100, 2026-11-27): such a row has no time without the
# pass.
NCU_TIME = "ncu gpu__time_duration (kernel replay)"
TIMER = "kernel timer (CUPTI activity records)"
TIMER_PASS = "kernel timer (CUPTI activity records) in a pass of the program without ncu"
NO_KERNEL_TIME = ("none: ncu's range replay gives a range only its duration, not its kernels' time, and no "
                  "pass without ncu timed it")
_LAUNCH_CATEGORIES = {"cuda_runtime", "cuda_driver"}
_RANGE_CATEGORIES = {"user_annotation", "cpu_op"}  # record_function; _RecordFunctionFast (our mirror)


class KernelTiming(TypedDict):
    """One kernel launch of timings.json (see the module doc)."""

    launch: int
    range: str  # the innermost `mt|` range it was launched in ("" for none)
    nvtx: list[str]
    kernel: str
    time_ns: int
    stream: int | None


class _TimingsKernels(TypedDict):
    format: int
    kernels: list[KernelTiming]  # read_timings checks both


class Timings(_TimingsKernels, total=False):
    source: str
    device: str
    dropped_outside_ranges: int


def _num(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def join_trace(events: Iterable[Mapping[str, Any]]) -> list[KernelTiming]:
    """Kernel entries (see the module doc) of a Chrome trace's events, in order of kernel start.

    A kernel whose launch call is not in the trace takes the `mt|` range its "External id" names, if
    any; one launched outside every `mt|` range gets range "" (analysis: outside any op or region)."""
    kernels: list[Mapping[str, Any]] = []  # Chrome trace events
    launches: dict[object, Mapping[str, Any]] = {}
    ranges: dict[object, list[tuple[float, float, str]]] = {}
    external: dict[object, str] = {}
    for e in events:
        if e.get("ph") != "X":
            continue
        cat, args = e.get("cat", ""), e.get("args") or {}
        ts, dur = _num(e.get("ts")), _num(e.get("dur"))
        if ts is None or dur is None:
            continue
        if cat == "kernel" and "correlation" in args:
            kernels.append(e)
        elif cat in _LAUNCH_CATEGORIES and "correlation" in args:
            launches[args["correlation"]] = e
        elif cat in _RANGE_CATEGORIES and str(e.get("name", "")).startswith("mt|"):
            ranges.setdefault((e.get("pid"), e.get("tid")), []).append((ts, ts + dur, str(e["name"])))
            if "External id" in args:
                external[args["External id"]] = str(e["name"])
    ordered = sorted(kernels, key=lambda e: float(e["ts"]))
    calls = [launches.get(k["args"]["correlation"]) for k in ordered]
    stacks = _stacks(ranges, [c for c in calls if c is not None])
    out: list[KernelTiming] = []
    for i, (k, call) in enumerate(zip(ordered, calls, strict=True)):
        stack = stacks.get(id(call), []) if call is not None else []
        if call is None and (k.get("args") or {}).get("External id") in external:
            stack = [external[k["args"]["External id"]]]  # the range the profiler says launched it
        out.append({"launch": i, "range": stack[-1] if stack else "", "nvtx": stack,
                    "kernel": str(k.get("name", "")), "time_ns": round(float(k["dur"]) * 1000),
                    "stream": (k.get("args") or {}).get("stream")})
    return out


def _stacks(ranges: dict[object, list[tuple[float, float, str]]],
            calls: list[Mapping[str, Any]]) -> dict[int, list[str]]:
    """id(launch call) -> names of the ranges open on its thread when it started, outermost first: one
    sweep per thread over ranges (by start, outer first on ties) and calls (by start)."""
    out: dict[int, list[str]] = {}
    by_thread: dict[object, list[Mapping[str, Any]]] = {}
    for c in calls:
        by_thread.setdefault((c.get("pid"), c.get("tid")), []).append(c)
    for thread, mine in by_thread.items():
        spans = sorted(ranges.get(thread, []), key=lambda s: (s[0], -s[1]))
        mine.sort(key=lambda c: float(c["ts"]))
        stack: list[tuple[float, float, str]] = []
        j = 0
        for c in mine:
            t = float(c["ts"])
            while j < len(spans) and spans[j][0] <= t:
                while stack and stack[-1][1] < spans[j][0]:
                    stack.pop()
                stack.append(spans[j])
                j += 1
            while stack and stack[-1][1] < t:
                stack.pop()
            out[id(c)] = [s[2] for s in stack if s[0] <= t <= s[1]]
    return out


def write_timings(path: Path, kernels: list[KernelTiming], device: str) -> None:
    write_json(path, {"format": TIMINGS_FORMAT, "source": SOURCE, "device": device, "kernels": kernels})


def read_timings(path: Path) -> Timings:
    """The timings file, checked: ReportError naming what is wrong when it is not one."""
    data = read_json(path, "the run folder is damaged")
    entries = data.get("kernels") if isinstance(data, dict) else None
    ok = (isinstance(entries, list) and data.get("format") == TIMINGS_FORMAT
          and all(isinstance(k, dict) and isinstance(k.get("range"), str) and isinstance(k.get("kernel"), str)
                  and isinstance(k.get("time_ns"), int) and not isinstance(k.get("time_ns"), bool)
                  and 0 <= k["time_ns"] < LIMIT for k in entries))
    if not ok:
        raise ReportError(f"{path} is not a timings file of format {TIMINGS_FORMAT} (a list of kernels, each "
                          "with range, kernel and time_ns from 0 to below 2**63): the run folder is damaged")
    return cast(Timings, data)  # the fields readers use are checked just above


def range_times(path: Path) -> dict[str, int]:
    """Each `mt|` range of the timings file at `path` -> the summed time (ns) of the kernels launched inside
    it, nested ranges' kernels included: a range-replayed row's kernels' own time."""
    out: dict[str, int] = {}
    for k in read_timings(path)["kernels"]:
        stack = k.get("nvtx") or [k["range"]]
        for name in dict.fromkeys(n for n in stack if isinstance(n, str) and n):
            out[name] = out.get(name, 0) + k["time_ns"]
    return out


def same_kernel(short: str, timed: str) -> bool:
    """Whether ncu's short kernel name ('vectorized_layer_norm_kernel') names the kernel the timer recorded
    by its demangled name ('void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<...>')."""
    return bool(short) and (short == timed or short in timed)


def launch_times(path: Path, launches: Sequence[tuple[str, str]]) -> list[int | None]:
    """Each (range, ncu short kernel name) launch of a kernel-replayed report, in launch order -> its own
    time (ns) in the timings file at `path`, None where the pass ran other kernels.

    The k-th launch of a range joins the k-th timed kernel of that range (its innermost `mt|` range; "" for
    none) when the range launched as many kernels in both runs and every name agrees; otherwise the whole
    range keeps no time of the pass (a filter such as --launch-count, a profiler window outside the
    ranges, or a program that ran differently the second time)."""
    timed: dict[str, list[KernelTiming]] = {}
    for k in read_timings(path)["kernels"]:
        timed.setdefault(k["range"], []).append(k)
    rows: dict[str, list[int]] = {}
    for i, (rng, _) in enumerate(launches):
        rows.setdefault(rng, []).append(i)
    out: list[int | None] = [None] * len(launches)
    for rng, mine in rows.items():
        theirs = timed.get(rng, [])
        if len(theirs) == len(mine) and all(same_kernel(launches[i][1], t["kernel"])
                                            for i, t in zip(mine, theirs, strict=True)):
            for i, t in zip(mine, theirs, strict=True):
                out[i] = t["time_ns"]
    return out


def keep_ranged(path: Path) -> int:
    """Keep only the kernels launched inside an `mt|` range in the timings file at `path` (as ncu's
    `--nvtx-include` keeps measure's and profile's under a filter); returns how many were dropped."""
    data = read_timings(path)
    kept = [k for k in data["kernels"] if k["range"]]
    for i, k in enumerate(kept):
        k["launch"] = i
    dropped = len(data["kernels"]) - len(kept)
    write_json(path, {**data, "kernels": kept, "dropped_outside_ranges": dropped})
    return dropped


def is_timings(path: str | Path) -> bool:
    return Path(path).name.endswith(TIMINGS_FILE)
