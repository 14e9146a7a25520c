"""Tool overhead of `memtraffic measure`: its wall time against the same ncu argv run bare.

1. `memtraffic measure ARGS --out DIR/measure` (a fresh process, timed from outside);
2. the ncu argv that run.json recorded, run again directly on a copy of the plan (DIR/bare), timed;
3. prints both and their ratio, and writes DIR/overhead.json.

Both runs profile the same configs with the same metrics; the difference is memtraffic's own work:
imports, checks (ncu --version, --query-metrics unless cached, the GPU), writing the plan and the
analysis of the report. Usage (GPU machine): python scripts/measure_overhead.py DIR [measure args...]
(default args: --all).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path


def timed(argv: list[str], log: Path) -> float:
    t0 = time.perf_counter()
    with open(log, "w") as out:
        code = subprocess.call(argv, stdout=out, stderr=subprocess.STDOUT)
    wall = time.perf_counter() - t0
    if code != 0:
        print(f"warning: {argv[0]} exited with {code} (see {log})", file=sys.stderr)
    return wall


def main(argv: list[str]) -> int:
    if not argv:
        raise SystemExit(__doc__)
    root = Path(argv[0])
    args = argv[1:] or ["--all"]
    root.mkdir(parents=True, exist_ok=True)
    measured = root / "measure"
    wall_measure = timed([sys.executable, "-m", "memtraffic.cli", "measure", *args, "--out", str(measured)],
                         root / "measure.log")
    run = json.loads((measured / "run.json").read_text())
    ncu_argv = list(run["attempts"][0]["argv"])
    bare = root / "bare"
    bare.mkdir()
    shutil.copy(measured / "plan.json", bare / "plan.json")
    ncu_argv[ncu_argv.index("--export") + 1] = str(bare / "profile.ncu-rep")
    ncu_argv[ncu_argv.index(str(measured / "plan.json"))] = str(bare / "plan.json")  # the runner's plan
    wall_bare = timed(ncu_argv, root / "bare.log")
    result = {"measure_args": args, "configs": len(run["configs"]), "measure_wall_s": round(wall_measure, 2),
              "bare_ncu_wall_s": round(wall_bare, 2), "ratio": round(wall_measure / wall_bare, 3),
              "ncu_wall_inside_measure_s": run.get("wall_time_s")}
    (root / "overhead.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
