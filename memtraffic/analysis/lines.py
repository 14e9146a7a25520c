"""Per source line: which line of a kernel moves the bytes, and what kind of excess they are.

memtraffic.ncu.source reads ncu's per-instruction counters (the SourceCounters section; `memtraffic
measure --source` or plain `ncu --section SourceCounters --import-source yes`) into one row per line;
here each row is judged against the kernel's minimum (from plan.json) with analyze's two factors, so both
tell one story: bytes used per sector (bytes the instructions asked for / sectors x 32) and requests per
useful byte (bytes asked for / the minimum); their product is the L1 amplification (moved / minimum).
Kernels without line info (torch's and cuBLAS's own) get one row per memory instruction.

"Bytes asked for" is the kernel counter analyze reads (smsp__sass_data_bytes_mem_global_op_ld/st: each
warp access's distinct bytes). Per line, ncu has only `thread_inst_executed_true` x access size (the
row's `thread_bytes`), which counts every thread, also threads of a warp reading the same address: on
the H100 seed run's naive softmax load 536.87 MB against the counter's 33.55 MB (32 threads a warp, 2
distinct floats). A line's bytes asked for are therefore known (`bytes_requested`) where
- its kernel's lines in that direction have thread bytes summing to the kernel's counter (no thread
  repeats another's address anywhere, so each line's thread bytes are its bytes asked for), or
- it is its kernel's only line in that direction (the kernel's counter is the line's);
else (a plain report without the counter, or several lines with repeated addresses) they are None and
the line says the factors are not told apart, giving only what is measured: the amplification, and
ncu's ideal sectors (the sectors each access's distinct bytes would fill), a bound on sector use.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TypedDict

from memtraffic.analysis.findings import sentences
from memtraffic.ncu.kernel_table import kernel_table, measured_lines_of
from memtraffic.ncu.source import SECTOR, MeasuredLine, opcode
from memtraffic.runfolder.load import load_run
from memtraffic.runfolder.paths import portable_path
from memtraffic.runfolder.records import Plan, configs_of
from memtraffic.runfolder.timings import is_timings
from memtraffic.vocab.errors import ReportError, UsageError
from memtraffic.vocab.finding import Finding, Level, Subject
from memtraffic.vocab.units import compile_regex

# Above this ratio a line's waste or redundancy is worth naming (counters are exact; 10% is noise in models).
THRESHOLD = 1.1

NO_SOURCE_HINT = (
    "capture it with `memtraffic measure --source`, or plain "
    "`ncu --section SourceCounters --import-source yes -o REPORT your-program`"
)


class JudgedLine(TypedDict):
    """A measured line (memtraffic.ncu.source.MeasuredLine) judged against its kernel's minimum: bytes
    asked for (None where the per-line counters cannot give it, see the module) beside ncu's thread bytes,
    the minimum in its direction, its excess sectors, findings, verdict and share of its kernel's bytes."""

    file: str | None
    line: int | None
    pc: str | None
    source: str
    operation: str
    inst_executed: int
    requests: int
    sectors: int
    ideal_sectors: int
    ncu_excessive_sectors: int
    excess_sectors: int
    access_sizes: list[int]
    thread_bytes: int
    bytes_requested: int | None
    bytes_moved: int
    local_bytes: int
    share: float
    min_bytes: float | None
    verdict: str
    findings: list[Finding]


class LineRow(JudgedLine):
    """A row of `memtraffic lines` (COLUMNS): a judged line with its launch number, range and kernel."""

    launch: int
    range: str
    kernel: str


# The columns of `memtraffic lines`, in the order its table and JSON give them.
COLUMNS = ("launch", "range", "kernel", *JudgedLine.__annotations__)


