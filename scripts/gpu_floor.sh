#!/usr/bin/env bash
# GPU: issue 42 -- how far a program is from its floor. Profiles a transformer block's forward and backward
# eager and compiled, and the lecture's GELU three ways (eager ops, one Triton kernel, torch.compile), each
# in a profiler window after warm-up, then runs `memtraffic floor` on each and notebook 04 as plain Python.
# usage: bash scripts/gpu_floor.sh OUT [NAME]   (from the repository root; NAME: the runs' suffix)
#
# Writes under OUT (each step goes on when another fails; rc of each in OUT/logs/steps.txt):
#   reports/h100/floor_eager_NAME/      profile --torch-ops of examples/floor_block.py
#   reports/h100/floor_compiled_NAME/   the same with --compile
#   reports/h100/floor_gelu_{eager,triton,compiled}/  profile --torch-ops of examples/floor_gelu.py --mode ...
#   logs/*.log, logs/floor_*.json       each command's output, `memtraffic floor --format json` of each run
# The run folders name paths relative to the run folder or repository (scripts/share_runs.py).
set -u
OUT=${1:?usage: bash scripts/gpu_floor.sh OUT [NAME]}
NAME=${2:-block}
mkdir -p "$OUT/reports/h100" "$OUT/logs"
PY=${PYTHON:-python}
export PYTHONUNBUFFERED=1
export TORCHINDUCTOR_CACHE_DIR
TORCHINDUCTOR_CACHE_DIR=$(mktemp -d)
"$PY" -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/logs/install.log" 2>&1

run() {  # run NAME TIMEOUT CMD...: output into logs/NAME.{json,log}, rc into logs/steps.txt
    local name=$1 limit=$2
    shift 2
    local t=$SECONDS
    timeout "$limit" "$@" > "$OUT/logs/$name.json" 2> "$OUT/logs/$name.log"
    local rc=$?
    echo "$name rc=$rc ${SECONDS}s-total $((SECONDS - t))s" | tee -a "$OUT/logs/steps.txt"
}

{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; "$PY" -c \
  "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u; } \
  > "$OUT/logs/environment.txt" 2>&1

PROFILE=("$PY" -m memtraffic.cli profile --torch-ops --profile-from-start off
         --target-processes application-only --format json)
run floor_eager_$NAME 200 "${PROFILE[@]}" --out "$OUT/reports/h100/floor_eager_$NAME" \
    -- "$PY" examples/floor_block.py
run floor_compiled_$NAME 240 "${PROFILE[@]}" --out "$OUT/reports/h100/floor_compiled_$NAME" \
    -- "$PY" examples/floor_block.py --compile
for mode in eager triton compiled; do
    run floor_gelu_$mode 90 "${PROFILE[@]}" --out "$OUT/reports/h100/floor_gelu_$mode" \
        -- "$PY" examples/floor_gelu.py --mode $mode
done
for r in floor_eager_$NAME floor_compiled_$NAME floor_gelu_eager floor_gelu_triton floor_gelu_compiled; do
    run "floor_of_$r" 60 "$PY" -m memtraffic.cli floor --format json "$OUT/reports/h100/$r"
    "$PY" -m memtraffic.cli floor "$OUT/reports/h100/$r" > "$OUT/logs/floor_table_$r.txt" 2>&1
done
"$PY" scripts/share_runs.py "$OUT"/reports/h100/floor_* > "$OUT/logs/share_runs.log" 2>&1
# The lesson as plain Python on this machine's runs, placed where it reads them (needs plotly)
cp -r "$OUT"/reports/h100/floor_* reports/h100/
(cd notebooks && timeout 120 "$PY" 04_floor.py) > "$OUT/logs/notebook04.log" 2>&1
echo "notebook04 rc=$?" >> "$OUT/logs/steps.txt"
rm -rf "$TORCHINDUCTOR_CACHE_DIR"
echo "total ${SECONDS}s" >> "$OUT/logs/steps.txt"
