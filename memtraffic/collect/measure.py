"""Collection for variants: `memtraffic measure` profiles a plan's configs in ONE ncu process per GPU.

`measure()` checks the user's input, ncu and the GPU up front, writes the plan into a new run folder,
lets ONE ncu process profile every config of the plan inside `python -m memtraffic.collect.runner PLAN.json`,
and starts a fresh ncu process for the configs not yet done if the runner dies, and saves run.json. The
run folder's records are held by one runfolder.builder.RunBuilder, written once at the end of each phase.
memtraffic.api.run_measure then analyzes the reports (results.csv, results.json) and `record_analysis`
completes run.json with what ncu profiled.

With --gpus the plan's configs are split across the GPUs by predicted cost (memtraffic.collect.sweep) and one
ncu process per GPU runs at the same time, each with its own CUDA_VISIBLE_DEVICES, status file, log
and reports (profile-gpu0.ncu-rep, ...), all in the one run folder. A GPU whose ncu fails loses only
its own configs: run.json lists them under 'rerun' (`measure --rerun RUN` measures them again).

With --metrics auto (the default) the first pass is a first look with the one-pass set (ncu.metrics.
FIRST_LOOK); then `measure` asks its `second_pass` (the analysis side's rule, ncu.metrics.SECOND_PASS_RULE,
which memtraffic.api.run_measure gives it) which configs the first look leaves unexplained, and profiles
them again with the full set (FULL_LOOK): a second pass in the same run folder, by the same runner on the
same GPUs.
"""

from __future__ import annotations

import copy
import itertools
import os
import shlex
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from memtraffic.collect.fallback import unavailable
from memtraffic.collect.planning import build_plan, check_names  # torch only when a plan is built
from memtraffic.collect.sweep import (
    Grid,
    check_gpus,
    gpu_indices,
    parse_shard,
    plan_from_grids,
    predicted_cost,
    read_sweep,
    shard_plan,
    visible_id,
)
from memtraffic.host.gpu import cuda_device_names, gpu_name, require_gpu
from memtraffic.host.machine import utc_now
from memtraffic.ncu.command import (
    NVTX_INCLUDE,
    NcuControls,
    NcuRun,
    metric_tokens,
    parse_controls,
    run_ncu,
)
from memtraffic.ncu.kernel_table import keep_kernel_tables
from memtraffic.ncu.metrics import AUTO, FIRST_LOOK, FULL_LOOK, Remeasure
from memtraffic.ncu.session import NcuSession
from memtraffic.runfolder.builder import RunBuilder
from memtraffic.runfolder.folder import (
    DEFAULT_RUNS_ROOT,
    StatusRecord,
    append_status,
    new_run_dir,
    read_claims,
    read_status,
)
from memtraffic.runfolder.records import (  # atomic: the runner may wait
    Attempt,
    GpuRan,
    GpuRun,
    NcuPass,
    NcuRan,
    Plan,
    Remeasured,
    RunRecord,
    SecondPass,
    Skipped,
    plan_file,
    rerun_list,
    status_files,
    write_plan,
)
from memtraffic.runfolder.timings import NCU_TIME
from memtraffic.vocab.configs import parse_params
from memtraffic.vocab.errors import GpuNotFoundError, NcuError, UsageError, say
from memtraffic.vocab.extras import require
from memtraffic.vocab.files import refuse_nonempty, require_folder
from memtraffic.vocab.ops import Shape, format_shape, parse_dtype, parse_shape

if TYPE_CHECKING:
    import pandas as pd

SECOND = "-second"  # the second pass's files: plan-second.json, profile-second[-gpuN].ncu-rep, status-...


def runner_argv(plan_path: Path) -> list[str]:
    return [sys.executable, "-m", "memtraffic.collect.runner", str(plan_path)]


