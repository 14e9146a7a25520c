#!/usr/bin/env bash
# GPU: the before/after pair behind the README's "Comparing runs" (needs a CUDA GPU and ncu). The user GELU
# kernel of examples/strided/my_gelu.py (walks the tensor column by column) and of
# examples/coalesced/my_gelu.py (the fix, the same kernel line for line), both variant my_gelu, measured
# with --source at 4096x4096 in fp32 and bf16, then `memtraffic diff` of the two:
#   diff_gelu_strided_4096x4096/, diff_gelu_coalesced_4096x4096/   the two run folders (commit under reports/h100/)
#   diff.txt, diff_lines.txt, diff.json                            memtraffic diff: per config, per line, json
# Usage: bash scripts/make_diff_pair.sh [DIR]   (default reports/h100; refuses existing run folders)
#        With $OUT set (a folder to collect results in), the run folders are packed into $OUT/diff_pair.tar.gz and the
#        diff outputs written beside it, DIR is ignored.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
if [ -n "${OUT:-}" ]; then runs=$(mktemp -d); dest=$OUT; else runs=${1:-reports/h100}; dest=$runs; fi
before=$runs/diff_gelu_strided_4096x4096
after=$runs/diff_gelu_coalesced_4096x4096
for dir in "$before" "$after"; do
  if [ -e "$dir" ]; then echo "$dir exists: remove it first" >&2; exit 1; fi
done
# memtraffic and its kernels from this tree, whatever else the machine has installed
"$py" -m pip install -q --no-deps --no-build-isolation -e . >/dev/null
mt() { "$py" -m memtraffic.cli "$@"; }
grid=(my_gelu --shape 4096x4096 --dtype fp32 --dtype bf16 --source --metrics traffic)  # as committed
mt measure "${grid[@]}" --variants examples/strided/my_gelu.py --out "$before"
mt measure "${grid[@]}" --variants examples/coalesced/my_gelu.py --out "$after"
mkdir -p "$dest"
mt diff "$before" "$after" | tee "$dest/diff.txt"
mt diff "$before" "$after" --group-by line > "$dest/diff_lines.txt"
mt diff "$before" "$after" --format json > "$dest/diff.json"
if [ -n "${OUT:-}" ]; then
  tar -czf "$OUT/diff_pair.tar.gz" -C "$runs" "$(basename "$before")" "$(basename "$after")"
  ls -la "$OUT"
fi
