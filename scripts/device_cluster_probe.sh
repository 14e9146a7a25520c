#!/usr/bin/env bash
# One H100 call for issue 14, results packed into $OUT/cluster_probe.tgz: softmax_cluster (CUDA C++, rows in
# the shared memory of a thread-block cluster) built, its GPU tests and gelu_cuda's run, then timed
# beside a copy and softmax_split at the long-row shapes (scripts/split_probe.py), then the bench
# of both over the suite's shapes.
# Usage (on the device, from the repository root): OUT=... bash scripts/device_cluster_probe.sh
set -uo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)/cluster_probe
mkdir -p "$out"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$out/install.txt" 2>&1 || cat "$out/install.txt"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%FT%TZ; } | tee "$out/gpu.txt"
python3 -m pytest -q -m gpu -k "cluster or gelu_cuda" tests/test_softmax_kernels.py tests/test_other_kernels.py \
  >"$out/tests.txt" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed|error:" "$out/tests.txt" | tail -40
python3 scripts/split_probe.py "$out/split_probe.json" --rounds 3 --subjects "${SUBJECTS:-^(shipped|cluster)}" --shapes "${SHAPES:-16384x131072,8192x32768}" \
  2>&1 | grep -v Warning | tee "$out/split_probe.txt"
[ -n "${BENCH-1}" ] && memtraffic bench softmax_cluster softmax_split --out "$out/bench" 2>&1 | tail -40 | tee "$out/bench.txt"
tar -C "$(dirname "$out")" -czf "${OUT:?set OUT}/cluster_probe.tgz" cluster_probe
