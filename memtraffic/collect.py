"""Collection for variants: `memtraffic measure` profiles a plan's configs in ONE ncu process.

`measure()` checks the user's input, ncu and the GPU up front, writes the plan into a new run folder,
lets ONE ncu process profile every config of the plan inside `python -m memtraffic.runner PLAN.json`,
and starts a fresh ncu process for the configs not yet done if the runner dies. Then it analyzes the
reports and saves run.json, results.csv and results.json.
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memtraffic.exceptions import NcuError
from memtraffic.extract import EmptyReportError
from memtraffic.ncu import (
    NVTX_INCLUDE,
    NcuRun,
    build_ncu_command,
    find_ncu,
    metrics_cache_key,
    ncu_version,
    query_metric_names,
    resolve_metrics,
    run_ncu,
)
from memtraffic.plan import build_plan
from memtraffic.rundir import (
    DEFAULT_RUNS_ROOT,
    append_status,
    check_gpu,
    environment,
    new_run_dir,
    partial_reports_expected,
    read_status,
    utc_now,
)


def runner_argv(plan_path: Path) -> list[str]:
    return [sys.executable, "-m", "memtraffic.runner", str(plan_path)]


@dataclass
class MeasureOptions:
    variants: list[str]
    shapes: list[str] = field(default_factory=list)
    dtypes: list[str] = field(default_factory=list)
    params: list[str] = field(default_factory=list)
    all_variants: bool = False
    variant_files: list[str] = field(default_factory=list)  # users' variant files (--variants)
    metrics: str = "traffic"
    out: Path | None = None
    clock_control: str = "none"
    cache_control: str = "all"
    source: bool = False  # per-line counters and source text for `memtraffic lines`
    verbose: bool = False
    runs_root: Path = DEFAULT_RUNS_ROOT
    max_attempts: int | None = None  # fresh ncu processes after runner crashes; default: one per config
    plan: dict[str, Any] | None = None  # a ready plan (build_plan / merge_plans) instead of the fields above


@dataclass
class MeasureResult:
    run_dir: Path
    run: dict[str, Any]
    table: Any  # the analyzed pandas DataFrame (empty when nothing was profiled)


def profile_plan(plan: dict[str, Any], run_dir: Path, ncu: Path, metrics: Sequence[str], opts: MeasureOptions,
                 echo: Callable[[str], None] | None = None,
                 ncu_runner: Callable[..., NcuRun] = run_ncu) -> dict[str, Any]:
    """Profile the plan's configs, restarting ncu for those not yet done whenever the runner dies.

    Returns the attempts, the reports written and whether the user interrupted. Config statuses are
    in the status file: a config that was started but never finished is recorded as failed here.
    """
    plan_path = run_dir / "plan.json"
    status_path = run_dir / plan["status_file"]
    ids = [c["id"] for c in plan["configs"]]
    max_attempts = opts.max_attempts or len(ids) + 1
    attempts: list[dict[str, Any]] = []
    reports: list[str] = []
    interrupted = False
    for attempt in range(1, max_attempts + 1):
        before = read_status(status_path)
        if all(i in before for i in ids):
            break
        report = run_dir / ("profile.ncu-rep" if attempt == 1 else f"profile-{attempt}.ncu-rep")
        argv = build_ncu_command(ncu, metrics, report, runner_argv(plan_path),
                                 cache_control=opts.cache_control, clock_control=opts.clock_control,
                                 source=opts.source)
        result = ncu_runner(argv, run_dir / "ncu.log", echo=echo, verbose=opts.verbose)
        attempts.append({"argv": argv, "returncode": result.returncode, "passes": result.passes,
                         "no_kernels_message": result.no_kernels})
        if report.exists() and report.stat().st_size > 0:
            reports.append(report.name)
        after = read_status(status_path)
        for cid, rec in after.items():
            if rec.get("status") == "start":
                append_status(status_path, {"id": cid, "range": rec.get("range"), "status": "failed",
                                            "error": f"the runner process died while running it "
                                                     f"(ncu exit code {result.returncode})"})
        if result.interrupted or result.returncode in (130, -2):
            interrupted = True
            break
        if after == before:  # no config even started: ncu or the runner fails before measuring
            last = " | ".join(line for line in result.tail[-3:] if line.strip()) or "(no output)"
            raise NcuError(f"ncu exited with code {result.returncode} before profiling anything: {last} "
                           f"(full log: {run_dir / 'ncu.log'})")
    final = read_status(status_path)
    for cid in ids:
        if cid not in final:
            why = "not run: interrupted" if interrupted else "not run: the runner kept failing before it"
            append_status(status_path, {"id": cid, "status": "failed" if not interrupted else "not run",
                                        "error": why})
    return {"attempts": attempts, "reports": reports, "interrupted": interrupted}


def _config_entries(plan: Mapping[str, Any], status: Mapping[int, dict[str, Any]],
                    profiled: set[str] | None) -> list[dict[str, Any]]:
    """run.json's per-config lines: status ok/failed/not run, error text, and whether ncu profiled it."""
    entries = []
    for c in plan["configs"]:
        rec = status.get(c["id"], {})
        entry = {k: c[k] for k in ("id", "range", "variant", "op", "shape", "dtype", "params")}
        entry.update(status=rec.get("status", "not run"), error=rec.get("error"), max_err=rec.get("max_err"),
                     profiled=None if profiled is None else c["range"] in profiled)
        if entry["status"] == "ok" and entry["profiled"] is False:
            entry["error"] = "no kernel was profiled inside its NVTX range"
        entries.append(entry)
    return entries


