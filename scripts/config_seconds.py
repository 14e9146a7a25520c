"""Per run folder of `memtraffic measure`: configs, the median and mean seconds a config took (the runner's
status files: ncu's passes included), the median of each phase where the runner recorded them (inputs
made and copied, warm-up call, check against the reference, the measured call with ncu's replay), and
the profiling wall time (run.json), as a table.

    python scripts/config_seconds.py RUN [RUN ...]
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

PHASES = ["inputs", "warmup", "check", "measured"]


def row(run: Path) -> str:
    records = [r for status in sorted(run.glob("status*.jsonl"))
               for r in map(json.loads, filter(str.strip, status.read_text().splitlines()))
               if r.get("status") == "ok"]
    seconds = [r["seconds"] for r in records]
    phases = [statistics.median(r["phases"][p] for r in records) if all("phases" in r for r in records)
              else float("nan") for p in PHASES]
    info = json.loads((run / "run.json").read_text())
    return (f"{run.name:10s} {len(info.get('gpus') or [None]):4d} {len(seconds):7d} "
            f"{statistics.median(seconds):9.3f} {statistics.mean(seconds):7.3f} "
            + " ".join(f"{p:8.3f}" for p in phases) + f" {info['wall_time_s']:11.2f}")


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    print("run        gpus configs  median s  mean s   inputs   warmup    check measured  profiling s")
    for path in argv:
        print(row(Path(path)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
