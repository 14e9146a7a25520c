"""The one run loader, and a report read once.

`load_run(path)` takes a run folder (from `memtraffic measure`, `profile` or `merge`) or any .ncu-rep
and gives a Run: its name, plan.json, run.json and report paths. Every command that reads runs goes
through it.

`kernel_table(report)` is the report's per-kernel table (the rows of report.read_report). Opening a
.ncu-rep costs ncu_report's whole load, so the table is kept after the first read, in a compact
gzip'd JSON file that holds the report's SHA-256:
- beside the report, as <name>.kernels.json.gz, written by measure, profile and merge into the run
  folder they make (and committed with the reference runs);
- else in the per-user cache, $MEMTRAFFIC_CACHE (or $XDG_CACHE_HOME, ~/.cache)/memtraffic/reports/
  <sha256>.json.gz, so any other report is read once too without writing into its folder.
A table whose hash, format or metric table does not match is ignored and the report read again.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from memtraffic.core.errors import ReportError
from memtraffic.core.rundir import cache_dir, partial_reports_expected, write_bytes_atomic
from memtraffic.ncu.metrics import METRICS
from memtraffic.ncu.report import REPORT_SUFFIX, check_report_file, check_rows, read_json, read_rows

TABLE_SUFFIX = ".kernels.json.gz"
TABLE_FORMAT = 1
# Columns of a kernel table besides the metric aliases, in read_report's order ('report' is the path
# the table is read for, so it is added on reading, never stored).
_INFO_COLUMNS = ["launch", "range", "nvtx", "kernel", "kernel_full", "grid_size", "block_size", "device",
                 "passes"]


@dataclass
class Run:
    """A run folder or a lone report: what every reader needs of it."""

    path: Path  # as given
    name: str  # the folder's name, or the report's name without .ncu-rep
    folder: Path | None  # the run folder (a report's own folder when it holds a plan.json)
    plan: dict[str, Any] | None
    meta: dict[str, Any] | None  # run.json
    reports: list[Path] = field(default_factory=list)

    @property
    def partial(self) -> bool:
        """True when the run was interrupted or its runner crashed: a damaged last launch is dropped."""
        return partial_reports_expected(self.meta or {})

    def kernels(self) -> pd.DataFrame:
        """Every report's kernel table, stacked (see kernel_table)."""
        frames = [kernel_table(r, self.partial).kernels for r in self.reports]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def load_run(path: str | Path) -> Run:
    """A run folder or a .ncu-rep -> Run. ReportError when the path does not exist or a JSON file of the
    folder is damaged. A folder's reports are those its run.json lists, else every .ncu-rep in it (the
    list may be empty: `analyze` then says so, `merge` and `measure --rerun` check what they need).
    A report inside one of our run folders gets that folder's plan, so ranges map to variants."""
    path = Path(path)
    if not path.exists():
        raise ReportError(f"{path}: no such file or folder")
    folder = path if path.is_dir() else path.parent
    plan = read_json(folder / "plan.json")
    meta = read_json(folder / "run.json")
    for name, data in (("plan.json", plan), ("run.json", meta)):
        if data is not None and not isinstance(data, dict):
            raise ReportError(f"{folder / name} holds a {type(data).__name__}, not an object: "
                              "the run folder is damaged")
    if path.is_dir():
        listed = (meta or {}).get("reports")
        reports = [folder / r for r in listed] if listed else sorted(folder.glob("*" + REPORT_SUFFIX))
        return Run(path, folder.name or folder.resolve().name, folder, plan, meta, reports)
    if plan is None:
        return Run(path, path.name.removesuffix(REPORT_SUFFIX), None, None, None, [path])
    return Run(path, folder.name or folder.resolve().name, folder, plan, meta, [path])


# --- the kernel table --------------------------------------------------------------------------------------


@dataclass
class KernelTable:
    """One report's launches (read_report's rows) and whether any has per-line counters."""

    kernels: pd.DataFrame
    source_counters: bool


def table_path(report: Path) -> Path:
    """Where measure, profile and merge keep a report's table: beside it, <name>.kernels.json.gz."""
    return report.with_name(report.name.removesuffix(REPORT_SUFFIX) + TABLE_SUFFIX)


def cached_table_path(digest: str) -> Path:
    return cache_dir() / "reports" / f"{digest}.json.gz"


