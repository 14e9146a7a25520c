#!/usr/bin/env bash
# GPU, TWO or FOUR GPUs of one host (nvidia-h100-x2, -x4; issue 41): measure's default (--metrics auto: a
# one-pass first look for every config, then the traffic set again only for the configs below 0.9 L1
# efficiency whose bytes are not what their variant's model predicts) on the 720-config sweep
# scripts/sweeps/softmax_gpus_720.toml, `--gpus 0`, then `--gpus all` (and on four GPUs `--gpus 0,1`),
# each from an empty Triton cache of its own: scripts/gpu_gpus.sh with auto:1 and WARM_TRITON=0.
# Usage: bash scripts/gpu_gpus_first_look.sh OUT   (installs the checkout with pip -e, no dependencies)
# OUT gets first_look.tgz (reports/<MACHINE>/gpus_vs_one_720_auto_x1_cold/: summary.json,
# comparison.csv, logs.tgz; the runs' stdout/stderr; machine.txt) and all-1.tgz (the --gpus all run
# folder) under 15 MB.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bash scripts/gpu_gpus_first_look.sh OUT}
work=$(mktemp -d)
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$work/install.log" 2>&1 \
  || { cat "$work/install.log"; exit 1; }
gpus=$(nvidia-smi -L | grep -c '^GPU')
also=
[ "$gpus" -ge 4 ] && also=2
SWEEP=scripts/sweeps/softmax_gpus_720.toml WARM_TRITON=0 ALSO_FIRST=$also bash scripts/gpu_gpus.sh "$work" auto:1
dest=$(ls -d "$work"/reports/*/gpus_vs_one_720_auto_x1_cold)
mv "$dest/all-1.tgz" "$work/all-1.tgz" 2>/dev/null
tar czf "$out/first_look.tgz" -C "$work" reports machine.txt install.log
if [ -f "$work/all-1.tgz" ] && [ "$(stat -c %s "$work/all-1.tgz")" -lt 15000000 ]; then
  cp "$work/all-1.tgz" "$out/"
fi
cat "$dest/summary.json"
