"""One sweep measured with `measure --gpus all` and with `--gpus 0`: wall times, their ratio, and whether
every config's L1/L2 byte counters are identical in the two runs (issue 15).

    python scripts/measure_gpus.py OUT [--sweep scripts/sweeps/softmax_h200x2.toml] [--work DIR]
                                       [--also-first N]

Written for one call on a multi-GPU host. Runs alternate: one GPU, all GPUs, one GPU, all GPUs (--repeat
pairs; --also-first N adds a run on the first N GPUs after each 'all', e.g. two of four), so that the
counters of two runs on the same GPUs show what varies from run to run anyway. Every run starts with an
empty Triton cache of its own (TRITON_CACHE_DIR), so each compiles its kernels as a fresh user's would
(with --warm-triton, one cache filled by an untimed first run); the ncu metric list is cached before the
first run, so none pays `ncu --query-metrics`. Wall time is that of the whole `memtraffic measure`
command (start-up, planning, profiling, analysis); run.json's wall_time_s (profiling only) is recorded
beside it. A run that fails is reported and left out.

OUT gets: summary.json (devices, date, versions, wall times, ratios, per-GPU split (each GPU's wall time,
its configs' seconds and the fixed rest: gpu_split), measure's own timings, and per counter
how many configs have identical values in each pair of runs), comparison.csv (one row per config:
each counter in every run), all-1.tgz (the first --gpus all run folder) and logs.tgz (progress).
With `--metrics auto` (measure's default) summary.json also says, per run, which configs the second pass
measured again with the full set and how long it took (second_pass); profiling_wall_s is then both passes.
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

from memtraffic.analysis.analyze import analyze_path  # noqa: E402

DEFAULT_SWEEP = Path(__file__).resolve().parent / "sweeps" / "softmax_h200x2.toml"
# The counters that must not depend on which GPU or process measured a config.
COUNTERS = ["l1_ld_bytes", "l1_st_bytes", "l2_rd_bytes", "l2_wr_bytes", "req_ld_bytes", "req_st_bytes",
            "l1_ld_sectors", "l1_st_sectors", "l1_ld_requests", "l1_st_requests"]
# Shown beside them, not expected to match exactly: DRAM traffic and time vary run to run.
OTHERS = ["dram_rd_bytes", "dram_wr_bytes", "time_ns"]


def warm_metric_cache() -> None:
    """Ask ncu for its metric names once, into the cache that both measure runs then read."""
    from memtraffic.host.gpu import require_gpu
    from memtraffic.ncu.command import find_ncu, metrics_cache_key, ncu_version, query_metric_names

    ncu = find_ncu()
    query_metric_names(ncu, metrics_cache_key(ncu, ncu_version(ncu), require_gpu("measure_gpus needs one")))


def measure(sweep: Path, gpus: str, out: Path, log: Path, cache: Path, metrics: str) -> float | None:
    """Run `memtraffic measure --sweep SWEEP --gpus GPUS --metrics METRICS --out OUT`; its wall time in
    seconds, None if it failed (the log says why; the other runs go on)."""
    argv = [sys.executable, "-m", "memtraffic.cli", "measure", "--sweep", str(sweep), "--gpus", gpus,
            "--metrics", metrics, "--out", str(out), "--format", "json"]
    env = {**os.environ, "TRITON_CACHE_DIR": str(cache), "PYTHONUNBUFFERED": "1"}
    t0 = time.perf_counter()
    with open(log, "w") as f:
        proc = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        f.write(proc.stderr)
    wall = time.perf_counter() - t0
    print(proc.stderr[-3000:], file=sys.stderr, flush=True)
    if proc.returncode != 0:
        print(f"measure --gpus {gpus} exited with {proc.returncode}: see {log}", file=sys.stderr)
        return None
    return wall


def collected(tables) -> list[str]:
    """The COUNTERS the runs collected (the 'bytes' metric set has no sector or request counters)."""
    return [col for col in COUNTERS if all(t[col].notna().any() for t in tables)]


def same(x, y) -> bool:
    """Equal, or missing in both (a first look's row has no request counters)."""
    return bool(x == y) or bool(x != x and y != y)  # numpy's bools sum to numpy ints: JSON refuses them


def compare(a, b) -> dict[str, int]:
    """Counter -> how many configs (ranges of both tables) have exactly the same value in both."""
    common = sorted(set(a.index) & set(b.index))
    return {col: sum(same(a[col][r], b[col][r]) for r in common) for col in collected([a, b])}


def second_pass(info: dict) -> dict | None:
    """What measure --metrics auto's second pass did in a run (run.json's second_pass), None without one."""
    again = info.get("second_pass")
    if again is None:
        return None
    return {"configs": [c["range"] for c in again["configs"]],
            "taken": sum(bool(c["taken"]) for c in again["configs"]), "wall_time_s": again["wall_time_s"],
            "error": again.get("error"), "metric_set": again["metric_set"]}


def gpu_split(run_dir: Path, info: dict) -> list[dict]:
    """Per GPU of a run: its configs, predicted and measured seconds, and where its wall time went: the
    runner's configs (status file 'seconds': inputs, warm-up, check, the profiled call) and the rest, its
    fixed cost, split by the Unix times of the attempt (t_start/t_end) and of the runner's records into
    ncu starting python (to_python_s), python importing and waiting for the plan (to_ready_s), ready to
    the first config (to_first_s), the last config's end to ncu's exit (after_last_s: the report
    written, the process torn down) and between configs (between_s: one config's end to the next's
    start); with each phase of the configs summed (phases_s: inputs, warmup, check, measured, free)."""
    out = []
    for g in info["gpus"]:
        status, ready, stamps, phases, between, last_ok = {}, None, [], {}, 0.0, None
        path = run_dir / g.get("status_file", f"status-gpu{g['index']}.jsonl")
        for line in path.read_text().splitlines() if path.is_file() else []:
            rec = json.loads(line)
            if rec.get("event") == "ready" and ready is None:
                ready = rec
            if "t" in rec and "id" in rec:
                stamps.append(rec["t"])
            if rec.get("status") == "start" and last_ok is not None:
                between += rec["t"] - last_ok
            if rec.get("status") == "ok":
                status[rec["id"]] = rec.get("seconds") or 0.0
                last_ok = rec.get("t")
                for phase, s in (rec.get("phases") or {}).items():
                    phases[phase] = phases.get(phase, 0.0) + s
        configs_s = round(sum(status.values()), 3)
        row = {"index": g["index"], "configs": len(g["configs"]),
               "predicted_cost_s": g["predicted_cost_s"], "wall_time_s": g["wall_time_s"],
               "configs_s": configs_s, "fixed_s": round(g["wall_time_s"] - configs_s, 3),
               "between_s": round(between, 3), "phases_s": {k: round(v, 3) for k, v in phases.items()}}
        first = (g.get("attempts") or [{}])[0]
        if ready and stamps and "t_start" in first:
            last = g["attempts"][-1]
            python = ready.get("process_started")
            row.update(to_python_s=round(python - first["t_start"], 3) if python else None,
                       to_ready_s=round(ready["t"] - python, 3) if python else None,
                       to_first_s=round(min(stamps) - ready["t"], 3),
                       after_last_s=round(last["t_end"] - max(stamps), 3))
        out.append(row)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--sweep", type=Path, default=DEFAULT_SWEEP)
    parser.add_argument("--repeat", type=int, default=2, help="pairs of runs (one GPU, then all GPUs)")
    parser.add_argument("--work", type=Path, help="where the run folders go (default: a temporary folder)")
    parser.add_argument("--metrics", default="traffic", help="measure's --metrics (default traffic)")
    parser.add_argument("--also-first", type=int, metavar="N",
                        help="also run on the first N GPUs (--gpus 0,...,N-1) in each round, after 'all'")
    parser.add_argument("--warm-triton", action="store_true",
                        help="one Triton cache for every run, filled by a first run that is not timed")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    work = args.work or Path(tempfile.mkdtemp(prefix="measure_gpus-"))
    work.mkdir(parents=True, exist_ok=True)
    (work / "logs").mkdir(exist_ok=True)

    warm_metric_cache()
    kinds = ["one", "all"] + ([f"first{args.also_first}"] if args.also_first else [])
    gpus_of = {"one": "0", "all": "all",
               f"first{args.also_first}": ",".join(map(str, range(args.also_first or 0)))}
    names = [f"{kind}-{k}" for k in range(1, args.repeat + 1) for kind in kinds]  # a failed run is dropped
    if args.warm_triton:
        measure(args.sweep, "all", work / "warm-up", work / "logs" / "warm-up.log", work / "triton",
                args.metrics)
    walls = {}
    for name in names:
        gpus = gpus_of[name.rsplit("-", 1)[0]]
        walls[name] = measure(args.sweep, gpus, work / name, work / "logs" / f"{name}.log",
                              work / ("triton" if args.warm_triton else f"triton-{name}"), args.metrics)

    failed = [name for name in names if walls[name] is None]
    if "one-1" in failed or "all-1" in failed:
        raise SystemExit(f"nothing to compare: {', '.join(failed)} failed (logs in {work / 'logs'})")
    names = [name for name in names if name not in failed]
    tables = {name: analyze_path(work / name).set_index("range") for name in names}
    infos = {name: json.loads((work / name / "run.json").read_text()) for name in names}
    ranges = sorted(set().union(*(set(t.index) for t in tables.values())))
    rows = []
    for rng in ranges:
        row = {"range": rng, "gpu_in_all-1": next((c.get("gpu") for c in infos["all-1"]["configs"]
                                                        if c["range"] == rng), None)}
        for col in COUNTERS + OTHERS:
            for name in names:
                row[f"{col}[{name}]"] = tables[name][col].get(rng) if rng in tables[name].index else None
        rows.append(row)
    with open(args.out / "comparison.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)

    ratios = [(f"one-{k}", f"{kind}-{k}") for k in range(1, args.repeat + 1) for kind in kinds[1:]]
    pairs = ratios + [(f"{kind}-1", f"{kind}-{k}") for kind in kinds for k in range(2, args.repeat + 1)]
    ratios, pairs = ([(a, b) for a, b in ps if a in names and b in names] for ps in (ratios, pairs))
    same_everywhere = {col: sum(all(same(tables[names[0]][col].get(r), tables[n][col].get(r)) for n in names)
                                for r in ranges)
                       for col in collected(tables.values())}
    env = infos["all-1"]["environment"]
    again = {n: second_pass(infos[n]) for n in names}
    profiled = {n: round(infos[n]["wall_time_s"] + ((again[n] or {}).get("wall_time_s") or 0.0), 3)
                for n in names}
    summary = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "gpu": env["gpu"], "gpus": len(infos["all-1"]["gpus"]), "driver": env["driver"],
        "ncu_version": env["ncu_version"], "torch": env["torch"], "triton": env["triton"],
        "sweep": args.sweep.name, "metrics": args.metrics, "passes": infos["all-1"].get("passes"),
        "configs": len(ranges), "runs": names, "failed_runs": failed,
        "warm_triton": args.warm_triton,
        "configs_ok": {n: sum(c["status"] == "ok" and bool(c["profiled"]) for c in infos[n]["configs"])
                       for n in names},
        "wall_s": {n: round(walls[n], 2) for n in names},
        "profiling_wall_s": profiled,
        "ratio_all_over_one": {f"{b} / {a}": round(walls[b] / walls[a], 3) for a, b in ratios},
        "profiling_ratio_all_over_one": {f"{b} / {a}": round(profiled[b] / profiled[a], 3)
                                         for a, b in ratios},
        "per_gpu": {n: gpu_split(work / n, infos[n]) for n in names},
        "second_pass": {n: {k: v for k, v in a.items() if k != "configs"} | {"configs": len(a["configs"])}
                        for n, a in again.items() if a is not None},
        "second_pass_same_configs": len({tuple(sorted(a["configs"])) for a in again.values() if a}) <= 1,
        # measure's own steps before profiling (plan, ncu version, GPU check, metric list, environment)
        "measure_timings": {n: infos[n].get("timings") for n in names},
        "identical_configs_per_counter": {f"{a} vs {b}": compare(tables[a], tables[b]) for a, b in pairs},
        "identical_in_every_run": same_everywhere,
    }
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    with tarfile.open(args.out / "all-1.tgz", "w:gz") as tar:  # the reference run to commit
        tar.add(work / "all-1", arcname="all-1")
    with tarfile.open(args.out / "logs.tgz", "w:gz") as tar:  # progress, and every run's status files
        tar.add(work / "logs", arcname="logs")
        for name in names:
            for status in sorted((work / name).glob("status*.jsonl")):
                tar.add(status, arcname=f"status/{name}/{status.name}")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