def measure(opts: MeasureOptions, echo: Callable[[str], None] | None = None) -> MeasureResult:
    """Check everything up front, profile every config under ncu, analyze, save. See the module doc."""
    from memtraffic import analyze as analysis

    echo = echo or (lambda line: print(line, file=sys.stderr, flush=True))
    # Where measure's own time goes (run.json "timings"): the tool's overhead over bare ncu.
    clock, timings = time.perf_counter(), {}

    def lap(name: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        timings[name] = round(now - clock, 3)
        clock = now

    plan = opts.plan or build_plan(opts.variants, opts.shapes, opts.dtypes, opts.params, opts.all_variants,
                                   variant_files=opts.variant_files)
    lap("plan_s")
    build_ncu_command("ncu", [], "r", [], cache_control=opts.cache_control, clock_control=opts.clock_control)
    resolve_metrics(opts.metrics)  # names that are not even metric-shaped fail before we look for ncu
    ncu = find_ncu()
    version = ncu_version(ncu)
    lap("ncu_version_s")
    gpu = check_gpu()
    lap("gpu_check_s")
    metrics = resolve_metrics(opts.metrics, query_metric_names(ncu, metrics_cache_key(ncu, version, gpu)))
    lap("query_metrics_s")

    variants = list(dict.fromkeys(c["variant"] for c in plan["configs"]))
    run_dir = new_run_dir(variants, opts.out, opts.runs_root)
    plan["metrics"] = {"spec": opts.metrics, "names": metrics}
    plan["options"] = {"clock_control": opts.clock_control, "cache_control": opts.cache_control,
                       "source": opts.source}
    (run_dir / "plan.json").write_text(json.dumps(plan, indent=2) + "\n")
    for s in plan["skipped"]:
        echo(f"skip {s['variant']} {'x'.join(map(str, s['shape']))} {s['dtype']}: {s['reason']}")
    echo(f"profiling {len(plan['configs'])} configs with {ncu} into {run_dir}")

    run: dict[str, Any] = {
        "started": utc_now(),
        "command": shlex.join(sys.argv),
        "environment": environment(gpu, ncu, version),
        "variants": variants,
        "shapes": list(dict.fromkeys("x".join(map(str, c["shape"])) for c in plan["configs"])),
        "dtypes": list(dict.fromkeys(c["dtype"] for c in plan["configs"])),
        "params": opts.params,
        "metric_set": opts.metrics,
        "metric_names": metrics,
        "clock_control": opts.clock_control,
        "cache_control": opts.cache_control,
        "source": opts.source,
    }
    lap("environment_s")
    t0 = time.perf_counter()
    try:
        outcome = profile_plan(plan, run_dir, ncu, metrics, opts, echo)
    except NcuError as err:
        run.update(wall_time_s=round(time.perf_counter() - t0, 3), error=str(err), configs=[])
        (run_dir / "run.json").write_text(json.dumps(run, indent=2) + "\n")
        raise
    run["wall_time_s"] = round(time.perf_counter() - t0, 3)
    run["finished"] = utc_now()
    run.update(outcome)
    passes = [a["passes"] for a in outcome["attempts"] if a["passes"]]
    run["passes"] = max(passes) if passes else None

    status = read_status(run_dir / plan["status_file"])
    run["configs"] = _config_entries(plan, status, profiled=None)
    run["skipped"] = plan["skipped"]
    (run_dir / "run.json").write_text(json.dumps(run, indent=2) + "\n")  # saved before analysis can fail
    try:
        table, kernels = analysis.analyze_reports([run_dir / r for r in outcome["reports"]], plan,
                                                  allow_partial=partial_reports_expected(run),
                                                  run_name=run_dir.name)
    except EmptyReportError:  # ncu wrote reports without kernels: reported below, naming the ranges
        table, kernels = analysis.analyze_reports([], plan)
    if run["passes"] is None and len(kernels) and "passes" in kernels:
        found = kernels["passes"].dropna()
        run["passes"] = int(found.max()) if len(found) else None
    profiled = set(kernels["range"]) if len(kernels) else set()
    run["configs"] = _config_entries(plan, status, profiled)
    if len(table):
        analysis.save_results(table, run_dir)
    lap("ncu_and_analysis_s")
    timings["analysis_s"] = round(timings["ncu_and_analysis_s"] - run["wall_time_s"], 3)
    run["timings"] = timings
    (run_dir / "run.json").write_text(json.dumps(run, indent=2) + "\n")

    ok_ranges = [c["range"] for c in run["configs"] if c["status"] == "ok"]
    if ok_ranges and not profiled and not outcome["interrupted"]:
        raise NcuError(
            f"ncu profiled no kernel inside the NVTX ranges {', '.join(ok_ranges[:4])}"
            f"{' ...' if len(ok_ranges) > 4 else ''} (filter --nvtx-include {NVTX_INCLUDE}): do these "
            f"variants launch CUDA kernels? See {run_dir / 'ncu.log'}"
        )
    return MeasureResult(run_dir, run, table)
