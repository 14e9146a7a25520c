"""One sweep measured with `measure --gpus all` and with `--gpus 0`: wall times, their ratio, and whether
every config's L1/L2 byte counters are identical in the two runs (issue 15).

    python scripts/measure_gpus.py OUT [--sweep scripts/sweeps/softmax_h200x2.toml] [--work DIR]

Written for one call on a multi-GPU host. Both runs start with an empty Triton cache of their own
(TRITON_CACHE_DIR), so each compiles its kernels as a fresh user's would; the ncu metric list is
cached before either run, so neither pays `ncu --query-metrics`. The one-GPU run goes first.
Wall time is that of the whole `memtraffic measure` command (start-up, planning, profiling,
analysis); run.json's wall_time_s (profiling only) is recorded beside it.

OUT gets: summary.json (devices, date, versions, wall times, ratio, counter equality, per-GPU split),
comparison.csv (one row per config: each counter in both runs), all.tgz and one.tgz (the two run
folders), one.log and all.log (the commands' progress lines).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memtraffic.analyze import analyze_path  # noqa: E402

DEFAULT_SWEEP = Path(__file__).resolve().parent / "sweeps" / "softmax_h200x2.toml"
# The counters that must not depend on which GPU or process measured a config.
COUNTERS = ["l1_ld_bytes", "l1_st_bytes", "l2_rd_bytes", "l2_wr_bytes", "req_ld_bytes", "req_st_bytes",
            "l1_ld_sectors", "l1_st_sectors", "l1_ld_requests", "l1_st_requests"]
# Shown beside them, not expected to match exactly: DRAM traffic and time vary run to run.
OTHERS = ["dram_rd_bytes", "dram_wr_bytes", "time_ns"]


def warm_metric_cache() -> None:
    """Ask ncu for its metric names once, into the cache that both measure runs then read."""
    from memtraffic.ncu import find_ncu, metrics_cache_key, ncu_version, query_metric_names
    from memtraffic.rundir import check_gpu

    ncu = find_ncu()
    query_metric_names(ncu, metrics_cache_key(ncu, ncu_version(ncu), check_gpu()))


def measure(sweep: Path, gpus: str, out: Path, log: Path, cache: Path) -> float:
    """Run `memtraffic measure --sweep SWEEP --gpus GPUS --out OUT`; its wall time in seconds."""
    argv = [sys.executable, "-m", "memtraffic.cli", "measure", "--sweep", str(sweep), "--gpus", gpus,
            "--out", str(out), "--format", "json"]
    env = {**os.environ, "TRITON_CACHE_DIR": str(cache), "PYTHONUNBUFFERED": "1"}
    t0 = time.perf_counter()
    with open(log, "w") as f:
        proc = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        f.write(proc.stderr)
    wall = time.perf_counter() - t0
    print(proc.stderr[-3000:], file=sys.stderr, flush=True)
    if proc.returncode != 0:
        raise SystemExit(f"measure --gpus {gpus} exited with {proc.returncode}: see {log}")
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--sweep", type=Path, default=DEFAULT_SWEEP)
    parser.add_argument("--work", type=Path, help="where the run folders go (default: a temporary folder)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    work = args.work or Path(tempfile.mkdtemp(prefix="measure_gpus-"))
    work.mkdir(parents=True, exist_ok=True)

    warm_metric_cache()
    runs = {"one": "0", "all": "all"}
    walls = {}
    for name, gpus in runs.items():
        log, cache = args.out / f"{name}.log", work / f"triton-{name}"
        walls[name] = measure(args.sweep, gpus, work / name, log, cache)

    tables = {name: analyze_path(work / name).set_index("range") for name in runs}
    infos = {name: json.loads((work / name / "run.json").read_text()) for name in runs}
    one, many = tables["one"], tables["all"]
    rows, mismatches = [], []
    for rng in sorted(set(one.index) | set(many.index)):
        row = {"range": rng}
        for col in COUNTERS + OTHERS:
            a = one[col].get(rng) if rng in one.index else None
            b = many[col].get(rng) if rng in many.index else None
            row[f"{col}_one"], row[f"{col}_all"] = a, b
            if col in COUNTERS and not (a is not None and b is not None and a == b):
                mismatches.append({"range": rng, "counter": col, "one": a, "all": b})
        row["gpu_all"] = next(c.get("gpu") for c in infos["all"]["configs"] if c["range"] == rng) \
            if rng in many.index else None
        rows.append(row)
    with open(args.out / "comparison.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)

    env = infos["all"]["environment"]
    summary = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "gpu": env["gpu"], "gpus": len(infos["all"]["gpus"]), "driver": env["driver"],
        "ncu_version": env["ncu_version"], "torch": env["torch"], "triton": env["triton"],
        "sweep": str(args.sweep.name), "configs": len(rows),
        "configs_ok": {n: sum(c["status"] == "ok" and bool(c["profiled"]) for c in infos[n]["configs"])
                       for n in runs},
        "wall_s": {n: round(w, 2) for n, w in walls.items()},
        "profiling_wall_s": {n: infos[n]["wall_time_s"] for n in runs},
        "ratio_all_over_one": round(walls["all"] / walls["one"], 3),
        "profiling_ratio_all_over_one": round(infos["all"]["wall_time_s"] / infos["one"]["wall_time_s"], 3),
        "per_gpu": [{"index": g["index"], "configs": len(g["configs"]),
                     "predicted_cost_s": g["predicted_cost_s"], "wall_time_s": g["wall_time_s"]}
                    for g in infos["all"]["gpus"]],
        "counters_compared": COUNTERS,
        "counters_identical": not mismatches and len(rows) == len(one) == len(many),
        "mismatches": mismatches,
    }
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    for name in runs:
        with tarfile.open(args.out / f"{name}.tgz", "w:gz") as tar:
            tar.add(work / name, arcname=name)
    print(json.dumps({k: v for k, v in summary.items() if k != "mismatches"}, indent=2))
    print(f"{len(mismatches)} counter mismatches")


if __name__ == "__main__":
    main()
