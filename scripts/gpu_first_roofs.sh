#!/usr/bin/env bash
# GPU: issue 51 -- the roofs a floor needs, measured by a GPU's first profile. This GPU's committed roofs
# (reports/roofs/) are set aside and the user cache is empty, so `memtraffic profile` meets the GPU as a
# user's first profile would: it measures the roofs once after the run and says so; a second profile reuses
# them; with --no-roofs (and another empty cache) the run has no floor and `memtraffic floor` exits 1.
# usage: bash scripts/gpu_first_roofs.sh OUT   (from the repository root; the committed roofs are put back)
#
# OUT/first_roofs.tgz holds runs/{first,second,no_roofs}/ (examples/floor_gelu.py --mode eager, paths made
# shareable by scripts/share_runs.py), cache/roofs.json (the roofs the first profile measured) and logs/
# (each command's output; steps.txt: rc and seconds of each step).
set -u
OUT=${1:?usage: bash scripts/gpu_first_roofs.sh OUT}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
R=$(mktemp -d)
mkdir -p "$R/runs" "$R/logs" "$R/committed"
"$PY" -m pip install -q --no-deps --no-build-isolation -e . > "$R/logs/install.log" 2>&1
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > "$R/logs/environment.txt"
mv reports/roofs/*.json "$R/committed/"
trap 'mv "$R"/committed/*.json reports/roofs/ 2>/dev/null' EXIT
step() {  # step NAME CMD...: output into logs/NAME.{json,log}, rc and seconds into logs/steps.txt
    local name=$1 t=$SECONDS
    shift
    "$@" > "$R/logs/$name.json" 2> "$R/logs/$name.log"
    echo "$name rc=$? $((SECONDS - t))s" >> "$R/logs/steps.txt"
}
PROFILE=("$PY" -m memtraffic.cli profile --torch-ops --profile-from-start off
         --target-processes application-only --format json)
PROGRAM=("$PY" examples/floor_gelu.py --mode eager)
export MEMTRAFFIC_CACHE="$R/cache"
step first "${PROFILE[@]}" --out "$R/runs/first" -- "${PROGRAM[@]}"
step second "${PROFILE[@]}" --out "$R/runs/second" -- "${PROGRAM[@]}"
step floor_first "$PY" -m memtraffic.cli floor "$R/runs/first"
MEMTRAFFIC_CACHE="$R/cache2" step no_roofs "${PROFILE[@]}" --no-roofs --out "$R/runs/no_roofs" -- "${PROGRAM[@]}"
MEMTRAFFIC_CACHE="$R/cache2" step floor_no_roofs "$PY" -m memtraffic.cli floor "$R/runs/no_roofs"
"$PY" scripts/share_runs.py "$R"/runs/* > "$R/logs/share_runs.log" 2>&1
tar -C "$R" -czf "$OUT/first_roofs.tgz" runs logs cache
cat "$R/logs/steps.txt"
