"""Per source line, as ncu counted it: the bytes, sectors and requests of each line (or instruction).

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
- memory_l2_theoretical_sectors_local: the 32-byte sectors of local-memory accesses (register spills,
  per-thread arrays), per instruction; never part of an operation's minimum.

Kernels without line info (torch's and cuBLAS's own) get one row per memory instruction (PC, SASS).
Judging the lines against the operation's minimum is memtraffic.analysis.lines' job.
"""

from __future__ import annotations

from typing import Any, TypedDict

from memtraffic.ncu.metrics import (
    ACCESS_BITS,
    ACCESS_TYPE,
    IDEAL,
    INST,
    LOCAL_SECTORS,
    NCU_EXCESSIVE,
    REQUESTS,
    SECTORS,
    THREAD_INST,
)

SECTOR = 32
OPERATIONS = {2: "load", 4: "store"}  # memory_access_type codes (ncu's source page: Access Operation)

# What measured_lines gives: bump it when that changes, so kept tables are read again.
LINES_VERSION = 2


class MeasuredLine(TypedDict):
    """One source line's (or, without line info, one memory instruction's) counters as ncu gave them:
    file and line, or the instruction's PC (hex); bytes_requested is threads x access size (see
    memtraffic.analysis.lines for what that counts)."""

    file: str | None
    line: int | None
    pc: str | None
    source: str
    inst_executed: int
    operation: str
    requests: int
    sectors: int
    ideal_sectors: int
    ncu_excessive_sectors: int
    access_sizes: list[int]
    bytes_requested: int
    bytes_moved: int
    local_bytes: int


def _per_pc(action: Any, name: str) -> dict[int, float]:
    """One per-instruction metric as {PC: value} (empty when the report lacks it)."""
    metric = action.metric_by_name(name)
    if metric is None or not metric.has_correlation_ids():
        return {}
    ids = metric.correlation_ids()
    return {ids.as_uint64(i): metric.as_double(i) for i in range(metric.num_instances())}


def opcode(sass: str) -> str:
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


def measured_lines(action: Any) -> list[MeasuredLine]:
    """One row per source line (or per memory instruction, without line info) that touches global or local
    memory: what ncu counted, before any minimum is applied (see judge). Empty without per-line counters."""
    sectors = _per_pc(action, SECTORS)
    if not sectors:
        return []
    local = _per_pc(action, LOCAL_SECTORS)
    requests, ideal = _per_pc(action, REQUESTS), _per_pc(action, IDEAL)
    excessive, bits = _per_pc(action, NCU_EXCESSIVE), _per_pc(action, ACCESS_BITS)
    kinds, inst, threads = _per_pc(action, ACCESS_TYPE), _per_pc(action, INST), _per_pc(action, THREAD_INST)

    def where(pc: int) -> tuple[str, int] | None:
        info = action.source_info(pc)
        return (info.file_name(), int(info.line())) if info is not None else None

    memory = [pc for pc in dict.fromkeys([*sectors, *local])
              if sectors.get(pc) or requests.get(pc) or local.get(pc)]
    groups: dict[tuple[str, int] | int, list[int]] = {}
    for pc in memory:
        groups.setdefault(where(pc) or pc, []).append(pc)
    line_inst: dict[tuple[str, int], float] = {}  # every instruction of a line, as ncu's source page counts
    if any(isinstance(k, tuple) for k in groups):
        for pc, n in inst.items():
            loc = where(pc)
            if loc is not None:
                line_inst[loc] = line_inst.get(loc, 0.0) + n

    rows: list[MeasuredLine] = []
    cache: dict[str, list[str]] = {}
    for key, pcs in groups.items():
        sass = {pc: action.sass_by_pc(pc).strip() for pc in pcs}
        codes = {int(kinds[pc]) for pc in pcs if pc in kinds}
        operation = _operation(codes, {opcode(s) for s in sass.values()})
        sizes = sorted({int(bits[pc]) // 8 for pc in pcs if bits.get(pc)})
        file: str | None
        line: int | None
        address: str | None
        if isinstance(key, tuple):
            (file, line), address = key, None
            source, executed = _source_text(action, key[0], key[1], cache), int(line_inst.get(key, 0))
        else:
            file, line, address = None, None, hex(key)
            source, executed = sass[key], int(inst.get(key, 0))
        sector_count = int(sum(sectors.get(pc, 0) for pc in pcs))
        row: MeasuredLine = {
            "file": file, "line": line, "pc": address, "source": source, "inst_executed": executed,
            "operation": operation,
            "requests": int(sum(requests.get(pc, 0) for pc in pcs)),
            "sectors": sector_count,
            "ideal_sectors": int(sum(ideal.get(pc, 0) for pc in pcs)),
            "ncu_excessive_sectors": int(sum(excessive.get(pc, 0) for pc in pcs)),
            "access_sizes": sizes,
            "bytes_requested": int(sum(threads.get(pc, 0) * bits.get(pc, 0) // 8 for pc in pcs)),
            "bytes_moved": sector_count * SECTOR,
            "local_bytes": int(sum(local.get(pc, 0) for pc in pcs)) * SECTOR,
        }
        rows.append(row)
    return rows


