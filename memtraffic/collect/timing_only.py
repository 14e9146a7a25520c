"""Timing-only runs: kernel times without counters, when asked or when ncu cannot read the counters.

`profile --timing-only` (profile_timing): The program runs without ncu, through the launcher
(memtraffic/_inject/launch.py), which times its kernels with torch.profiler
(memtraffic.inprogram.kernel_timer) while the op tracer, the Triton launch ranges and regions record the
same minimums as under ncu. The run folder has the usual layout with `timings.json`
(memtraffic.runfolder.timings) where `profile.ncu-rep` would be; analysis shows each range's time, its
achieved bandwidth at the minimum (minimum bytes / time) and that bandwidth's fraction of the measured
copy roof, and no per-level bytes.

memtraffic.api runs it for --timing-only, and when profile raises CountersUnavailable
(memtraffic.collect.fallback). Torch-free here: the program, not memtraffic, imports torch.

`measure --timing-only` (measure_timing): The plan is measure's; the runner (`python -m
memtraffic.collect.runner PLAN.json`) runs without ncu through the launcher, which times its kernels with
torch.profiler (memtraffic.inprogram.kernel_timer): each config's measured launch, inside its `mt|v|...`
range, after the runner's warm-up call (the kernels outside every range, warm-up and reference checks, are
dropped, as ncu's --nvtx-include leaves them out). The run folder has measure's layout with `timings.json`
(memtraffic.runfolder.timings) where the reports would be; the analysis gives each config its time and
bandwidth at the model's minimum, no per-level bytes.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable

from memtraffic.collect.measure import (
    MeasureOptions,
    MeasureResult,
    plan_for,
    precheck,
    run_label,
    runner_argv,
    skip_line,
)
from memtraffic.collect.profile import (
    STARTUP_FILE,
    TIMINGS_ENV,
    TORCH_MARK_FILE,
    ProfileOptions,
    ProfileResult,
    ProgramFailed,
    check_options,
    program_env,
    program_label,
    resolve_program,
    startup_split,
    trace_mode,
    with_launcher,
)
from memtraffic.collect.trace_ops import INJECT_DIR, tracer_warnings
from memtraffic.host.gpu import ANYWHERE, gpu_name
from memtraffic.host.machine import environment, utc_now
from memtraffic.runfolder.builder import RunBuilder
from memtraffic.runfolder.folder import new_run_dir, read_status
from memtraffic.runfolder.load import TRACE_FILE
from memtraffic.runfolder.records import RunRecord, plan_file, plan_from_trace
from memtraffic.runfolder.timings import TIMER, TIMINGS_FILE, keep_ranged
from memtraffic.runfolder.trace import TRACE_FROM, read_startup, read_trace
from memtraffic.vocab.errors import GpuNotFoundError, MemtrafficError, UsageError
from memtraffic.vocab.files import refuse_nonempty


def _require_gpu() -> str:
    """The GPU's name, or GpuNotFoundError before anything is created: without a GPU there is no kernel to
    time (a measure plan would run in Triton's interpreter, a program would record nothing)."""
    try:
        return gpu_name()
    except GpuNotFoundError:
        raise GpuNotFoundError("no NVIDIA GPU is visible (nvidia-smi found none): timing-only runs time CUDA "
                               f"kernels, so they need one; {ANYWHERE}") from None


def profile_timing(opts: ProfileOptions, echo: Callable[[str], None], reason: str = "") -> ProfileResult:
    """Run the program without ncu, its kernels timed; the run folder as profile's, timings.json as its
    report. A program that fails after writing its timings gives a partial result (as under ncu); one
    that fails before raises ProgramFailed."""
    entered = time.time()
    program = resolve_program(opts.command)
    mode = trace_mode(opts) if opts.torch_ops else "none"
    if with_launcher([program, *opts.command[1:]], mode) is None:
        raise UsageError("timing-only runs time kernels with torch.profiler inside the program: give a "
                         f"Python program that uses PyTorch (python SCRIPT, -m MODULE or -c CODE), not "
                         f"{shlex.join(opts.command)!r}")
    check_options(opts)
    if opts.out is not None:
        refuse_nonempty(opts.out)
    gpu = _require_gpu()
    run_dir = new_run_dir([program_label(opts.command)], opts.out, opts.runs_root)
    timings = run_dir / TIMINGS_FILE
    app = with_launcher([program, *opts.command[1:]], mode, opts.triton, timings) or []
    echo(f"timing {shlex.join(opts.command)} without counters into {run_dir}")
    run: RunRecord = {
        "kind": "profile", "timing_only": True, "time_source": TIMER,
        "timing_reason": reason or "asked for (--timing-only)",
        "started": utc_now(), "command": shlex.join(sys.argv), "program": list(opts.command),
        "environment": environment(gpu), "metric_set": None, "metric_names": [], "metric_notes": [],
        "torch_ops": opts.torch_ops, "triton": opts.triton,
        "traced_from": TRACE_FROM[trace_mode(opts)] if opts.torch_ops else None, "source": False,
        "clock_control": None, "cache_control": None,
    }
    env = program_env(run_dir, opts.torch_ops, mode=trace_mode(opts), triton=opts.triton, timings=timings)
    t0, started = time.perf_counter(), time.time()
    proc = subprocess.run(app, env=env, stdout=sys.stderr, check=False)
    has_timings = timings.is_file()
    if has_timings and opts.nvtx_include:  # a filter: keep what it keeps of our ranges, all of them
        run["nvtx_include_applied"] = "kernels inside an mt| range (timing-only runs take no other filter)"
        keep_ranged(timings)
    run.update({"wall_time_s": round(time.perf_counter() - t0, 3), "finished": utc_now(),
                "interrupted": False, "attempts": [{"argv": app, "returncode": proc.returncode}],
                "returncode": proc.returncode,
                "startup": startup_split(read_startup(run_dir / STARTUP_FILE), entered, started, None),
                "reports": [TIMINGS_FILE] if has_timings else []})
    (run_dir / STARTUP_FILE).unlink(missing_ok=True)
    plan = plan_from_trace(read_trace(run_dir / TRACE_FILE), opts.command,
                           {"spec": None, "names": [], "notes": ["timing-only: no counters"]})
    record = RunBuilder(run_dir, run)
    record.save_plan(plan, checked=True)
    record.save()
    for text in tracer_warnings(run_dir / TORCH_MARK_FILE):
        echo(f"warning: {text}")
    failed = proc.returncode != 0
    if not has_timings:
        if failed:
            raise ProgramFailed(f"the program exited with code {proc.returncode} before it wrote its kernel "
                                "times", proc.returncode)
        raise MemtrafficError(f"the program wrote no {TIMINGS_FILE}: it never imported torch (timing-only "
                              "runs time kernels with torch.profiler), or it ended with os._exit")
    echo(f"timed the program's kernels; the program recorded {len(plan['configs'])} ops/regions/launches")
    return ProfileResult(run_dir, run, plan, timings)


def measure_timing(opts: MeasureOptions, echo: Callable[[str], None], reason: str = "") -> MeasureResult:
    """Run the plan's configs without ncu, their kernels timed (see the module doc)."""
    if opts.plan is None:
        precheck(opts)  # the options, before the GPU is looked for and before torch and triton load
    if opts.out is not None:
        refuse_nonempty(opts.out)
    gpu = _require_gpu()
    plan = plan_for(opts)
    run_dir = new_run_dir(run_label(opts, plan), opts.out, opts.runs_root)
    plan["metrics"] = {"spec": None, "names": [], "notes": ["timing-only: no counters"]}
    plan["options"] = {"clock_control": None, "cache_control": None, "source": False}
    record = RunBuilder(run_dir)
    record.save_plan(plan)
    for s in plan.get("skipped", []):
        echo(skip_line(s))
    timings = run_dir / TIMINGS_FILE
    argv = with_launcher(runner_argv(run_dir / plan_file()), "none", timings=timings) or []
    env = dict(os.environ)
    env[TIMINGS_ENV] = str(timings)
    env["PYTHONPATH"] = os.pathsep.join([str(INJECT_DIR), *filter(None, [env.get("PYTHONPATH")])])
    echo(f"timing {len(plan['configs'])} configs without counters into {run_dir}")
    t0 = time.perf_counter()
    with open(run_dir / "runner.log", "w", encoding="utf-8") as log:
        proc = subprocess.run(argv, env=env, stdout=log, stderr=subprocess.STDOUT, check=False)
    has_timings = timings.is_file()
    if has_timings:  # measure's ncu runs profile only inside the configs' ranges: so do these times
        keep_ranged(timings)
    status = read_status(run_dir / plan.get("status_file", "status.jsonl"))
    run: RunRecord = {
        "started": utc_now(), "command": shlex.join(sys.argv), "environment": environment(gpu),
        "params": opts.params, "metric_set": None, "metric_names": [], "metric_notes": [],
        "clock_control": None, "cache_control": None, "source": False,
        "timing_only": True, "time_source": TIMER, "timing_reason": reason or "asked for (--timing-only)",
        "wall_time_s": round(time.perf_counter() - t0, 3), "finished": utc_now(), "interrupted": False,
        "attempts": [{"argv": argv, "returncode": proc.returncode, "passes": None}], "passes": None,
        "reports": [TIMINGS_FILE] if has_timings else [],
        "variants": list(dict.fromkeys(c.get("variant", "") for c in plan["configs"])),
        "configs": record.outcomes(status, launches=None), "skipped": plan.get("skipped", []),
    }
    record.save(**run)
    return MeasureResult(record, [timings] if has_timings else [], status=status, clock=time.perf_counter())
