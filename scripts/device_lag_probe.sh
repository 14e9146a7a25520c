#!/usr/bin/env bash
# One H100 call (issue 14): scripts/lag_probe.py (why the lag kernel loses at 16384x131072 bf16) and
# the lag kernel's gpu test cases. Packs everything into $OUT/lag_probe.tgz after each step.
#   OUT=... bash scripts/device_lag_probe.sh [extra lag_probe.py arguments]
set -uo pipefail
cd "$(dirname "$0")/.."
res=/tmp/lag_probe
rm -rf "$res"; mkdir -p "$res"
pack() { tar czf "${OUT:-/tmp}/lag_probe.tgz" -C /tmp lag_probe; }
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$res/install.txt" 2>&1 || cat "$res/install.txt"
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader; } \
  | tee "$res/machine.txt"
timeout -k 10 120 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_softmax_kernels.py -k "split and lag" \
  2>&1 | tail -15 | tee "$res/gpu_tests.txt"
pack
timeout -k 10 360 python3 scripts/lag_probe.py "$res/lag_probe.json" "$@" 2>&1 | tee "$res/lag_probe.txt"
pack
# L1 and L2 bytes of the probe's waits under ncu (NCU_ONCE: subjects, two launches each; first shape/dtype)
if [ -n "${NCU_ONCE:-}" ]; then
  ncu=$(command -v ncu || echo /opt/nvidia/nsight-compute/2025.3.1/ncu)
  timeout -k 10 150 "$ncu" --kernel-name regex:_lag_probe_kernel --csv --metrics \
    l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum,l1tex__t_bytes_pipe_lsu_mem_global_op_st.sum,lts__t_bytes.sum,dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum \
    python3 scripts/lag_probe.py "$res/once.json" --once "$NCU_ONCE" "$@" >"$res/ncu_once.csv" 2>"$res/ncu_once.err"
  tail -3 "$res/ncu_once.err"; pack
fi
