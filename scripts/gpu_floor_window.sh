#!/usr/bin/env bash
# GPU: issue 51 -- one profiler-window program (examples/floor_block.py: a transformer block's forward and
# backward after warm-up) profiled on one GPU with the defaults (kernel replay, each kernel's time from a
# pass of the program without ncu), with --time-from ncu (ncu's kernel replay times), with --timing-only and
# with --replay range (bytes from ncu's range replay, times from a run without ncu), the program alone,
# `memtraffic floor` of each, and the floor_window table of docs/floor.md (scripts/readme_tables.py).
# usage: bash scripts/gpu_floor_window.sh OUT [GPU]   (from the repository root; GPU: the reports folder,
#        default from nvidia-smi: h100, h200; RANGE=0 leaves the --replay range run out)
#
# OUT gets (each step goes on when another fails; the rc of each in steps.txt):
#   floor_window.tgz        reports/GPU/floor_window/{default,time_from_ncu,timing_only,range}/ (paths made shareable by
#                           scripts/share_runs.py) and, when this GPU has no committed roofs, the roofs the
#                           first profile measured as reports/roofs/<device>.json; logs/ (each command's
#                           output, `memtraffic floor --format json` of each run)
#   floor_window_table.md   the table docs/floor.md gets from the pair (readme_tables.floor_window_output)
#   floors.txt              `memtraffic floor RUN` of each run (or its one-line "no floor")
#   (the tarball's logs/pytest_profile.json: the ncu tests of tests/collect/test_profile.py on this GPU)
#   steps.txt, environment.txt
set -u
OUT=${1:?usage: bash scripts/gpu_floor_window.sh OUT [GPU]}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
export PYTHONUNBUFFERED=1
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
GPU=${2:-$(echo "$name" | awk '{print tolower($2)}')}
work=$(mktemp -d)
runs="$work/reports/$GPU/floor_window"
mkdir -p "$runs" "$work/logs"
"$PY" -m pip install -q --no-deps --no-build-isolation -e . > "$work/logs/install.log" 2>&1

run() {  # run NAME TIMEOUT CMD...: output into logs/NAME.{json,log}, rc into steps.txt
    local step=$1 limit=$2
    shift 2
    local t=$SECONDS
    timeout "$limit" "$@" > "$work/logs/$step.json" 2> "$work/logs/$step.log"
    local rc=$?
    echo "$step rc=$rc ${SECONDS}s-total $((SECONDS - t))s" | tee -a "$OUT/steps.txt"
}

{ echo "$name"; nvidia-smi --query-gpu=driver_version --format=csv,noheader; "$PY" -c \
  "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; ncu --version | tail -1;
  date -u; } > "$OUT/environment.txt" 2>&1
roofs_before=$("$PY" -c "from memtraffic.host.roofs_cache import find_roofs; print(find_roofs('$name') is not None)")

PROFILE=("$PY" -m memtraffic.cli profile --torch-ops --profile-from-start off
         --target-processes application-only --format json)
modes=(default time_from_ncu timing_only)
run bare 120 "$PY" examples/floor_block.py  # the program alone: what each profile costs on top of it
run profile_default 200 "${PROFILE[@]}" --out "$runs/default" -- "$PY" examples/floor_block.py
run profile_time_from_ncu 200 "${PROFILE[@]}" --time-from ncu --out "$runs/time_from_ncu" \
    -- "$PY" examples/floor_block.py
run profile_timing_only 120 "${PROFILE[@]}" --timing-only --out "$runs/timing_only" \
    -- "$PY" examples/floor_block.py
if [ "${RANGE:-1}" != 0 ]; then
    run profile_range 200 "${PROFILE[@]}" --replay range --out "$runs/range" -- "$PY" examples/floor_block.py
    modes+=(range)
fi
# the ncu tests of profile on this GPU, range replay's kernel times among them
run pytest_profile 240 "$PY" -m pytest -q -p no:cacheprovider tests/collect/test_profile.py -k on_gpu
for mode in "${modes[@]}"; do
    run "floor_$mode" 60 "$PY" -m memtraffic.cli floor --format json "$runs/$mode"
    { echo "== memtraffic floor reports/$GPU/floor_window/$mode"
      "$PY" -m memtraffic.cli floor "$runs/$mode" 2>&1; echo; } >> "$OUT/floors.txt"
done
if [ "$roofs_before" != True ]; then  # the roofs the first profile measured and cached, to commit
    "$PY" -m memtraffic.cli roofs --save-reference > "$work/logs/roofs.txt" 2>&1
    echo "roofs rc=$?" >> "$OUT/steps.txt"
    mkdir -p "$work/reports/roofs"
    # the committed file names no machine: the host name left out, as scripts/share_runs.py does for runs
    "$PY" -c "import sys; from pathlib import Path; from memtraffic.probes.roof_probes import write_reference; from memtraffic.host.roofs_cache import find_roofs
entry = find_roofs(sys.argv[1]); entry.get('environment', {}).pop('host', None)
print(write_reference(entry, Path(sys.argv[2])))" "$name" "$work/reports/roofs" >> "$work/logs/roofs.txt" 2>&1
fi
"$PY" scripts/share_runs.py "$runs"/* > "$work/logs/share_runs.log" 2>&1
# The table from these runs (their reports folder read as the committed one would be)
"$PY" -c "import sys; sys.path.insert(0, 'scripts'); import readme_tables as t; from pathlib import Path;
print('\n'.join(t.floor_window_output(Path(sys.argv[1])) or ['no pair']))" "$work/reports" \
    > "$OUT/floor_window_table.md" 2>&1
echo "table rc=$?" >> "$OUT/steps.txt"
tar -C "$work" -czf "$OUT/floor_window.tgz" reports logs
rm -rf "$work"
echo "total ${SECONDS}s" >> "$OUT/steps.txt"
