"""Per source line: which line of a kernel moves the bytes, and what kind of excess they are.

memtraffic.ncu.source reads ncu's per-instruction counters (the SourceCounters section; `memtraffic
measure --source` or plain `ncu --section SourceCounters --import-source yes`) into one row per line;
here each row is judged against the kernel's minimum (from plan.json): sector waste (ncu's ideal
sectors) and redundancy (the same bytes requested by several warps or programs, which ncu counts as
ideal). Kernels without line info (torch's and cuBLAS's own) get one row per memory instruction.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from memtraffic.ncu.kernel_table import measured_lines_of
from memtraffic.ncu.source import SECTOR, opcode
from memtraffic.runfolder.load import load_run
from memtraffic.runfolder.paths import portable_path
from memtraffic.runfolder.records import Plan, configs_of
from memtraffic.runfolder.timings import is_timings
from memtraffic.vocab.errors import ReportError, UsageError
from memtraffic.vocab.finding import Finding, Level, Subject, sentences
from memtraffic.vocab.units import compile_regex

# Above this ratio a line's waste or redundancy is worth naming (counters are exact; 10% is noise in models).
THRESHOLD = 1.1

NO_SOURCE_HINT = (
    "capture it with `memtraffic measure --source`, or plain "
    "`ncu --section SourceCounters --import-source yes -o REPORT your-program`"
)


def line_findings(row: dict[str, Any]) -> list[Finding]:
    """The excess of one line, as findings in analyze's rules and words: spills, sector waste (ncu's ideal
    sectors: the distinct bytes of each access) and redundant requests (ideal sectors beyond the kernel's
    minimum in the line's direction); none when the line is fine. Their factors multiply as analyze's do:
    bytes moved / minimum = sector_x x requested_x."""
    found = []
    where = Subject(kernel=str(row.get("kernel") or ""), line=location(row) if "file" in row else "")
    if row.get("local_bytes"):  # spills are never compulsory: every local byte is excess
        found.append(Finding("line_spills", where, "local", {"local_bytes": row["local_bytes"]}))
    sectors, ideal, minimum = row["sectors"], row["ideal_sectors"], row["min_bytes"]
    level: Level = "L1 ld" if row["operation"] == "load" else "L1 st"
    moved, asked = sectors * SECTOR, ideal * SECTOR
    if ideal and sectors / ideal > THRESHOLD:
        found.append(Finding("sector_waste", where, level, {
            "what": "loads" if level == "L1 ld" else "stores", "used_n": round(SECTOR * ideal / sectors),
            "sector_eff": ideal / sectors, "sector_x": sectors / ideal, "requested_bytes": asked,
            "moved_bytes": moved}))
    if minimum and asked / minimum > THRESHOLD:
        # ideal sectors hold each access's distinct bytes; beyond the minimum, warps or programs request
        # the same sectors again (the same bytes, or neighbours of theirs in a sector another one uses)
        found.append(Finding("redundant_requests", where, level, {
            "what": "input" if level == "L1 ld" else "output", "requested_x": asked / minimum,
            "requested_bytes": asked, "min_bytes": minimum,
            "sector_x": sectors / ideal if ideal else math.nan,
            "moved_bytes": moved, "l1_x": moved / minimum}))
    return found


def judge(measured: Sequence[dict[str, Any]], min_read: float | None = None,
          min_write: float | None = None) -> list[dict[str, Any]]:
    """The measured rows with the kernel's minimum applied: min_bytes, excess_sectors, verdict and share,
    sorted by excess sectors, largest first. Without minimums (no plan) redundancy is not judged."""
    rows = []
    for measured_row in measured:
        row = dict(measured_row)
        minimum = {"load": min_read, "store": min_write}.get(row["operation"])
        row["min_bytes"] = minimum
        # Excess: ncu's waste inside sectors, plus ideal sectors beyond the kernel's whole minimum in this
        # direction (a line's own share of it is unknown, so this is a lower bound of its redundancy).
        beyond = max(0.0, row["ideal_sectors"] - minimum / SECTOR) if minimum else 0.0
        local = row.get("local_bytes", 0) // SECTOR  # local-memory sectors: all excess
        row["excess_sectors"] = int(row["sectors"] - row["ideal_sectors"] + beyond + local)
        row["findings"] = line_findings(row)
        row["verdict"] = sentences(row["findings"]) or "fine"
        rows.append(row)
    total = sum(r["bytes_moved"] + r.get("local_bytes", 0) for r in rows)
    for r in rows:
        r["share"] = (r["bytes_moved"] + r.get("local_bytes", 0)) / total if total else 0.0
    rows.sort(key=lambda r: (-r["excess_sectors"], -r["bytes_moved"]))
    return rows


COLUMNS = ("launch", "range", "kernel", "file", "line", "pc", "source", "operation", "inst_executed",
           "requests", "sectors", "ideal_sectors", "ncu_excessive_sectors", "excess_sectors", "access_sizes",
           "bytes_requested", "bytes_moved", "local_bytes", "share", "min_bytes", "verdict", "findings")


def report_lines(reports: Sequence[Path],
                 plan: Plan | None = None) -> tuple[list[dict[str, Any]], int]:
    """Rows (COLUMNS) of every kernel with per-line counters in these reports, and how many kernels the
    reports hold in all. Minimums come from the plan's config of each kernel's NVTX range."""
    minimums = {c["range"]: (c.get("min_read_bytes"), c.get("min_write_bytes"))
                for c in configs_of(plan)}
    rows: list[dict[str, Any]] = []
    offset = 0
    for report in reports:
        launches, n_launches = measured_lines_of(Path(report))
        for k in launches:
            min_read, min_write = minimums.get(k["range"], (None, None))
            rows += [{"launch": offset + k["launch"], "range": k["range"], "kernel": k["kernel"], **r}
                     for r in judge(k["lines"], min_read, min_write)]
        offset += n_launches
    return [{c: r.get(c, 0) if c == "local_bytes" else r[c] for c in COLUMNS} for r in rows], offset


def read_lines(path: str | Path, kernel: str | None = None, top: int | None = None) -> list[dict[str, Any]]:
    """`memtraffic lines`: a run folder or .ncu-rep -> rows (COLUMNS), kernel by kernel in launch order,
    each kernel's lines by excess. `kernel` is a regex searched in the kernel name and the range."""
    try:
        pattern = compile_regex(kernel) if kernel else None
    except re.error as err:
        raise UsageError(f"--kernel {kernel!r} is not a regular expression ({err})") from None
    if top is not None and top < 1:
        raise UsageError(f"--top {top}: give a positive number of lines per kernel")
    run = load_run(path)
    if not run.reports:
        raise ReportError(f"{path}: no .ncu-rep file in this folder")
    if all(is_timings(r) for r in run.reports):
        raise ReportError(f"{path} is a timing-only run (kernel times, no counters): per-line counters need "
                          f"ncu: {NO_SOURCE_HINT}")
    rows, kernels = report_lines(run.reports, run.plan)
    if not kernels:
        raise ReportError(f"{path} holds no profiled kernel: is it an Nsight Compute report?")
    if not rows:
        raise ReportError(f"{path} has no per-line counters (ncu's SourceCounters section): {NO_SOURCE_HINT}")
    if pattern:
        rows = [r for r in rows if pattern.search(r["kernel"]) or pattern.search(r["range"])]
        if not rows:
            raise UsageError(f"no kernel or range matches --kernel {kernel!r} in {path}")
    if top is not None:
        by_kernel = itertools.groupby(rows, key=lambda r: r["launch"])
        rows = [r for _, group in by_kernel for r in list(group)[:top]]
    for r in rows:  # where the measuring machine compiled the kernel, made relative (a run you can share)
        r["file"] = portable_path(r["file"]) if r["file"] else r["file"]
    return rows


def worst_line(rows: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The line with the most excess sectors, if any line has excess."""
    worst = max(rows, key=lambda r: r["excess_sectors"], default=None)
    return worst if worst is not None and worst["excess_sectors"] > 0 else None


KINDS = {"line_spills": "spills", "sector_waste": "sector waste", "redundant_requests": "redundant"}


def worst_line_finding(row: dict[str, Any], subject: Subject) -> Finding:
    """The finding that names a row's worst line (analyze with per-line counters): where, what kind of
    excess, and its share of its kernel's bytes."""
    code = opcode(row["source"]) if not row["file"] else ""
    where = location(row) if row["file"] else (f"{row['pc']} ({code})" if code else row["pc"])
    kinds = " + ".join(KINDS[f.rule] for f in row["findings"]) or "excess"
    return Finding("worst_line", replace(subject, line=where), "L1",
                   {"line": where, "kinds": kinds, "share_frac": row["share"],
                    "excess_n": row["excess_sectors"]})


def location(r: dict[str, Any]) -> str:
    """'softmax_rows.py:38', or the instruction's address when the report has no source line."""
    return f"{Path(r['file']).name}:{r['line']}" if r["file"] else r["pc"]