def line_findings(row: JudgedLine) -> list[Finding]:
    """The excess of one line, as findings in analyze's rules and words: spills, sector waste (bytes asked
    for / bytes moved) and redundant requests (bytes asked for / the kernel's minimum in the line's
    direction); their factors multiply as analyze's do: moved / minimum = sector_x x requested_x. Where
    the line's bytes asked for are unknown (see the module), the line's L1 amplification alone
    (`line_unsplit`) and ncu's ideal sectors' bound on its sector use (`line_ideal_waste`). None when the
    line is fine."""
    found = []
    where = Subject(kernel=str(row.get("kernel") or ""), line=location(row) if "file" in row else "")
    if row.get("local_bytes"):  # spills are never compulsory: every local byte is excess
        found.append(Finding("line_spills", where, "local", {"local_bytes": row["local_bytes"]}))
    sectors, ideal, minimum = row["sectors"], row["ideal_sectors"], row["min_bytes"]
    asked = row["bytes_requested"]
    level: Level = "L1 ld" if row["operation"] == "load" else "L1 st"
    what = "loads" if level == "L1 ld" else "stores"
    moved = sectors * SECTOR
    if asked is None:
        if ideal and sectors / ideal > THRESHOLD:
            found.append(Finding("line_ideal_waste", where, level, {
                "what": what, "used_n": round(SECTOR * ideal / sectors), "ideal_bytes": ideal * SECTOR,
                "moved_bytes": moved, "thread_bytes": row["thread_bytes"]}))
        if minimum and moved / minimum > THRESHOLD:
            found.append(Finding("line_unsplit", where, level, {
                "what": what, "l1_x": moved / minimum, "moved_bytes": moved, "min_bytes": minimum,
                "thread_bytes": row["thread_bytes"]}))
        return found
    if asked and moved / asked > THRESHOLD:
        found.append(Finding("sector_waste", where, level, {
            "what": what, "used_n": round(SECTOR * asked / moved), "sector_eff": asked / moved,
            "sector_x": moved / asked, "requested_bytes": asked, "moved_bytes": moved}))
    if minimum and asked / minimum > THRESHOLD:
        found.append(Finding("redundant_requests", where, level, {
            "what": "input" if level == "L1 ld" else "output", "requested_x": asked / minimum,
            "requested_bytes": asked, "min_bytes": minimum, "sector_x": moved / asked,
            "moved_bytes": moved, "l1_x": moved / minimum}))
    return found


def asked_for(measured: Sequence[MeasuredLine], counter: Mapping[str, float | None]) -> list[int | None]:
    """Each line's bytes asked for (see the module), from its thread bytes and its kernel's counter per
    direction (`counter`: 'load'/'store' -> smsp__sass_data_bytes_mem_global_op_ld/st, None where not
    measured): exact, or None where the per-line counters cannot give it."""
    out: list[int | None] = []
    for row in measured:
        op = row["operation"]
        total = counter.get(op)
        mine = [r for r in measured if r["operation"] == op]
        if total is None or not math.isfinite(total):
            out.append(None)
        elif sum(r["bytes_requested"] for r in mine) == total:  # no thread repeats another's address
            out.append(int(row["bytes_requested"]))
        elif len(mine) == 1:
            out.append(int(total))
        else:
            out.append(None)
    return out


def judge(measured: Sequence[MeasuredLine], min_read: float | None = None,
          min_write: float | None = None, asked_read: float | None = None,
          asked_write: float | None = None) -> list[JudgedLine]:
    """The measured rows (memtraffic.ncu.source.measured_lines) with the kernel's minimum and bytes asked
    for (its req_ld/req_st counters, None where not measured) applied: thread_bytes, bytes_requested,
    min_bytes, excess_sectors, findings, verdict and share, sorted by excess sectors, largest first.
    Without minimums (no plan) redundancy is not judged."""
    rows: list[JudgedLine] = []
    asked = asked_for(measured, {"load": asked_read, "store": asked_write})
    for m, bytes_asked in zip(measured, asked, strict=True):
        minimum = {"load": min_read, "store": min_write}.get(m["operation"])
        # Excess: ncu's waste inside sectors, plus ideal sectors beyond the kernel's whole minimum in this
        # direction (a line's own share of it is unknown, so this is a lower bound of its redundancy).
        beyond = max(0.0, m["ideal_sectors"] - minimum / SECTOR) if minimum else 0.0
        local_bytes = m.get("local_bytes", 0)
        local = local_bytes // SECTOR  # local-memory sectors: all excess
        row: JudgedLine = {
            "file": m["file"], "line": m["line"], "pc": m["pc"], "source": m["source"],
            "operation": m["operation"], "inst_executed": m["inst_executed"], "requests": m["requests"],
            "sectors": m["sectors"], "ideal_sectors": m["ideal_sectors"],
            "ncu_excessive_sectors": m["ncu_excessive_sectors"],
            "excess_sectors": int(m["sectors"] - m["ideal_sectors"] + beyond + local),
            "access_sizes": m["access_sizes"],
            "thread_bytes": m["bytes_requested"],  # ncu's per line: threads x access size
            "bytes_requested": bytes_asked, "bytes_moved": m["bytes_moved"], "local_bytes": local_bytes,
            "share": 0.0, "min_bytes": minimum, "verdict": "", "findings": []}
        row["findings"] = line_findings(row)
        row["verdict"] = sentences(row["findings"]) or "fine"
        rows.append(row)
    total = sum(r["bytes_moved"] + r["local_bytes"] for r in rows)
    for r in rows:
        r["share"] = (r["bytes_moved"] + r["local_bytes"]) / total if total else 0.0
    rows.sort(key=lambda r: (-r["excess_sectors"], -r["bytes_moved"]))
    return rows