@dataclass
class MeasureOptions:
    variants: list[str]
    shapes: list[str | Shape] = field(default_factory=list)  # '4096x4096' or (4096, 4096): parsed once here
    dtypes: list[str] = field(default_factory=list)
    params: list[str] = field(default_factory=list)
    all_variants: bool = False
    variant_files: list[str] = field(default_factory=list)  # users' variant files (--variants)
    metrics: str = AUTO
    out: Path | None = None
    clock_control: str = "none"
    cache_control: str = "all"
    source: bool = False  # per-line counters and source text for `memtraffic lines`
    verbose: bool = False
    runs_root: Path = DEFAULT_RUNS_ROOT
    max_attempts: int | None = None  # fresh ncu processes after runner crashes; default: one per config
    plan: Plan | None = None  # a ready plan (build_plan / merge_plans) instead of the fields above
    sweep: Path | None = None  # a TOML sweep file instead of variants/shapes/dtypes/params
    rerun: Path | None = None  # a run folder: measure again the configs its run.json lists under 'rerun'
    shard: str | None = None  # 'I/N': only that deterministic part of the plan
    gpus: str | None = None  # 'all' or '0,1': one ncu process per GPU at once
    timing_only: bool = False  # no ncu: the runner's kernels timed (memtraffic.collect.timing_only)
    roofs: bool = True  # measure the GPU's roofs after the run when none are known (probes.roof_probes)
    # Parsed once, when the options are made (UsageError for a bad value): what the layers below use. The
    # fields above keep the text as given, for run.json and for messages.
    metric_tokens: tuple[str, ...] = field(init=False)  # --metrics: set names, aliases, raw ncu names
    shard_part: tuple[int, int] | None = field(init=False, default=None)  # --shard 2/4: (2, 4)
    gpu_list: list[int] | Literal["all"] | None = field(init=False, default=None)  # --gpus: indices, or all
    grids: list[Grid] | None = field(init=False, default=None)  # --sweep: the file's grids
    rerun_configs: Plan | None = field(init=False, default=None)  # --rerun: the folder's configs to rerun
    controls: NcuControls = field(init=False)  # --cache-control, --clock-control

    def __post_init__(self) -> None:
        if self.timing_only and self.source:  # said before the GPU is looked at
            raise UsageError("--timing-only and --source do not go together: a timing-only run times the "
                             "kernels without ncu, so it has no per-line counters; drop one of them")
        grid_given = bool(self.variants or self.shapes or self.dtypes or self.params or self.all_variants)
        if sum(bool(x) for x in (self.plan, self.sweep, self.rerun, grid_given)) > 1:
            raise UsageError("give the configs one way: variants and grid options, --sweep FILE, or --rerun "
                             "RUN")
        self.controls = parse_controls(self.cache_control, self.clock_control)
        self.shapes = [parse_shape(s) if isinstance(s, str) else tuple(s) for s in self.shapes]
        if AUTO in (t.strip() for t in self.metrics.split(",")) and self.metrics.strip() != AUTO:
            raise UsageError(f"--metrics {self.metrics}: {AUTO} stands alone (a first look with "
                             f"{FIRST_LOOK}, then {FULL_LOOK} where needed); name sets, aliases or ncu "
                             "names without it")
        self.metric_tokens = tuple(metric_tokens(FIRST_LOOK if self.first_look else self.metrics))
        if self.shard:
            self.shard_part = parse_shard(self.shard)
        if self.gpus:
            indices = gpu_indices(self.gpus)
            self.gpu_list = "all" if indices is None else indices
        if self.sweep:
            self.grids = read_sweep(self.sweep)
        if self.rerun:  # the folder read once: what is left to measure is known before the GPU is
            self.rerun_configs = rerun_plan(self.rerun)

    @property
    def first_look(self) -> bool:
        """--metrics auto: a first look, then the full set where it is needed (see AUTO)."""
        return self.metrics.strip() == AUTO


@dataclass(frozen=True)
class GpuSlot:
    """One GPU of `measure --gpus`: its index as this process numbers it and its CUDA_VISIBLE_DEVICES."""

    index: int
    visible: str

    @property
    def tag(self) -> str:
        return f"gpu{self.index}"


@dataclass
class MeasureResult:
    """A measured run folder: its records (run.json, the plan), the reports ncu wrote (not yet analyzed)."""

    record: RunBuilder
    reports: list[Path]
    table: Any = None  # the analyzed DataFrame, once memtraffic.api.run_measure has analyzed the reports
    status: dict[int, StatusRecord] = field(default_factory=dict)  # the runner's status per config id
    timings: dict[str, float] = field(default_factory=dict)
    clock: float = 0.0  # perf_counter() when the environment was recorded: the ncu + analysis lap starts
    session: NcuSession | None = None  # the ncu and GPU it ran on (a second pass runs there too)
    slots: list[GpuSlot] = field(default_factory=list)  # --gpus: the GPUs

    @property
    def run_dir(self) -> Path:
        return self.record.folder

    @property
    def run(self) -> RunRecord:
        return self.record.run

    @property
    def plan(self) -> Plan:
        if self.record.plan is None:
            raise TypeError("a measured run has its plan")
        return self.record.plan


# What --metrics auto's second pass measures (memtraffic.analysis.first_look.remeasure): given the first
# look's result, the configs to measure again, or None.
SecondPassRule = Callable[[MeasureResult], Remeasure | None]


