#!/usr/bin/env bash
# Device check for profile --torch-ops and measure's overhead breakdown. Results under $1.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: device_torch_ops_check.sh OUTDIR}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$out/install.txt" 2>&1 || cat "$out/install.txt"
{
  echo "== python"; command -v python3; ls -la "$(command -v python3)"; head -c 300 "$(command -v python3)" | strings | head -5
  env | grep -E '^PYTHON|^VIRTUAL' ; python3 -c "import sys; print(sys.flags); print(sys.path); print('torch imported by site:', 'torch' in sys.modules)"
  ls "$(python3 -c 'import site; print(site.getsitepackages()[0])')"/*.pth
  echo "== sitecustomize without ncu"
  rm -f /tmp/t.jsonl /tmp/mark
  PYTHONPATH=$PWD/memtraffic/_inject MEMTRAFFIC_TORCH_OPS=1 MEMTRAFFIC_TRACE=/tmp/t.jsonl MEMTRAFFIC_TORCH_MARK=/tmp/mark \
    python3 -c "import sys; print('sitecustomize', sys.modules.get('sitecustomize')); import torch; print(torch.ones(2).sum())"
  ls -la /tmp/t.jsonl /tmp/mark; head -c 400 /tmp/t.jsonl; echo
  python3 -c "import sitecustomize; print(sitecustomize.__file__)"
} > "$out/diag.txt" 2>&1
cat "$out/diag.txt"
rm -rf /tmp/prof && memtraffic profile --torch-ops --out /tmp/prof -- python3 examples/torch_model.py > "$out/profile_torch.txt" 2>&1
tail -30 "$out/profile_torch.txt"; ls /tmp/prof
python3 -m pytest -q -p no:cacheprovider -m "gpu or ncu" tests/test_profile.py tests/test_trace.py 2>&1 | tail -5
rm -rf /tmp/oh && memtraffic measure --all --out /tmp/oh > "$out/measure_all.txt" 2>&1; cp /tmp/oh/run.json "$out/measure_all_run.json"
python3 -c "import json; r = json.load(open('/tmp/oh/run.json')); print(r['timings'], r['wall_time_s'])"
