"""A committed report's own bytes: the reports under reports/ are xz-compressed in place
(scripts/make_kernel_tables.py), and a test that cuts a report as ncu would leave it cuts its content."""

from __future__ import annotations

import lzma
from pathlib import Path

from memtraffic.ncu.report import is_compressed


def report_bytes(report: Path) -> bytes:
    """The report's content: decompressed when it is xz-compressed, else the file as it is."""
    data = report.read_bytes()
    return lzma.decompress(data) if is_compressed(report) else data
