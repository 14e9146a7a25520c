"""Per source line: which line of a kernel moves the bytes, and what kind of excess they are.

Reads ncu's per-instruction counters (the SourceCounters section; `memtraffic measure --source` or plain
`ncu --section SourceCounters --import-source yes`). Each metric below is a list of instances keyed by PC
(`correlation_ids()`); the metrics do NOT share one PC order, so every value is joined by PC. What they
mean, checked on H100 reports (ncu 2025.3.1) against ncu's own source page:

- memory_l1_tag_requests_global: L1 tag lookups of global accesses; one per 128-byte line a warp-level
  access touches (a coalesced 4-byte load of 32 threads is 1, a 16-byte one 4, a scattered one up to 32).
- memory_l2_theoretical_sectors_global: 32-byte sectors those accesses touch, counted per access (the same
  sector touched by two warps counts twice). Times 32 it is the bytes the line moves between L1 and L2
  (if nothing hits in L1).
- memory_l2_theoretical_sectors_global_ideal: the sectors each access would touch if its distinct bytes
  were contiguous. derived__memory_l2_theoretical_sectors_global_excessive = sectors - ideal: waste
  inside a sector only. Warps that each load the same bytes touch no extra sector per access, so ncu
  calls them ideal; that redundancy shows only against the operation's minimum (from plan.json).
- memory_access_size_type: bits per thread access (32, 64, 128); memory_access_type: 2 load, 4 store;
  inst_executed: warp-level executions; thread_inst_executed_true: thread executions with the predicate
  on (threads that really accessed memory).

Kernels without line info (torch's and cuBLAS's own) get one row per memory instruction (PC, SASS).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memtraffic.core.errors import ReportError, UsageError
from memtraffic.core.units import fmt_bytes
from memtraffic.ncu.report import _range_stack, load_ncu_report, range_label
from memtraffic.ncu.run import keep_beside, load_run, stored_table

SECTOR = 32
REQUESTS = "memory_l1_tag_requests_global"
SECTORS = "memory_l2_theoretical_sectors_global"
IDEAL = "memory_l2_theoretical_sectors_global_ideal"
NCU_EXCESSIVE = "derived__memory_l2_theoretical_sectors_global_excessive"
ACCESS_BITS = "memory_access_size_type"
ACCESS_TYPE = "memory_access_type"
INST = "inst_executed"
THREAD_INST = "thread_inst_executed_true"
OPERATIONS = {2: "load", 4: "store"}  # memory_access_type codes (ncu's source page: Access Operation)
# Above this ratio a line's waste or redundancy is worth naming (counters are exact; 10% is noise in models).
THRESHOLD = 1.1

NO_SOURCE_HINT = (
    "capture it with `memtraffic measure --source`, or plain "
    "`ncu --section SourceCounters --import-source yes -o REPORT your-program`"
)


def _per_pc(action: Any, name: str) -> dict[int, float]:
    """One per-instruction metric as {PC: value} (empty when the report lacks it)."""
    metric = action.metric_by_name(name)
    if metric is None or not metric.has_correlation_ids():
        return {}
    ids = metric.correlation_ids()
    return {ids.as_uint64(i): metric.as_double(i) for i in range(metric.num_instances())}


def _opcode(sass: str) -> str:
    """'@!P0  LDG.E.64 R4, desc[...]' -> 'LDG.E.64'."""
    tokens = sass.split()
    if tokens and tokens[0].startswith("@"):
        tokens = tokens[1:]
    return tokens[0] if tokens else ""


def _operation(codes: set[int], opcodes: set[str]) -> str:
    names = {OPERATIONS.get(c) for c in codes} - {None}
    if not names or len(names) < len(codes):  # a code we have not verified: name it by its opcodes
        names |= {"atomic" if o.startswith(("ATOM", "RED")) else o for o in opcodes}
    return "+".join(sorted(n for n in names if n))


def _source_text(action: Any, file: str, line: int, cache: dict[str, list[str]]) -> str:
    if file not in cache:
        files = action.source_files()
        cache[file] = files[file].splitlines() if file in files else []
    text = cache[file]
    return text[line - 1].strip() if 0 < line <= len(text) else ""


def verdict(row: dict[str, Any]) -> str:
    """Name the excess of one line: sector waste (ncu's ideal), redundancy (the kernel's minimum), or fine."""
    parts = []
    sectors, ideal = row["sectors"], row["ideal_sectors"]
    if ideal and sectors / ideal > THRESHOLD:
        used = SECTOR * ideal / sectors
        sizes = row["access_sizes"]
        why = (f"each {sizes[0]}-byte access lands in its own sector (addresses 32+ bytes apart, "
               "e.g. down a column)" if len(sizes) == 1 and used <= sizes[0] * 1.05
               else "strided or misaligned addresses")
        waste = sectors / ideal
        parts.append(f"sector waste: uses {used:.3g} of every {SECTOR} bytes it moves ({waste:.3g}x): {why}")
    minimum = row["min_bytes"]
    if minimum and ideal * SECTOR / minimum > THRESHOLD:
        # ideal sectors hold each access's distinct bytes; beyond the minimum, warps or programs request
        # the same sectors again (the same bytes, or neighbours of theirs in a sector another one uses)
        ratio = ideal * SECTOR / minimum
        parts.append(f"redundant: the same sectors requested by ~{ratio:.0f} warps/programs (even its ideal "
                     f"sectors are {ratio:.3g}x the kernel's minimum {row['operation']} of "
                     f"{fmt_bytes(minimum)})")
    return "; ".join(parts) if parts else "fine"


def measured_lines(action: Any) -> list[dict[str, Any]]:
    """One row per source line (or per memory instruction, without line info) that touches global memory:
    what ncu counted, before any minimum is applied (see judge). Empty without per-line counters."""
    sectors = _per_pc(action, SECTORS)
    if not sectors:
        return []
    requests, ideal = _per_pc(action, REQUESTS), _per_pc(action, IDEAL)
    excessive, bits = _per_pc(action, NCU_EXCESSIVE), _per_pc(action, ACCESS_BITS)
    kinds, inst, threads = _per_pc(action, ACCESS_TYPE), _per_pc(action, INST), _per_pc(action, THREAD_INST)

    def where(pc: int) -> tuple[str, int] | None:
        info = action.source_info(pc)
        return (info.file_name(), int(info.line())) if info is not None else None

    memory = [pc for pc, n in sectors.items() if n or requests.get(pc)]
    groups: dict[tuple[str, int] | int, list[int]] = {}
    for pc in memory:
        groups.setdefault(where(pc) or pc, []).append(pc)
    line_inst: dict[tuple[str, int], float] = {}  # every instruction of a line, as ncu's source page counts
    if any(isinstance(k, tuple) for k in groups):
        for pc, n in inst.items():
            loc = where(pc)
            if loc is not None:
                line_inst[loc] = line_inst.get(loc, 0.0) + n

    rows: list[dict[str, Any]] = []
    cache: dict[str, list[str]] = {}
    for key, pcs in groups.items():
        sass = {pc: action.sass_by_pc(pc).strip() for pc in pcs}
        codes = {int(kinds[pc]) for pc in pcs if pc in kinds}
        operation = _operation(codes, {_opcode(s) for s in sass.values()})
        sizes = sorted({int(bits[pc]) // 8 for pc in pcs if bits.get(pc)})
        if isinstance(key, tuple):
            file, line = key
            row = {"file": file, "line": line, "pc": None, "source": _source_text(action, file, line, cache),
                   "inst_executed": int(line_inst.get(key, 0))}
        else:
            row = {"file": None, "line": None, "pc": hex(key), "source": sass[key],
                   "inst_executed": int(inst.get(key, 0))}
        row.update(
            operation=operation,
            requests=int(sum(requests.get(pc, 0) for pc in pcs)),
            sectors=int(sum(sectors[pc] for pc in pcs)),
            ideal_sectors=int(sum(ideal.get(pc, 0) for pc in pcs)),
            ncu_excessive_sectors=int(sum(excessive.get(pc, 0) for pc in pcs)),
            access_sizes=sizes,
            bytes_requested=int(sum(threads.get(pc, 0) * bits.get(pc, 0) // 8 for pc in pcs)),
        )
        row["bytes_moved"] = row["sectors"] * SECTOR
        rows.append(row)
    return rows


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
        row["excess_sectors"] = int(row["sectors"] - row["ideal_sectors"] + beyond)
        row["verdict"] = verdict(row)
        rows.append(row)
    total = sum(r["bytes_moved"] for r in rows)
    for r in rows:
        r["share"] = r["bytes_moved"] / total if total else 0.0
    rows.sort(key=lambda r: (-r["excess_sectors"], -r["bytes_moved"]))
    return rows


def kernel_lines(action: Any, min_read: float | None = None,
                 min_write: float | None = None) -> list[dict[str, Any]]:
    """One row per source line (or per memory instruction, without line info) that touches global memory,
    sorted by excess sectors, largest first. Without minimums (no plan) redundancy is not judged."""
    return judge(measured_lines(action), min_read, min_write)


# What a lines table holds depends on this module's reading: bump it when measured_lines changes.
LINES_VERSION = 1


def _lines_doc(report: Path) -> dict[str, Any]:
    """The report read once: every launch with per-line counters (its number, range, kernel, measured
    lines), and how many launches the report holds in all."""
    loaded = load_ncu_report(report)
    launches = []
    n = 0
    for i in range(loaded.num_ranges()):
        rng = loaded.range_by_idx(i)
        for j in range(rng.num_actions()):
            action = rng.action_by_idx(j)
            measured = measured_lines(action)
            if measured:
                launches.append({"launch": n, "range": range_label(_range_stack(action)),
                                 "kernel": action.name(), "lines": measured})
            n += 1
    return {"launches": launches, "n_launches": n}


def lines_table(report: Path) -> dict[str, Any]:
    """The report's measured lines, read once and kept (memtraffic.ncu.run.stored_table)."""
    return stored_table(report, "lines", LINES_VERSION, _lines_doc)


