"""Wall time and peak memory of `memtraffic analyze` on every committed run (issue 13's reading-side goal).

Each analysis runs in a fresh Python process, as a user would run it: the wall time includes the
interpreter's start and every import; the peak is the process's own maximum resident set size.
Usage: python scripts/bench_analyze.py [RUN ...]   (default: every run folder under reports/h100)
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CHILD = """
import json, resource, sys
from memtraffic.cli import app
try:
    app(["analyze", sys.argv[1], "--format", "json"], prog_name="memtraffic")
except SystemExit as exit:
    code = exit.code
print(json.dumps({"peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "torch": "torch" in sys.modules}), file=sys.stderr)
"""


def measure(run: Path) -> dict:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", CHILD, str(run)], capture_output=True, text=True, cwd=REPO)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"analyze {run} failed: {proc.stderr.strip().splitlines()[-1]}")
    stats = json.loads(proc.stderr.strip().splitlines()[-1])
    return {"run": str(run.relative_to(REPO)), "wall_s": wall, "peak_mb": stats["peak_kib"] / 1024,
            "imported_torch": stats["torch"]}


def main(argv: list[str]) -> int:
    runs = [Path(a).resolve() for a in argv] or sorted(
        p.parent for p in (REPO / "reports" / "h100").glob("*/profile.ncu-rep"))
    rows = [measure(run) for run in runs]
    width = max(len(r["run"]) for r in rows)
    print(f"{'run':<{width}}  wall s  peak MB  torch imported")
    for r in rows:
        print(f"{r['run']:<{width}}  {r['wall_s']:6.2f}  {r['peak_mb']:7.0f}  {r['imported_torch']}")
    print(f"{'max':<{width}}  {max(r['wall_s'] for r in rows):6.2f}  {max(r['peak_mb'] for r in rows):7.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
