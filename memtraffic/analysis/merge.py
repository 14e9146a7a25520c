"""`memtraffic merge RUN... --out R`: several run folders (shards, reruns, other machines) as one run.

The new folder gets a copy of every report (renamed partN-NAME, so equal names never collide), one
plan with the configs of all runs (ids renumbered, each config naming its part and reports), a
status file, and a run.json that keeps every part's ncu argv, environment and origin. Runs measured
on different GPUs or ncu versions are refused unless allow_mixed: their counters do not compare.

A config measured in two of the runs keeps both measurements: the later one's range gets a '|#N'
suffix (its Nth measurement) and the plan maps the NVTX range in that part's reports to it (config
'nvtx_range' and 'reports'), which analysis applies, so the two never sum into one row.
"""

from __future__ import annotations

import contextlib
import shlex
import shutil
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from memtraffic.host.machine import utc_now
from memtraffic.ncu.kernel_table import kernel_table, write_kernel_table
from memtraffic.ncu.report import EmptyReportError
from memtraffic.runfolder.folder import append_status
from memtraffic.runfolder.load import load_run
from memtraffic.runfolder.records import (
    Outcome,
    Plan,
    RunRecord,
    Skipped,
    partial_reports_expected,
    rerun_list,
    write_plan,
    write_run,
)
from memtraffic.vocab.environment import Environment
from memtraffic.vocab.errors import ReportError, UsageError, say
from memtraffic.vocab.files import new_folder, path_kind, require_file

# What must agree between runs for their counters to compare (environment keys).
SAME = ("gpu", "ncu_version")


def _load_run(path: Path) -> tuple[Plan, RunRecord, list[str]]:
    """plan, run.json and report names of a run folder; UsageError for anything that is not one."""
    kind = path_kind(path)
    if kind != "folder":
        what = {"missing": "no such folder", "file": "a file"}.get(kind, kind)
        raise UsageError(f"{path} is not a run folder ({what}): give folders written by `memtraffic measure`")
    run = load_run(path)
    if run.plan is None or run.meta is None or "configs" not in run.plan:
        raise UsageError(f"{path} is not a run folder (no plan.json and run.json): give folders written by "
                         "`memtraffic measure`")
    entries = run.meta.get("configs", [])
    with_ids = isinstance(entries, list) and all(isinstance(c, dict) and "id" in c for c in entries)
    if not with_ids or not all("id" in c for c in run.plan["configs"]):
        raise UsageError(f"{path}: its configs have no ids (plan.json, run.json): give folders written by "
                         "`memtraffic measure`")
    missing = [r for r in run.reports if not r.is_file()]
    if missing:
        raise UsageError(f"{path} lacks its report {missing[0].name}: the run folder is incomplete")
    return run.plan, run.meta, [r.name for r in run.reports]


def _measured_ranges(path: Path, run: RunRecord, reports: Sequence[str],
                     echo: Callable[[str], None]) -> set[str]:
    """The NVTX ranges the run's reports hold kernels of; ReportError naming the run when one is unreadable
    (read before anything is written, so a failed merge leaves no folder behind). An interrupted run's
    damaged last launch is left out, and said."""
    ranges: set[str] = set()
    empty: EmptyReportError | None = None
    for report in reports:
        try:
            read = kernel_table(path / report, allow_partial=partial_reports_expected(run))
        except EmptyReportError as err:  # an attempt whose runner died before profiling: no kernel
            empty = err
            continue
        except ReportError as err:
            raise ReportError(f"cannot merge {path}: {err}; leave the run out, or measure it again") from None
        for n in read.damaged:
            echo(f"warning: {path / report} is truncated or damaged: kernel launch #{n} has no name or "
                 "metrics (left out)")
        ranges.update(read.kernels["range"])
    if empty is not None and not ranges and any(c.get("status") == "ok" for c in run.get("configs", [])):
        raise ReportError(f"cannot merge {path}: {empty}; leave the run out, or measure it again")
    return ranges


