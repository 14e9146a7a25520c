#!/usr/bin/env bash
# Notebook 03 executed on a GPU (issue 43), so that its committed outputs are a measurement: the notebook
# (with its outputs) and the run folder its measuring cell saved come back under OUT. Then, in the clone:
#   cp OUT/03_measure_your_kernel.ipynb notebooks/; tar xzf OUT/runs.tgz -C /tmp
#   cp -r /tmp/reports/runs/*_softmax_pairs+2 reports/h100/lesson03_softmax_pairs_1048576x2_fp32
#   python scripts/share_runs.py reports/h100/lesson03_softmax_pairs_1048576x2_fp32   # paths made relative
# where the notebook reads it on a machine without a GPU and shows the same tables.
# Needs torch, triton, ncu, `pip install -e . --no-deps`, and jupytext, nbclient, ipykernel, plotly.
#   bash scripts/gpu_notebook03.sh OUT
set -uo pipefail
out=${1:?usage: scripts/gpu_notebook03.sh OUT_FOLDER}
mkdir -p "$out"
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
{ nvidia-smi -L; ncu --version; date -u +%FT%TZ; } >"$out/gpu.txt" 2>&1
rm -rf reports/runs notebooks/reports  # only this execution's runs are packed
timeout 420 python3 scripts/execute_notebooks.py 03_measure_your_kernel >"$out/execute.log" 2>&1
echo "execute_notebooks exit code $?" >>"$out/execute.log"
cp notebooks/03_measure_your_kernel.ipynb "$out/"
tar czf "$out/runs.tgz" reports/runs notebooks/reports 2>>"$out/execute.log"
touch "$out/DONE"
