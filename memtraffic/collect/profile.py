"""`memtraffic profile -- CMD`: any program under ncu with memtraffic's metrics, into a new run folder.

The program is anything ncu can launch (python, trtexec, a CUDA binary). Minimums come from what the
program itself records while it runs: with --torch-ops, every aten op's compulsory traffic (the tracer in
memtraffic.inprogram.tracer, injected through PYTHONPATH); in any program, `memtraffic.region(...)`
blocks. Both append plan configs to $MEMTRAFFIC_TRACE, which becomes the run's plan.json, so `analyze`
joins each kernel to its op or region by NVTX range exactly as it does for `measure`'s variants.

The run folder has the same layout as measure's: profile.ncu-rep, plan.json, run.json (the exact ncu argv,
the program's exit code, environment), ncu.log, trace.jsonl, results.csv/json. Nothing is overwritten. A
program that fails keeps its partial report; memtraffic.api.run_profile analyzes it.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from memtraffic.collect.fallback import unavailable
from memtraffic.collect.progress import TraceProgress, earlier_run, end_text
from memtraffic.collect.trace_ops import INJECT_DIR, tracer_env, tracer_warnings
from memtraffic.host.gpu import gpu_name
from memtraffic.host.machine import utc_now
from memtraffic.ncu.command import (
    RANGE_INCLUDE,
    NcuControls,
    check_ncu_options,
    metric_tokens,
    parse_controls,
    run_ncu,
)
from memtraffic.ncu.kernel_table import keep_kernel_tables
from memtraffic.ncu.metrics import FIRST_LOOK
from memtraffic.ncu.session import NcuSession
from memtraffic.runfolder.builder import RunBuilder
from memtraffic.runfolder.folder import DEFAULT_RUNS_ROOT, new_run_dir
from memtraffic.runfolder.load import TRACE_FILE
from memtraffic.runfolder.records import (
    Attempt,
    Plan,
    Replay,
    RunRecord,
    TimingPass,
    plan_from_trace,
)
from memtraffic.runfolder.timings import (
    KERNEL_TIMES_FILE,
    NCU_TIME,
    NO_KERNEL_TIME,
    TIMER_PASS,
    read_timings,
)
from memtraffic.runfolder.trace import STARTUP_ENV, TRACE_ENV, TRACE_FROM, read_startup, read_trace
from memtraffic.vocab.errors import MemtrafficError, NcuError, UsageError, say
from memtraffic.vocab.files import refuse_nonempty
from memtraffic.vocab.launches import DISTINCT_ENV, NVTX_EXCLUDE, REPLAY_ENV, VALUE_CALLS_ENV

TORCH_MARK_FILE = "torch-imported"
REPORT_FILE = "profile.ncu-rep"
TRITON_ENV = "MEMTRAFFIC_TRITON"  # "1": sitecustomize / the launcher range each Triton launch
TIMINGS_ENV = "MEMTRAFFIC_TIMINGS"  # a file: the program times its kernels into it (timing-only runs)
STARTUP_FILE = "startup.jsonl"  # the program's start-up stamps (runfolder.trace.STARTUP_ENV), read into
# run.json's "startup" and removed


class ProgramFailed(MemtrafficError):
    """The profiled program exited non-zero; what ncu profiled before is saved and analyzed."""

    def __init__(self, message: str, returncode: int):
        super().__init__(message)
        self.exit_code = returncode if 0 < returncode < 256 else 1


# Where each kernel's time comes from: a pass of the program without ncu (its kernels as they ran, caches as
# the program leaves them) or ncu's kernel replay (caches flushed before each kernel; no second run).
TimeFrom = Literal["program", "ncu"]
TIME_FROM: tuple[TimeFrom, ...] = get_args(TimeFrom)


@dataclass
class ProfileOptions:
    command: list[str]
    metrics: str = FIRST_LOOK
    torch_ops: bool = False
    triton: bool = True  # a range per Triton launch of a Python program (inprogram.triton_launches)
    timing_only: bool = False  # no ncu: kernel times joined to the minimums (memtraffic.collect.timing_only)
    roofs: bool = True  # measure the GPU's roofs after the run when none are known (probes.roof_probes)
    source: bool = False
    kernel_name: str | None = None
    launch_skip: int | None = None
    launch_count: int | None = None
    nvtx_include: list[str] = field(default_factory=list)
    # With --torch-ops: measure only the calls of these ops ('aten.mm' or 'aten.mm.default'); none: all.
    ops: list[str] = field(default_factory=list)
    # Measure the first `distinct` calls of each signature; repeats reuse their counters (0: every call).
    distinct: int = 1
    # ... and of a value-dependent op's signature (gathers, scatters: VALUE_DEPENDENT; 0: every call).
    value_calls: int = 4
    target_processes: str = "all"
    profile_from_start: bool = True
    replay: str = "auto"  # kernel, range (each measured mt| range one unit), or auto: choose_replay
    # Each kernel's time: "program" (a pass of the program without ncu: timing_pass) or "ncu" (its replay).
    time_from: TimeFrom = "program"
    from_first_forward: bool = False
    clock_control: str = "none"
    cache_control: str = "all"
    out: Path | None = None
    runs_root: Path = DEFAULT_RUNS_ROOT
    verbose: bool = False
    # Parsed once, when the options are made (UsageError for a bad value): --metrics (a name not even
    # metric-shaped), --cache-control and --clock-control.
    metric_tokens: tuple[str, ...] = field(init=False)
    controls: NcuControls = field(init=False)

    def __post_init__(self) -> None:
        if self.time_from not in TIME_FROM:
            raise UsageError(f"unknown --time-from {self.time_from!r}: use one of {', '.join(TIME_FROM)}")
        self.controls = parse_controls(self.cache_control, self.clock_control)
        self.metric_tokens = tuple(metric_tokens(self.metrics))
        conflict = flag_conflict(self)
        if conflict:
            raise UsageError(conflict)


# Options that cannot go together: (first flag, second flag, why), checked when the options are made, so
# before ncu, the GPU or the program is looked at.
_RANGE = "range replay measures each op, region or Triton launch range as one unit"
_TIMED = "a timing-only run times the kernels without ncu"
CONFLICTS = [
    ("--replay range", "--kernel-name", f"{_RANGE}, not single kernels (--replay kernel picks them by name)"),
    ("--replay range", "--source", f"{_RANGE}, and ncu takes per-line counters under kernel replay only"),
    ("--replay range", "--launch-count", f"{_RANGE}, not kernel launches (--replay kernel counts them)"),
    ("--timing-only", "--source", f"{_TIMED}, so it has no per-line counters"),
    ("--timing-only", "--replay range", f"{_TIMED}, so nothing is replayed"),
    ("--timing-only", "--time-from ncu", f"{_TIMED}, so it has no time of ncu's"),
    ("--replay range", "--time-from ncu", "ncu's range replay gives a range only its duration, ncu's own "
     "work included, never its kernels' time"),
]


def flag_conflict(opts: ProfileOptions) -> str | None:
    """The line that names two options given together that cannot be (CONFLICTS), None when none are."""
    given = {"--replay range": opts.replay == "range", "--kernel-name": opts.kernel_name is not None,
             "--source": opts.source, "--launch-count": opts.launch_count is not None,
             "--timing-only": opts.timing_only, "--time-from ncu": opts.time_from == "ncu"}
    for first, second, why in CONFLICTS:
        if given[first] and given[second]:
            return f"{first} and {second} do not go together: {why}; drop one of them"
    return None


@dataclass
class ProfileResult:
    """A profiled run folder: run.json's content, the plan from the program's trace, its report."""

    run_dir: Path
    run: RunRecord
    plan: Plan
    report: Path
    table: Any = None  # the analyzed DataFrame, once memtraffic.api.run_profile has analyzed the report

    @property
    def record(self) -> RunBuilder:
        """The run folder's records, to write run.json's last phase (analysis) through."""
        return RunBuilder(self.run_dir, self.run, self.plan)

    @property
    def returncode(self) -> int:
        """The program's exit code (ncu passes it through): non-zero means a partial report."""
        return int(self.run.get("returncode") or 0)


