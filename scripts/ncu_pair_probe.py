"""Does one ncu process slow another down when each profiles its own GPU? (issue 15)

    python scripts/ncu_pair_probe.py OUT [--round 1|2] [--launches 40]

Runs a bare program (no memtraffic runner: per launch, inputs made on the CPU and copied as the runner
does, timed apart, then one softmax in its NVTX range) under ncu with measure's argv (the 'traffic'
metrics, --cache-control all) in the scenarios of one round (ROUNDS below), one after the other: on
GPU 0 alone, on GPUs 0 and 1 at once, pinned to CPUs, without cache control, without ncu, with other
kernel sizes or one metric. Each program records the seconds of every ranged launch (launch + sync:
ncu's replay passes included) and its own start-up; OUT/pair_probe_roundR.json keeps them and a table
is printed. If the pair's launches take longer than the lone one's, the contention is in ncu or the
driver, not in memtraffic's runner.

`child` is the program itself: `python scripts/ncu_pair_probe.py child N ELEMENTS RESULT.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

T0 = time.perf_counter()
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def child(launches: int, elements: int, result: Path) -> None:
    import torch

    started = time.perf_counter() - T0
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(elements // 4096, 4096, generator=gen).cuda()
    torch.softmax(x, dim=1)  # outside any range: module load, first launch
    torch.cuda.synchronize()
    inputs, seconds = [], []
    for k in range(launches):
        t = time.perf_counter()  # the runner's way: made on the CPU (seeded), copied to the GPU
        x = torch.randn(elements // 4096, 4096, generator=gen).cuda()
        torch.cuda.synchronize()
        inputs.append(time.perf_counter() - t)
        t = time.perf_counter()
        torch.cuda.nvtx.range_push(f"mt|probe|{k}")
        torch.softmax(x, dim=1)
        torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
        seconds.append(time.perf_counter() - t)
    result.write_text(json.dumps({"import_s": started, "input_s": inputs, "launch_s": seconds,
                                  "process_s": time.perf_counter() - T0}))


def gpu_cpus() -> dict[int, str]:
    """GPU index -> its 'CPU Affinity' column of `nvidia-smi topo -m` (e.g. '0-15'), where it has one."""
    try:
        text = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return {}
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in text.splitlines()]
    header = next((line.split("\t") for line in lines if "CPU Affinity" in line), None)
    if header is None:
        return {}
    col = [h.strip() for h in header].index("CPU Affinity")
    out = {}
    for line in lines:
        cells = [c.strip() for c in line.split("\t")]
        if cells and re.fullmatch(r"GPU\d+", cells[0]) and len(cells) > col:
            out[int(cells[0][3:])] = cells[col]
    return out


def scenario(name: str, gpus: list[int], argv_for, work: Path, pin: dict[int, str] | None = None) -> dict:
    """Start one program per GPU at once and wait for all; per process: wall and the child's timings."""
    procs = []
    t0 = time.perf_counter()
    for gpu in gpus:
        result = work / f"{name}-gpu{gpu}.json"
        argv = argv_for(gpu, result)
        if pin and gpu in pin:
            argv = ["taskset", "-c", pin[gpu], *argv]
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": str(gpu)}
        with open(work / f"{name}-gpu{gpu}.log", "w") as log:  # the child keeps its own descriptor
            procs.append((gpu, result, subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT),
                          time.perf_counter()))
    out = {"scenario": name, "processes": []}
    for gpu, result, proc, start in procs:
        rc = proc.wait()
        wall = time.perf_counter() - start
        data = json.loads(result.read_text()) if result.exists() else {}
        launches = data.get("launch_s", [])
        out["processes"].append({
            "gpu": gpu, "rc": rc, "wall_s": round(wall, 3), "import_s": round(data.get("import_s", 0), 3),
            "launch_median_s": round(statistics.median(launches), 4) if launches else None,
            "launch_sum_s": round(sum(launches), 3), "launch_s": [round(s, 4) for s in launches],
            "input_median_s": round(statistics.median(data["input_s"]), 4) if launches else None})
    out["wall_s"] = round(time.perf_counter() - t0, 3)
    return out


