#!/usr/bin/env bash
# Make the committed reference runs under reports/h100/ (needs a CUDA GPU and ncu >= 2023.1).
# Arguments go to scripts/make_reference_reports.py: --list, --only GROUP..., --force, --out DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${PYTHON:-python3}" scripts/make_reference_reports.py "$@"