def resolve_program(command: Sequence[str]) -> str:
    """The program's path, or a UsageError when there is no command or it cannot be found."""
    if not command:
        raise UsageError("give the program to profile after --, e.g. memtraffic profile -- python train.py")
    first = command[0]
    found = shutil.which(first)
    if found is None and os.sep in first and Path(first).is_file():
        raise UsageError(f"{first} is not executable: chmod +x it, or run it through its interpreter")
    if found is None:
        raise UsageError(f"command not found: {first} (check the name, or give its full path)")
    return found


REPLAYS = ("auto", "kernel", "range")


# Why `auto` never takes range replay: ncu's range replay gives a range only its duration on the GPU, ncu's
# own per-range work included (a SwiGLU forward in a profiler window, H200, 2026-11-27: 206.8 us for an rsqrt
# over 4,096 floats whose kernel takes 2.0 us; 4.94 ms of "GPU time" against 2.22 ms under kernel replay).
AUTO_WHY = ("auto takes kernel replay: ncu's range replay times a range by its duration, ncu's own work "
            "included (about 200 us for an op whose kernels take 1-2 us); --replay range measures each op "
            "range's bytes as one unit and times its kernels in a second pass without ncu")


def choose_replay(opts: ProfileOptions, metric_names: Sequence[str]) -> Replay:
    """How ncu replays this profile, and why (run.json's "replay").

    `auto` (the default) and `kernel` take kernel replay: each kernel's counters and time, ncu's
    gpu__time_duration. `range` replays each measured op, region or Triton launch range as one unit (a
    foreach op of 52 kernels is one replay; kernels outside memtraffic's ranges, such as autotuning
    benchmarks, are not measured): its bytes equal the sum of its kernels', its time is not theirs, so
    profile times the kernels in a pass of the program without ncu (timing_pass). ncu refuses the
    smsp__sass_* counters and --profile-from-start off (without --torch-ops, whose tracer follows the
    program's profiler window instead) under range replay: those keep kernel replay. A driver call ncu
    cannot capture inside a measured range (a library's first cuInit, a kernel's first
    cuKernelSetAttribute) fails the program: profile then measures it again with kernel replay
    (range_refusal). The reason is kept either way."""
    if opts.replay not in REPLAYS:
        raise UsageError(f"unknown --replay {opts.replay!r}: use one of {', '.join(REPLAYS)}")
    if opts.replay == "kernel":
        return {"mode": "kernel", "why": "asked for (--replay kernel)"}
    if opts.replay == "auto":
        return {"mode": "kernel", "why": AUTO_WHY}
    sass = [n for n in metric_names if n.startswith("smsp__sass_")]
    if sass:
        return {"mode": "kernel", "why": f"ncu's range replay refuses the SASS counters ({sass[0]}"
                f"{f' and {len(sass) - 1} more' if len(sass) > 1 else ''}) of --metrics {opts.metrics}"}
    if not opts.profile_from_start and not opts.torch_ops:
        return {"mode": "kernel", "why": "ncu's range replay refuses --profile-from-start off; with "
                "--torch-ops the op tracer follows the program's profiler window instead"}
    return {"mode": "range", "why": "asked for (--replay range); each range's time from its kernels, timed "
            "in a pass of the program without ncu"}


