#!/usr/bin/env bash
# The committed `profile --torch-ops` run of a training step (needs a CUDA GPU, ncu and torch):
#   profile_train_step - examples/train_step.py (embedding, attention, layer norm, MLP, cross entropy,
#   backward, AdamW), its second step only: --profile-from-start off profiles, and the tracer traces,
#   the calls between cudaProfilerStart and cudaProfilerStop.
# Beside the report: ncu's own print of every metric of every kernel (ncu_raw.csv.gz, compared with
# memtraffic's numbers by tests/analysis/test_profile_reports.py), and the tables `profile` and
# `analyze --group-by op` printed (stdout.txt, by_op.txt).
# Usage: OUT=/some/dir bash scripts/make_torch_ops_report.sh
#   -> $OUT/profile_train_step.tar.gz (the run folder; unpack it into reports/h100/, then run
#      python scripts/make_kernel_tables.py reports/h100/profile_train_step)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:?set OUT to the folder the archive goes to}
ncu=${MEMTRAFFIC_NCU:-ncu}
memtraffic=${MEMTRAFFIC:-python3 -m memtraffic.cli}
name=profile_train_step
work=$(mktemp -d)
run=$work/$name
$memtraffic profile --out "$run" --torch-ops --profile-from-start off -- python3 examples/train_step.py \
  > "$work/stdout.txt" 2> "$work/stderr.txt" || { cat "$work/stderr.txt" >&2; exit 1; }
mv "$work/stdout.txt" "$work/stderr.txt" "$run/"
"$ncu" --import "$run/profile.ncu-rep" --page raw --csv --print-units base | gzip -9n > "$run/ncu_raw.csv.gz"
$memtraffic analyze "$run" --group-by op > "$run/by_op.txt"
mkdir -p "$out"
tar czf "$out/$name.tar.gz" -C "$work" "$name"
ls -l "$out/$name.tar.gz"
tail -5 "$run/stderr.txt"
