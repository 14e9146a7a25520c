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
  env | grep -E '^PYTHON|^VIRTUAL' ; python3 -c "import sys; print(sys.flags); print(sys.path)"
  echo "== sitecustomize without ncu"
  rm -f /tmp/t.jsonl /tmp/mark
  PYTHONPATH=$PWD/memtraffic/_inject MEMTRAFFIC_TORCH_OPS=1 MEMTRAFFIC_TRACE=/tmp/t.jsonl MEMTRAFFIC_TORCH_MARK=/tmp/mark \
    python3 -c "import sys; print('sitecustomize', sys.modules.get('sitecustomize')); import torch; print(torch.ones(2).sum())"
  ls -la /tmp/t.jsonl /tmp/mark; head -c 400 /tmp/t.jsonl; echo
  python3 -c "import sitecustomize; print(sitecustomize.__file__)"
} > "$out/diag.txt" 2>&1
cat "$out/diag.txt"
