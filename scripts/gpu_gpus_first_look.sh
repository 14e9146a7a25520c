#!/usr/bin/env bash
# GPU, TWO GPUs of one host (nvidia-h100-x2; issue 41): measure's default (--metrics auto: a one-pass first
# look for every config, then the traffic set again for the configs below 0.9 L1 load or store efficiency)
# on the 480-config sweep scripts/sweeps/softmax_h100x2_480.toml, `--gpus 0` then `--gpus all`, each from an
# empty Triton cache of its own: scripts/gpu_gpus.sh with auto:1 and WARM_TRITON=0, as
# reports/h200x2/gpus_vs_one_480_bytes_x1_cold was made with bytes:1.
# Usage: bash scripts/gpu_gpus_first_look.sh OUT   (installs the checkout with pip -e, no dependencies)
# OUT gets first_look.tgz (reports/h100x2/gpus_vs_one_480_auto_x1_cold/: summary.json, comparison.csv,
# logs.tgz; the runs' stdout/stderr; machine.txt) and all-1.tgz (the --gpus all run folder) under 15 MB.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bash scripts/gpu_gpus_first_look.sh OUT}
work=$(mktemp -d)
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$work/install.log" 2>&1 \
  || { cat "$work/install.log"; exit 1; }
SWEEP=scripts/sweeps/softmax_h100x2_480.toml WARM_TRITON=0 bash scripts/gpu_gpus.sh "$work" auto:1
dest=reports/h100x2/gpus_vs_one_480_auto_x1_cold
mv "$work/$dest/all-1.tgz" "$work/all-1.tgz" 2>/dev/null
tar czf "$out/first_look.tgz" -C "$work" reports machine.txt install.log
if [ -f "$work/all-1.tgz" ] && [ "$(stat -c %s "$work/all-1.tgz")" -lt 15000000 ]; then
  cp "$work/all-1.tgz" "$out/"
fi
cat "$work/$dest/summary.json"
