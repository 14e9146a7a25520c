"""`measure --timing-only`, and measure's fallback to it when ncu is missing or may not read the counters.

The plan is measure's; the runner (`python -m memtraffic.measure.runner PLAN.json`) runs without ncu
through the launcher, which times its kernels with torch.profiler (memtraffic.measure.timing): each
config's measured launch, inside its `mt|v|...` range, after the runner's warm-up call (the kernels
outside every range, warm-up and reference checks, are dropped, as ncu's --nvtx-include leaves them
out). The run folder has measure's layout with `timings.json` (memtraffic.core.timings) where the
reports would be; the analysis gives each config its time and bandwidth at the model's minimum,
no per-level bytes.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from memtraffic.core.errors import GpuNotFoundError
from memtraffic.core.rundir import environment, gpu_name, new_run_dir, read_status, utc_now
from memtraffic.core.runfile import write_plan, write_run
from memtraffic.core.timings import SOURCE, TIMINGS_FILE, keep_ranged
from memtraffic.measure.measure import (
    MeasureOptions,
    MeasureResult,
    _config_entries,
    _run_label,
    plan_for,
    runner_argv,
)
from memtraffic.measure.ops import INJECT_DIR
from memtraffic.measure.profile import TIMINGS_ENV, with_launcher


def measure_timing(opts: MeasureOptions, echo: Callable[[str], None], reason: str = "") -> MeasureResult:
    """Run the plan's configs without ncu, their kernels timed (see the module doc)."""
    plan = plan_for(opts)
    try:
        gpu: str | None = gpu_name()
    except GpuNotFoundError:
        gpu = None
    run_dir = new_run_dir(_run_label(opts, plan), opts.out, opts.runs_root)
    plan["metrics"] = {"spec": None, "names": [], "notes": ["timing-only: no counters"]}
    plan["options"] = {"clock_control": None, "cache_control": None, "source": False}
    write_plan(run_dir, plan)
    for s in plan["skipped"]:
        echo(f"skip {s['variant']} {'x'.join(map(str, s['shape']))} {s['dtype']}: {s['reason']}")
    timings = run_dir / TIMINGS_FILE
    argv = with_launcher(runner_argv(run_dir / "plan.json"), "none", timings=timings) or []
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
    run: dict[str, Any] = {
        "started": utc_now(), "command": shlex.join(sys.argv), "environment": environment(gpu),
        "params": opts.params, "metric_set": None, "metric_names": [], "metric_notes": [],
        "clock_control": None, "cache_control": None, "source": False,
        "timing_only": True, "timing_source": SOURCE, "timing_reason": reason or "asked for (--timing-only)",
        "wall_time_s": round(time.perf_counter() - t0, 3), "finished": utc_now(), "interrupted": False,
        "attempts": [{"argv": argv, "returncode": proc.returncode, "passes": None}], "passes": None,
        "reports": [TIMINGS_FILE] if has_timings else [],
        "variants": list(dict.fromkeys(c["variant"] for c in plan["configs"])),
        "configs": _config_entries(plan, status, launches=None), "skipped": plan["skipped"],
    }
    write_run(run_dir, run)
    return MeasureResult(run_dir, run, plan, [timings] if has_timings else [], status=status,
                         clock=time.perf_counter())
