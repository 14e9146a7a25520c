#!/usr/bin/env bash
# Issue 15 probe on a host with two GPUs (2026-11-23): is `measure --gpus all` held back by ncu's lock
# file? Nsight Compute serializes profiling across processes with a lock file in its temp directory; two
# ncu processes on two GPUs share it unless each gets a TMPDIR of its own. Runs scripts/measure_gpus.py
# with one (--gpus 0), all (--gpus all) and priv (--gpus all, a TMPDIR per ncu) twice each, one warm
# Triton cache for all, and keeps what ncu's own docs say of the lock. Results under $OUT/gpus_lock.
# Usage (on the device, from the repository root): OUT=... bash scripts/device_gpus_lock.sh
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:?set OUT}/gpus_lock
work=/tmp/gpus_lock
mkdir -p "$out"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$out/install.txt" 2>&1 || cat "$out/install.txt"
{ nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader; nproc; date -u +%FT%TZ; } \
  | tee "$out/gpu.txt"
nvidia-smi topo -m >"$out/topo.txt" 2>&1
docs=$(dirname "$(readlink -f "$(command -v ncu)")")/docs
grep -rl "nsight-compute-lock" "$docs" /opt/nvidia/nsight-compute/*/docs 2>/dev/null | sort -u | head -3 \
  | while read -r f; do
      echo "== $f"
      python3 -c 'import html, re, sys
t = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", open(sys.argv[1], errors="replace").read())).split())
for m in re.finditer("nsight-compute-lock", t):
    print("...", t[max(0, m.start() - 1500):m.end() + 300], "...")' "$f"
    done >"$out/lock_docs.txt" 2>&1
python3 scripts/measure_gpus.py "$out" --kinds one,all,priv --repeat 2 --warm-triton --work "$work" 2>&1 \
  | tail -120 | tee "$out/summary.txt"
ls -la /tmp/nsight-compute-lock >>"$out/lock_docs.txt" 2>&1
tar czf "$out/work_logs.tgz" -C "$work" logs 2>/dev/null
for run in "$work"/priv-1 "$work"/all-1; do
  [ -d "$run" ] && tar czf "$out/$(basename "$run")-meta.tgz" -C "$work" "$(basename "$run")/run.json" \
    $(cd "$work" && ls "$(basename "$run")"/status*.jsonl "$(basename "$run")"/ncu*.log 2>/dev/null)
done
ls -la "$out"