_REFUSED = re.compile(r"Unsupported API during capture \((\w+)\)|(\S+) is not supported in range replay")


def range_refusal(tail: Sequence[str]) -> str | None:
    """What ncu refused under range replay, from the last lines of its output ('cuInit', a metric name),
    or None: ncu 2025.3.1 then ends the program with an error ("Unsupported API during capture (cuInit)",
    "Metric ... is not supported in range replay")."""
    for line in tail:
        found = _REFUSED.search(line)
        if found:
            return found.group(1) or found.group(2)
    return None


def program_env(run_dir: Path, torch_ops: bool, base: dict[str, str] | None = None,
                mode: str = "1", distinct: int = 0, triton: bool = False,
                timings: Path | None = None, replay: str = "kernel", value_calls: int = 0) -> dict[str, str]:
    """The program's environment: regions and the op tracer append their records to the run's trace.
    `mode`: which op calls the tracer records (memtraffic.runfolder.trace.TRACE_FROM); `distinct` and
    `value_calls`: how many calls of each signature, and of a value-dependent one, are measured
    (memtraffic.vocab.launches; 0: every call); `triton`: each Triton launch gets a range; `timings`: the
    program times its kernels into that file."""
    env = dict(os.environ if base is None else base)
    env[DISTINCT_ENV] = str(distinct)
    env[VALUE_CALLS_ENV] = str(value_calls)
    env[REPLAY_ENV] = replay
    if torch_ops:  # the tracer starts with the program (sitecustomize); the mark says torch was imported
        env = tracer_env(run_dir / TRACE_FILE, env, torch_mark=run_dir / TORCH_MARK_FILE, mode=mode)
    env[TRACE_ENV] = str(run_dir / TRACE_FILE)
    if torch_ops or triton:
        env[STARTUP_ENV] = str(run_dir / STARTUP_FILE)
    if triton:
        env[TRITON_ENV] = "1"
    if timings is not None:
        env[TIMINGS_ENV] = str(timings)
    if (triton or timings is not None) and not torch_ops:  # sitecustomize's route, for non-Python launchers
        env["PYTHONPATH"] = os.pathsep.join([str(INJECT_DIR), *filter(None, [env.get("PYTHONPATH")])])
    return env


