#!/usr/bin/env bash
# The committed `memtraffic profile` reference runs (needs a CUDA GPU, ncu, torch and cupy):
#   reports/h100/profile_torch_model  - examples/torch_model.py with --torch-ops (per-op minimums)
#   reports/h100/profile_cupy_region  - examples/cupy_region.py, three memtraffic.region blocks
# Beside each report, ncu's own print of every metric of every kernel (ncu --import R --page raw --csv
# --print-units base; ncu_raw.csv.gz), which tests compare with memtraffic's numbers. Refuses existing
# folders. Then `python scripts/make_kernel_tables.py OUT_ROOT` compresses the reports and writes their tables.
# Usage: bash scripts/make_profile_reports.sh [OUT_ROOT]   (default reports/h100)
set -euo pipefail
cd "$(dirname "$0")/.."
root=${1:-reports/h100}
ncu=${MEMTRAFFIC_NCU:-ncu}
run() {  # name, then the profile arguments
  local name=$1; shift
  if [ -e "$root/$name" ]; then echo "$root/$name exists: remove it first" >&2; exit 1; fi
  memtraffic profile --out "$root/$name" "$@"
  "$ncu" --import "$root/$name/profile.ncu-rep" --page raw --csv --print-units base | gzip -9n > "$root/$name/ncu_raw.csv.gz"
}
run profile_torch_model --torch-ops -- python3 examples/torch_model.py
run profile_cupy_region -- python3 examples/cupy_region.py
