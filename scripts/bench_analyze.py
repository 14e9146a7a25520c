"""Wall time and peak memory of `memtraffic analyze`: first read of a report, repeated read, and ncu_report's
own load of the same report(s), for every committed run or the runs and reports given.

Each measurement runs in a fresh Python process, as a user would run it: the wall time includes the
interpreter's start and every import; the peak is the process's maximum resident set size (max RSS).
- first read: the run copied to a temporary folder without its kernel tables, with an empty cache
  ($MEMTRAFFIC_CACHE): memtraffic opens each report once and keeps its tables in the cache;
- repeated read: the same again (the tables come from the cache; a committed run reads its own tables);
- ncu_report: a process that only imports ncu_report, loads the run's reports and looks up memtraffic's
  metrics of each launch (ncu_report materializes a launch when it is first touched: what any reader pays).
Usage: python scripts/bench_analyze.py [RUN_OR_REPORT ...] [--repeat N]
       (default: every run folder with results.json under reports/; a .ncu-rep is analyzed alone)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ANALYZE = """
import json, resource, sys
from memtraffic.cli import app
try:
    app(["analyze", sys.argv[1], "--format", "json"], prog_name="memtraffic")
except SystemExit as exit:
    if exit.code:
        raise
print(json.dumps({"peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "torch": "torch" in sys.modules}), file=sys.stderr)
"""
LOAD = """
import json, resource, sys
from memtraffic.ncu.metrics import METRICS
from memtraffic.ncu.report import load_ncu_report
kernels = 0
for path in sys.argv[1:]:
    with load_ncu_report(path) as report:  # a committed (xz-compressed) report is decompressed first
        for i in range(report.num_ranges()):
            rng = report.range_by_idx(i)
            for j in range(rng.num_actions()):
                action = rng.action_by_idx(j)
                action.name()
                for m in METRICS.values():
                    action.metric_by_name(m.ncu)
                kernels += 1
print(json.dumps({"peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "kernels": kernels}),
      file=sys.stderr)
"""


def _child(code: str, args: list[str], env: dict[str, str]) -> tuple[float, dict]:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=REPO,
                          env=env)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise SystemExit(f"{' '.join(args)}: failed: {last}")
    return wall, json.loads(proc.stderr.strip().splitlines()[-1])


def _copy_without_tables(path: Path, into: Path) -> tuple[Path, list[Path]]:
    """The run (or lone report) copied without its tables, and its reports in the copy."""
    if path.is_file():
        into.mkdir()
        shutil.copyfile(path, into / path.name)
        return into / path.name, [into / path.name]
    shutil.copytree(path, into, ignore=shutil.ignore_patterns("*.kernels.json.gz"))
    run = json.loads((into / "run.json").read_text()) if (into / "run.json").is_file() else {}
    reports = [into / r for r in run.get("reports") or []] or sorted(into.glob("*.ncu-rep"))
    return into, reports


def measure(path: Path, repeat: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        copy, reports = _copy_without_tables(path, Path(tmp) / path.name)
        report_mb = sum(r.stat().st_size for r in reports) / 1e6
        env = {**os.environ, "MEMTRAFFIC_CACHE": str(Path(tmp) / "cache")}
        load_s, load = _child(LOAD, [str(r) for r in reports], env)
        first_s, first = _child(ANALYZE, [str(copy)], env)
        again = [_child(ANALYZE, [str(copy)], env) for _ in range(repeat)]
    name = str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)
    return {"run": name, "kernels": load["kernels"], "report_mb": report_mb,
            "load_s": load_s, "load_mb": load["peak_kib"] / 1024,
            "first_s": first_s, "first_mb": first["peak_kib"] / 1024,
            "repeat_s": statistics.median(s for s, _ in again),
            "repeat_mb": max(r["peak_kib"] for _, r in again) / 1024,
            "torch": first["torch"] or any(r["torch"] for _, r in again)}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path)
    parser.add_argument("--repeat", type=int, default=3, help="repeated reads per run (median time, max RSS)")
    args = parser.parse_args(argv)
    paths = [p.resolve() for p in args.paths] or sorted(
        p.parent for p in (REPO / "reports").rglob("results.json") if any(p.parent.glob("*.ncu-rep")))
    print(f"# {platform.node()}: {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; load average {os.getloadavg()[0]:.2f}")
    rows = [measure(p, args.repeat) for p in paths]
    width = max(len(r["run"]) for r in rows)
    print(f"{'run':<{width}}  kernels  report MB  ncu_report s  MB  first read s  MB  repeated s  MB  torch")
    for r in rows:
        print(f"{r['run']:<{width}}  {r['kernels']:7d}  {r['report_mb']:9.2f}  {r['load_s']:12.2f}"
              f"  {r['load_mb']:3.0f}  {r['first_s']:12.2f}  {r['first_mb']:3.0f}  {r['repeat_s']:10.2f}"
              f"  {r['repeat_mb']:3.0f}  {'yes' if r['torch'] else 'no'}")
    print(f"{'max':<{width}}  {'':7}  {'':9}  {max(r['load_s'] for r in rows):12.2f}"
          f"  {max(r['load_mb'] for r in rows):3.0f}  {max(r['first_s'] for r in rows):12.2f}"
          f"  {max(r['first_mb'] for r in rows):3.0f}  {max(r['repeat_s'] for r in rows):10.2f}"
          f"  {max(r['repeat_mb'] for r in rows):3.0f}")
    big = max(rows, key=lambda r: r["kernels"])
    if big["kernels"] >= 1000:
        per = 1000 / big["kernels"]
        print(f"per 1000 kernels ({big['run']}): first read {big['first_s'] * per:.2f} s, "
              f"repeated {big['repeat_s'] * per:.2f} s; ncu_report's load {big['load_s'] * per:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