def trace_mode(opts: ProfileOptions) -> str:
    """Which op calls --torch-ops records: those ncu may profile (the profiler window under
    --profile-from-start off), from the first forward on request, else all."""
    if not opts.profile_from_start:
        return "window"
    return "forward" if opts.from_first_forward else "1"


LAUNCHER = Path(__file__).resolve().parent.parent / "_inject" / "launch.py"
_PYTHON = re.compile(r"python[\d.]*")
_PYTHON_FLAGS_WITH_VALUE = ("-W", "-X")


def with_launcher(command: Sequence[str], mode: str = "1", triton: bool = False,
                  timings: Path | None = None) -> list[str] | None:
    """`python [flags] train.py ...` -> `python [flags] .../launch.py train.py ...`; None if not Python.
    A trace mode other than "1" goes to the launcher as `--trace-from=MODE` ("none": no op tracer), Triton
    launch ranges as `--triton`, kernel timing as `--timings=FILE`. As arguments, not only environment
    variables: a Python process between memtraffic and the program (H100, 2026-11-25: under ncu) runs
    sitecustomize too, which takes them out of the environment the program then inherits.

    The launcher starts the op tracer inside the interpreter itself: under ncu the PYTHONPATH route
    (sitecustomize) did not run (H100, ncu 2025.3.1, 2026-11-23), an interpreter argument always does.
    """
    if not _PYTHON.fullmatch(Path(command[0]).name):
        return None
    i = 1
    while i < len(command) and command[i].startswith("-") and command[i] not in ("-m", "-c", "-"):
        i += 2 if command[i] in _PYTHON_FLAGS_WITH_VALUE else 1
    if i >= len(command) or command[i] == "-":  # an interactive interpreter or a program on stdin
        return None
    options = [] if mode == "1" else [f"--trace-from={mode}"]
    options += ["--triton"] if triton else []
    options += [f"--timings={timings}"] if timings is not None else []
    return [command[0], *command[1:i], str(LAUNCHER), *options, *command[i:]]


TIMING_PASS_DIR = "timing-pass"  # the pass's own trace, start-up stamps and torch mark, removed after it


