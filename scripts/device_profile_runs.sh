#!/usr/bin/env bash
# One device call for issues 11 and 13 (H100): the profile reference runs, the profile/trace GPU tests,
# and measure's overhead against bare ncu (twice: cold metric cache, then warm). Results under $1.
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
start=$(date +%s)
bash scripts/make_profile_reports.sh reports/h100 2>&1 | tee "$out/profile_runs.txt"
tar czf "$out/profile_runs.tgz" reports/h100/profile_torch_model reports/h100/profile_cupy_region
echo "== profile runs took $(( $(date +%s) - start )) s" | tee -a "$out/steps.txt"
start=$(date +%s)
python3 -m pytest -q -p no:cacheprovider -m "gpu or ncu" tests/test_profile.py tests/test_trace.py \
  tests/test_regions.py 2>&1 | tee "$out/gpu_tests.txt"
echo "== gpu tests took $(( $(date +%s) - start )) s" | tee -a "$out/steps.txt"
start=$(date +%s)
rm -rf ~/.cache/memtraffic/ncu-metrics /tmp/overhead-cold /tmp/overhead-warm
python3 scripts/measure_overhead.py /tmp/overhead-cold --all 2>&1 | tail -1 | tee "$out/overhead.txt"
python3 scripts/measure_overhead.py /tmp/overhead-warm --all 2>&1 | tail -1 | tee -a "$out/overhead.txt"
cp /tmp/overhead-warm/measure/run.json "$out/overhead_warm_run.json"
echo "== overhead took $(( $(date +%s) - start )) s" | tee -a "$out/steps.txt"
