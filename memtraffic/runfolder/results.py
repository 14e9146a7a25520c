"""A saved table (a run folder's results.json, or `memtraffic analyze --format json` output), read and checked
here and nowhere else: `report` renders it when the reports are gone, `diff` compares it.

Each row is an object; the fields every reader indexes or adds up are checked: names are strings, a
range's kernels a list of strings, and every count, byte total, time, efficiency or bandwidth is null or
a number from 0 to below 2**63 (an efficiency or amplification is a ratio of two byte counts that are,
the measured one at least 1 byte; a bandwidth below 2**63 bytes a nanosecond; an op's minimum at most
units.OP_BYTES_LIMIT, more than any GPU holds). A row that departs is one ReportError naming the file,
the row and the field.
"""

from __future__ import annotations

from pathlib import Path

from memtraffic.vocab.errors import ReportError
from memtraffic.vocab.files import read_json
from memtraffic.vocab.units import LIMIT, OP_BYTES_LIMIT, fmt_bytes

TEXT = ("run", "range", "variant", "op", "shape", "dtype", "device", "diagnosis", "status")
MINIMUMS = ("min_read_bytes", "min_write_bytes", "min_bytes")
COUNTS = ("time_ns", "fadd", "fmul", "ffma", "hw_flops", "model_flops", "n_kernels", "calls", "passes")
RATIOS = ("eff_", "amp_", "sector_eff_", "bw_")  # prefixes: efficiencies, amplifications, bandwidths
BANDWIDTH = "bw_"


def _is_count(key: str) -> bool:
    """A column that is bytes, a count or a time (never negative, below 2**63). excess_bytes (measured less
    the minimum, per op type) is negative where a cache hid bytes: not one."""
    return key in COUNTS or (key.endswith("_bytes") and key != "excess_bytes")


def row_problem(row: object) -> str | None:
    """Where a saved table's row departs ('time_ns is -5000, expected ...'), None when it does not."""
    if not isinstance(row, dict):
        return f"is {type(row).__name__}, expected an object"
    for key, value in row.items():
        if value is None:
            continue
        if key in TEXT and not isinstance(value, str):
            return f"{key} is {value!r}, expected a string"
        if key == "kernels" and not (isinstance(value, list) and all(isinstance(k, str) for k in value)):
            return f"kernels is {value!r}, expected a list of kernel names"
        if _is_count(key) or key.startswith(RATIOS):
            if isinstance(value, bool) or not isinstance(value, int | float):
                return f"{key} is {value!r}, expected a number"
            most: float = LIMIT
            what = "from 0 to below 2**63"
            if key.startswith(BANDWIDTH):
                most, what = LIMIT * 1e9, "from 0 to below 2**63 bytes a nanosecond"
            if not 0 <= value < most:  # NaN fails this too
                return f"{key} is {_short(value)}, expected a number {what}"
            if key in MINIMUMS and value > OP_BYTES_LIMIT:
                return (f"{key} is {_short(value)}, expected bytes from 0 to {fmt_bytes(OP_BYTES_LIMIT)} "
                        "(more than any GPU holds)")
    return None


def _short(value: float) -> str:
    """A number as the error line shows it: a 300-digit count as '1e+299' (its digits say nothing)."""
    text = repr(value)
    return text if len(text) <= 24 else f"{float(value):.3g}"


def read_results(path: Path, advice: str) -> list[dict[str, object]]:
    """The rows of a saved table, each checked (row_problem); ReportError naming the file (and row and field)
    when it is not a list of row objects, ending with `advice` (what to do)."""
    data = read_json(path, advice)
    if not isinstance(data, list):
        raise ReportError(f"{path} is not a saved table (a list of rows as `memtraffic analyze --format "
                          f"json` prints): {advice}")
    for i, row in enumerate(data):
        found = row_problem(row)
        if found:
            raise ReportError(f"{path}: row {i} ({_name(row)}) {found}: {advice}")
    return data


def _name(row: object) -> str:
    """A row's name for the error line: its range, else its op type (a per-op table), else 'unnamed'."""
    names = [row.get(k) for k in ("range", "op")] if isinstance(row, dict) else []
    return next((repr(n) for n in names if isinstance(n, str) and n), "unnamed")