def _check_same(paths: Sequence[Path], runs: Sequence[RunRecord], allow_mixed: bool) -> list[str]:
    """Refuse runs measured on different GPUs or ncu versions (unless allowed: then notes)."""
    notes = []
    for key in SAME:
        seen = [(r.get("environment") or Environment()).get(key) for r in runs]
        if len({str(v) for v in seen}) > 1:
            where = "; ".join(f"{p}: {v}" for p, v in zip(paths, seen, strict=True))
            if not allow_mixed:
                what = "GPUs" if key == "gpu" else "ncu versions"
                raise UsageError(f"the runs were measured on different {what} ({where}): their counters do "
                                 "not compare; pass --allow-mixed to merge them anyway")
            notes.append(f"mixed {key}: {where}")
    if len({tuple(r.get("metric_names") or []) for r in runs}) > 1:
        notes.append("the runs collected different metrics: columns a run lacks stay empty for its rows")
    return notes


def _shard_note(runs: Sequence[RunRecord]) -> str | None:
    """Shards of one plan that are not all there (or there twice)."""
    shards = [r["shard"] for r in runs if "shard" in r]
    if not shards:
        return None
    digests = {s["plan_digest"] for s in shards}
    if len(digests) > 1:
        return "the shards come from different plans (their grids differ)"
    count = shards[0]["count"]
    have = sorted(s["index"] for s in shards)
    if have != list(range(1, count + 1)):
        missing = sorted(set(range(1, count + 1)) - set(have))
        twice = sorted({i for i in have if have.count(i) > 1})
        parts = ([f"missing {', '.join(map(str, missing))}"] if missing else []) + \
            ([f"twice {', '.join(map(str, twice))}"] if twice else [])
        return f"shards of {count}: " + "; ".join(parts)
    return None


def merge_runs(sources: Sequence[Path], out: Path, allow_mixed: bool = False,
               echo: Callable[[str], None] | None = None) -> tuple[Path, RunRecord]:
    """Merge the run folders into the new folder `out`; returns it and its run.json. See the module doc."""
    echo = echo or say
    if len(sources) < 1:
        raise UsageError("give the run folders to merge: memtraffic merge RUN_A RUN_B --out MERGED")
    paths = [Path(s) for s in sources]
    if len({p.resolve() for p in paths}) < len(paths):
        raise UsageError("a run folder is given twice: each run can be merged once")
    if out.resolve() in {p.resolve() for p in paths}:
        raise UsageError(f"--out {out} is one of the runs: merge into a new folder")
    inside = next((p for p in paths if out.resolve().is_relative_to(p.resolve())), None)
    if inside is not None:  # a run folder is a format: no folder of another run inside it
        raise UsageError(f"--out {out} is inside the run {inside}: merge into a new folder outside the runs")
    loaded = [_load_run(p) for p in paths]
    measured = [_measured_ranges(p, run, reports, echo) for p, (_, run, reports) in zip(paths, loaded,
                                                                                     strict=True)]
    notes = _check_same(paths, [run for _, run, _ in loaded], allow_mixed)
    shard = _shard_note([run for _, run, _ in loaded])
    if shard:
        notes.append(shard)
    with new_folder(out) as building:  # a failure or Ctrl-C leaves nothing; a non-empty --out is refused
        plan, run = _write_merged(building, out.name, paths, loaded, measured, notes)
    for note in notes:
        echo(f"note: {note}")
    echo(f"merged {len(plan['configs'])} configs of {len(paths)} runs into {out}")
    missing = run.get("missing", [])
    if missing:
        shown = ", ".join(missing[:6]) + (" ..." if len(missing) > 6 else "")
        echo(f"error: {len(missing)} configs ran but have no kernel in their reports (cut short?): {shown}; "
             f"they are listed to rerun: `memtraffic measure --rerun {out}`")
    return out, run


