#!/usr/bin/env bash
# Issue 35 on the H100: a kernel that spills and its fix, what the `spills` metric set costs in replay
# passes, the launch floor and DRAM latency the time diagnosis needs, and committed groups measured again
# with the new counters. Everything lands under $1 (run folders, logs); nothing under reports/ is written.
# Usage: bash scripts/gpu_spills.sh OUT [steps...]    steps: spills passes probes rerun tests (default all;
#        about 4 minutes on the H100, probes alone under a minute)
# Then, on the CPU side: OUT/spills_softmax_naive_2048x16384 -> reports/h100/, OUT/spills_passes_SET ->
# reports/h100/spills_passes/SET, OUT/rerun_suite_1048576x2_fp32 -> reports/h100/spills_suite_1048576x2_fp32,
# OUT/rerun_matmul_softmax -> reports/h100/spills_matmul_softmax_4096x1024x1024, and
# `python scripts/time_probes.py merge OUT/time_probes.json` (adds launch_s, dram_latency_s to
# reports/roofs/NVIDIA_H100_80GB_HBM3.json).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: gpu_spills.sh OUT [steps...]}; shift
steps=${*:-spills passes probes rerun tests}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$out/install.txt" 2>&1 || cat "$out/install.txt"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
git rev-parse HEAD >>"$out/gpu.txt" 2>/dev/null
date -u +%FT%TZ | tee -a "$out/gpu.txt"
step() {  # step NAME COMMAND...: run, log to $out/NAME.txt, time it; a failed step never stops the others
  local name=$1; shift
  local start=$(date +%s)
  "$@" >"$out/$name.txt" 2>&1
  local rc=$?
  echo "== $name rc=$rc took $(( $(date +%s) - start )) s" | tee -a "$out/steps.txt"
  tail -n 25 "$out/$name.txt"
}
for s in $steps; do
  case $s in
    # The spill and its fix: softmax_naive holds a 16384-float row in registers; one warp gives each
    # thread 512 floats (it spills), 16 warps 32 (it does not). Traffic + spills counters, per line too.
    spills)
      step spills_run memtraffic measure softmax_naive --shape 2048x16384 --param num_warps=1,4,16 \
        --metrics traffic,spills --source --out "$out/spills_softmax_naive_2048x16384"
      step spills_analyze memtraffic analyze "$out/spills_softmax_naive_2048x16384"
      step spills_lines memtraffic lines "$out/spills_softmax_naive_2048x16384" --top 3 ;;
    # Replay passes and time of each set on the same kernels (run.json: passes, wall_time_s).
    passes)
      for set in traffic spills traffic,spills bytes bytes,spills; do
        name=spills_passes_${set//,/_}
        step "$name" memtraffic measure softmax_tiled softmax_naive --shape 4096x4096 --metrics "$set" \
          --out "$out/$name"
      done ;;
    # The launch floor and the DRAM latency (Little's law) for the time diagnosis.
    probes) step time_probes python3 scripts/time_probes.py measure "$out" ;;
    # Committed groups again with the new counters: rows at the minimum in bytes but slow in time.
    rerun)
      step rerun_suite memtraffic measure softmax_naive softmax_online softmax_3pass softmax_tiled \
        --shape 1048576x2 --metrics traffic,spills --out "$out/rerun_suite_1048576x2_fp32"
      step rerun_matmul_softmax memtraffic measure matmul_softmax_fused matmul_softmax_unfused \
        --shape 4096x1024x1024 --dtype fp32 --dtype bf16 --metrics traffic,spills \
        --out "$out/rerun_matmul_softmax" ;;
    # The gpu-marked tests of this issue.
    tests) step gpu_tests python3 -m pytest -q -s -m gpu -p no:cacheprovider tests/kernels/test_softmax_kernels.py \
             tests/probes/test_roof_probes.py -k "spill or measured_roofs" ;;
    *) echo "unknown step $s" ;;
  esac
done
echo done | tee "$out/DONE_SPILLS"
