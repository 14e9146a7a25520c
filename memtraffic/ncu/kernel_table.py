"""A report read once: its per-kernel table, kept beside it or in the user cache.

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
from typing import TypedDict, cast

import pandas as pd

from memtraffic.host.cache import cache_dir, cache_unusable
from memtraffic.ncu.metrics import LAUNCH_STATS, METRICS
from memtraffic.ncu.report import REPORT_SUFFIX, MeasuredLaunch, check_report_file, check_rows, read_rows
from memtraffic.ncu.source import LINES_VERSION
from memtraffic.vocab.errors import ReportError
from memtraffic.vocab.files import os_error_line, write_bytes_atomic

TABLE_FORMAT = 1


class KernelTableBody(TypedDict):
    """What _kernels_doc reads from a report: launch rows as column lists (NaN as null), the damaged
    launches, the launches with per-line counters (read_rows' third part) and how many launches in all."""

    rows: int
    damaged: list[int]
    columns: dict[str, list[object]]
    lines: list[MeasuredLaunch]
    launches: int


class KernelTableDoc(KernelTableBody):
    """The stored table (<report>.kernels.json.gz): the body, with the report content and the version
    (JSON of what the reading depends on) it was made for."""

    format: int
    report_sha256: str
    version: object
# Columns of a kernel table besides the metric aliases, in read_report's order ('report' is the path
# the table is read for, so it is added on reading, never stored).
_INFO_COLUMNS = ["launch", "range", "nvtx", "kernel", "kernel_full", "grid_size", "block_size", "device",
                 "passes", *LAUNCH_STATS]


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
    digest = hashlib.sha256()  # hashlib.file_digest is Python >= 3.11
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _encode(doc: KernelTableDoc) -> bytes:
    return gzip.compress(json.dumps(doc, separators=(",", ":")).encode(), compresslevel=6, mtime=0)


def _read_stored(path: Path, digest: str, version: object, kind: str = "kernels", cached: bool = False
                 ) -> KernelTableDoc | None:
    """The table at path if it is one for this report content and version, else None (damaged or stale).
    A kernel table of this content whose fields are damaged is a ReportError beside a report (a run
    folder's file), and ignored in the user cache (made again)."""
    try:
        doc = json.loads(gzip.decompress(path.read_bytes()))
    except (OSError, EOFError, ValueError):
        return None
    if (not isinstance(doc, dict) or doc.get("format") != TABLE_FORMAT or doc.get("report_sha256") != digest
            or doc.get("version") != version):
        return None
    if kind == "kernels" and (found := _table_problem(doc)):
        if cached:
            return None
        raise ReportError(f"{path}: {found}: the table is damaged; delete it and the report is read again")
    return cast(KernelTableDoc, doc)  # its shape checked by _table_problem


def _table_problem(doc: dict[str, object]) -> str | None:
    """Where a kernel table (a doc of _kernels_doc) departs from its shape, or None."""
    rows = doc.get("rows")
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 0:
        return "rows is not a count"
    damaged = doc.get("damaged")
    if not isinstance(damaged, list):
        return "damaged is not a list"
    if not isinstance(doc.get("lines"), list):
        return "lines is not a list"
    if not all(isinstance(n, int) for n in damaged):
        return "damaged is not a list of launch numbers"
    if not isinstance(doc.get("launches"), int):
        return "launches is not a count"
    columns = doc.get("columns")
    if not isinstance(columns, dict):
        return "columns is not an object"
    for col in _INFO_COLUMNS:
        if col not in columns:
            return f"columns.{col} is missing"
    for col, values in columns.items():
        if not isinstance(values, list) or len(values) != rows:
            return f"columns.{col} does not hold one value per row ({rows} rows)"
    for col in ("range", "nvtx", "kernel", "kernel_full", "device"):
        if not all(isinstance(v, str) for v in columns[col]):
            return f"columns.{col} holds a value that is not text"
    for col in ("launch", "passes", *LAUNCH_STATS, *METRICS):
        if any(v is not None and (isinstance(v, bool) or not isinstance(v, int | float))
               for v in columns.get(col, [])):
            return f"columns.{col} holds a value that is not a number"
    return None


def _cached(path: Path) -> bool:
    """Whether the cache holds a file at path; a cache folder that cannot be searched holds none."""
    try:
        return path.is_file()
    except OSError as err:  # EACCES: a folder without search permission
        cache_unusable(os_error_line(err))
        return False


def _keep(path: Path, data: bytes) -> None:
    """Keep a table in the cache; a cache that cannot be written (read-only, full, not a folder) only costs
    a re-read, said once."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(path, data)
    except OSError as err:
        cache_unusable(os_error_line(err))


def keep_beside(report: Path, kind: str, doc: KernelTableDoc) -> Path:
    """Write a table of the report beside it (table_path), atomically."""
    out = table_path(report, kind)
    write_bytes_atomic(out, _encode(doc))
    return out


def stored_table(report: str | Path, kind: str, version: object,
                 make: Callable[[Path], KernelTableBody]) -> KernelTableDoc:
    """A table of the report: the one beside it, else the one in the user cache, else make(report) (which
    reads the report) kept in the cache. `version` is JSON that changes whenever make's output would."""
    report = Path(report)
    check_report_file(report)
    digest = file_digest(report)
    for stored, cached in ((table_path(report, kind), False), (cached_table_path(digest, kind), True)):
        found = _cached(stored) if cached else stored.is_file()
        if found and (doc := _read_stored(stored, digest, version, kind, cached)) is not None:
            return doc
    made: KernelTableDoc = {"format": TABLE_FORMAT, "report_sha256": digest, "version": version,
                            **make(report)}
    _keep(cached_table_path(digest, kind), _encode(made))
    return made


# --- the kernel table ---------------------------------------------------------------------------------------


@dataclass
class KernelTable:
    """One report's launches (read_report's rows), whether any has per-line counters, and the launches
    that were damaged (a report cut short: no name or metrics; dropped from `kernels`)."""

    kernels: pd.DataFrame
    source_counters: bool
    damaged: list[int] = field(default_factory=list)


def _kernels_version() -> dict[str, object]:
    """What a kernel table depends on: each alias's ncu forms, and how per-line counters are read."""
    return {"metrics": {alias: [str(f) for f in m.forms] for alias, m in METRICS.items()},
            "launch": LAUNCH_STATS, "lines": LINES_VERSION}


def _kernels_doc(report: Path) -> KernelTableBody:
    """The report read once, as column lists (NaN as null; metric aliases no launch has are left out),
    with the measured lines of the launches that have per-line counters."""
    rows, damaged, lines = read_rows(report)
    columns: dict[str, list[object]] = {}
    for col in _INFO_COLUMNS + list(METRICS):
        values = [None if isinstance(v, float) and math.isnan(v) else v for v in (r[col] for r in rows)]
        if col not in METRICS or any(v is not None for v in values):
            columns[col] = values
    return {"rows": len(rows), "damaged": damaged, "columns": columns, "lines": lines,
            "launches": len(rows) + len(damaged)}


def _frame(doc: KernelTableBody, report: Path) -> pd.DataFrame:
    """The stored columns as read_report's DataFrame (same columns, order and dtypes)."""
    n = doc["rows"]
    cols = doc["columns"]
    data: dict[str, list[object]] = {"report": [str(report)] * n}
    for col in _INFO_COLUMNS:
        data[col] = cols[col]
    for alias in METRICS:
        data[alias] = cols.get(alias, [None] * n)
    df: pd.DataFrame = pd.DataFrame(data)  # (the stubs' constructor is Any under Python 3.10)
    for col in ["passes", *LAUNCH_STATS, *METRICS]:
        df[col] = df[col].astype(float)
    return df


def kernel_table(report: str | Path, allow_partial: bool = False) -> KernelTable:
    """The report's kernel table (see stored_table): the same rows and errors as read_report, except
    that with allow_partial the damaged launches are returned (`damaged`) for the caller to name."""
    report = Path(report)
    doc = stored_table(report, "kernels", _kernels_version(), _kernels_doc)
    check_rows(report, doc["rows"], [] if allow_partial else doc["damaged"], allow_partial)
    return KernelTable(_frame(doc, report), bool(doc["lines"]), list(doc["damaged"]))


def measured_lines_of(report: Path) -> tuple[list[MeasuredLaunch], int]:
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
