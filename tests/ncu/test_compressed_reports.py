"""The committed reports are xz-compressed in place (scripts/make_kernel_tables.py): reading one gives what
its decompressed content gives, and a damaged one is a ReportError, never a report with fewer launches."""

from __future__ import annotations

import json
import lzma
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memtraffic.ncu.report import XZ_MAGIC, is_compressed, read_rows
from memtraffic.vocab.errors import ReportError

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "reports" / "h100" / "plain_ncu_triton_source" / "profile.ncu-rep"  # with per-line counters


def _tracked_reports() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "*.ncu-rep"], cwd=REPO, capture_output=True, text=True)
    return [REPO / line for line in out.stdout.splitlines()]


def test_every_committed_report_is_compressed():
    reports = _tracked_reports()
    if not reports:
        pytest.skip("not a git checkout")
    assert [r for r in reports if not is_compressed(r)] == [], "run scripts/make_kernel_tables.py"


def test_a_compressed_report_reads_as_its_content(tmp_path):
    plain = tmp_path / "plain.ncu-rep"
    plain.write_bytes(lzma.decompress(SOURCE.read_bytes()))
    assert not is_compressed(plain)
    rows, damaged, lines = read_rows(SOURCE)
    assert json.dumps([rows, damaged, lines]) == json.dumps(read_rows(plain))  # NaN written as NaN
    assert rows and not damaged and lines  # launches, none damaged, per-line counters


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.floats(min_value=0.0, max_value=0.999))
def test_a_cut_compressed_report_is_one_clear_error(tmp_path, cut):
    data = SOURCE.read_bytes()
    damaged = tmp_path / "cut.ncu-rep"
    damaged.write_bytes(data[:max(len(XZ_MAGIC), int(len(data) * cut))])
    with pytest.raises(ReportError, match=r"cut\.ncu-rep is a damaged xz-compressed report \(.+\): copy it"):
        read_rows(damaged)