def profile_plan(plan: Plan | None, run_dir: Path, session: NcuSession, opts: MeasureOptions,
                 echo: Callable[[str], None] | None = None,
                 ncu_runner: Callable[..., NcuRun] = run_ncu, *, gpu: GpuSlot | None = None,
                 stop: threading.Event | None = None,
                 on_start: Callable[[subprocess.Popen[str]], None] | None = None,
                 ready: Callable[[], Plan] | None = None, stem: str = "") -> NcuPass:
    """Profile the plan's configs, restarting ncu for those not yet done whenever the runner dies.

    Returns the attempts, the reports written and whether the user interrupted. Config statuses are
    in the status file: a config that was started but never finished is recorded as failed here.
    With `gpu`, the configs that GPU's runners claim (claims/: the GPUs share the plan, see
    profile_gpus), with files of its own (status-gpu0.jsonl, ncu-gpu0.log, profile-gpu0.ncu-rep),
    until every config is claimed and its own are done; `stop` set by another thread ends the
    restarts. With `ready` (plan None), the first ncu starts while the plan is still being built: its
    runner waits for plan.json, and `ready()` gives the plan (or raises why it could not be built) once
    that ncu has returned. `stem` names a later pass's files (SECOND: plan-second.json,
    status-second-gpu0.jsonl, ...).
    """
    plan_path = run_dir / plan_file(stem)
    tag = f"{stem}-{gpu.tag}" if gpu else stem
    status_path = run_dir / (f"status{tag}.jsonl" if gpu else plan.get("status_file", "status.jsonl") if plan
                                        else "status.jsonl")
    log_path = run_dir / f"ncu{tag}.log"
    claims = claims_folder(run_dir, stem)

    def mine(plan: Plan) -> list[int]:
        """The configs this ncu's runners run: every one, or with `gpu` those they claimed."""
        taken = read_claims(claims) if gpu is not None else {}
        return [c["id"] for c in plan["configs"] if gpu is None or taken.get(c["id"]) == gpu.index]

    def finished(plan: Plan, status: Mapping[int, StatusRecord]) -> bool:
        """Every config claimed (with `gpu`) and each of this ncu's has its record."""
        if gpu is not None and not {c["id"] for c in plan["configs"]} <= read_claims(claims).keys():
            return False
        return all(i in status for i in mine(plan))

    known = plan
    app = runner_argv(plan_path)
    extra: dict[str, object] = {}
    if gpu is not None:
        app += ["--claims", str(claims), "--gpu", str(gpu.index), "--status", str(status_path)]
        extra["env"] = {**os.environ, "CUDA_VISIBLE_DEVICES": gpu.visible}
    if on_start is not None:
        extra["on_start"] = on_start
    max_attempts = opts.max_attempts or (len(known["configs"]) + 1 if known is not None else 10**6)
    attempts: list[Attempt] = []
    reports: list[str] = []
    interrupted = False
    for attempt in itertools.count(1):
        if attempt > max_attempts:
            break
        before = read_status(status_path)
        if known is not None and finished(known, before):
            break
        if stop is not None and stop.is_set():
            interrupted = True
            break
        report = run_dir / (f"profile{tag}.ncu-rep" if attempt == 1 else f"profile{tag}-{attempt}.ncu-rep")
        waiting = known is None  # the runner starts up while the plan is built, then reads it
        argv = session.command(report, app + (["--wait-for-plan"] if waiting else []),
                               cache_control=opts.controls.cache_control,
                               clock_control=opts.controls.clock_control,
                               source=opts.source)
        t_start = time.time()
        result = ncu_runner(argv, log_path, echo=echo, verbose=opts.verbose, **extra)
        t_end = time.time()
        if waiting:
            known = _built(plan, ready)  # raises the plan's error: its runner exited, ran nothing
            max_attempts = opts.max_attempts or len(known["configs"]) + 1
        attempts.append({"argv": argv, "returncode": result.returncode, "passes": result.passes,
                         "no_kernels_message": result.no_kernels,
                         "t_start": round(t_start, 3), "t_end": round(t_end, 3)})
        if gpu is not None:
            attempts[-1].update({"gpu": gpu.index, "cuda_visible_devices": gpu.visible})
        if report.exists() and report.stat().st_size > 0:
            reports.append(report.name)
        after = read_status(status_path)
        for cid, rec in after.items():
            if rec.get("status") == "start":
                append_status(status_path, {"id": cid, "range": rec.get("range"), "status": "failed",
                                            "error": f"the runner process died while running it "
                                                     f"(ncu exit code {result.returncode})"})
        if result.interrupted or result.returncode in (130, -2) or (stop is not None and stop.is_set()):
            interrupted = True
            break
        if after == before and known is not None and finished(known, after):
            break  # the other GPUs' runners had taken every config
        if after == before:  # no config even started: ncu or the runner fails before measuring
            last = " | ".join(line for line in result.tail[-3:] if line.strip()) or "(no output)"
            raise NcuError(f"ncu exited with code {result.returncode} before profiling anything: {last} "
                           f"(full log: {log_path})")
    final = read_status(status_path)
    for cid in mine(known) if known is not None else []:
        if cid not in final:
            why = "not run: interrupted" if interrupted else "not run: the runner kept failing before it"
            append_status(status_path, {"id": cid, "status": "failed" if not interrupted else "not run",
                                        "error": why})
    return {"attempts": attempts, "reports": reports, "interrupted": interrupted}


def claims_folder(run_dir: Path, stem: str = "") -> Path:
    """Where the runners of `measure --gpus` claim the configs of plan{stem}.json (see profile_gpus)."""
    return run_dir / f"claims{stem}"


