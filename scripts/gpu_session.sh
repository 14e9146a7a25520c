#!/usr/bin/env bash
# Everything the project needs from a GPU machine, in one go: gpu-marked tests, the reference ncu
# runs, the measured roofs and the benchmark. Results land under reports/ and a log in $1.
# Usage: [REPORTS_ARGS="--only GROUP... --force"] bash scripts/gpu_session.sh LOGDIR [steps...]
#        (steps: tests reports roofs bench, the default, and torch_ops diff_pair many_kernels, whose
#        outputs land in LOGDIR/STEP/). REPORTS_ARGS goes to make_reference_reports.py, which refuses to
#        overwrite an existing group folder without --force.
#        GPU_TAG names the bench folder reports/bench/DATE-GPU_TAG (default h100, as the committed run).
set -uo pipefail
cd "$(dirname "$0")/.."
log=${1:?usage: gpu_session.sh LOGDIR [steps...]}; shift
steps=${*:-tests reports roofs bench}
mkdir -p "$log"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$log/install.txt" 2>&1 || cat "$log/install.txt"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$log/gpu.txt"
date -u +%FT%TZ | tee -a "$log/gpu.txt"
for step in $steps; do
  start=$(date +%s)
  case $step in
    tests) python3 -m pytest -q -m "gpu or ncu" -p no:cacheprovider 2>&1 | tee "$log/gpu_tests.txt" ;;
    reports) python3 scripts/make_reference_reports.py ${REPORTS_ARGS:-} 2>&1 | tee "$log/reports.txt" ;;
    roofs) memtraffic roofs --refresh --save-reference 2>&1 | tee "$log/roofs.txt" ;;
    bench) memtraffic bench --out "reports/bench/$(date -u +%F)-${GPU_TAG:-h100}" 2>&1 | tee "$log/bench.txt" ;;
    # The runs the README and tests read that are not measure groups; each lands in $log/STEP/.
    torch_ops) OUT="$log/$step" bash scripts/make_torch_ops_report.sh 2>&1 | tee "$log/$step.txt" ;;
    diff_pair) OUT="$log/$step" bash scripts/make_diff_pair.sh 2>&1 | tee "$log/$step.txt" ;;
    many_kernels) OUT="$log/$step" bash scripts/make_many_kernels_report.sh 2>&1 | tee "$log/$step.txt" ;;
    *) echo "unknown step $step" ;;
  esac
  echo "== $step took $(( $(date +%s) - start )) s" | tee -a "$log/steps.txt"
done
