#!/usr/bin/env bash
# A report captured by hand, as a user without memtraffic would: plain `ncu --set full -o` around a
# small torch program. tests/analysis/test_analyze.py analyzes it with --min-bytes (no plan, no NVTX ranges).
# Usage: bash scripts/capture_plain_ncu.sh [OUT_DIR]   (needs a CUDA GPU and ncu; refuses to overwrite)
set -euo pipefail
out=${1:-reports/h100/plain_ncu_torch_softmax}
if [ -e "$out/profile.ncu-rep" ]; then echo "$out/profile.ncu-rep exists: remove it first" >&2; exit 1; fi
mkdir -p "$out"
ncu --set full --import-sass no --clock-control none -o "$out/profile" \
  python3 -c "import torch; x = torch.randn(1048576, 2, device='cuda'); y = torch.softmax(x, dim=1); torch.cuda.synchronize()"