def _built(plan: Plan | None, ready: Callable[[], Plan] | None) -> Plan:
    """The plan given, else the one built in the background (ready() raises why it could not be)."""
    if plan is not None:
        return plan
    if ready is None:
        raise TypeError("give a plan or a ready() that builds it")
    return ready()


def profile_gpus(plan: Plan | None, run_dir: Path, session: NcuSession, opts: MeasureOptions,
                 slots: Sequence[GpuSlot], echo: Callable[[str], None],
                 ncu_runner: Callable[..., NcuRun] = run_ncu,
                 ready: Callable[[], Plan] | None = None, stem: str = "") -> NcuPass:
    """`profile_plan` for every GPU at once, one thread and one ncu process per GPU. With `ready` (plan
    None) the runners start while the plan is built, as profile_plan's does; `stem` as there.

    The GPUs share the plan: each runner takes the next config in plan order that no runner has
    claimed (claims/, one file per config), so a GPU whose configs run faster takes more of them and a
    GPU whose ncu fails leaves its untaken configs to the others. Afterwards each config of the plan
    (and plan.json) says which GPU ran it ('gpu'); the claims folder is removed.

    Lines are prefixed with the GPU ('[gpu1] ...'). One GPU's failure is recorded in its entry and the
    others go on. Ctrl-C reaches the runners through the terminal (they stop after their current config
    and ncu writes what they finished); a second Ctrl-C kills the ncu processes.
    """
    lock = threading.Lock()
    stop = threading.Event()
    procs: list[subprocess.Popen[str]] = []
    results: dict[int, GpuRan] = {}

    def say(slot: GpuSlot) -> Callable[[str], None]:
        def line(text: str) -> None:
            with lock:
                echo(f"[{slot.tag}] {text}")
        return line

    def started(proc: subprocess.Popen[str]) -> None:
        with lock:
            procs.append(proc)

    def work(slot: GpuSlot) -> None:
        t0 = time.perf_counter()
        ran: NcuRan = {"attempts": [], "reports": [], "interrupted": False}
        error: str | None = None
        try:
            ran = profile_plan(plan, run_dir, session, opts, say(slot), ncu_runner, gpu=slot, stop=stop,
                               on_start=started, ready=ready, stem=stem)
        except Exception as err:  # NcuError or a bug: this GPU's configs are lost, not the others'
            error = str(err) if isinstance(err, NcuError) else f"{type(err).__name__}: {err}"
            say(slot)(f"FAILED: {error}")
        results[slot.index] = {"attempts": ran["attempts"], "reports": ran["reports"],
                               "interrupted": ran["interrupted"], "error": error,
                               "wall_time_s": round(time.perf_counter() - t0, 3)}

    threads = [threading.Thread(target=work, args=(slot,), name=slot.tag, daemon=True) for slot in slots]
    for t in threads:
        t.start()
    interrupted = False
    while any(t.is_alive() for t in threads):
        try:
            for t in threads:
                t.join(0.2)
        except KeyboardInterrupt:
            if interrupted:  # second Ctrl-C: stop waiting for ncu
                with lock:
                    for proc in procs:
                        if proc.poll() is None:
                            proc.kill()
                continue
            interrupted = True
            stop.set()
            echo("interrupted: waiting for each GPU's ncu to write the report of its finished configs "
                 "(Ctrl-C again to kill them)")
    plan = _built(plan, ready)  # raises why the plan could not be built (each GPU's runner then ran nothing)
    claims = claims_folder(run_dir, stem)
    taken = read_claims(claims)
    for config in plan["configs"]:
        gpu = taken.get(config["id"])
        if gpu is not None:
            config["gpu"] = gpu
    write_plan(run_dir, plan, stem=stem)
    shutil.rmtree(claims, ignore_errors=True)
    gpus: list[GpuRun] = []
    for slot in slots:
        out = results[slot.index]
        ids = [c["id"] for c in plan["configs"] if c.get("gpu") == slot.index]
        gpus.append({"index": slot.index, "cuda_visible_devices": slot.visible, "configs": ids,
                     "predicted_cost_s": round(sum(predicted_cost(c) for c in plan["configs"]
                                                   if c.get("gpu") == slot.index), 3),
                     "status_file": f"status{stem}-{slot.tag}.jsonl", **out})
    return {"attempts": [a for g in gpus for a in g["attempts"]],
            "reports": [r for g in gpus for r in g["reports"]],
            "interrupted": interrupted or any(g["interrupted"] for g in gpus),
            "gpus": gpus}


