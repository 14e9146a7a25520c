#!/usr/bin/env bash
# One H100 call for issue 27 (softmax at copy speed on the bf16 long-row and 4096-column shapes). Runs
# from a copy of the repository with `memtraffic` importable from $PWD (kernels/ linked in as
# memtraffic/kernels, as the editable install maps it); everything lands in $OUT/<mode>.tgz.
#   MODE=probe: scripts/softmax_gaps_probe.py on the gap shapes (configurations of the kernels' knobs).
#   MODE=bench: `memtraffic bench` of the row softmax variants on the >= 64 MB shapes, the softmax gpu
#               tests, and `memtraffic measure --metrics bytes` of softmax_split at 8192x32768 bf16.
# Usage (on the device, from the repository root): OUT=... MODE=probe bash scripts/device_softmax_gaps.sh
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
[ -e memtraffic/kernels ] || ln -s ../kernels memtraffic/kernels
mode=${MODE:-probe}
out=$(mktemp -d)/$mode
mkdir -p "$out"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%FT%TZ; cat COMMIT 2>/dev/null; } \
  | tee "$out/gpu.txt"
if [ "$mode" = probe ]; then
  python3 scripts/softmax_gaps_probe.py --out "$out/probe.json" ${ONLY:-} 2>&1 | tee "$out/probe.txt"
else
  variants=${VARIANTS:-softmax_naive softmax_tiled softmax_online softmax_split}
  shapes=${SHAPES:---shape 4096x4096 --shape 8192x8192 --shape 8192x32768 --shape 32768x4096 --shape 16384x131072}
  # shellcheck disable=SC2086
  python3 -m memtraffic.cli bench $variants $shapes --out "$out/bench" 2>"$out/bench_progress.txt" \
    | tee "$out/bench.txt"
  if [ -n "${TESTS:-1}" ]; then
    python3 -m pytest -q -x -m gpu tests/test_softmax_kernels.py -k "split or naive or tiled" -p no:cacheprovider \
      2>&1 | tail -5 | tee "$out/gpu_tests.txt"
  fi
fi
tar -C "$(dirname "$out")" -czf "${OUT:?set OUT}/$mode.tgz" "$mode"
