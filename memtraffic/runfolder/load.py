"""The one run loader.

`load_run(path)` takes a run folder (from `memtraffic measure`, `profile` or `merge`) or any .ncu-rep
and gives a Run: its name, plan.json, run.json and report paths. Every command that reads runs goes
through it.
The reports' kernels are read through memtraffic.ncu.kernel_table.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from memtraffic.ncu.kernel_table import kernel_table
from memtraffic.ncu.report import REPORT_SUFFIX
from memtraffic.runfolder.records import DAMAGED, Plan, RunRecord, plan_from_trace, read_plan, read_run
from memtraffic.runfolder.timings import TIMINGS_FILE, is_timings
from memtraffic.runfolder.trace import read_trace
from memtraffic.vocab.errors import ReportError
from memtraffic.vocab.files import path_kind, require_file

TRACE_FILE = "trace.jsonl"  # what `profile` names its trace (memtraffic.collect.profile)
LAUNCHER_NAME = "launch.py"  # memtraffic/_inject/launch.py: profile --torch-ops puts it after the interpreter


@dataclass
class Run:
    """A run folder or a lone report: what every reader needs of it."""

    path: Path  # as given
    name: str  # the folder's name, or the report's name without .ncu-rep
    folder: Path | None  # the run folder (a report's own folder when it holds a plan.json)
    plan: Plan | None
    meta: RunRecord | None  # run.json
    reports: list[Path] = field(default_factory=list)
    # Why the run may be incomplete before any report is read (an interrupted profile), one line each.
    notes: list[str] = field(default_factory=list)

    def kernels(self) -> pd.DataFrame:
        """Every report's launches (kernel_table's rows), stacked; a damaged launch is left out (analyze
        names it)."""
        frames = [kernel_table(r, allow_partial=True).kernels for r in self.reports]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def load_run(path: str | Path) -> Run:
    """A run folder or a .ncu-rep -> Run. ReportError when the path does not exist or a JSON file of the
    folder is damaged (memtraffic.runfolder.records checks them). A folder's reports are those its run.json
    lists, else every .ncu-rep in it (the list may be empty: `analyze` then says so, `merge` and
    `measure --rerun` check what they need). A report inside one of our run folders gets that folder's
    plan, so ranges map to variants. A `profile` killed under ncu leaves no plan.json: its plan is
    rebuilt from trace.jsonl and the run is said to be interrupted (see interrupted_profile). Every path is
    checked for what it is before it is opened (vocab.files.require_file): a plan.json, run.json or report
    that is a folder, FIFO, device, link loop or dangling link is a ReportError naming it."""
    path = Path(path)
    kind = path_kind(path)
    if kind == "missing":
        raise ReportError(f"{path}: no such file or folder")
    if kind not in ("file", "folder"):
        raise ReportError(f"{path} is {kind}: give a run folder or a .ncu-rep report")
    if kind == "file" and path.suffix == ".json" and not is_timings(path):  # results.json, analyze's JSON
        raise ReportError(f"{path} is a saved table, not a run: give its run folder or a .ncu-rep (only "
                          "`diff` and the [[expect]] limits of `check` read a saved table)")
    folder = path if kind == "folder" else path.parent
    plan = read_plan(folder)
    meta = read_run(folder)
    notes: list[str] = []
    if plan is None and require_file(folder / TRACE_FILE, DAMAGED):
        plan, meta, notes = interrupted_profile(folder, meta)
    elif plan is not None and meta is None and any(folder.glob("status*.jsonl")):  # measure's, killed
        notes = [f"{folder}: the run was interrupted (measure was killed before it saved run.json): the "
                 f"configs its reports lack are named below; `memtraffic measure --rerun {folder}` measures "
                 "them"]
    listed = (meta or {}).get("reports")
    if kind == "folder":
        reports = [folder / r for r in listed] if listed else sorted(folder.glob("*" + REPORT_SUFFIX))
        if not reports and require_file(folder / TIMINGS_FILE, DAMAGED):  # a timing-only run
            reports = [folder / TIMINGS_FILE]
        for report in reports:  # a missing one is a gap the readers name; a FIFO or folder is no report
            require_file(report, DAMAGED if listed else "give a .ncu-rep report, or move it out of the run")
        return Run(path, folder.name or folder.resolve().name, folder, plan, meta, reports, notes)
    if plan is None:
        return Run(path, path.name.removesuffix(REPORT_SUFFIX), None, None, None, [path])
    return Run(path, folder.name or folder.resolve().name, folder, plan, meta, [path], notes)


def interrupted_profile(folder: Path, meta: RunRecord | None) -> tuple[Plan, RunRecord, list[str]]:
    """(plan, run.json, notes) of a `profile` run folder without plan.json: the program (or ncu) was killed
    before profile saved it. trace.jsonl holds a record (with its minimum) of every op call or region the
    program reached, so the plan is rebuilt from it; the note says so and gives the command that
    profiles the program again (from run.json, else from the ncu argv at the top of ncu.log)."""
    records = read_trace(folder / TRACE_FILE)
    program, options = _program_of_log(folder / "ncu.log")
    if meta and (given := meta.get("program")):
        program = list(given)
        options = (["--torch-ops"] if meta.get("torch_ops") else []) + _TRACE_OPTIONS.get(
            str(meta.get("traced_from")), [])
    plan = plan_from_trace(records, program)
    meta = meta.copy() if meta else {}
    meta.setdefault("kind", "profile")
    meta["interrupted"] = True
    again = shlex.join(["memtraffic", "profile", *options, "--out", "NEW_FOLDER", "--",
                        *(program or ["YOUR_PROGRAM"])])
    lost = len(plan.get("skipped", []))
    dropped = f", {lost} damaged records left out" if lost else ""
    calls = len(plan["configs"])
    note = (f"{folder}: the run was interrupted (profile was killed before it saved plan.json): "
            f"the plan is rebuilt from {TRACE_FILE} ({calls} op calls and regions{dropped}) and the "
            f"report holds what ncu profiled before; profile the program again to complete it: `{again}`")
    return plan, meta, [note]


# profile's options for each trace mode (memtraffic.runfolder.trace.TRACE_FROM), by the launcher's
# --trace-from value and by run.json's traced_from.
_TRACE_OPTIONS = {"window": ["--profile-from-start", "off"], "forward": ["--from-first-forward"],
                  "profiler window": ["--profile-from-start", "off"],
                  "first forward": ["--from-first-forward"]}


def _program_of_log(log: Path) -> tuple[list[str], list[str]]:
    """(the profiled program, profile's options for it: --torch-ops and its trace mode where memtraffic's
    launcher ran it) from the ncu argv run_ncu writes at the top of ncu.log ('$ ncu ... --export REPORT
    PROGRAM...'), without the launcher; ([], []) when the log does not say."""
    if path_kind(log) != "file":  # no log, or a FIFO that would block: the note names no command then
        return [], []
    try:
        first = log.read_text(encoding="utf-8", errors="replace").split("\n", 1)[0]
        argv = shlex.split(first.removeprefix("$ "))
    except (OSError, ValueError):
        return [], []
    if "--export" not in argv or argv.index("--export") + 2 > len(argv):
        return [], []
    program = argv[argv.index("--export") + 2:]
    options: list[str] = []
    if len(program) > 1 and program[1].endswith(LAUNCHER_NAME):  # python .../launch.py [--trace-from=X] ...
        options, rest = ["--torch-ops"], program[2:]
        if rest and rest[0].startswith("--trace-from="):
            options += _TRACE_OPTIONS.get(rest[0].split("=", 1)[1], [])
            rest = rest[1:]
        program = [program[0], *rest]
    return program, options


