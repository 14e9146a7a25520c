#!/usr/bin/env bash
# measure's overhead against bare ncu on the H100, every cache warm (a first `measure --all` compiles
# the Triton kernels and torch.compile graphs and caches the metric names), plus the measure GPU tests.
# Usage: bash scripts/device_overhead.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: device_overhead.sh OUTDIR}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$out/install.txt" 2>&1 || cat "$out/install.txt"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%FT%TZ; } | tee "$out/env.txt"
memtraffic measure --all --out /tmp/warm-caches > "$out/warm.txt" 2>&1
for i in 1 2; do
  python3 scripts/measure_overhead.py /tmp/overhead-$i --all 2>&1 | tail -1 | tee -a "$out/overhead.txt"
  python3 -c "import json; r = json.load(open('/tmp/overhead-$i/measure/run.json')); print(r['timings'], r['wall_time_s'])" \
    | tee -a "$out/overhead.txt"
done
cp /tmp/overhead-1/measure/run.json "$out/overhead_run.json"
python3 -m pytest -q -p no:cacheprovider -m "gpu or ncu" tests/test_collect.py 2>&1 | tail -3 | tee "$out/gpu_tests.txt"
