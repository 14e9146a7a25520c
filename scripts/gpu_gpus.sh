#!/usr/bin/env bash
# GPU, TWO GPUs of one host (nvidia-h100-x2; issue 33): `measure --gpus all` against one GPU on the
# 160-config sweep (scripts/sweeps/softmax_h200x2_160.toml), with scripts/measure_gpus.py, now that the
# runners start while the plan is built (they used to wait for it: ~6 s of torch and kernel imports in
# the parent, paid before any ncu started).
#   bytes set (one replay pass): one GPU, all GPUs, twice (--repeat 2);
#   traffic set (six passes, where two ncu processes' passes take turns): once (--repeat 1);
# both with one Triton cache warmed by an untimed first run (--warm-triton), as issue 33's baseline was;
# WARM_TRITON=0: every run compiles into an empty cache of its own, as a fresh user's does (<SET>_x<N>_cold).
# SWEEP: another sweep file (issue 41: scripts/sweeps/softmax_h100x2_480.toml); the trailing number of its
# name is the folders' config count.
# ALSO_FIRST=N: also a run on the first N GPUs in each round (measure_gpus.py --also-first; two of four).
# Each run's summary.json holds the ratios, each GPU's wall time split into its configs' seconds and the
# fixed rest, and measure's own timings. The traffic step skips itself when the first took past BUDGET_S (250) seconds.
# Usage: bash scripts/gpu_gpus.sh OUT [SET:REPEAT ...]   (default: bytes:2 traffic:1; after
# `pip install -e . --no-deps`)
# OUT gets reports/<MACHINE>/gpus_vs_one_<N>_<SET>_x<REPEAT>/ (summary.json, comparison.csv, logs.tgz,
# all-1.tgz) and machine.txt, MACHINE being the GPU and how many (h100x2, h200x4, ...); commit the
# summary.json files (and comparison.csv) under reports/<MACHINE>/.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bash scripts/gpu_gpus.sh OUT [SET:REPEAT ...]}
shift
specs=${*:-bytes:2 traffic:1}
budget=${BUDGET_S:-250}
machine=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -o 'H[0-9]*' | tr H h)
machine=${machine:-gpu}x$(nvidia-smi -L | grep -c '^GPU')
mkdir -p "$out/reports/$machine"
start=$(date +%s)
{ nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader; date -u +%FT%TZ; git rev-parse HEAD
  ncu --version | tail -1; nproc; } >"$out/machine.txt" 2>&1
cat "$out/machine.txt"
sweep=${SWEEP:-scripts/sweeps/softmax_h200x2_160.toml}
configs=$(basename "$sweep" .toml | grep -o '[0-9]*$')  # the folder names say how many configs
for spec in $specs; do
  set_=${spec%%:*}
  repeat=${spec##*:}
  if [ "$(( $(date +%s) - start ))" -ge "$budget" ]; then
    echo "SKIPPED $set_: over the budget of $budget s" | tee -a "$out/machine.txt"
    continue
  fi
  warm=(--warm-triton) suffix=
  [ "${WARM_TRITON:-1}" = 0 ] && warm=() suffix=_cold
  dest=$out/reports/$machine/gpus_vs_one_${configs}_${set_}_x$repeat$suffix
  t0=$(date +%s)
  also=()
  [ -n "${ALSO_FIRST:-}" ] && also=(--also-first "$ALSO_FIRST")
  python3 scripts/measure_gpus.py "$dest" --sweep "$sweep" --metrics "$set_" --repeat "$repeat" "${warm[@]}" "${also[@]}" \
    >"$dest.stdout.txt" 2>"$dest.stderr.txt"
  echo "$set_: measure_gpus.py exited $? after $(( $(date +%s) - t0 )) s"
  python3 - "$dest/summary.json" <<'PY'
import json, sys
try:
    s = json.load(open(sys.argv[1]))
except OSError as err:
    sys.exit(f"no summary: {err}")
print("wall_s", s["wall_s"])
print("ratio_all_over_one", s["ratio_all_over_one"])
print("profiling_ratio_all_over_one", s["profiling_ratio_all_over_one"])
for run, gpus in s["per_gpu"].items():
    for g in gpus:
        print(run, {k: v for k, v in g.items() if k not in ("configs", "predicted_cost_s")})
print("measure_timings", s.get("measure_timings"))
PY
done
echo "total $(( $(date +%s) - start )) s"
