"""Write the kernel table (<name>.kernels.json.gz, with the per-line counters where the report has them)
beside every committed report under reports/.

`memtraffic measure`, `profile` and `merge` write it into the run folders they make; the committed runs
get theirs from this script (no GPU needed), so that every later analyze, roofline and report reads the
table instead of the .ncu-rep. Rerun it after a report is replaced or memtraffic.ncu.metrics changes (a
stale table is never used: it is read from the report again). Commit the tables.
Usage: python scripts/make_kernel_tables.py [REPORT_OR_FOLDER ...]   (default: everything under reports/)
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from memtraffic.ncu.kernel_table import table_path, write_kernel_table
from memtraffic.ncu.report import REPORT_SUFFIX

REPO = Path(__file__).resolve().parent.parent


def main(argv: list[str]) -> int:
    roots = [Path(a) for a in argv] or [REPO / "reports"]
    reports = sorted(r for root in roots
                     for r in ([root] if root.is_file() else root.rglob("*" + REPORT_SUFFIX)))
    with tempfile.TemporaryDirectory() as cache:
        os.environ["MEMTRAFFIC_CACHE"] = cache  # read every report itself, not a table cached before
        for report in reports:
            table_path(report).unlink(missing_ok=True)
            out = write_kernel_table(report)
            name = out.relative_to(REPO) if out.is_relative_to(REPO) else out
            print(f"{name}  {out.stat().st_size:>8} bytes  (report {report.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
