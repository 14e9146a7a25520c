#!/usr/bin/env bash
# Issue 32 on a GPU: measure and profile through the shared ncu session (memtraffic/ncu/session.py), the
# error path where a GPU and ncu exist, bench --format csv and bench --out built whole. Logs under $1.
# Usage: bash scripts/gpu_cli.sh OUTDIR   (on the device, after `pip install -e . --no-deps`)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: gpu_cli.sh OUTDIR}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
status=0
step() {  # step NAME EXPECTED_EXIT CMD...: run, log, compare the exit code
  local name=$1 want=$2; shift 2
  "$@" >"$out/$name.out" 2>"$out/$name.err"
  local got=$?
  echo "$name: exit $got (want $want)" | tee -a "$out/summary.txt"
  [ "$got" = "$want" ] || status=1
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >"$out/gpu.txt" 2>&1
date -u +%FT%TZ >>"$out/gpu.txt"
# the gpu tests of the code the session replaced: measure, --gpus, profile --torch-ops, bench
timeout 400 python3 -m pytest -q -p no:cacheprovider -m "gpu or ncu" tests/collect/test_measure.py tests/collect/test_profile.py \
  tests/collect/test_sweep.py tests/probes/test_bench.py >"$out/gpu_tests.txt" 2>&1
echo "gpu tests: exit $? (want 0)" | tee -a "$out/summary.txt"
step measure 0 memtraffic measure softmax_tiled torch_softmax --shape 4096x1024 --out "$out/measure"
step profile 0 memtraffic profile --torch-ops --out "$out/profile" -- python3 examples/torch_model.py
step bench_csv 0 memtraffic bench softmax_tiled torch_softmax --shape 1024x1024 --dtype fp32 --budget 0.05 \
  --format csv --out "$out/bench"
# usage errors come before ncu and the GPU, also where both exist
step gpus_junk 2 memtraffic measure softmax_tiled --gpus junk
step budget 2 memtraffic bench --budget -1
step out_taken 2 memtraffic measure softmax_tiled --out "$out/measure"
# what the session recorded: environment and the exact argv of each run
python3 - "$out" >"$out/records.txt" 2>&1 <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
for name in ("measure", "profile"):
    run = json.loads((out / name / "run.json").read_text())
    env = run["environment"]
    print(name, env["gpu"], env["chip"], env["ncu_version"], run["metric_set"], len(run["metric_names"]))
    print(" ", " ".join(run["attempts"][0]["argv"][:12]), "...")
PY
echo "records: exit $?" | tee -a "$out/summary.txt"
ls -a "$out/bench" >"$out/bench_files.txt"
exit $status
