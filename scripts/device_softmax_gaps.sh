#!/usr/bin/env bash
# One H100 call for issue 27 (softmax at copy speed on the bf16 long-row and 4096-column shapes). Runs
# from a copy of the repository with `memtraffic` importable from $PWD (kernels/ linked in as
# memtraffic/kernels, as the editable install maps it); everything lands in $OUT/gaps.tgz.
# MODE: any of (default: all three, in this order)
#   probe: scripts/softmax_gaps_probe.py on the gap shapes (configurations of the kernels' knobs);
#   tests: the softmax_split, naive and tiled gpu tests of tests/test_softmax_kernels.py;
#   bench: `memtraffic bench` of the row softmax variants and torch.softmax on the shapes moving
#          >= 64 MB, both dtypes, then `memtraffic measure --metrics bytes` (ncu) of softmax_split and
#          softmax_online at 8192x32768 bf16.
# Usage (on the device, from the repository root): OUT=... MODE="probe tests bench" bash scripts/device_softmax_gaps.sh
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
[ -e memtraffic/kernels ] || ln -s ../kernels memtraffic/kernels
out=$(mktemp -d)/gaps
mkdir -p "$out"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%FT%TZ; cat COMMIT 2>/dev/null; } \
  | tee "$out/gpu.txt"
for mode in ${MODE:-probe tests bench}; do
  case $mode in
  probe)
    python3 scripts/softmax_gaps_probe.py --out "$out/probe.json" 2>&1 | tee "$out/probe.txt" ;;
  tests)
    python3 -m pytest -q -x -m gpu tests/test_softmax_kernels.py -k "split or naive or tiled" \
      -p no:cacheprovider 2>&1 | tail -5 | tee "$out/gpu_tests.txt" ;;
  bench)
    python3 -m memtraffic.cli bench softmax_naive softmax_tiled softmax_online softmax_split torch_softmax \
      --shape 4096x4096 --shape 8192x8192 --shape 8192x32768 --shape 32768x4096 --shape 16384x131072 \
      --out "$out/bench" 2>"$out/bench_progress.txt" | tee "$out/bench.txt"
    python3 -m memtraffic.cli measure softmax_split softmax_online --shape 8192x32768 --dtype bf16 \
      --metrics bytes --out "$out/measure_8192x32768_bf16" 2>&1 | tail -30 | tee "$out/measure.txt" ;;
  esac
done
rm -f "$out"/measure_*/profile.ncu-rep.gz 2>/dev/null
tar -C "$(dirname "$out")" -czf "${OUT:?set OUT}/gaps.tgz" gaps
