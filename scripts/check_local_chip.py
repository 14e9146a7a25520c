"""On a GPU machine with ncu: does the local GPU's own metric list match the shipped list of its chip?

Runs `ncu --query-metrics` (no --chip: the local GPU), compares its base names with the list
memtraffic ships for the chip the GPU's name maps to (memtraffic/ncu/chip_metrics.json.gz, from
`ncu --query-metrics --chip CHIP`), and runs `memtraffic metrics --format json` without --chip.
Writes $OUT/chip_check.json (the comparison and the local resolution of every set) and
$OUT/query_metrics_head.txt (ncu's first lines). Exit 1 when a name memtraffic's aliases use differs
between the two lists; other counters may differ (a machine can lack its chip's NVLink counters).

Usage (GPU machine, ncu on PATH): OUT=/tmp/out python scripts/check_local_chip.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def main() -> int:
    from memtraffic.ncu.chips import chip_metric_names, closest_chip
    from memtraffic.ncu.command import base_name, find_ncu, parse_query_metrics
    from memtraffic.ncu.metrics import METRICS
    from memtraffic.vocab.arch import chip_for_gpu
    from memtraffic.vocab.machine import gpu_name

    out = Path(os.environ.get("OUT", "."))
    out.mkdir(parents=True, exist_ok=True)
    gpu = gpu_name()
    chip = chip_for_gpu(gpu)
    ncu = find_ncu()
    proc = subprocess.run([str(ncu), "--query-metrics"], capture_output=True, text=True, timeout=600)
    (out / "query_metrics_head.txt").write_text("\n".join(proc.stdout.splitlines()[:8]) + "\n")
    local = parse_query_metrics(proc.stdout)
    shipped = chip_metric_names(chip.name) if chip else frozenset()
    metrics = subprocess.run([sys.executable, "-m", "memtraffic.cli", "metrics", "--format", "json"],
                             capture_output=True, text=True, timeout=600, cwd=REPO)
    result = {
        "gpu": gpu, "chip": chip.name if chip else None, "closest_shipped_chip": closest_chip(local),
        "local_names": len(local), "shipped_names": len(shipped),
        "only_local": sorted(local - shipped)[:50], "only_shipped": sorted(shipped - local)[:50],
        "metrics_rc": metrics.returncode, "metrics_stderr": metrics.stderr[-2000:],
        "metrics": json.loads(metrics.stdout) if metrics.returncode == 0 else None,
    }
    (out / "chip_check.json").write_text(json.dumps(result, indent=2) + "\n")
    # A machine may lack counters its chip's list has (the H100 test machine: no NVLink or C2C ones);
    # what must agree are the names memtraffic's aliases use.
    ours = {base_name(n) for m in METRICS.values() for form in m.forms for n in form.names}
    differ = sorted((local ^ shipped) & ours)
    ok = chip is not None and not differ and metrics.returncode == 0
    print(f"{gpu}: chip {result['chip']}, local {len(local)} names, shipped {len(shipped)}; "
          f"memtraffic's names {'agree' if not differ else 'DIFFER: ' + ', '.join(differ)}; "
          f"memtraffic metrics exit {metrics.returncode}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