def report_lines(reports: Sequence[Path],
                 plan: Plan | None = None) -> tuple[list[LineRow], int]:
    """Rows (COLUMNS) of every kernel with per-line counters in these reports, and how many kernels the
    reports hold in all. Minimums come from the plan's config of each kernel's NVTX range."""
    minimums = {c["range"]: (c.get("min_read_bytes"), c.get("min_write_bytes"))
                for c in configs_of(plan)}
    rows: list[LineRow] = []
    offset = 0
    for report in reports:
        launches, n_launches = measured_lines_of(Path(report))
        asked = _asked_counters(Path(report)) if launches else {}
        for k in launches:
            min_read, min_write = minimums.get(k["range"], (None, None))
            rows += [{"launch": offset + k["launch"], "range": k["range"], "kernel": k["kernel"], **r}
                     for r in judge(k["lines"], min_read, min_write, *asked.get(k["launch"], (None, None)))]
        offset += n_launches
    return rows, offset


def _asked_counters(report: Path) -> dict[int, tuple[float | None, float | None]]:
    """Per launch of the report, its bytes asked for by loads and stores (req_ld_bytes, req_st_bytes;
    None where the report lacks those counters, as plain SourceCounters reports do)."""
    def value(r: Mapping[Hashable, object], key: str) -> float | None:
        v = r.get(key)
        return float(v) if isinstance(v, int | float) and math.isfinite(v) else None

    kernels = kernel_table(report, allow_partial=True).kernels
    return {int(str(r["launch"])): (value(r, "req_ld_bytes"), value(r, "req_st_bytes"))
            for r in kernels.to_dict("records")}


def read_lines(path: str | Path, kernel: str | None = None, top: int | None = None) -> list[LineRow]:
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


def worst_line(rows: Sequence[LineRow]) -> LineRow | None:
    """The line with the most excess sectors, if any line has excess."""
    worst = max(rows, key=lambda r: r["excess_sectors"], default=None)
    return worst if worst is not None and worst["excess_sectors"] > 0 else None


KINDS = {"line_spills": "spills", "sector_waste": "sector waste", "redundant_requests": "redundant",
         "line_ideal_waste": "sector waste", "line_unsplit": "amplified"}


def worst_line_finding(row: LineRow, subject: Subject) -> Finding:
    """The finding that names a row's worst line (analyze with per-line counters): where, what kind of
    excess, and its share of its kernel's bytes."""
    code = opcode(row["source"]) if not row["file"] else ""
    where = location(row) if row["file"] else (f"{row['pc']} ({code})" if code else row["pc"] or "")
    kinds = " + ".join(KINDS[f.rule] for f in row["findings"]) or "excess"
    return Finding("worst_line", replace(subject, line=where), "L1",
                   {"line": where, "kinds": kinds, "share_frac": row["share"],
                    "excess_n": row["excess_sectors"]})


def location(r: JudgedLine) -> str:
    """'softmax_rows.py:38', or the instruction's address when the report has no source line."""
    return f"{Path(r['file']).name}:{r['line']}" if r["file"] else r["pc"] or ""
