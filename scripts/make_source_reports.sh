#!/usr/bin/env bash
# The committed per-source-line reference runs (needs a CUDA GPU and ncu), and ncu's own export of each:
#   OUT/source_seed_1048576x2_fp32, OUT/source_column_4096x4096_fp32   memtraffic measure --source
#       (scripts/make_reference_reports.py groups), each with ncu's own source page of the same report,
#       the oracle that tests/analysis/test_lines.py compares `memtraffic lines` against: ncu_source.csv.gz (per
#       source line with its SASS, kernels with line info) and ncu_sass.csv.gz (per instruction, all kernels)
#   OUT/plain_ncu_triton_source   plain ncu with SourceCounters around scripts/source_demo_triton.py
#       (no memtraffic ranges), with its ncu_source.csv.gz
# Then `python scripts/make_kernel_tables.py OUT` compresses the reports and writes their kernel tables.
# Usage: bash scripts/make_source_reports.sh [OUT]   (default reports/h100; refuses to overwrite)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-reports/h100}
py=${PYTHON:-python3}
ncu=${NCU:-ncu}
plain=$out/plain_ncu_triton_source
if [ -e "$plain" ]; then echo "$plain exists: remove it first" >&2; exit 1; fi

"$py" scripts/make_reference_reports.py --out "$out" --only source_seed_1048576x2_fp32 source_column_4096x4096_fp32

mkdir -p "$plain"
# Only the demo's two Triton kernels: torch's own (arange, equal) would embed MBs of cubin.
"$ncu" --section SourceCounters --import-source yes --kernel-name regex:copy --clock-control none \
  -o "$plain/profile" "$py" scripts/source_demo_triton.py

# ncu's own export, every kernel of the report. `--print-source cuda` alone prints the source text without
# counters; `cuda,sass` gives a row per line (summed over its instructions) followed by its SASS rows.
for dir in "$out/source_seed_1048576x2_fp32" "$out/source_column_4096x4096_fp32" "$plain"; do
  "$ncu" --import "$dir/profile.ncu-rep" --page source --print-source cuda,sass --csv | gzip -9n > "$dir/ncu_source.csv.gz"
  "$ncu" --import "$dir/profile.ncu-rep" --page source --print-source sass --csv | gzip -9n > "$dir/ncu_sass.csv.gz"
done
