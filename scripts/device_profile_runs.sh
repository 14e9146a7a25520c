#!/usr/bin/env bash
# One device call for issues 11 and 13 (H100): the profile reference runs, the profile/trace GPU tests,
# and measure's overhead against bare ncu once every cache is warm (a first `measure --all` compiles
# the Triton kernels and torch.compile graphs and caches the metric names). Results under $1.
# Usage: bash scripts/device_profile_runs.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: device_profile_runs.sh OUTDIR}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$out/install.txt" 2>&1 || cat "$out/install.txt"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%FT%TZ; ncu --version | tail -1
  python3 -c "import torch, triton, cupy; print(torch.__version__, triton.__version__, cupy.__version__)"; } \
  | tee "$out/env.txt"
rm -rf reports/h100/profile_torch_model reports/h100/profile_cupy_region
bash scripts/make_profile_reports.sh reports/h100 > "$out/profile_runs.txt" 2>&1
grep -E "recorded|warning|error" "$out/profile_runs.txt"
tar czf "$out/profile_runs.tgz" reports/h100/profile_torch_model reports/h100/profile_cupy_region
python3 -m pytest -q -p no:cacheprovider -m "gpu or ncu" tests/test_profile.py tests/test_trace.py \
  tests/test_regions.py 2>&1 | tee "$out/gpu_tests.txt" | tail -3
memtraffic measure --all --out /tmp/warm-caches > "$out/warm.txt" 2>&1
python3 scripts/measure_overhead.py /tmp/overhead --all 2>&1 | tail -1 | tee "$out/overhead.txt"
cp /tmp/overhead/measure/run.json "$out/overhead_run.json"
python3 -c "import json; r = json.load(open('/tmp/overhead/measure/run.json')); print(r['timings'], r['wall_time_s'])"