def timing_pass(opts: ProfileOptions, program: str, run_dir: Path, replay: str,
                echo: Callable[[str], None]) -> TimingPass | None:
    """Time a profile's kernels as the program runs them: the program once more, without ncu, its kernels
    timed by the kernel timer (memtraffic.inprogram.kernel_timer: CUPTI activity records) into
    KERNEL_TIMES_FILE, with the ranges the ncu run had (the same trace mode, --distinct, --value-calls and
    replay setting, so each op call gets the same `mt|` range name). analysis.analyze gives each launch its
    own time from that file (a range-replayed row its kernels' sum). Not inside ncu: CUPTI takes one
    subscriber, and ncu is one. The pass's trace is set aside (the plan is the ncu run's). None for a
    program that is not Python (the timer runs inside the interpreter): its launches keep ncu's time (a
    range-replayed one has none), and analysis says so."""
    times = run_dir / KERNEL_TIMES_FILE
    app = with_launcher([program, *opts.command[1:]], trace_mode(opts) if opts.torch_ops else "none",
                        opts.triton, times)
    if app is None:
        said = (f"the kernel timer runs inside a Python program, and {Path(program).name} is not one")
        echo(f"warning: no kernel times of the program's own: {said} (its ranges have ncu's range duration "
             "only; profile with --replay kernel for each kernel's time)" if replay == "range" else
             f"each kernel keeps ncu's time (caches flushed before it): {said}")
        return None
    scratch = run_dir / TIMING_PASS_DIR
    scratch.mkdir(exist_ok=True)
    env = program_env(scratch, opts.torch_ops, mode=trace_mode(opts), distinct=opts.distinct,
                      value_calls=opts.value_calls, triton=opts.triton, timings=times, replay=replay)
    echo("timing the kernels as the program runs them: the program again, without ncu "
         "(--time-from ncu skips this)" if replay != "range" else
         "timing each range's kernels: the program again, without ncu (range replay's time is ncu's)")
    t0 = time.perf_counter()
    proc = subprocess.run(app, env=env, stdout=sys.stderr, check=False)
    shutil.rmtree(scratch, ignore_errors=True)
    kernels = len(read_timings(times)["kernels"]) if times.is_file() else None
    if kernels is None:
        echo(f"warning: the pass without ncu wrote no kernel times (exit code {proc.returncode}; the timer "
             "starts when the program imports torch): "
             + ("the ranges have no kernel time" if replay == "range" else "each kernel keeps ncu's time"))
    return {"argv": app, "returncode": proc.returncode, "wall_time_s": round(time.perf_counter() - t0, 3),
            "kernels": kernels}


def pass_left_out(opts: ProfileOptions) -> str | None:
    """Why a kernel-replayed profile keeps ncu's times without a pass of the program (None: it takes one).
    A filter on launches leaves ncu fewer kernels in a range than the pass runs, so no range would join."""
    if opts.time_from == "ncu":
        return "asked for (--time-from ncu)"
    filters = (("--kernel-name", opts.kernel_name), ("--launch-skip", opts.launch_skip),
               ("--launch-count", opts.launch_count))
    given = [flag for flag, value in filters if value is not None]
    if given:
        return (f"{given[0]} leaves ncu a part of each range's kernels, which a pass of the whole program "
                "cannot join")
    return None


def program_label(command: Sequence[str]) -> str:
    """'python train.py' -> 'train.py'; 'trtexec --onnx=m.onnx' -> 'trtexec': the run folder's name."""
    words = [Path(w).name for w in command]
    if re.fullmatch(r"python[\d.]*", words[0]) and len(words) > 1:
        rest = [w for w in words[1:] if not w.startswith("-")]
        return rest[0] if rest else words[0]
    return words[0]


def launched(opts: ProfileOptions, program: str) -> list[str]:
    """The program's argv: a Python program through the launcher when it traces ops or Triton launches."""
    app = [program, *opts.command[1:]]
    if opts.torch_ops or opts.triton:  # others rely on sitecustomize (program_env)
        app = with_launcher(app, trace_mode(opts) if opts.torch_ops else "none", opts.triton) or app
    return app


