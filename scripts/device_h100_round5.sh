#!/usr/bin/env bash
# One H100 call (2026-11-23): split probe round 5 (issue 14: one program per chunk, ticketed) and the
# one-pass 'bytes' metric set against 'traffic' on the 80-config sweep, one GPU (issue 15).
#   OUT=... bash scripts/device_h100_round5.sh
# Everything is packed into $OUT/h100_round5.tgz.
set -uo pipefail
cd "$(dirname "$0")/.."
res=/tmp/h100_round5; work=/tmp/h100_round5_work
rm -rf "$res" "$work"; mkdir -p "$res" "$work"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$res/install.txt" 2>&1 || cat "$res/install.txt"
{ date -u +%FT%TZ; git rev-parse HEAD; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } \
  | tee "$res/machine.txt"
python3 scripts/split_probe.py "$res/round5.json" --rounds 3 --shapes 16384x131072,8192x32768 \
  --subjects '^(shipped|nosync-4096/4|flatnosync|ticket)' 2>&1 | tee "$res/round5.txt"
sweep=scripts/sweeps/softmax_h200x2.toml
export TRITON_CACHE_DIR=$work/triton
memtraffic measure --sweep $sweep --gpus 0 --metrics bytes --out "$work/warm-up" >"$res/warm-up.log" 2>&1
for metrics in bytes traffic bytes traffic; do
  n=1; [ -e "$work/$metrics-1" ] && n=2
  start=$(date +%s%N)
  memtraffic measure --sweep $sweep --gpus 0 --metrics $metrics --out "$work/$metrics-$n" \
    >"$res/$metrics-$n.log" 2>&1
  echo "$metrics-$n wall_ms $(( ($(date +%s%N) - start) / 1000000 ))" | tee -a "$res/walls.txt"
done
python3 scripts/config_seconds.py "$work"/bytes-1 "$work"/traffic-1 "$work"/bytes-2 "$work"/traffic-2 \
  | tee "$res/table.txt"
for run in bytes-1 traffic-1 bytes-2 traffic-2; do
  mkdir -p "$res/runs/$run"; cp "$work/$run"/run.json "$work/$run"/status*.jsonl "$work/$run"/results.csv \
    "$res/runs/$run/" 2>/dev/null
done
tar czf "${OUT:-/tmp}/h100_round5.tgz" -C /tmp h100_round5
