#!/usr/bin/env bash
# Device call 2 of issue 12: the committed source reference runs again, now with ncu's per-line export
# (scripts/make_source_reports.sh; $OUT/source_ref.tgz), then what `--source` costs on
# `memtraffic measure --all` (default shapes, traffic metrics). A first runner pass without ncu compiles every kernel (Triton, torch.compile, load_inline),
# so neither measured run pays for compilation; then --all without and with --source. run.json has the
# wall time and passes, ncu.log the passes of each kernel. Everything but the reports lands in
# $OUT/source2.tgz, with their sizes. Usage on the device: bash scripts/source_session_2.sh
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
W=$(mktemp -d)
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; ncu --version; } > "$W/env.txt" 2>&1
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$W/pip.log" 2>&1
timeout 200 bash scripts/make_source_reports.sh "$W/ref" > "$W/make_source.log" 2>&1
echo "exit code $?" >> "$W/make_source.log"
cp "$W/make_source.log" "$W/env.txt" "$W/ref/"
tar czf "$OUT/source_ref.tgz" -C "$W/ref" .

mkdir -p "$W/warm"
python3 -c "import json, sys; from memtraffic.measure.measure import build_plan
json.dump(build_plan([], [], [], [], all_variants=True), open(sys.argv[1], 'w'))" "$W/warm/plan.json"
timeout 150 python3 -m memtraffic.measure.runner "$W/warm/plan.json" > "$W/warm.log" 2>&1
echo "exit code $?" >> "$W/warm.log"
for mode in no-source source; do
  timeout 110 python3 -m memtraffic.cli measure --all --"$mode" --out "$W/all_$mode" > "$W/all_$mode.log" 2>&1
  echo "exit code $?" >> "$W/all_$mode.log"
done
ls -l "$W"/all_*/ > "$W/sizes.txt"
tar czf "$OUT/source2.tgz" -C "$W" --exclude='*.ncu-rep' .
