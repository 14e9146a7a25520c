#!/usr/bin/env bash
# Device call 1 of issue 12 (per-source-line view): the committed source reference runs with ncu's own
# export (scripts/make_source_reports.sh), plus what the reading side must know about ncu: its --help,
# the source page under each --print-source view, and a capture without SASS (does source_info need the
# cubin?). Everything lands in $OUT/source1.tgz. Usage on the device: bash scripts/source_session_1.sh
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
W=$(mktemp -d)
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; ncu --version; } > "$W/env.txt" 2>&1
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$W/pip.log" 2>&1
ncu --help > "$W/ncu_help.txt" 2>&1

timeout 300 bash scripts/make_source_reports.sh "$W/ref" > "$W/make_source.log" 2>&1
echo "exit code $?" >> "$W/make_source.log"

mkdir -p "$W/exp"
seed=$W/ref/source_seed_1048576x2_fp32/profile.ncu-rep
for view in sass cuda cuda,sass; do
  ncu --import "$seed" --page source --print-source "$view" --csv > "$W/exp/seed_$view.csv" 2> "$W/exp/seed_$view.err"
done
ncu --import "$seed" --page source --csv > "$W/exp/seed_default.csv" 2> "$W/exp/seed_default.err"
ncu --import "$seed" --page details --csv > "$W/exp/seed_details.csv" 2> "$W/exp/seed_details.err"
timeout 60 ncu --section SourceCounters --import-source yes --import-sass no --kernel-name regex:copy \
  --clock-control none -o "$W/exp/plain_no_sass" python3 scripts/source_demo_triton.py > "$W/exp/plain_no_sass.log" 2>&1
ls -l "$W"/ref/*/ "$W/exp" > "$W/sizes.txt"
tar czf "$OUT/source1.tgz" -C "$W" .
