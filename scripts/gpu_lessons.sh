#!/usr/bin/env bash
# GPU checks of the lessons (issue 36): memtraffic.measure_variants on notebook 03's own variant, and the
# %%memtraffic cell magic profiling a cell for real. Needs `pip install -e . --no-deps`, torch, ncu, pytest.
# Writes OUT/pytest.log (and OUT/DONE). Takes about a minute.
#   bash scripts/gpu_lessons.sh OUT
set -uo pipefail
out=${1:?usage: scripts/gpu_lessons.sh OUT_FOLDER}
mkdir -p "$out"
cd "$(dirname "$0")/.."
nvidia-smi -L > "$out/gpu.txt" 2>&1
ncu --version >> "$out/gpu.txt" 2>&1
timeout 420 python -m pytest -q -p no:cacheprovider -rA -m "gpu or ncu" \
  tests/test_api_lessons.py tests/test_magic.py > "$out/pytest.log" 2>&1
echo "pytest exit code $?" >> "$out/pytest.log"
touch "$out/DONE"
