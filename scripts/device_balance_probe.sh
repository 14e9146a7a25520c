#!/usr/bin/env bash
# One H100 call (issue 14): scripts/balance_probe.py on 16384x131072 (bf16, fp32), chunks 4096/4 and
# 8192/8. Packs everything into $OUT/balance_probe.tgz.
#   OUT=... bash scripts/device_balance_probe.sh [extra balance_probe.py arguments]
set -uo pipefail
cd "$(dirname "$0")/.."
res=/tmp/balance_probe
rm -rf "$res"; mkdir -p "$res"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$res/install.txt" 2>&1 || cat "$res/install.txt"
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader; } \
  | tee "$res/machine.txt"
python3 scripts/balance_probe.py "$res/balance.json" --chunks 4096/4,8192/8 "$@" 2>&1 | tee "$res/balance.txt"
tar czf "${OUT:-/tmp}/balance_probe.tgz" -C /tmp balance_probe
