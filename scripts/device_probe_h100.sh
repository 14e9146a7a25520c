#!/usr/bin/env bash
# One H100 call (2026-11-23), two checks that need a GPU, results under $OUT/probe:
#  1. issue 14: how much the same-size copy and the softmax kernels at 4096x4096 bf16 vary between fresh
#     buffers, with the bench's zeroing L2 flush and with a read flush (scripts/copy_spread.py);
#  2. issue 12: `memtraffic profile --source` end to end on a plain Triton program (no memtraffic ranges),
#     then `memtraffic lines` on the run it made.
# Usage (on the device, from the repository root): OUT=... bash scripts/device_probe_h100.sh
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:?set OUT}/probe
mkdir -p "$out"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$out/install.txt" 2>&1 || cat "$out/install.txt"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%FT%TZ; } | tee "$out/gpu.txt"
python3 scripts/copy_spread.py "$out/copy_spread.json" --rounds 8 2>&1 | tee "$out/copy_spread.txt"
python3 scripts/copy_spread.py "$out/copy_spread_8192.json" --shape 8192x8192 --rounds 4 2>&1 \
  | tee "$out/copy_spread_8192.txt"
memtraffic profile --source --kernel-name regex:copy --out "$out/profile_source" \
  -- python3 scripts/source_demo_triton.py 2>&1 | tee "$out/profile_source.txt"
memtraffic lines "$out/profile_source" 2>&1 | tee "$out/lines.txt"
memtraffic lines "$out/profile_source" --format json > "$out/lines.json" 2>&1
rm -f "$out"/profile_source/*.ncu-rep.tmp
du -sh "$out"/* | tee "$out/sizes.txt"
