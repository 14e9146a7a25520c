""".ncu-rep -> tidy pandas DataFrame, one row per profiled kernel launch, metrics under their aliases.

Reports are read with NVIDIA's `ncu_report` module: the `ncu-report` package if installed, else the
copy in an Nsight Compute install (`<ncu>/extras/python`). No GPU and no ncu are needed for the package.
ncu_report loads a junk file as a report with zero ranges and a truncated one with a last launch
that has no name and no metrics, so both are checked here and become ReportErrors.
"""

from __future__ import annotations

import contextlib
import glob
import importlib
import lzma
import os
import re
import shutil
import sys
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, TypedDict

import pandas as pd

from memtraffic.ncu.metrics import (
    DEVICE_NAME,
    LAUNCH_BLOCK,
    LAUNCH_GRID,
    LAUNCH_STATS,
    METRICS,
    REPLAY_PASSES,
    Metric,
)
from memtraffic.ncu.source import MeasuredLine, measured_lines
from memtraffic.vocab.configs import RANGE_PREFIX
from memtraffic.vocab.errors import ReportError
from memtraffic.vocab.files import require_file

REPORT_SUFFIX = ".ncu-rep"
_DEFAULT_DOMAIN = "<default domain>"

# Metric columns in the launch table (ncu name -> alias); units say which can be summed over kernels.
ADDITIVE_UNITS = {"ns", "byte", "sector", "request", "inst", "op"}

_ncu_report: ModuleType | None = None


class MeasuredLaunch(TypedDict):
    """A launch with per-line counters: its launch number, range, kernel and its lines (rows of
    memtraffic.ncu.source.measured_lines)."""

    launch: int
    range: str
    kernel: str
    lines: list[MeasuredLine]


class EmptyReportError(ReportError):
    """The file loads but holds no kernel: junk, cut before the first kernel, or filters matched nothing."""


def _extras_dirs() -> list[Path]:
    """Nsight Compute installs' extras/python folders, those of the ncu we would run first."""
    dirs: list[Path] = []
    ncus = [os.environ.get("MEMTRAFFIC_NCU"), shutil.which("ncu"), "/usr/local/cuda/bin/ncu"]
    for ncu in filter(None, ncus):
        path = Path(ncu).resolve()
        dirs += [path.parent / "extras" / "python", path.parent.parent / "extras" / "python"]
    installs = ("/opt/nvidia/nsight-compute/*/extras/python",
                "/usr/local/cuda*/nsight-compute*/extras/python")
    for pattern in installs:
        dirs += sorted((Path(p) for p in glob.glob(pattern)), reverse=True)
    return list(dict.fromkeys(d for d in dirs if (d / "ncu_report.py").is_file()))


def import_ncu_report() -> ModuleType:
    """The ncu_report module: the pip package, else an Nsight Compute install's extras/python copy."""
    global _ncu_report
    if _ncu_report is not None:
        return _ncu_report
    try:
        _ncu_report = importlib.import_module("ncu_report")
        return _ncu_report
    except ImportError:
        pass
    for folder in _extras_dirs():
        sys.path.insert(0, str(folder))
        try:
            sys.modules.pop("ncu_report", None)
            _ncu_report = importlib.import_module("ncu_report")
            return _ncu_report
        except ImportError:
            sys.path.remove(str(folder))
    raise ReportError(
        "cannot read .ncu-rep files: the ncu_report module is missing; `pip install ncu-report`, or install "
        "Nsight Compute (its extras/python folder has ncu_report.py; set MEMTRAFFIC_NCU to its ncu)"
    )


# ncu's range replay (--replay-mode range) names each result "range" (ncu 2025.3.1): it holds the summed
# counters of every kernel launched between the range's push and pop. Its row's kernel is RANGE_KERNEL.
RANGE_RESULT_NAME = "range"
RANGE_KERNEL = "(range replay)"