def check_options(opts: ProfileOptions) -> None:
    """UsageError for an option value profile refuses, with or without ncu: said before the GPU is looked
    for and before anything is created."""
    check_ncu_options(opts.cache_control, opts.clock_control, opts.target_processes, opts.launch_skip,
                      opts.launch_count)
    if opts.distinct < 0:
        raise UsageError(f"--distinct {opts.distinct}: give how many calls of each signature to measure "
                         "(>= 1), or --every-launch")
    if opts.value_calls < 0:
        raise UsageError(f"--value-calls {opts.value_calls}: give how many calls of each value-dependent "
                         "signature to measure (>= 1), or 0 for every call")
    if opts.replay not in REPLAYS:
        raise UsageError(f"unknown --replay {opts.replay!r}: use one of {', '.join(REPLAYS)}")
    if opts.ops and not opts.torch_ops:
        raise UsageError("--ops names aten ops, which only --torch-ops traces: add --torch-ops")
    if opts.ops and opts.nvtx_include:
        raise UsageError("--ops and --nvtx-include both choose which ranges ncu measures: give one of "
                         "them")
    for op in opts.ops:
        if not _OP_NAME.fullmatch(op):
            raise UsageError(f"--ops {op!r} is not an aten op name: give names such as aten.mm or "
                             "aten.mm.default, comma-separated (the op column of a profile's table)")


_OP_NAME = re.compile(r"aten\.\w+(\.\w+)?")


def ops_include(ops: Sequence[str]) -> str:
    """ncu's --nvtx-include for the op tracer's ranges of these ops ('mt|op|<seq>|aten.mm.default'):
    'aten.mm' takes every overload of aten.mm, 'aten.mm.default' that overload only."""
    names = "|".join(re.escape(op) + ("" if op.count(".") == 2 else r"\.\w+") for op in sorted(set(ops)))
    return rf"regex:^mt\|op\|\d+\|({names})/"


def startup_split(events: dict[str, float], entered: float, started: float,
                  first_kernel_s: float | None) -> dict[str, float]:
    """run.json's "startup": where the time before the first measured kernel went, in seconds, from wall
    times: memtraffic before it started the command (memtraffic_s), ncu's start (if it runs the program)
    and the interpreter's until the program ran (to_program_s), the program's imports up to torch's end
    (imports_s), memtraffic's tracer starting (tracer_s), the program's own work until the first measured
    kernel (to_first_kernel_s). A span whose ends were not stamped (no torch, no launcher) is left out."""
    first = None if first_kernel_s is None else started + first_kernel_s
    program, torch, ready = (events.get(e) for e in ("program_start", "torch_imported", "tracer_ready"))
    spans = {"memtraffic_s": (entered, started), "to_program_s": (started, program),
             "imports_s": (program, torch), "tracer_s": (torch, ready), "to_first_kernel_s": (ready, first)}
    return {key: round(b - a, 3) for key, (a, b) in spans.items() if a is not None and b is not None}


def traced_ranges(opts: ProfileOptions, ranges: bool) -> list[str]:
    """ncu's --nvtx-include filters. With --torch-ops, only kernels inside the op tracer's, regions' and
    Triton launches' ranges: what Inductor's and Triton's autotuning benchmark, and kernels no traced op
    launched, stay out (a compiled MLP block from an empty Inductor cache: 523 such launches measured in
    120 s, H100, 2026-11-26); --ops narrows that to the named ops; the user's --nvtx-include replaces it
    (ours beside it could widen what the user chose). Range replay needs a range filter either way."""
    if opts.ops:
        return [ops_include(opts.ops)]
    if opts.nvtx_include:
        return [RANGE_INCLUDE, *opts.nvtx_include] if ranges else list(opts.nvtx_include)
    return [RANGE_INCLUDE] if ranges or opts.torch_ops else []


