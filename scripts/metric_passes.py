"""How many replay passes each part of memtraffic's metric sets costs ncu, and what a pass costs (issue 15).

    python scripts/metric_passes.py OUT [--launches 10]

Compiles a tiny CUDA program with nvcc (one copy kernel of 16M floats, launched --launches times, each
launch + sync timed by the program), then profiles it under ncu (measure's flags, every launch) once per
metric subset: each metric of the 'traffic' set alone and the groups below. Prints, and writes to
OUT/metric_passes.json, per subset: the metrics, ncu's replay passes ('N passes' in its output) and the
median seconds of a profiled launch. Two concurrent ncu processes slow each other only in the passes
after the first (scripts/ncu_pair_probe.py round 2), so the passes are what `measure --gpus` scales with.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PROGRAM = r"""
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
__global__ void copy(const float* __restrict__ x, float* __restrict__ y, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) y[i] = x[i];
}
int main(int argc, char** argv) {
    int launches = atoi(argv[1]), n = 1 << 24;
    float *x, *y;
    cudaMalloc(&x, n * sizeof(float));
    cudaMalloc(&y, n * sizeof(float));
    cudaMemset(x, 0, n * sizeof(float));
    for (int k = 0; k < launches; ++k) {
        auto t = std::chrono::steady_clock::now();
        copy<<<1056, 512>>>(x, y, n);
        cudaDeviceSynchronize();
        std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t;
        printf("launch_s %.6f\n", dt.count());
    }
    return cudaGetLastError() != cudaSuccess;
}
"""
_PASSES = re.compile(r"-\s+(\d+)\s+pass(?:es)?\b")


def subsets(traffic: list[str]) -> dict[str, list[str]]:
    def having(*parts: str) -> list[str]:
        return [m for m in traffic if any(p in m for p in parts)]

    l1_bytes = ("l1tex__t_bytes_pipe_lsu_mem_global_op_ld.", "l1tex__t_bytes_pipe_lsu_mem_global_op_st.")

    groups = {f"only {m}": [m] for m in traffic}
    groups.update({
        "l1 bytes ld+st": having(*l1_bytes),
        "l1 bytes+sectors ld+st": having(*l1_bytes, "l1tex__t_sectors"),
        "l1 requests ld+st": having("l1tex__t_requests"),
        "l1 all six": having(*l1_bytes, "l1tex__t_sectors", "l1tex__t_requests"),
        "ldgsts (l1 + sass)": having("ldgsts"),
        "sass (3)": having("smsp__sass"),
        "l2 rd+wr": having("lts__"),
        "dram rd+wr": having("dram__"),
        "l1 bytes + l2 + dram": having(*l1_bytes, "lts__", "dram__"),
        "traffic without time": [m for m in traffic if m != "gpu__time_duration.sum"],
        "traffic without requests": [m for m in traffic if "requests" not in m],
        "traffic without ldgsts": [m for m in traffic if "ldgsts" not in m],
        "traffic": traffic,
    })
    return groups


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--launches", type=int, default=10)
    args = parser.parse_args()
    from memtraffic.ncu.command import build_ncu_command, find_ncu, resolve_metrics

    work = Path(tempfile.mkdtemp(prefix="metric_passes-"))
    (work / "copy.cu").write_text(PROGRAM)
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    subprocess.run([nvcc, "-O2", "-o", str(work / "copy"), str(work / "copy.cu")], check=True)
    ncu = find_ncu()
    rows = []
    print(f"{'subset':58s} metrics passes  launch ms", flush=True)
    for k, (name, metrics) in enumerate(subsets(resolve_metrics("traffic")).items()):
        app = [str(work / "copy"), str(args.launches)]
        argv = build_ncu_command(ncu, metrics, work / f"r{k}.ncu-rep", app, nvtx_include=())
        proc = subprocess.run(argv, capture_output=True, text=True)
        passes = sorted({int(p) for p in _PASSES.findall(proc.stdout)})
        launches = [float(line.split()[1]) for line in proc.stdout.splitlines()
                    if line.startswith("launch_s ")]
        median = statistics.median(launches[1:]) if len(launches) > 1 else float("nan")
        rows.append({"subset": name, "metrics": metrics, "passes": passes, "launch_median_s": median,
                     "returncode": proc.returncode, "stderr_tail": proc.stderr[-400:]})
        print(f"{name:58s} {len(metrics):7d} {','.join(map(str, passes)) or '?':>6s} {median * 1e3:10.1f}"
              + ("" if proc.returncode == 0 else f"  (ncu exited {proc.returncode})"), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    result = {"launches": args.launches, "rows": rows}
    (args.out / "metric_passes.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
