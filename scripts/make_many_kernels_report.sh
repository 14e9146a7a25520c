#!/usr/bin/env bash
# GPU: a real report of thousands of kernels, for scripts/bench_analyze.py's cost per 1000 kernels.
# `memtraffic profile --torch-ops --metrics bytes` (one replay pass per kernel) of two AdamW training
# steps of a 64-layer MLP (scripts/many_kernels_mlp.py, ~3,000 launches). The run folder (report, plan
# with every op's minimum, run.json, the kernel table profile writes) and this machine's own
# bench_analyze figures are packed into $OUT/many_kernels_mlp64.tar.gz. The report is tens of MB: keep
# it out of git; unpack it anywhere and run `python scripts/bench_analyze.py FOLDER/many_kernels_mlp64`.
# Usage: OUT=/some/folder bash scripts/make_many_kernels_report.sh [LAYERS] [STEPS]
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:?set OUT to the folder that gets the results}
layers=${1:-64}
steps=${2:-2}
mkdir -p "$out"
work=$(mktemp -d)
name=many_kernels_mlp$layers
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$work/install.txt" 2>&1 || cat "$work/install.txt"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%FT%TZ; git rev-parse HEAD; } \
  >"$work/machine.txt" 2>&1
start=$(date +%s)
memtraffic profile --torch-ops --metrics bytes --out "$work/$name" -- \
  python3 scripts/many_kernels_mlp.py --layers "$layers" --steps "$steps" >"$work/analyze.txt" 2>"$work/profile.log"
echo "profile exited $? after $(( $(date +%s) - start )) s" | tee -a "$work/machine.txt"
# two cores, as the CPU machines this project is checked on have
taskset -c 0,1 python3 scripts/bench_analyze.py "$work/$name" --repeat 2 >"$work/bench_device.txt" 2>&1
tail -n 4 "$work/bench_device.txt"
tar -czf "$out/$name.tar.gz" -C "$work" .
ls -l "$out"
