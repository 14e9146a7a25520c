#!/usr/bin/env bash
# Device call for issues 11 and 13 after the first one (device_profile_runs.sh) traced no torch op:
# why sitecustomize did not run there, the profile reference runs again, and measure's overhead with
# its timings (metric names cached first, as on any second run). Results under $1.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: device_torch_ops_check.sh OUTDIR}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$out/install.txt" 2>&1 || cat "$out/install.txt"
{
  echo "== python"; command -v python3; ls -la "$(command -v python3)"
  env | grep -E '^PYTHON|^VIRTUAL'
  python3 -c "import sys; print(sys.flags); print(sys.path); print('torch imported by site:', 'torch' in sys.modules)"
  ls "$(python3 -c 'import site; print(site.getsitepackages()[0])')" | grep '\.pth$'
  echo "== sitecustomize without ncu"
  rm -f /tmp/t.jsonl /tmp/mark
  PYTHONPATH=$PWD/memtraffic/_inject MEMTRAFFIC_TORCH_OPS=1 MEMTRAFFIC_TRACE=/tmp/t.jsonl MEMTRAFFIC_TORCH_MARK=/tmp/mark \
    python3 -c "import sys; print('sitecustomize', sys.modules.get('sitecustomize')); import torch; print(torch.ones(2).sum())"
  ls -la /tmp/t.jsonl /tmp/mark; head -c 300 /tmp/t.jsonl; echo
} > "$out/diag.txt" 2>&1
cat "$out/diag.txt"
rm -rf reports/h100/profile_torch_model reports/h100/profile_cupy_region
bash scripts/make_profile_reports.sh reports/h100 > "$out/profile_runs.txt" 2>&1
grep -E "recorded|warning|error" "$out/profile_runs.txt"
tar czf "$out/profile_runs.tgz" reports/h100/profile_torch_model reports/h100/profile_cupy_region
python3 -m pytest -q -p no:cacheprovider -m "gpu or ncu" tests/test_profile.py tests/test_trace.py 2>&1 | tail -3
memtraffic measure torch_softmax --shape 64x64 --out /tmp/warm >/dev/null 2>&1  # caches the metric names
rm -rf /tmp/oh && python3 scripts/measure_overhead.py /tmp/oh --all 2>&1 | tail -1 | tee "$out/overhead.txt"
cp /tmp/oh/measure/run.json "$out/overhead_run.json"
python3 -c "import json; r = json.load(open('/tmp/oh/measure/run.json')); print(r['timings'], r['wall_time_s'])"
