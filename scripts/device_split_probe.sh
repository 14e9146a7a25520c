#!/usr/bin/env bash
# One H100 call for issue 14, results packed into $OUT/split_probe.tgz (the device returns few files):
#  1. scripts/split_probe.py: softmax_split at 16384x131072 and 8192x32768 against the probe kernels its
#     CONFIGS name (round 1, commit bbf1a37: nosync, poll, hold16; round 2, 3a3b577: reread, stash, loop);
#  2. scripts/copy_spread.py at 4096x4096 fp32 and bf16: how much the copy and the kernels move between
#     fresh buffers (the bench's "% of copy" there sits at 94-95%).
# Usage (on the device, from the repository root): OUT=... bash scripts/device_split_probe.sh
set -uo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)/split_probe
mkdir -p "$out"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$out/install.txt" 2>&1 || cat "$out/install.txt"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%FT%TZ; git rev-parse HEAD; } \
  | tee "$out/gpu.txt"
python3 scripts/split_probe.py "$out/split_probe.json" --rounds ${ROUNDS:-4} 2>&1 | tee "$out/split_probe.txt"
for dt in ${SPREAD_DTYPES-fp32 bf16}; do
  python3 scripts/copy_spread.py "$out/copy_spread_4096_$dt.json" --shape 4096x4096 --dtype $dt --rounds 8 \
    2>&1 | tee "$out/copy_spread_4096_$dt.txt"
done
tar -C "$(dirname "$out")" -czf "${OUT:?set OUT}/split_probe.tgz" split_probe
