"""The records of one run folder while a run makes them: a RunBuilder holds its plan.json and run.json and
writes them, through the schema check of runfolder/records.py, once at the end of each phase.

`measure`: plan.json as soon as it is built (the runners wait for it); run.json when ncu has measured
(saved before analysis can fail), again with the second pass of --metrics auto (plan-second.json, and
plan.json naming the reports that hold each config measured again), and once more when the reports are
analyzed (what ncu profiled of each config, what to rerun, where the time went). `profile`: run.json when
the program starts (kept if it is killed), plan.json and run.json when it ends, run.json after analysis.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from memtraffic.runfolder.folder import StatusRecord
from memtraffic.runfolder.records import PLAN_FILE, Outcome, Plan, RunRecord, write_plan, write_run

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing's own from Python 3.11


class RunBuilder:
    """plan.json and run.json of the run folder `folder`: `run` and `plan` are what was written last, or
    is about to be."""

    def __init__(self, folder: Path, run: RunRecord | None = None, plan: Plan | None = None) -> None:
        self.folder = folder
        self.run: RunRecord = {} if run is None else run
        self.plan = plan

    def save_plan(self, plan: Plan, stem: str = "", checked: bool = False) -> Plan:
        """plan.json written now (plan{stem}.json for a later pass's own plan, records.plan_file); the
        run's own plan is held. `checked`: see records.write_plan."""
        write_plan(self.folder, plan, checked=checked, stem=stem)
        if not stem:
            self.plan = plan
        return plan

    def abort_plan(self, why: str) -> None:
        """plan.abort beside the plan that will not come: the runners waiting for it stop (runner.py)."""
        (self.folder / PLAN_FILE).with_suffix(".abort").write_text(f"{why}\n")

    def save(self, **fields: Unpack[RunRecord]) -> RunRecord:
        """run.json with `fields` added, written now: the end of a phase."""
        self.run.update(fields)
        write_run(self.folder, self.run)
        return self.run

    def outcomes(self, status: Mapping[int, StatusRecord], launches: Mapping[str, int] | None
                 ) -> list[Outcome]:
        """run.json's per-config lines of the held plan (see outcomes)."""
        if self.plan is None:
            raise TypeError("the run's plan is not built yet")
        return outcomes(self.plan, status, launches)


def outcomes(plan: Plan, status: Mapping[int, StatusRecord], launches: Mapping[str, int] | None
             ) -> list[Outcome]:
    """run.json's per-config lines: status ok/failed/not run, error text, whether ncu profiled it and how
    many launches (`launches`: per range, once the reports are read; readers then know a config whose
    report was cut inside it)."""
    entries: list[Outcome] = []
    for c in plan["configs"]:
        rec = status.get(c["id"], {})
        done = rec.get("status", "not run")
        profiled = None if launches is None else c["range"] in launches
        error = "no kernel was profiled inside its NVTX range" if done == "ok" and profiled is False \
            else rec.get("error")
        entry: Outcome = {"id": c["id"], "range": c["range"], "variant": c["variant"], "op": c["op"],
                          "shape": c["shape"], "dtype": c["dtype"], "params": c["params"],
                          "status": done, "error": error, "max_err": rec.get("max_err"), "profiled": profiled}
        if "gpu" in c:
            entry["gpu"] = c["gpu"]
        if launches:
            entry["kernels"] = int(launches.get(c["range"], 0))
        entries.append(entry)
    return entries