def _write_merged(out: Path, name: str, paths: Sequence[Path],
                  loaded: Sequence[tuple[Plan, RunRecord, list[str]]], measured: Sequence[set[str]],
                  notes: list[str]) -> tuple[Plan, RunRecord]:
    """Fill the folder `out` (to be renamed `name`) with the merged run; its plan and run.json."""
    first_plan, first_run, _ = loaded[0]
    plan: Plan = {"configs": []}
    if "version" in first_plan:
        plan["version"] = first_plan["version"]
    if "seed" in first_plan:
        plan["seed"] = first_plan["seed"]
    if "metrics" in first_plan:
        plan["metrics"] = first_plan["metrics"]
    if "options" in first_plan:
        plan["options"] = first_plan["options"]
    skipped: list[Skipped] = []
    variant_files: list[str] = []
    merged_from: list[str] = []
    plan.update({"status_file": "status.jsonl", "variant_files": variant_files, "skipped": skipped,
                 "merged_from": merged_from})
    run: RunRecord = {"merged": utc_now(), "command": shlex.join(sys.argv),
                      "environment": first_run.get("environment"),
                      "metric_set": first_run.get("metric_set"),
                      "metric_names": first_run.get("metric_names"),
                      "clock_control": first_run.get("clock_control"),
                      "cache_control": first_run.get("cache_control"),
                      "parts": [], "attempts": [], "reports": [], "configs": [], "skipped": []}
    seen: dict[str, int] = {}  # range -> how many parts measured it so far
    missing: list[str] = []  # configs that ran but have no kernel in their reports (a report cut short)
    for part, (path, (src_plan, src_run, reports)) in enumerate(zip(paths, loaded, strict=True), 1):
        names = [f"part{part}-{r}" for r in reports]
        for report, name in zip(reports, names, strict=True):
            shutil.copy2(path / report, out / name)
            with contextlib.suppress(EmptyReportError):  # no table of nothing
                write_kernel_table(out / name, copy_of=path / report)
        for log in sorted(path.glob("ncu*.log")):
            if require_file(log, "the run folder is damaged (restore the file, or leave the run out)"):
                shutil.copy2(log, out / f"part{part}-{log.name}")
        entries = {c["id"]: c for c in src_run.get("configs", [])}
        ids = []
        for config in src_plan["configs"]:
            new = config.copy()  # less what belonged to its own run (set again below, or dropped)
            new.pop("gpu", None)
            new.pop("nvtx_range", None)
            new.pop("reports", None)
            new.pop("part", None)
            nvtx = config.get("nvtx_range", config["range"])
            # A merged run's config knows its own reports; else any of the run's reports may hold it.
            held = [f"part{part}-{r}" for r in config["reports"]] if "reports" in config else names
            new["id"], new["part"], new["reports"] = len(plan["configs"]), part, held
            seen[nvtx] = seen.get(nvtx, 0) + 1
            if seen[nvtx] > 1:  # the Nth measurement of this config in the merge
                new["range"], new["nvtx_range"] = f"{nvtx}|#{seen[nvtx]}", nvtx
            plan["configs"].append(new)
            ids.append(new["id"])
            found = entries.get(config["id"])
            # A config its run.json lacks is judged by the reports alone.
            entry: Outcome = found.copy() if found is not None else {
                "status": "not run", "error": "not in its run.json", "id": new["id"], "range": new["range"],
                "profiled": True}
            entry["id"], entry["range"], entry["part"] = new["id"], new["range"], part
            entry["profiled"] = bool(entry["profiled"]) and nvtx in measured[part - 1]
            if entry["status"] == "ok" and not entry["profiled"]:
                missing.append(new["range"])
            run["configs"].append(entry)
            append_status(out / "status.jsonl", {k: entry.get(k) for k in ("id", "range", "status", "error")})
        skipped += src_plan.get("skipped", [])
        variant_files += [f for f in src_plan.get("variant_files", []) if f not in variant_files]
        merged_from.append(str(path.resolve()))
        run["skipped"] += src_run.get("skipped", [])
        for a in src_run.get("attempts", []):
            attempt = a.copy()
            attempt["part"] = part
            run["attempts"].append(attempt)
        run["reports"] += names
        run["parts"].append({
            "part": part, "source": str(path.resolve()), "run": path.name, "reports": names, "configs": ids,
            **{k: src_run.get(k) for k in ("environment", "command", "started", "wall_time_s", "shard",
                                            "gpus", "metric_set", "interrupted") if k in src_run}})
    run["interrupted"] = any(r.get("interrupted") for _, r, _ in loaded)
    passes = [p for _, r, _ in loaded if (p := r.get("passes"))]
    run["passes"] = max(passes) if passes else None
    run["rerun"] = rerun_list(run["configs"])
    run["notes"] = notes
    run["missing"] = missing
    write_plan(out, plan)
    write_run(out, run)

    from memtraffic.analysis import analyze

    try:
        table, _ = analyze.analyze_reports([out / r for r in run["reports"]], plan, run_name=name,
                                           meta=run)
    except EmptyReportError:  # every config is listed under 'missing' or 'rerun'
        table = None
    if table is not None and len(table):
        analyze.save_results(table, out)
    return plan, run
