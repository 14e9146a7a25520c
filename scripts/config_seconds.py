"""Per run folder of `memtraffic measure`: configs, the median and mean seconds a config took (the runner's
status files: ncu's passes included) and profiling wall time (run.json), as a table.

    python scripts/config_seconds.py RUN [RUN ...]
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


def row(run: Path) -> str:
    seconds = [r["seconds"] for status in sorted(run.glob("status*.jsonl"))
               for r in map(json.loads, filter(str.strip, status.read_text().splitlines()))
               if r.get("status") == "ok"]
    info = json.loads((run / "run.json").read_text())
    return (f"{run.name:10s} {len(info.get('gpus') or [None]):4d} {len(seconds):7d} "
            f"{statistics.median(seconds):9.3f} {statistics.mean(seconds):7.3f} {info['wall_time_s']:9.2f}")


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    print("run        gpus configs  median s  mean s  profiling s")
    for path in argv:
        print(row(Path(path)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