def rerun_plan(run_dir: Path) -> Plan:
    """The configs a run folder lists under 'rerun' (failed, interrupted, or on a GPU that failed), and
    those its reports hold no kernel of (a report cut short or lost after the run), as a plan of their
    own: measure them again, then `memtraffic merge` the two runs."""
    from memtraffic.runfolder.load import load_run

    if not require_folder(run_dir, "give the run folder to measure again", usage=True, option="--rerun"):
        raise UsageError(f"--rerun {run_dir}: not a run folder (no such folder)")
    loaded = load_run(run_dir)
    plan, run = loaded.plan, loaded.meta or {}  # no run.json: measure was killed before it saved it
    if plan is None:
        raise UsageError(f"--rerun {run_dir}: not a run folder (no plan.json)")
    found = _launches_in(loaded.reports)
    lost = {c["range"] for c in plan["configs"]  # a variant's config (no kind) with no kernel in the reports
            if "kind" not in c and c.get("nvtx_range", c["range"]) not in found}
    wanted = set(run.get("rerun") or []) | lost
    if not wanted:
        raise UsageError(f"--rerun {run_dir}: its run.json lists no config to rerun and its reports hold "
                         "every config; every config finished")
    configs = [c.copy() for c in plan["configs"] if c["range"] in wanted]
    for i, config in enumerate(configs):
        config.pop("gpu", None)  # the new run's GPUs and reports hold it
        config.pop("reports", None)
        config["id"] = i
    return _kept_from(plan, {"status_file": "status.jsonl", "configs": configs, "skipped": []})


def _kept_from(plan: Plan, again: Plan) -> Plan:
    """`again`, a plan made from `plan` (a rerun, a second pass), with what it keeps of it: the format
    version, the input seed and the users' variant files, where `plan` has them."""
    if "version" in plan:
        again["version"] = plan["version"]
    if "seed" in plan:
        again["seed"] = plan["seed"]
    if "variant_files" in plan:
        again["variant_files"] = plan["variant_files"]
    return again


def _launches_in(reports: Sequence[Path]) -> Counter[str]:
    """How many launches the reports hold of each NVTX range (a report missing or unreadable holds none)."""
    from memtraffic.ncu.kernel_table import kernel_table
    from memtraffic.vocab.errors import ReportError

    found: Counter[str] = Counter()
    for report in reports:
        try:
            found.update(kernel_table(report, allow_partial=True).kernels["range"])
        except ReportError:
            continue
    return found


def plan_for(opts: MeasureOptions) -> Plan:
    """The plan of the options: a ready one, --rerun, a --sweep file or the grid options; then --shard."""
    if opts.plan is not None:
        plan = opts.plan
    elif opts.rerun_configs is not None:
        plan = opts.rerun_configs
    elif opts.grids is not None:
        plan = plan_from_grids(opts.grids)
    else:
        plan = build_plan(opts.variants, opts.shapes, opts.dtypes, opts.params, opts.all_variants,
                          variant_files=opts.variant_files)
    if opts.shard_part:
        plan = shard_plan(plan, *opts.shard_part)
    return plan


def _gpu_slots(spec: str, wanted: list[int] | Literal["all"]) -> tuple[list[GpuSlot], str]:
    """The GPUs of --gpus (`spec` as given, `wanted` parsed), checked against those this process sees; all
    must be of one kind."""
    names = cuda_device_names()
    if not names:
        require_gpu(f"--gpus {spec} needs one")  # raises
    indices = check_gpus(spec, None if wanted == "all" else wanted, len(names))
    kinds = {names[i] for i in indices}
    if len(kinds) > 1:
        raise UsageError(f"--gpus {spec}: the GPUs differ ({', '.join(sorted(kinds))}); a run is measured on "
                         "one kind of GPU: pick GPUs of one kind")
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    return [GpuSlot(i, visible_id(i, env)) for i in indices], names[indices[0]]


def skip_line(s: Skipped) -> str:
    """What measure says of a combination its plan leaves out, and why."""
    shape = "x".join(map(str, s.get("shape", [])))
    return f"skip {s.get('variant', '')} {shape} {s.get('dtype', '')}: {s.get('reason', '')}"


def _rerun_note(run: RunRecord, echo: Callable[[str], None], run_dir: Path) -> None:
    for g in run.get("gpus", []):
        if g["error"]:
            echo(f"[gpu{g['index']}] failed: {g['error']}")
    if rerun := run.get("rerun"):
        shown = ", ".join(rerun[:6]) + (" ..." if len(rerun) > 6 else "")
        echo(f"{len(rerun)} configs to rerun ({shown}): `memtraffic measure --rerun {run_dir}` "
             f"measures them into a new run, then `memtraffic merge {run_dir} NEW --out MERGED`")


def precheck(opts: MeasureOptions) -> None:
    """What plan_for would refuse, found without importing torch or the kernels (measure's first step)."""
    if opts.grids is not None or opts.rerun_configs is not None:  # read when the options were made
        return
    check_names(opts.variants, opts.all_variants, opts.variant_files)
    for dtype in opts.dtypes:
        parse_dtype(dtype)
    parse_params(opts.params)


def _gpu_or_none() -> str | None:
    try:
        return gpu_name()
    except GpuNotFoundError:
        return None


