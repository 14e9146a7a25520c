"""Make the committed reports light and quick to read: xz-compress every .ncu-rep under reports/ in place
(ncu embeds each kernel's cubin: xz shrinks a report 10-300x; memtraffic reads a compressed report as it
is, `xz -dc REPORT > plain.ncu-rep` gives one for the Nsight Compute UI), then write its kernel table
(<name>.kernels.json.gz, with the per-line counters where the report has them) beside it.

`memtraffic measure`, `profile` and `merge` write the table into the run folders they make; the committed
runs get theirs from this script (no GPU needed), so that every later analyze, roofline and report reads the
table instead of the .ncu-rep. Rerun it after adding or replacing a report, or after
memtraffic.ncu.metrics changes (a stale table is never used: the report is read again). Commit both.
Usage: python scripts/make_kernel_tables.py [REPORT_OR_FOLDER ...]   (default: everything under reports/)
"""

from __future__ import annotations

import lzma
import os
import sys
import tempfile
from pathlib import Path

from memtraffic.ncu.kernel_table import table_path, write_kernel_table
from memtraffic.ncu.report import REPORT_SUFFIX, is_compressed
from memtraffic.vocab.files import write_bytes_atomic

REPO = Path(__file__).resolve().parent.parent


def compress(report: Path) -> None:
    """The report xz-compressed in place (atomically), unless it is already."""
    if not is_compressed(report):
        write_bytes_atomic(report, lzma.compress(report.read_bytes(), preset=9 | lzma.PRESET_EXTREME))


def main(argv: list[str]) -> int:
    roots = [Path(a) for a in argv] or [REPO / "reports"]
    reports = sorted(r for root in roots
                     for r in ([root] if root.is_file() else root.rglob("*" + REPORT_SUFFIX)))
    with tempfile.TemporaryDirectory() as cache:
        os.environ["MEMTRAFFIC_CACHE"] = cache  # read every report itself, not a table cached before
        for report in reports:
            compress(report)
            table_path(report).unlink(missing_ok=True)
            out = write_kernel_table(report)
            name = out.relative_to(REPO) if out.is_relative_to(REPO) else out
            print(f"{name}  {out.stat().st_size:>8} bytes  (report {report.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