def write_lines_table(report: Path) -> Path:
    """Keep the report's lines table beside it (the committed runs: scripts/make_kernel_tables.py)."""
    return keep_beside(report, "lines", lines_table(report))


COLUMNS = ("launch", "range", "kernel", "file", "line", "pc", "source", "operation", "inst_executed",
           "requests", "sectors", "ideal_sectors", "ncu_excessive_sectors", "excess_sectors", "access_sizes",
           "bytes_requested", "bytes_moved", "share", "min_bytes", "verdict")


def report_lines(reports: Sequence[Path],
                 plan: dict[str, Any] | None = None) -> tuple[list[dict[str, Any]], int]:
    """Rows (COLUMNS) of every kernel with per-line counters in these reports, and how many kernels the
    reports hold in all. Minimums come from the plan's config of each kernel's NVTX range."""
    minimums = {c["range"]: (c.get("min_read_bytes"), c.get("min_write_bytes"))
                for c in (plan or {}).get("configs", [])}
    rows: list[dict[str, Any]] = []
    offset = 0
    for report in reports:
        table = lines_table(Path(report))
        for k in table["launches"]:
            min_read, min_write = minimums.get(k["range"], (None, None))
            rows += [{"launch": offset + k["launch"], "range": k["range"], "kernel": k["kernel"], **r}
                     for r in judge(k["lines"], min_read, min_write)]
        offset += table["n_launches"]
    return [{c: r[c] for c in COLUMNS} for r in rows], offset