def run_label(opts: MeasureOptions, plan: Plan | None) -> list[str]:
    """The names a run folder is named after: the plan's variants, else what the options say."""
    if plan is not None:
        return list(dict.fromkeys(c["variant"] for c in plan["configs"]))
    if opts.sweep:
        return [Path(opts.sweep).stem]
    return list(opts.variants) or ["all"]


class _PlanInBackground:
    """plan.json built in a thread while ncu starts the runner; on failure plan.abort tells it to stop."""

    def __init__(self, make: Callable[[], Plan], record: RunBuilder):
        self._plan: Plan | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._build, args=(make, record), daemon=True)
        self._thread.start()

    def _build(self, make: Callable[[], Plan], record: RunBuilder) -> None:
        try:
            self._plan = record.save_plan(make())
        except BaseException as err:  # re-raised in the main thread by result()
            self._error = err
            record.abort_plan(f"{type(err).__name__}: {err}")

    def result(self) -> Plan:
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._plan is not None
        return self._plan


def measure(opts: MeasureOptions, echo: Callable[[str], None] | None = None,
            ncu_runner: Callable[..., NcuRun] = run_ncu, second_pass: SecondPassRule | None = None
            ) -> MeasureResult:
    """Check everything up front, profile every config under ncu, save run.json. See the module doc.
    Raises CountersUnavailable (memtraffic.collect.fallback) when ncu is missing or may not read the
    counters: memtraffic.api.run_measure then times the plan instead (memtraffic.collect.timing_only).

    With --metrics auto and a `second_pass` rule, the configs the rule picks from the first look are
    measured again with the full set (_measure_again). The reports are not analyzed here (the measuring
    side never imports analysis): the rule is given by memtraffic.api.run_measure, which analyzes the
    reports, then calls record_analysis.
    """
    echo = echo or say
    # Where measure's own time goes (run.json "timings"): the tool's overhead over bare ncu.
    clock, timings = time.perf_counter(), {}

    def lap(name: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        timings[name] = round(now - clock, 3)
        clock = now

    if opts.out is not None:  # every flag is checked before ncu and the GPU are looked for
        refuse_nonempty(opts.out)
    # a bad --cache-control or --clock-control, or a name not even metric-shaped, failed when the options
    # were made
    tokens = list(opts.metric_tokens)
    # The plan is built (torch, triton and the kernels imported: ~6 s on the H100 machine) while ncu
    # starts the runners (one per GPU), which import the same and then wait for plan.json; its configs
    # are split across the GPUs (finish_plan) before it is written, each runner takes its own.
    overlap = opts.plan is None
    if overlap:
        precheck(opts)
        plan = None
    else:
        plan = plan_for(opts)
    lap("plan_s")
    require("memtraffic measure", "torch", "triton")  # the runner needs them: said before ncu is looked for
    try:
        session = NcuSession.find()
        probe = _gpu_or_none() if not opts.gpus else None
        if probe:  # the metric query is where a GPU's locked counters show first
            session.on_gpu(probe, tokens)
    except NcuError as err:
        raise (err if opts.gpus else unavailable(err)) from None
    lap("ncu_version_s")
    if opts.gpus and opts.gpu_list is not None:
        slots, gpu = _gpu_slots(opts.gpus, opts.gpu_list)
    else:  # nvidia-smi, not torch: the parent need not import torch (the runner checks CUDA)
        slots, gpu = [], gpu_name() if overlap else require_gpu("`memtraffic measure` needs one (and ncu)")
    lap("gpu_check_s")
    session = session.on_gpu(gpu, tokens)
    for note in session.spec.notes:  # what this GPU cannot count: measured without it
        echo(f"not measured on {gpu}: {note}")
    lap("query_metrics_s")

    run_dir = new_run_dir(run_label(opts, plan), opts.out, opts.runs_root)

    def finish_plan(plan: Plan) -> Plan:
        plan["metrics"] = session.metric_record(opts.metrics)
        plan["options"] = {"clock_control": opts.clock_control, "cache_control": opts.cache_control,
                           "source": opts.source}
        if slots:  # one status file per GPU: the runners never write the same file
            plan.pop("status_file", None)
            plan["status_files"] = {str(s.index): f"status-{s.tag}.jsonl" for s in slots}
        for s in plan.get("skipped", []):
            echo(skip_line(s))
        where = f"{len(slots)} GPUs ({', '.join(s.tag for s in slots)}: each takes the next config when it " \
            "finishes one)" if len(slots) > 1 else f"GPU {slots[0].index}" if slots else "one ncu process"
        echo(f"profiling {len(plan['configs'])} configs on {where} with {session.path} into {run_dir}")
        return plan

    record = RunBuilder(run_dir)
    pending = _PlanInBackground(lambda: finish_plan(plan_for(opts)), record) if overlap else None
    if plan is not None:
        record.save_plan(finish_plan(plan))
    run = record.run
    run.update({
        "started": utc_now(),
        "command": shlex.join(sys.argv),
        "environment": session.environment(),
        "params": opts.params,
        "metric_set": opts.metrics,
        "metric_names": session.metrics,
        "metric_notes": session.spec.notes,
        "clock_control": opts.clock_control,
        "cache_control": opts.cache_control,
        "source": opts.source,
        "time_source": NCU_TIME,  # the runner's kernels, replayed one by one
    })
    if opts.sweep:  # the file as it was, beside the grids read from it
        run["sweep"] = {"file": str(opts.sweep), "text": Path(opts.sweep).read_text(encoding="utf-8")}
    if opts.rerun:
        run["rerun_of"] = str(opts.rerun)
    lap("environment_s")
    t0 = time.perf_counter()
    try:
        if slots:
            outcome = profile_gpus(plan, run_dir, session, opts, slots, echo, ncu_runner,
                                   ready=pending.result if pending else None)
        else:
            outcome = profile_plan(plan, run_dir, session, opts, echo, ncu_runner,
                                   ready=pending.result if pending else None)
    except UsageError:  # the plan could not be built: nothing was measured, and nothing is kept
        shutil.rmtree(run_dir, ignore_errors=True)
        raise
    except NcuError as err:
        record.save(wall_time_s=round(time.perf_counter() - t0, 3), error=str(err), configs=[])
        raise
    plan = _built(plan, pending.result if pending else None)
    record.plan = plan  # with --gpus, as profile_gpus wrote it: each config with the GPU that ran it
    run.update({"variants": list(dict.fromkeys(c["variant"] for c in plan["configs"])),
                "shapes": list(dict.fromkeys(format_shape(c["shape"]) for c in plan["configs"])),
                "dtypes": list(dict.fromkeys(c["dtype"] for c in plan["configs"]))})
    if "shard" in plan:
        run["shard"] = plan["shard"]
    run["wall_time_s"] = round(time.perf_counter() - t0, 3)
    run["finished"] = utc_now()
    run.update({"attempts": outcome["attempts"], "reports": outcome["reports"],
                "interrupted": outcome["interrupted"]})
    if "gpus" in outcome:
        run["gpus"] = outcome["gpus"]
    passes = [p for a in outcome["attempts"] if (p := a.get("passes"))]
    run["passes"] = max(passes) if passes else None

    status: dict[int, StatusRecord] = {}
    for name in status_files(plan):
        status.update(read_status(run_dir / name))
    for g in outcome.get("gpus", []):  # a GPU whose ncu failed: the configs it took say why
        for cid in g["configs"] if g["error"] else []:
            status.setdefault(cid, {"status": "not run", "error": f"GPU {g['index']} failed: {g['error']}"})
    for c in plan["configs"] if slots else []:  # taken by no GPU: every runner stopped before it
        status.setdefault(c["id"], {"status": "not run", "error": "interrupted" if outcome["interrupted"]
                                    else "no GPU took it: each GPU's runner stopped before it"})
    record.save(configs=record.outcomes(status, launches=None), skipped=plan.get("skipped", []))
    keep_kernel_tables([run_dir / r for r in outcome["reports"]])  # every later reading starts from these
    result = MeasureResult(record, [run_dir / r for r in outcome["reports"]], status=status, timings=timings,
                           clock=clock, session=session, slots=slots)
    if opts.first_look and second_pass is not None and not run.get("interrupted"):
        again = second_pass(result)
        if again is not None:
            _measure_again(result, again, opts, echo, ncu_runner)
    return result


def _measure_again(result: MeasureResult, again: Remeasure, opts: MeasureOptions,
                   echo: Callable[[str], None], ncu_runner: Callable[..., NcuRun] = run_ncu) -> None:
    """The second pass of --metrics auto: the configs `again` names (range -> their first look's L1 load and
    store efficiencies; its rule says why in words) profiled again with FULL_LOOK by the same runner, on
    the same GPUs (which share its configs as they did the first look's), into the run folder
    (plan-second.json, status-second*.jsonl, ncu-second*.log, profile-second*.ncu-rep).

    A config measured whole again (ok, and at least its first look's launches: `again.launches`) names the
    second pass's reports in plan.json (config 'reports'), so analysis takes its counters from them alone;
    any other keeps its first look's, said in one line, as is a second pass that fails as a whole.
    run.json's 'second_pass' records the rule, each config with its efficiencies and outcome, the set,
    the ncu argv and the wall time.
    """
    record, plan, run_dir, session = result.record, result.plan, result.run_dir, result.session
    if session is None or session.gpu is None:
        raise TypeError("a second pass needs the ncu session of a measured run")
    full = session.on_gpu(session.gpu, metric_tokens(FULL_LOOK))
    configs = [c.copy() for c in plan["configs"] if c["range"] in again.why]
    second = _kept_from(plan, {"configs": configs, "skipped": [], "status_file": f"status{SECOND}.jsonl",
                               "metrics": full.metric_record(FULL_LOOK)})
    if "options" in plan:
        second["options"] = plan["options"]
    if result.slots:
        second.pop("status_file")
        second["status_files"] = {str(s.index): f"status{SECOND}-{s.tag}.jsonl" for s in result.slots}
    record.save_plan(second, stem=SECOND)
    echo(f"measuring {len(configs)} of {len(plan['configs'])} configs again with the {FULL_LOOK} set "
         f"({again.rule})")
    done: SecondPass = {"first_look": FIRST_LOOK, "metric_set": FULL_LOOK, "metric_names": full.metrics,
                        "rule": again.rule, "error": None}
    ran: NcuPass = {"attempts": [], "reports": [], "interrupted": False}
    opts = copy.copy(opts)
    opts.source = False  # per-line counters come from the first look
    t0 = time.perf_counter()
    try:
        if result.slots:
            ran = profile_gpus(second, run_dir, full, opts, result.slots, echo, ncu_runner, stem=SECOND)
        else:
            ran = profile_plan(second, run_dir, full, opts, echo, ncu_runner, stem=SECOND)
    except Exception as err:  # NcuError, or a bug: the first look's rows stay whole either way
        done["error"] = str(err) if isinstance(err, NcuError) else f"{type(err).__name__}: {err}"
    done["wall_time_s"] = round(time.perf_counter() - t0, 3)
    done.update({"attempts": ran["attempts"], "reports": ran["reports"], "interrupted": ran["interrupted"]})
    if "gpus" in ran:
        done["gpus"] = ran["gpus"]
    reports = list(ran["reports"])
    keep_kernel_tables([run_dir / r for r in reports])
    found = _launches_in([run_dir / r for r in reports])
    status: dict[int, StatusRecord] = {}
    for name in status_files(second):
        status.update(read_status(run_dir / name))
    entries: list[Remeasured] = []
    own = {c["range"]: c for c in plan["configs"]}
    for c in configs:
        rec = status.get(c["id"], {})
        taken = rec.get("status") == "ok" and found[c["range"]] >= max(again.launches.get(c["range"], 0), 1)
        if taken:
            own[c["range"]]["reports"] = reports
        ld, st = again.why[c["range"]]
        entries.append({"id": c["id"], "range": c["range"], "eff_l1_ld": ld, "eff_l1_st": st,
                        "status": rec.get("status", "not run"), "error": rec.get("error"), "taken": taken})
    done["configs"] = entries
    run = result.run
    passes = [p for p in (run.get("passes"), *(a.get("passes") for a in ran["attempts"])) if p]
    record.save_plan(plan)
    record.save(second_pass=done, reports=[*run.get("reports", []), *reports],
                interrupted=bool(run.get("interrupted")) or ran["interrupted"],
                passes=max(passes) if passes else None)
    result.reports += [run_dir / r for r in reports]
    kept = [e["range"] for e in entries if not e["taken"]]
    if done["error"]:
        echo(f"the second pass failed ({done['error']}): its {len(configs)} configs keep their first "
             f"look's counters ({FIRST_LOOK})")
    elif kept:
        shown = ", ".join(kept[:4]) + (" ..." if len(kept) > 4 else "")
        echo(f"{len(kept)} of the {len(configs)} configs measured again were not measured whole by the "
             f"second pass and keep their first look's counters ({FIRST_LOOK}): {shown}")


def record_analysis(result: MeasureResult, kernels: pd.DataFrame,
                    echo: Callable[[str], None] | None = None) -> None:
    """Complete run.json from the analyzed launches (`kernels`: a table with 'range' and 'passes'):
    which configs ncu profiled, the passes, what to rerun, measure's timings. Raises NcuError when
    configs ran but ncu profiled no kernel inside their ranges."""
    echo = echo or say
    record, run, run_dir = result.record, result.run, result.run_dir
    if run.get("passes") is None and len(kernels) and "passes" in kernels:
        found = kernels["passes"].dropna()
        run["passes"] = int(found.max()) if len(found) else None
    launches: dict[str, int] = ({str(k): int(n) for k, n in kernels.groupby("range").size().items()}
                                if len(kernels) else {})
    configs = record.outcomes(result.status, launches)
    timings = result.timings
    timings["ncu_and_analysis_s"] = round(time.perf_counter() - result.clock, 3)
    again = run.get("second_pass", {}).get("wall_time_s", 0.0)
    timings["analysis_s"] = round(timings["ncu_and_analysis_s"] - run.get("wall_time_s", 0.0) - again, 3)
    record.save(configs=configs, rerun=rerun_list(configs), timings=timings)

    ok_ranges = [c["range"] for c in configs if c["status"] == "ok"]
    if ok_ranges and not launches and not run.get("interrupted"):
        what = "no kernel was timed" if run.get("timing_only") else "ncu profiled no kernel"
        raise NcuError(
            f"{what} inside the NVTX ranges {', '.join(ok_ranges[:4])}"
            f"{' ...' if len(ok_ranges) > 4 else ''} (filter --nvtx-include {NVTX_INCLUDE}): do these "
            f"variants launch CUDA kernels? See the ncu logs in {run_dir}"
        )
    _rerun_note(run, echo, run_dir)