def _range_stack(action: Any) -> list[str]:
    """The NVTX ranges the launch happened in, outermost first; non-default domains as 'domain:range'."""
    state = action.nvtx_state()
    if state is None:
        return []
    stack: list[str] = []
    for domain_id in state.domains():
        domain = state.domain_by_id(domain_id)
        name = domain.name()
        prefix = "" if name in (None, "", _DEFAULT_DOMAIN) else f"{name}:"
        ranges = list(domain.push_pop_ranges()) or list(domain.start_end_ranges())
        stack += [prefix + r for r in ranges]
    return stack


def range_label(stack: list[str]) -> str:
    """Our own 'mt|...' range (innermost) when there is one, else the whole stack joined by ' / '."""
    ours = [r for r in stack if r.startswith(RANGE_PREFIX)]
    return ours[-1] if ours else " / ".join(stack)


def _value(action: Any, name: str) -> Any:
    metric = action.metric_by_name(name)
    return None if metric is None else metric.value()


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


def alias_value(action: Any, metric: Metric) -> float:
    """The alias's value in this launch: its first form whose ncu names the report holds (a GPU other
    than the H100 collects another name, a sum, or sectors x 32), NaN when none is there."""
    for form in metric.forms:
        values = [_number(_value(action, name)) for name in form.names]
        if all(v == v for v in values):  # NaN != NaN: a name the report lacks
            return sum(values) * form.scale
    return float("nan")


def check_report_file(path: Path) -> None:
    """ReportError unless the path is a non-empty regular file (a FIFO is named, never opened)."""
    if not require_file(path, "give a .ncu-rep report or a run folder"):
        raise ReportError(f"{path}: no such report file")
    if path.stat().st_size == 0:
        raise ReportError(f"{path} is empty (0 bytes): not an Nsight Compute report")


# The committed reference reports are xz-compressed in place (ncu embeds each kernel's cubin, which xz
# shrinks 10-300x): a report that starts with xz's magic is read through a decompressed copy.
XZ_MAGIC = b"\xfd7zXZ\x00"


def is_compressed(path: Path) -> bool:
    """Whether the report file is xz-compressed (see XZ_MAGIC)."""
    with open(path, "rb") as f:
        return f.read(len(XZ_MAGIC)) == XZ_MAGIC


@contextlib.contextmanager
def _plain_report(path: Path) -> Iterator[Path]:
    """The report itself, or for an xz-compressed one a decompressed copy in a temporary folder, there until
    the block ends (ncu_report reads the file as launches are touched, not all when it loads it)."""
    if not is_compressed(path):
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="memtraffic-") as tmp:
        plain = Path(tmp) / path.name
        try:
            with lzma.open(path) as packed, open(plain, "wb") as out:
                shutil.copyfileobj(packed, out, 1 << 20)
        except (lzma.LZMAError, EOFError) as err:
            raise ReportError(f"{path} is a damaged xz-compressed report ({err}): copy it again") from None
        yield plain


@contextlib.contextmanager
def load_ncu_report(path: str | Path) -> Iterator[Any]:
    """The report object of ncu_report, to be read inside the block (an xz-compressed report is read as its
    content); ReportError when the file is missing, empty or unreadable."""
    path = Path(path)
    check_report_file(path)
    ncu_report = import_ncu_report()
    with _plain_report(path) as plain:
        try:
            with _native_noise_dropped():
                report = ncu_report.load_report(str(plain))
        except Exception as err:  # the module raises assorted types for unreadable files
            raise ReportError(f"{path} cannot be read as an Nsight Compute report: {err}") from None
        yield report


# What ncu_report's native code logs to the process's stderr on a report cut inside a launch (its protobuf
# parser's "Can't parse message ... missing required fields", after an absl preamble): the damage is
# said by check_rows in one line, so these lines are dropped; anything else it writes is passed on.
_NATIVE_NOISE = re.compile(r"^(WARNING: All log messages before absl::InitializeLog|E\d{4} .*\] Can't parse "
                           r"message of type)")