# The scenarios of each round, run one after the other; unnamed keys take DEFAULTS. Round 1: does a second
# ncu process slow the first, and is it the lock, the CPUs, the cache flushes or the inputs? Round 2: does
# the slowdown grow with the bytes a kernel touches (1M, 16M, 64M fp32 elements) or with ncu's passes
# (the 'traffic' set's 6 against one metric's 1) or with the SASS-patched metrics (smsp__sass_*: ncu
# instruments the kernel's code for them), and does it go with each process on its own CPUs?
DEFAULTS = {"tool": "ncu", "metrics": "traffic", "elements": 1 << 24, "cache": "all", "pin": None}
ONE_METRIC = ["l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum"]
ROUNDS = {
    "1": [{"name": "ncu-one", "gpus": [0]}, {"name": "ncu-pair", "gpus": [0, 1]},
          {"name": "ncu-one-again", "gpus": [0]}, {"name": "ncu-pair-pinned", "gpus": [0, 1], "pin": "topo"},
          {"name": "ncu-one-nocache", "gpus": [0], "cache": "none"},
          {"name": "ncu-pair-nocache", "gpus": [0, 1], "cache": "none"},
          {"name": "bare-one", "gpus": [0], "tool": "bare"},
          {"name": "bare-pair", "gpus": [0, 1], "tool": "bare"}],
    "2": [{"name": "ncu-1M-one", "gpus": [0], "elements": 1 << 20},
          {"name": "ncu-1M-pair", "gpus": [0, 1], "elements": 1 << 20},
          {"name": "ncu-64M-one", "gpus": [0], "elements": 1 << 26},
          {"name": "ncu-64M-pair", "gpus": [0, 1], "elements": 1 << 26},
          {"name": "ncu-1metric-one", "gpus": [0], "metrics": "one"},
          {"name": "ncu-1metric-pair", "gpus": [0, 1], "metrics": "one"},
          {"name": "ncu-nosass-one", "gpus": [0], "metrics": "nosass"},
          {"name": "ncu-nosass-pair", "gpus": [0, 1], "metrics": "nosass"},
          {"name": "ncu-sass-one", "gpus": [0], "metrics": "sass"},
          {"name": "ncu-sass-pair", "gpus": [0, 1], "metrics": "sass"},
          {"name": "ncu-pair-halves", "gpus": [0, 1], "pin": "halves"}],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--round", choices=sorted(ROUNDS), default="1")
    parser.add_argument("--launches", type=int, default=40)
    args = parser.parse_args()
    from memtraffic.ncu.command import build_ncu_command, find_ncu, resolve_metrics

    ncu = find_ncu()
    traffic = resolve_metrics("traffic")
    metric_sets = {"traffic": traffic, "one": ONE_METRIC,
                   "sass": [m for m in traffic if m.startswith("smsp__sass")],
                   "nosass": [m for m in traffic if not m.startswith("smsp__sass")]}
    work = Path(tempfile.mkdtemp(prefix="pair_probe-"))
    cpus = os.cpu_count() or 2
    pins = {"topo": gpu_cpus(), "halves": {0: f"0-{cpus // 2 - 1}", 1: f"{cpus // 2}-{cpus - 1}"}}

    def argv_for(spec: dict):
        me = [sys.executable, str(Path(__file__).resolve()), "child", str(args.launches),
              str(spec["elements"])]
        if spec["tool"] == "bare":
            return lambda gpu, result: [*me, str(result)]
        return lambda gpu, result: build_ncu_command(ncu, metric_sets[spec["metrics"]],
                                                     work / f"{result.stem}.ncu-rep", [*me, str(result)],
                                                     cache_control=spec["cache"])

    results = []
    print(f"CPU affinity per GPU (nvidia-smi topo): {pins['topo'] or 'none reported'}", flush=True)
    print(f"{'scenario':18s} gpu  rc  wall s  import s  input median s  launch median s  launches s",
          flush=True)
    for spec in ROUNDS[args.round]:
        spec = {**DEFAULTS, **spec}
        pin = pins[spec["pin"]] if spec["pin"] else None
        res = scenario(spec["name"], spec["gpus"], argv_for(spec), work, pin)
        results.append({**spec, **res})
        for p in res["processes"]:
            print(f"{spec['name']:18s} {p['gpu']:3d} {p['rc']:3d} {p['wall_s']:7.2f} {p['import_s']:9.2f} "
                  f"{p['input_median_s'] or float('nan'):15.4f} {p['launch_median_s'] or float('nan'):16.4f} "
                  f"{p['launch_sum_s']:11.2f}", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"pair_probe_round{args.round}.json").write_text(json.dumps(
        {"round": args.round, "cpu_affinity": pins, "launches": args.launches,
         "ncu_argv_example": argv_for(DEFAULTS)(0, work / "example.json"), "scenarios": results}, indent=1))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        child(int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4]))
    else:
        main()
