#!/usr/bin/env bash
# Issue 15 on a two-GPU host: where do the seconds of `measure --gpus all` go? One call:
#   OUT=... bash scripts/device_gpus_phases.sh
# 1. the machine (nvidia-smi topo, lscpu, numactl) into machine.txt;
# 2. scripts/ncu_pair_probe.py: a bare program under ncu on one GPU, on two at once, pinned, without
#    cache control, without ncu (pair_probe.txt/.json);
# 3. scripts/measure_gpus.py --repeat 1 --warm-triton on the 80-config sweep: --gpus 0 and --gpus all,
#    with the runner's per-phase seconds (table.txt from scripts/config_seconds.py; the run folders'
#    run.json and status files).
# Everything is packed into $OUT/gpus_phases.tgz (the device returns at most 8 files).
set -uo pipefail
cd "$(dirname "$0")/.."
res=/tmp/gpus_phases; work=/tmp/gpus_phases_work
rm -rf "$res" "$work"; mkdir -p "$res/runs" "$work"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$res/install.txt" 2>&1 || cat "$res/install.txt"
{ date -u +%FT%TZ; git rev-parse HEAD; nvidia-smi; nvidia-smi topo -m; lscpu; numactl -H; nproc; } \
  >"$res/machine.txt" 2>&1
python3 scripts/ncu_pair_probe.py "$res" 2>&1 | tee "$res/pair_probe.txt"
python3 scripts/measure_gpus.py "$res/measure" --repeat 1 --warm-triton --work "$work" >"$res/measure.txt" 2>&1
tail -30 "$res/measure.txt"
python3 scripts/config_seconds.py "$work"/warm-up "$work"/one-1 "$work"/all-1 2>&1 | tee "$res/table.txt"
for run in warm-up one-1 all-1; do
  mkdir -p "$res/runs/$run"; cp "$work/$run"/run.json "$work/$run"/status*.jsonl "$res/runs/$run/" 2>/dev/null
done
cp -r "$work/logs" "$res/runs/logs"
rm -f "$res/measure/all-1.tgz"  # the reports are not needed here; run.json and status are
tar czf "${OUT:-/tmp}/gpus_phases.tgz" -C /tmp gpus_phases
ls -la "${OUT:-/tmp}"