def file_digest(path: Path) -> str:
    """SHA-256 of the file's content: what a table is kept for."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _metric_names() -> dict[str, str]:
    return {alias: m.ncu for alias, m in METRICS.items()}


def _encode(rows: list[dict[str, Any]], damaged: list[str], source: bool, digest: str, size: int) -> bytes:
    # Column lists, NaN as null, and the metric aliases no launch has left out: a few hundred bytes a kernel.
    columns: dict[str, list[Any]] = {}
    for col in _INFO_COLUMNS + list(METRICS):
        values = [r[col] for r in rows]
        clean = [None if isinstance(v, float) and math.isnan(v) else v for v in values]
        if col in METRICS and all(v is None for v in clean):
            continue
        columns[col] = clean
    doc = {"format": TABLE_FORMAT, "report_sha256": digest, "report_bytes": size, "metrics": _metric_names(),
           "damaged": damaged, "source_counters": source, "rows": len(rows), "columns": columns}
    return gzip.compress(json.dumps(doc, separators=(",", ":")).encode(), compresslevel=6, mtime=0)


def _decode(data: bytes, digest: str) -> dict[str, Any] | None:
    """The table document if it is one for this report and this metric table, else None (recompute)."""
    try:
        doc = json.loads(gzip.decompress(data))
    except (OSError, EOFError, ValueError):
        return None
    if (not isinstance(doc, dict) or doc.get("format") != TABLE_FORMAT or doc.get("report_sha256") != digest
            or doc.get("metrics") != _metric_names() or not isinstance(doc.get("columns"), dict)):
        return None
    return doc


def _frame(doc: dict[str, Any], report: Path) -> pd.DataFrame:
    """The stored columns as read_report's DataFrame (same columns, order and dtypes)."""
    n = doc["rows"]
    cols = doc["columns"]
    data: dict[str, Any] = {"report": [str(report)] * n}
    for col in _INFO_COLUMNS:
        data[col] = cols[col]
    for alias in METRICS:
        data[alias] = cols.get(alias, [None] * n)
    df = pd.DataFrame(data)
    for col in ["passes", *METRICS]:
        df[col] = df[col].astype(float)
    return df


def _read_stored(path: Path, digest: str) -> dict[str, Any] | None:
    try:
        return _decode(path.read_bytes(), digest)
    except OSError:
        return None


def kernel_table(report: str | Path, allow_partial: bool = False) -> KernelTable:
    """The report's kernel table: from the table beside it, else the user cache, else the report itself
    (then kept in the cache). The same rows and errors as read_report."""
    report = Path(report)
    check_report_file(report)
    digest = file_digest(report)
    doc = None
    for stored in (table_path(report), cached_table_path(digest)):
        doc = _read_stored(stored, digest) if stored.is_file() else None
        if doc is not None:
            break
    if doc is None:
        rows, damaged, source = read_rows(report)
        data = _encode(rows, damaged, source, digest, report.stat().st_size)
        if rows:  # a report without kernels is cheap to read again, and its message names the file
            _keep(cached_table_path(digest), data)
        doc = _decode(data, digest)
        assert doc is not None
    check_rows(report, doc["rows"], doc["damaged"], allow_partial)
    return KernelTable(_frame(doc, report), bool(doc["source_counters"]))


def _keep(path: Path, data: bytes) -> None:
    """Keep a table in the cache; a cache that cannot be written (read-only home) only costs a re-read."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(path, data)
    except OSError:
        pass


def write_kernel_table(report: Path, copy_of: Path | None = None) -> Path:
    """Keep the report's table beside it (measure, profile and merge, in the run folder they make): the
    table of `copy_of` (a report with the same content) or the cached one when either is valid, else
    the report read once. ReportError when it cannot be read, or holds no kernel (nothing is written)."""
    report = Path(report)
    check_report_file(report)
    digest = file_digest(report)
    out = table_path(report)
    for stored in ([table_path(copy_of)] if copy_of else []) + [cached_table_path(digest)]:
        if stored.is_file() and (doc := _read_stored(stored, digest)) is not None and doc["rows"]:
            write_bytes_atomic(out, stored.read_bytes())
            return out
    rows, damaged, source = read_rows(report)
    check_rows(report, len(rows), [], allow_partial=True)  # EmptyReportError: no table of nothing
    write_bytes_atomic(out, _encode(rows, damaged, source, digest, report.stat().st_size))
    return out
