#!/usr/bin/env bash
# One H100 call (issue 14): is softmax_split's lag kernel (lag=1, the default since 79d82fe) right on the
# GPU, and faster than the groups kernel (lag=0) where rows take several parts (8192x8192, 8192x32768,
# 16384x131072)? (reports/bench/2026-11-23-h100-lag-probe/call1-lag-round: this script at 9ff2462.)
#   OUT=... bash scripts/device_lag_round.sh
# 1. softmax_split's gpu tests (the lag kernel's rows of several parts run only on a GPU);
# 2. the registers, spills and programs an SM of the kernels as the device compiles them;
# 3. three rounds of `memtraffic bench` of softmax_split and softmax_split_groups (scripts/
#    variants_split_groups.py) beside the copy, fresh buffers each round.
# Everything is packed into $OUT/lag_round.tgz.
set -uo pipefail
cd "$(dirname "$0")/.."
res=/tmp/lag_round
rm -rf "$res"; mkdir -p "$res"
pack() { tar czf "${OUT:-/tmp}/lag_round.tgz" -C /tmp lag_round; }  # after every step: a timeout keeps the rest
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$res/install.txt" 2>&1 || cat "$res/install.txt"
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader; } \
  | tee "$res/machine.txt"
# a kernel whose programs wait for each other could hang: every step has a time limit
timeout -k 10 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_softmax_kernels.py -k split 2>&1 \
  | tail -30 | tee "$res/gpu_tests.txt"
pack
timeout -k 10 60 python3 - <<'PY' 2>&1 | tee "$res/n_regs.txt"
import torch
from memtraffic.kernels import softmax_split as sp
m, n = 16384, 131072
for dtype in (torch.bfloat16, torch.float16, torch.float32):
    x = torch.empty((8, n), dtype=dtype, device="cuda")
    words = torch.full((m * 33 + 32,), -1, dtype=torch.int64, device="cuda")
    for label, kernel, args, meta in [
        ("groups", sp._softmax_split_kernel, (x, x, words, words, m, n, 32),
         {"SYNC": True, "PREFETCH": 0}),
        ("lag", sp._softmax_lag_kernel, (x, x, words, words, m, n, 32), {"ASM": True})]:
        k = kernel.warmup(*args, BLOCK_N=4096, PARTS_P2=32, **meta, num_warps=4, grid=(1,))
        k._init_handles()
        print(f"{label:6s} {str(dtype):15s} 4096/4 n_regs={k.n_regs} n_spills={k.n_spills} "
              f"per_sm={sp.resident_per_sm(k.n_regs, 4)}")
PY
pack
for r in 1 2 3; do
  timeout -k 10 100 memtraffic bench softmax_split softmax_split_groups --variants scripts/variants_split_groups.py \
    --shape 8192x8192 --shape 8192x32768 --shape 16384x131072 --out "$res/bench-$r" 2>&1 | tee "$res/bench-$r.txt"
  pack
done