def profile(opts: ProfileOptions, echo: Callable[[str], None] | None = None) -> ProfileResult:
    """Check, run the program under ncu, turn its trace into the plan, save. See the module doc.
    Raises CountersUnavailable when ncu is missing or may not read the counters: memtraffic.api.run_profile
    then runs the program timing-only (memtraffic.collect.timing_only), as it does for --timing-only.

    The report is not analyzed here: memtraffic.api.run_profile does that."""
    echo = echo or say
    entered = time.time()
    program = resolve_program(opts.command)
    check_options(opts)
    tokens = list(opts.metric_tokens)  # a name not even metric-shaped failed when the options were made
    if opts.out is not None:
        refuse_nonempty(opts.out)  # a usage error, said before ncu is looked for
    try:
        session = NcuSession.find()
        gpu = gpu_name()
        session = session.on_gpu(gpu, tokens)
    except NcuError as err:
        raise unavailable(err) from None
    for note in session.spec.notes:  # what this GPU cannot count: measured without it
        echo(f"not measured on {gpu}: {note}")

    replay: Replay = choose_replay(opts, session.metrics)
    echo(f"ncu replays each {'measured op range' if replay['mode'] == 'range' else 'kernel'}: "
         f"{replay['why']}")
    app = launched(opts, program)
    run_dir = new_run_dir([program_label(opts.command)], opts.out, opts.runs_root)
    report = run_dir / REPORT_FILE

    def ncu_argv(mode: str) -> list[str]:
        ranges = mode == "range"
        return session.command(
            report, app, cache_control=opts.controls.cache_control,
            clock_control=opts.controls.clock_control,
            nvtx_include=traced_ranges(opts, ranges),
            nvtx_exclude=[NVTX_EXCLUDE] if opts.distinct and not ranges else [],
            replay_mode=mode, target_processes=opts.target_processes,
            kernel_name=opts.kernel_name, launch_skip=opts.launch_skip,
            launch_count=opts.launch_count, source=opts.source,
            # Range replay refuses --profile-from-start off: the tracer then pushes ranges only inside the
            # program's profiler window (trace mode "window"), and those are the only ranges ncu replays.
            profile_from_start=opts.profile_from_start or ranges)

    argv = ncu_argv(replay["mode"])
    echo(f"profiling {shlex.join(opts.command)} with {session.path} into {run_dir}")
    run: RunRecord = {
        "kind": "profile",
        "started": utc_now(),
        "command": shlex.join(sys.argv),
        "program": list(opts.command),
        "environment": session.environment(),
        "metric_set": opts.metrics,
        "ops": list(opts.ops),  # --ops: only these ops' calls measured (none: every op)
        "metric_names": session.metrics,
        "metric_notes": session.spec.notes,
        "torch_ops": opts.torch_ops,
        "triton": opts.triton,
        "traced_from": TRACE_FROM[trace_mode(opts)] if opts.torch_ops else None,
        "distinct": opts.distinct,  # calls measured per signature, 0: every launch
        "value_calls": opts.value_calls,  # ... per value-dependent signature, 0: every call
        "replay": replay,
        "source": opts.source,
        "clock_control": opts.clock_control,
        "cache_control": opts.cache_control,
    }
    record = RunBuilder(run_dir, run)
    record.save()  # kept if the program or ncu is killed: reading then rebuilds the plan (load_run)
    # What an earlier run of the same command measured gives the progress line its ETA.
    expected = earlier_run([opts.runs_root, run_dir.parent], opts.command,
                           {k: run[k] for k in ("metric_set", "torch_ops", "traced_from", "distinct")},
                           exclude=run_dir)
    if expected is not None:
        echo(f"expecting {expected.kernels} kernel launches to measure, as {expected.run_dir} did")
    progress = TraceProgress(run_dir / TRACE_FILE, expected)
    t0 = time.perf_counter()
    attempts: list[Attempt] = []
    while True:
        ncu_started = time.time()
        try:
            result = run_ncu(argv, run_dir / "ncu.log", echo=echo, verbose=opts.verbose,
                             env=program_env(run_dir, opts.torch_ops, mode=trace_mode(opts),
                                             distinct=opts.distinct, value_calls=opts.value_calls,
                                             triton=opts.triton,
                                             replay=replay["mode"]),
                             progress_every_s=2.0, describe=progress.line)
        except NcuError as err:  # counters refused once the program ran: this folder keeps ncu.log
            out = None if opts.out is None else opts.out.with_name(opts.out.name + "-timing-only")
            raise unavailable(err, out) from None
        attempts.append({"argv": argv, "returncode": result.returncode, "passes": result.passes,
                         "no_kernels_message": result.no_kernels})
        refused = range_refusal(result.tail) if replay["mode"] == "range" and result.returncode else None
        if refused is None or result.interrupted:
            break
        # ncu failed a driver call inside a measured range, and with it the program: measure it again,
        # kernel by kernel, from a clean folder (the trace and the report of the failed run removed).
        replay = {"mode": "kernel", "why": f"range replay failed the program: ncu refused {refused} inside "
                  "a measured range (a first call that initializes something); measured again with kernel "
                  "replay"}
        echo(f"ncu's range replay refused {refused} inside a measured range and failed the program: "
             "profiling it again with kernel replay")
        for stale in (report, run_dir / TRACE_FILE, run_dir / TORCH_MARK_FILE, run_dir / STARTUP_FILE):
            stale.unlink(missing_ok=True)
        argv = ncu_argv("kernel")
        run["replay"] = replay
        progress = TraceProgress(run_dir / TRACE_FILE, expected)
    has_report = report.is_file() and report.stat().st_size > 0
    run.update({"wall_time_s": round(time.perf_counter() - t0, 3), "finished": utc_now(),
                "interrupted": result.interrupted, "attempts": attempts,
                "returncode": result.returncode, "kernels_profiled": result.kernels, "passes": result.passes,
                "first_kernel_s": result.first_kernel_s,  # the program's start-up, before ncu profiled any
                "startup": startup_split(read_startup(run_dir / STARTUP_FILE), entered, ncu_started,
                                         result.first_kernel_s),
                "reports": [report.name] if has_report else []})

    (run_dir / STARTUP_FILE).unlink(missing_ok=True)
    run["time_source"] = NCU_TIME
    left_out = None if replay["mode"] == "range" else pass_left_out(opts)
    if left_out and opts.time_from == "program":
        echo(f"each kernel keeps ncu's time (caches flushed before it): {left_out}")
    if not left_out and has_report and result.kernels and not result.interrupted:
        run["timing_pass"] = timing_pass(opts, program, run_dir, replay["mode"], echo)
        timed = (run_dir / KERNEL_TIMES_FILE).is_file()
        untimed = NO_KERNEL_TIME if replay["mode"] == "range" else NCU_TIME
        run["time_source"] = TIMER_PASS if timed else untimed
    plan = plan_from_trace(read_trace(run_dir / TRACE_FILE), opts.command,
                           session.metric_record(opts.metrics))
    configs = plan["configs"]
    record.save_plan(plan, checked=True)
    record.save()  # saved before analysis can fail
    keep_kernel_tables([report] if has_report else [])  # every later reading starts from it
    echo(f"ncu profiled {result.kernels} kernel launches; the program recorded {len(configs)} ops/regions")
    if (short := end_text(result.kernels, expected)) is not None:
        echo(short)
    if opts.torch_ops and not (run_dir / TORCH_MARK_FILE).exists():
        echo("warning: --torch-ops traced nothing: the program never imported torch (is it a Python "
             "program run by this Python's environment?)")
    for text in tracer_warnings(run_dir / TORCH_MARK_FILE) if opts.torch_ops else []:
        echo(f"warning: {text}")

    failed = result.returncode != 0 and not result.interrupted
    if not has_report or result.no_kernels or result.kernels == 0:
        last = " | ".join(line for line in result.tail[-3:] if line.strip()) or "(no output)"
        if failed:
            raise ProgramFailed(f"the program exited with code {result.returncode} before ncu profiled any "
                                f"kernel: {last} (log: {run_dir / 'ncu.log'})", result.returncode)
        raise NcuError("ncu profiled no kernel: the program launched no CUDA kernel (does it use the GPU?), "
                       "or --kernel-name/--nvtx-include/--launch-skip matched none "
                       f"(log: {run_dir / 'ncu.log'})")
    return ProfileResult(run_dir, run, plan, report)