def read_lines(path: str | Path, kernel: str | None = None, top: int | None = None) -> list[dict[str, Any]]:
    """`memtraffic lines`: a run folder or .ncu-rep -> rows (COLUMNS), kernel by kernel in launch order,
    each kernel's lines by excess. `kernel` is a regex searched in the kernel name and the range."""
    try:
        pattern = re.compile(kernel) if kernel else None
    except re.error as err:
        raise UsageError(f"--kernel {kernel!r} is not a regular expression ({err})") from None
    if top is not None and top < 1:
        raise UsageError(f"--top {top}: give a positive number of lines per kernel")
    run = load_run(path)
    if not run.reports:
        raise ReportError(f"{path}: no .ncu-rep file in this folder")
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
    return rows


def worst_line(rows: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The line with the most excess sectors, if any line has excess."""
    worst = max(rows, key=lambda r: r["excess_sectors"], default=None)
    return worst if worst is not None and worst["excess_sectors"] > 0 else None


def describe(row: dict[str, Any]) -> str:
    """'worst line softmax_rows.py:38 (redundant, 80% of its kernel's bytes)' for analyze's diagnosis."""
    kind = " + ".join(part.split(":")[0] for part in row["verdict"].split("; "))
    where = f"line {_where(row)}" if row["file"] else f"instruction {row['pc']} ({_opcode(row['source'])})"
    return f"worst {where} ({kind}, {row['share']:.0%} of its kernel's bytes)"


def _where(r: dict[str, Any]) -> str:
    return f"{Path(r['file']).name}:{r['line']}" if r["file"] else r["pc"]


def format_table(rows: Sequence[dict[str, Any]], width: int = 100) -> str:
    """Per kernel: a heading, a table of the lines' traffic, then each line's source and verdict."""
    from memtraffic.views.tables import text_table

    headers = ["line", "op", "inst", "requests", "sectors", "ideal", "excess", "moved", "share"]
    out: list[str] = []
    for launch in dict.fromkeys(r["launch"] for r in rows):
        mine = [r for r in rows if r["launch"] == launch]
        first = mine[0]
        out.append(f"== {first['kernel']}" + (f"  [{first['range']}]" if first["range"] else ""))
        out.append(text_table(headers, [
            [_where(r), r["operation"], r["inst_executed"], r["requests"], r["sectors"], r["ideal_sectors"],
             r["excess_sectors"], fmt_bytes(r["bytes_moved"]), f"{r['share']:.0%}"] for r in mine]))
        for r in mine:
            source = r["source"] if len(r["source"]) <= width else r["source"][: width - 3] + "..."
            out.append(f"  {_where(r)}  {source}\n      {r['verdict']}")
        out.append("")
    return "\n".join(out).rstrip()


def render(rows: Sequence[dict[str, Any]], fmt: str) -> str:
    from memtraffic.views.tables import dump

    return format_table(rows) if fmt == "table" else dump(rows, fmt)
