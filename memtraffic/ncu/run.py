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

import contextlib
import gzip
import hashlib
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from memtraffic.core.errors import ReportError
from memtraffic.core.files import cache_dir, write_bytes_atomic
from memtraffic.core.rundir import partial_reports_expected
from memtraffic.core.timings import TIMINGS_FILE
from memtraffic.ncu.metrics import METRICS
from memtraffic.ncu.report import REPORT_SUFFIX, check_report_file, check_rows, read_json, read_rows
from memtraffic.ncu.source import LINES_VERSION

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
    _check_plan(plan, folder / "plan.json")
    listed = (meta or {}).get("reports")
    if listed is not None and not (isinstance(listed, list) and all(isinstance(r, str) for r in listed)):
        raise ReportError(f"{folder / 'run.json'}: 'reports' is not a list of file names: the run folder is "
                          "damaged")
    if path.is_dir():
        reports = [folder / r for r in listed] if listed else sorted(folder.glob("*" + REPORT_SUFFIX))
        if not reports and (folder / TIMINGS_FILE).is_file():  # a timing-only run (memtraffic.core.timings)
            reports = [folder / TIMINGS_FILE]
        return Run(path, folder.name or folder.resolve().name, folder, plan, meta, reports)
    if plan is None:
        return Run(path, path.name.removesuffix(REPORT_SUFFIX), None, None, None, [path])
    return Run(path, folder.name or folder.resolve().name, folder, plan, meta, [path])


def _check_plan(plan: dict[str, Any] | None, where: Path) -> None:
    """ReportError unless the plan's configs are a list of objects that each name their range."""
    configs = (plan or {}).get("configs", [])
    ok = isinstance(configs, list) and all(isinstance(c, dict) and isinstance(c.get("range"), str)
                                           for c in configs)
    if not ok:
        raise ReportError(f"{where}: 'configs' is not a list of configs that each name their 'range': "
                          "the run folder is damaged")


# --- tables kept per report ---------------------------------------------------------------------------------
# A table is a gzip'd JSON object: format, the report's SHA-256, a version (what its content depends on:
# for the kernel table the metric table), and its own keys. A table that does not match is not used.


def table_path(report: Path, kind: str = "kernels") -> Path:
    """Where a report's table is kept in a run folder: beside it, <name>.<kind>.json.gz."""
    return report.with_name(f"{report.name.removesuffix(REPORT_SUFFIX)}.{kind}.json.gz")


def cached_table_path(digest: str, kind: str = "kernels") -> Path:
    """Where a report's table is kept for a report in no run folder of ours: the user cache."""
    return cache_dir() / "reports" / f"{digest}.{kind}.json.gz"


def file_digest(path: Path) -> str:
    """SHA-256 of the file's content: what a table is kept for."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _encode(doc: dict[str, Any]) -> bytes:
    return gzip.compress(json.dumps(doc, separators=(",", ":")).encode(), compresslevel=6, mtime=0)


def _read_stored(path: Path, digest: str, version: Any) -> dict[str, Any] | None:
    """The table at path if it is one for this report content and version, else None (damaged or stale)."""
    try:
        doc = json.loads(gzip.decompress(path.read_bytes()))
    except (OSError, EOFError, ValueError):
        return None
    if (not isinstance(doc, dict) or doc.get("format") != TABLE_FORMAT or doc.get("report_sha256") != digest
            or doc.get("version") != version):
        return None
    return doc


def _keep(path: Path, data: bytes) -> None:
    """Keep a table in the cache; a cache that cannot be written (read-only home) only costs a re-read."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(path, data)
    except OSError:
        pass


def keep_beside(report: Path, kind: str, doc: dict[str, Any]) -> Path:
    """Write a table of the report beside it (table_path), atomically."""
    out = table_path(report, kind)
    write_bytes_atomic(out, _encode(doc))
    return out


def stored_table(report: str | Path, kind: str, version: Any,
                 make: Callable[[Path], dict[str, Any]]) -> dict[str, Any]:
    """A table of the report: the one beside it, else the one in the user cache, else make(report) (which
    reads the report) kept in the cache. `version` is JSON that changes whenever make's output would."""
    report = Path(report)
    check_report_file(report)
    digest = file_digest(report)
    for stored in (table_path(report, kind), cached_table_path(digest, kind)):
        if stored.is_file() and (doc := _read_stored(stored, digest, version)) is not None:
            return doc
    doc = {"format": TABLE_FORMAT, "report_sha256": digest, "version": version, **make(report)}
    _keep(cached_table_path(digest, kind), _encode(doc))
    return doc


# --- the kernel table ---------------------------------------------------------------------------------------


@dataclass
class KernelTable:
    """One report's launches (read_report's rows) and whether any has per-line counters."""

    kernels: pd.DataFrame
    source_counters: bool


def _kernels_version() -> dict[str, Any]:
    """What a kernel table depends on: each alias's ncu forms, and how per-line counters are read."""
    return {"metrics": {alias: [str(f) for f in m.forms] for alias, m in METRICS.items()},
            "lines": LINES_VERSION}


def _kernels_doc(report: Path) -> dict[str, Any]:
    """The report read once, as column lists (NaN as null; metric aliases no launch has are left out),
    with the measured lines of the launches that have per-line counters."""
    rows, damaged, lines = read_rows(report)
    columns: dict[str, list[Any]] = {}
    for col in _INFO_COLUMNS + list(METRICS):
        values = [None if isinstance(v, float) and math.isnan(v) else v for v in (r[col] for r in rows)]
        if col not in METRICS or any(v is not None for v in values):
            columns[col] = values
    return {"rows": len(rows), "damaged": damaged, "columns": columns, "lines": lines,
            "launches": len(rows) + len(damaged)}


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


def kernel_table(report: str | Path, allow_partial: bool = False) -> KernelTable:
    """The report's kernel table (see stored_table): the same rows and errors as read_report."""
    report = Path(report)
    doc = stored_table(report, "kernels", _kernels_version(), _kernels_doc)
    check_rows(report, doc["rows"], doc["damaged"], allow_partial)
    return KernelTable(_frame(doc, report), bool(doc["lines"]))


def measured_lines_of(report: Path) -> tuple[list[dict[str, Any]], int]:
    """(the launches with per-line counters, each with its launch number, range, kernel and measured lines;
    how many launches the report holds), from the report's table (see kernel_table)."""
    doc = stored_table(report, "kernels", _kernels_version(), _kernels_doc)
    return doc["lines"], doc["launches"]


def write_kernel_table(report: Path, copy_of: Path | None = None) -> Path:
    """Keep the report's kernel table beside it (measure, profile and merge, in the run folder they make):
    the table of `copy_of` (a report with the same content) when it is valid, else kernel_table's.
    ReportError when the report cannot be read, or holds no kernel (nothing is written then)."""
    report = Path(report)
    out = table_path(report)
    if copy_of is not None:
        source = table_path(copy_of)
        if source.is_file() and _read_stored(source, file_digest(report), _kernels_version()) is not None:
            write_bytes_atomic(out, source.read_bytes())
            return out
    doc = stored_table(report, "kernels", _kernels_version(), _kernels_doc)
    check_rows(report, doc["rows"], [], allow_partial=True)  # EmptyReportError: no table of nothing
    return keep_beside(report, "kernels", doc)


def keep_kernel_tables(reports: Sequence[Path]) -> None:
    """A table beside each report that can be read (measure and profile, once ncu has finished); a report
    that cannot is left for the analysis to name."""
    for report in reports:
        with contextlib.suppress(ReportError):
            write_kernel_table(report)
