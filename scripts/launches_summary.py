"""Every-launch against distinct-launch runs, pair by pair: profiling time and agreement per op type.

    python scripts/launches_summary.py FOLDER [--json OUT.json]

FOLDER holds pairs of `memtraffic profile` run folders named profile_full_<NAME> (--every-launch) and
profile_sampled_<NAME> (--distinct K), as scripts/gpu_launches.sh writes them. Per pair: each run's
wall time (run.json's wall_time_s: ncu and the program), kernels measured, replay passes, the time ratio
sampled/full, the same after each run's first profiled kernel (the program's start-up left out:
first_kernel_s), the seconds each extra measured kernel cost, and `diff --group-by op` between them
reduced to its verdict: the op types whose L1 load bytes differ beyond 1% or DRAM read bytes beyond 3%
(issue 33's bar) and DRAM_FLOOR_BYTES (4 KiB: one kernel's launch-to-launch noise,
memtraffic.analysis.reuse) for each kernel launch of the op type in the every-launch run: an op type's
DRAM reads are a sum over its launches, each carrying that noise (a fill of 104 launches reads about
4 KiB a launch of its code and constants, whatever it writes). Other run folders (metric_*, one run
each) are listed with their seconds per measured kernel. No GPU needed: it reads run folders.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path
from typing import Any

from memtraffic.analysis.diff import compare, load_side
from memtraffic.analysis.reuse import DRAM_FLOOR_BYTES
from memtraffic.runfolder.load import load_run
from memtraffic.vocab.errors import MemtrafficError

L1_BAR = 0.01
DRAM_BAR = 0.03


# profile's first progress line, printed at ncu's first profiled kernel in runs that took over 2 s to
# reach it (runs made before run.json recorded first_kernel_s)
_FIRST = re.compile(r"^ncu: 1 kernel launch(?:es)? measured.*\(([0-9.]+) s a launch\)", re.M)


def first_kernel_s(folder: Path, run: dict[str, Any]) -> float | None:
    """Seconds before ncu profiled its first kernel (the program's start-up): run.json's first_kernel_s,
    else the first progress line of the folder's stderr.txt (profile's own output), else None."""
    if run.get("first_kernel_s") is not None:
        return run["first_kernel_s"]
    stderr = folder / "stderr.txt"
    found = _FIRST.search(stderr.read_text(errors="replace")) if stderr.is_file() else None
    return float(found.group(1)) if found else None


def _run_facts(folder: Path) -> dict[str, Any]:
    run = load_run(folder).meta or {}
    kernels = run.get("kernels_profiled") or 0
    wall = run.get("wall_time_s")
    first = first_kernel_s(folder, run)
    return {"folder": folder.name, "metric_set": run.get("metric_set"), "distinct": run.get("distinct"),
            "wall_time_s": wall, "kernels_profiled": kernels, "passes": run.get("passes"),
            "s_per_kernel": round(wall / kernels, 4) if wall and kernels else None,
            "first_kernel_s": first,
            "after_first_kernel_s": round(wall - first, 3) if wall and first is not None else None}


def _finite(x: Any) -> float:
    return x if isinstance(x, int | float) and math.isfinite(x) else 0.0


def pair(full: Path, sampled: Path) -> dict[str, Any]:
    """One pair's facts, ratio and per-op agreement."""
    a, b = _run_facts(full), _run_facts(sampled)
    d = compare(load_side(full, "op"), load_side(sampled, "op"), "op")
    ops, off = 0, []
    for r in d.rows:
        if r["status"] != "both":
            off.append({"op": r["match"], "why": r["status"]})
            continue
        ops += 1
        l1, dram = abs(_finite(r["l1_ld_bytes_rel"])), abs(_finite(r["dram_rd_bytes_rel"]))
        dram_bytes = abs(_finite(r["dram_rd_bytes_change"]))
        launches = max(1.0, _finite(r.get("n_kernels_a")))
        if l1 > L1_BAR or (dram > DRAM_BAR and dram_bytes > DRAM_FLOOR_BYTES * launches):
            off.append({"op": r["match"], "l1_ld_rel": r["l1_ld_bytes_rel"],
                        "dram_rd_rel": r["dram_rd_bytes_rel"]})
    ratio = b["wall_time_s"] / a["wall_time_s"] if a["wall_time_s"] and b["wall_time_s"] else None
    after = (b["after_first_kernel_s"] / a["after_first_kernel_s"]
             if a["after_first_kernel_s"] and b["after_first_kernel_s"] is not None else None)
    # Each extra measured kernel's cost, and what the sampled run paid besides (start-up, unmeasured work).
    extra = a["kernels_profiled"] - b["kernels_profiled"]
    marginal = (a["wall_time_s"] - b["wall_time_s"]) / extra if extra > 0 and ratio is not None else None
    return {"full": a, "sampled": b, "time_ratio": None if ratio is None else round(ratio, 4),
            "time_ratio_after_first_kernel": None if after is None else round(after, 4),
            "s_per_extra_kernel": None if marginal is None else round(marginal, 4),
            "ops_compared": ops, "ops_off": off}


def summarize(folder: Path) -> dict[str, Any]:
    runs = sorted(p for p in folder.iterdir() if (p / "run.json").is_file())
    names = {p.name.removeprefix("profile_full_") for p in runs if p.name.startswith("profile_full_")}
    pairs: dict[str, Any] = {}
    for n in sorted(names):
        if (folder / f"profile_sampled_{n}").is_dir():
            try:
                pairs[n] = pair(folder / f"profile_full_{n}", folder / f"profile_sampled_{n}")
            except MemtrafficError as err:  # one failed run loses only its pair
                pairs[n] = {"error": str(err)}
    others = [_run_facts(p) for p in runs if not p.name.startswith(("profile_full_", "profile_sampled_"))]
    return {"pairs": pairs, "other_runs": others}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    summary = summarize(args.folder)
    for name, p in summary["pairs"].items():
        if "error" in p:
            print(f"{name}: {p['error']}")
            continue
        full, sampled = p["full"], p["sampled"]
        print(f"{name}: full {full['wall_time_s']} s ({full['kernels_profiled']} kernels), sampled "
              f"{sampled['wall_time_s']} s ({sampled['kernels_profiled']} kernels): ratio {p['time_ratio']}; "
              f"after each run's first profiled kernel {p['time_ratio_after_first_kernel']}; "
              f"{p['s_per_extra_kernel']} s per extra kernel measured; {p['ops_compared']} op types "
              f"compared, {len(p['ops_off'])} off the bar")
        for o in p["ops_off"]:
            print(f"  off: {o}")
    for r in summary["other_runs"]:
        print(f"{r['folder']}: {r['metric_set']}, {r['passes']} passes, {r['kernels_profiled']} kernels in "
              f"{r['wall_time_s']} s ({r['s_per_kernel']} s a kernel)")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