@contextlib.contextmanager
def _native_noise_dropped() -> Iterator[None]:
    """File descriptor 2 goes to a temporary file while the block runs; its lines, less _NATIVE_NOISE,
    are written back to stderr afterwards."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no real stderr (an embedding host): nothing to filter
        yield
        return
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            kept = [line for line in sink.read().decode(errors="replace").splitlines()
                    if not _NATIVE_NOISE.match(line)]
            if kept:
                print("\n".join(kept), file=sys.stderr, flush=True)


def read_rows(path: str | Path) -> tuple[list[dict[str, object]], list[int], list[MeasuredLaunch]]:
    """(one dict per kernel launch, the damaged launches (no name or metrics: dropped), the launches with
    per-line counters: launch, range, kernel and their lines as memtraffic.ncu.source.measured_lines
    reads them). The rows are read_report's without its 'report' column. One pass over the report:
    ncu_report materializes each launch when it is first touched, so it is touched once (and what its
    native code logs about a damaged launch then is dropped: the damage is returned)."""
    with load_ncu_report(path) as report, _native_noise_dropped():
        return _read_rows(report)


def _read_rows(report: Any) -> tuple[list[dict[str, object]], list[int], list[MeasuredLaunch]]:
    rows: list[dict[str, object]] = []  # info columns and one per metric alias (METRICS)
    damaged: list[int] = []
    with_lines: list[MeasuredLaunch] = []
    launch = 0
    for i in range(report.num_ranges()):
        rng = report.range_by_idx(i)
        for j in range(rng.num_actions()):
            action = rng.action_by_idx(j)
            name = action.name()
            if not name or not action.metric_names():
                damaged.append(launch)
                launch += 1
                continue
            stack = _range_stack(action)
            try:
                full = action.name(action.NameBase_DEMANGLED)
            except Exception:  # older ncu_report versions take no argument
                full = name
            ranged = name == RANGE_RESULT_NAME  # one result for all the kernels of a range
            if ranged:
                name = full = RANGE_KERNEL
            label = range_label(stack)
            row: dict[str, object] = {
                "launch": launch,
                "range": label,
                "nvtx": " / ".join(stack),
                "kernel": name,
                "kernel_full": full,
                # a range's launch__* values are one of its kernels': not the range's
                "grid_size": None if ranged else _value(action, LAUNCH_GRID),
                "block_size": None if ranged else _value(action, LAUNCH_BLOCK),
                "device": _value(action, DEVICE_NAME) or "",
                "passes": _number(_value(action, REPLAY_PASSES)),
            }
            for column, stat in LAUNCH_STATS.items():
                row[column] = _number(_value(action, stat))
            for alias, metric in METRICS.items():
                row[alias] = alias_value(action, metric)
            lines = measured_lines(action)
            if lines:
                with_lines.append({"launch": launch, "range": label, "kernel": name, "lines": lines})
            rows.append(row)
            launch += 1
    return rows, damaged, with_lines


def check_rows(path: str | Path, n_rows: int, damaged: list[int], allow_partial: bool) -> None:
    """ReportError for a report without kernels, or with a damaged launch unless allow_partial (a run that
    was interrupted: then each damaged launch is a warning, and dropped)."""
    messages = [f"{path} is truncated or damaged: kernel launch #{n} has no name or metrics" for n in damaged]
    if messages and not allow_partial:
        raise ReportError(messages[0])
    for msg in messages:
        warnings.warn(msg + " (dropped)", stacklevel=3)
    if not n_rows:
        raise EmptyReportError(
            f"{path} holds no profiled kernel: it is not an Nsight Compute report, it is truncated, "
            "or ncu's filters matched no kernel"
        )


def read_report(path: str | Path, allow_partial: bool = False) -> pd.DataFrame:
    """One row per kernel launch: report, launch, range, kernel, kernel_full, grid/block size, device,
    passes, and a float column per alias of memtraffic.ncu.metrics (NaN when the report lacks that metric).

    ReportError when the file is missing, empty, not a report, truncated or holds no kernel. With
    allow_partial (a run that was interrupted), a damaged launch is dropped with a warning instead.
    This opens the report itself; memtraffic.ncu.kernel_table reads it once and keeps a table.
    """
    rows, damaged, _ = read_rows(path)
    check_rows(path, len(rows), damaged, allow_partial)
    table: pd.DataFrame = pd.DataFrame([{"report": str(path), **r} for r in rows])
    return table
