#!/usr/bin/env bash
# Issue 15 on a two-GPU host: `measure --gpus all` against `--gpus 0` with the one-pass 'bytes' metric
# set and the six-pass 'traffic' set, on the 80- and 160-config sweeps. One call:
#   OUT=... bash scripts/device_gpus_bytes.sh
# Each case is scripts/measure_gpus.py --repeat 1 --warm-triton (an untimed --gpus all run fills the
# Triton cache first); summary.json, comparison.csv and scripts/config_seconds.py's table per case, the
# bytes-160 reference run (all-1.tgz) and the logs, packed into $OUT/gpus_bytes.tgz.
# Not run yet: on 2026-11-23 the two-GPU machine was no longer lent when it was ready.
set -uo pipefail
cd "$(dirname "$0")/.."
res=/tmp/gpus_bytes; work=/tmp/gpus_bytes_work
rm -rf "$res" "$work"; mkdir -p "$res" "$work"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$res/install.txt" 2>&1 || cat "$res/install.txt"
{ date -u +%FT%TZ; git rev-parse HEAD; nvidia-smi --query-gpu=index,name,driver_version --format=csv; } \
  | tee "$res/machine.txt"
for case in traffic:160 bytes:160 bytes:80; do
  metrics=${case%%:*}; n=${case##*:}; name=$metrics-$n
  sweep=scripts/sweeps/softmax_h200x2.toml; [ "$n" = 160 ] && sweep=scripts/sweeps/softmax_h200x2_160.toml
  start=$(date +%s)
  python3 scripts/measure_gpus.py "$res/$name" --sweep "$sweep" --metrics "$metrics" --repeat 1 --warm-triton \
    --work "$work/$name" >"$res/$name.log" 2>&1
  python3 scripts/config_seconds.py "$work/$name"/one-1 "$work/$name"/all-1 2>&1 | tee "$res/$name/table.txt"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[2], d['wall_s'], \
d['ratio_all_over_one'], 'passes', d['passes'], d['identical_in_every_run'])" "$res/$name/summary.json" "$name"
  [ "$name" = bytes-160 ] || rm -f "$res/$name/all-1.tgz"
  echo "== $name took $(( $(date +%s) - start )) s"
done
tar czf "${OUT:-/tmp}/gpus_bytes.tgz" -C /tmp gpus_bytes
ls -la "${OUT:-/tmp}"
