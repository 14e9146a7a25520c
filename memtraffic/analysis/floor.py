"""How far a program is from its floor: time at the minimum per op, the recoverable time and why, and the
fused minimum of the traced region (`memtraffic floor`).

Per row of analyze's per-range table (an op call, an Inductor kernel, a region; only its per-range
columns are read: time, bytes per level, minimum, FLOPs, reused, launch statistics, so a range measured
as one row reads the same): the floor is the larger of its minimum bytes at the measured copy roof
(the ceilings' `dram_Bps`, read + write) and its FLOPs at the measured roof of its dtype and unit
(time_notes.FLOP_ROOF: 16-bit FLOPs on tensor cores), never above the time measured (a row faster than
a copy of its minimum read from L2). Recoverable time = time - floor, with the first reason that fits:
spills, launch-bound, bytes above the minimum at a level (DRAM, L2, L1), compute below its roof, the
grid too small for one wave, occupancy, a tail wave, bytes in flight (latency): memtraffic.analysis.
time_notes's order. Rows group by op type as analysis.per_op does; an op type's reason is the one
holding most of its recoverable time. Repeats reusing their first call's counters count as they ran.
Launches that are not the program's work (analysis.outside: autotuning, its cache flushes) are left out
of the time and the floor, and said in one line.

The fused minimum follows the data (trace records' `reads`, `writes`, `freed`; runfolder.trace): every
storage read before anything in the region wrote it is an input, read once; every value written in the
region and still alive when the trace ends (parameters, gradients, optimizer state, outputs, what is
kept for later) is written once; values overwritten or freed inside the region never leave the chip.
Beside it: the eager minimum (the sum of every call's minimum) and the DRAM bytes measured.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, cast

import pandas as pd

from memtraffic.analysis.outside import left_out, left_out_line
from memtraffic.analysis.per_op import OUTSIDE
from memtraffic.analysis.time_notes import FLOP_ROOF, compute_evidence, copy_seconds, time_reason
from memtraffic.vocab.finding import GOOD, Finding, Subject, to_dicts
from memtraffic.vocab.roofs import find_ceilings
from memtraffic.vocab.units import fmt_bytes, fmt_time

TOP = 5  # the op types whose share of the recoverable time the summary gives
# What a reason's kind means, for the legend and the JSON.
KINDS = {
    "spills": "local memory (register spills) moves bytes the op never needs",
    "launch": "launch-bound: too little work per kernel to leave the launch floor",
    "bytes": "bytes above the minimum at a level (DRAM, L2 or L1)",
    "compute": "compute below its roof (FLOPs at the measured roof of the dtype and unit take the floor)",
    "grid": "too little work to fill the GPU (under one wave of blocks)",
    "occupancy": "occupancy: too few warps resident to hide latency",
    "tail": "a partial last wave",
    "latency": "bytes in flight: too few outstanding loads for the copy roof (latency-bound)",
    "no minimum": "no minimum known for these calls: their whole time counts as recoverable",
    "no roofs": "no measured roofs for this GPU (memtraffic ceilings --refresh): every floor is 0",
    "timing only": "a timing-only run: no counters to tell bytes from latency",
    "unknown": "no reason fits: measure with --metrics traffic,spills",
    "at floor": "at its floor",
}


@dataclass
class FloorRow:
    """One op type (or region name): its time, floor and recoverable time in seconds, and why."""

    op: str
    calls: int
    time_s: float
    floor_s: float
    recoverable_s: float
    reason: Finding | None  # of the kind holding most of the recoverable time (None when none is recoverable)
    reason_kind: str  # a key of KINDS
    share: float  # of the run's recoverable time
    reasons_s: dict[str, float] = field(default_factory=dict)  # kind -> recoverable seconds


@dataclass
class Fused:
    """The fused minimum of a traced region: bytes read once from outside, written once to outlive it."""

    read_bytes: int
    write_bytes: int
    eager_bytes: int  # the sum of every call's minimum
    records: int  # trace records followed
    unidentified: int  # records without storages (regions, kernels outside Inductor): counted whole

    @property
    def total(self) -> int:
        return self.read_bytes + self.write_bytes


@dataclass
class Floor:
    """`memtraffic floor`: the run's time against its floor (see the module)."""

    run: str
    device: str
    gpu_time_s: float
    floor_s: float
    by_op: list[FloorRow]
    eager_min_bytes: int | None
    fused_min_bytes: int | None
    fused_note: str  # why the fused minimum is unknown, or what it rests on
    dram_bytes: float | None  # measured, every kernel (None for a timing-only run)
    timing_only: bool
    roofs: dict[str, float]
    left_out: str = ""  # the line that sums the launches left out (analysis.outside), '' when none is

    @property
    def recoverable_s(self) -> float:
        return self.gpu_time_s - self.floor_s

    @property
    def top_share(self) -> float:
        """The share of the recoverable time the TOP op types hold."""
        total = sum(r.recoverable_s for r in self.by_op)
        return sum(r.recoverable_s for r in self.by_op[:TOP]) / total if total > 0 else math.nan

    def summary(self, width: int | None = 100) -> str:
        """The summary lines `memtraffic floor` starts with, wrapped to `width` (None: a line each)."""
        return "\n".join(summary_lines(self, width or 10**9))

    def table(self) -> pd.DataFrame:
        """The op types as a DataFrame (the by_op rows, seconds), largest recoverable time first; `reason`
        holds each row's Finding (vocab.finding.say words it)."""
        return pd.DataFrame([{**asdict(r), "reason": r.reason} for r in self.by_op])

    def to_dict(self) -> dict[str, Any]:
        """The JSON of `memtraffic floor --format json`."""
        fused, dram = self.fused_min_bytes, self.dram_bytes
        return {
            "run": self.run, "device": self.device, "gpu_time_s": self.gpu_time_s, "floor_s": self.floor_s,
            "recoverable_s": self.recoverable_s, "top5_share": _plain(self.top_share),
            "by_op": [_row_dict(r) for r in self.by_op],
            "eager_min_bytes": self.eager_min_bytes, "fused_min_bytes": fused, "fused_note": self.fused_note,
            "dram_bytes": None if dram is None else int(dram),
            "dram_over_fused": dram / fused if dram is not None and fused else None,
            "timing_only": self.timing_only, "roofs": self.roofs, "reason_kinds": KINDS,
            "left_out": self.left_out,
        }


def _row_dict(r: FloorRow) -> dict[str, Any]:
    """A FloorRow as JSON has it: its reason as a finding record with its sentence."""
    return {**asdict(r), "reason": to_dicts([r.reason])[0] if r.reason else None}


def _plain(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _num(r: Mapping[str, Any], key: str) -> float | None:
    try:
        v = float(r.get(key))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def row_floor(r: Mapping[str, Any], measured: Mapping[str, Any]) -> float | None:
    """Seconds at the floor of one row (copy of the minimum or FLOPs at the roof, the larger); None when
    neither is known."""
    copy = copy_seconds(r, measured)
    flops, key = _num(r, "model_flops"), FLOP_ROOF.get(str(r.get("dtype") or ""))
    roof = _num(measured, key) if key else None
    compute = flops / roof if flops and roof else None
    known = [x for x in (copy, compute) if x is not None]
    return max(known) if known else None


def row_reason(r: Mapping[str, Any], measured: Mapping[str, Any], timed: bool = False) -> tuple[str, Finding]:
    """(kind, finding): why one row's time is above its floor (KINDS; the module's order)."""
    held = max((_num(r, "time_ns") or 0.0) * 1e-9 - (row_floor(r, measured) or 0.0), 0.0)
    if not measured.get("dram_Bps"):
        return "no roofs", Finding("no_roofs", evidence={"device": str(r.get("device") or "this GPU")},
                                   time_s=held)
    if copy_seconds(r, measured) is None and not _num(r, "model_flops"):
        return "no minimum", Finding("no_minimum", evidence={"time_s": held}, time_s=held)
    kind, found = time_reason(r, measured)
    if kind in ("spills", "launch"):
        return kind, found
    dram = _num(r, "eff_dram")
    if dram is not None and dram < GOOD:
        return "bytes", Finding("dram_excess", level="DRAM", time_s=held, evidence={
            "dram_x": 1 / dram, "min_bytes": _num(r, "min_bytes") or math.nan,
            "dram_bytes": (_num(r, "dram_rd_bytes") or 0.0) + (_num(r, "dram_wr_bytes") or 0.0)})
    if kind == "compute" or _compute_dominates(r, measured):  # the FLOPs set the floor
        return "compute", found if kind == "compute" else Finding(
            "compute_below_roof", time_s=held, evidence=compute_evidence(r, measured, row_floor(r, measured)))
    l2 = _num(r, "eff_l2")
    if l2 is not None and l2 < GOOD:
        return "bytes", Finding("l2_excess", level="L2", time_s=held, evidence={
            "l2_x": 1 / l2, "min_bytes": _num(r, "min_bytes") or math.nan,
            "l2_bytes": (_num(r, "l2_rd_bytes") or 0.0) + (_num(r, "l2_wr_bytes") or 0.0)})
    if kind == "L1":
        return "bytes", found
    if timed and kind in ("unknown", "latency"):
        return "timing only", Finding("timing_only", time_s=held)
    return kind, found


def _compute_dominates(r: Mapping[str, Any], measured: Mapping[str, Any]) -> bool:
    copy = copy_seconds(r, measured) or 0.0
    floor = row_floor(r, measured)
    return floor is not None and floor > copy


def _measured_roofs(devices: Sequence[str]) -> tuple[str, dict[str, float]]:
    for device in devices:
        entry = find_ceilings(device) if device else None
        if entry is not None:
            return device, {k: float(v) for k, v in entry.get("measured", {}).items()
                            if isinstance(v, int | float)}
    return (devices[0] if devices else ""), {}


def floor_of_table(table: pd.DataFrame, plan: Mapping[str, Any] | None = None, run: str = "") -> Floor:
    """The Floor of an analyzed per-range table (analyze.analyze_run) and the run's plan."""
    left = left_out_line(table) or ""
    table = table[~left_out(table)]
    devices = [d for d in dict.fromkeys(table["device"]) if isinstance(d, str) and d] if len(table) else []
    device, measured = _measured_roofs(devices)
    timed = "timing_only" in table.columns  # timing_only_table.mark: times, no counters
    records = cast("list[dict[str, Any]]", table.to_dict("records"))  # the table's columns are names
    rows = [r for r in records if _num(r, "time_ns")]
    groups: dict[str, list[tuple[float, float, str, Finding | None]]] = {}
    for r in rows:
        time_s = (_num(r, "time_ns") or 0.0) * 1e-9
        floor = row_floor(r, measured)
        floor_s = min(floor, time_s) if floor is not None else 0.0
        kind, why = ("at floor", None) if floor_s >= time_s else row_reason(r, measured, timed)
        op = r.get("op") or OUTSIDE
        groups.setdefault(op, []).append((time_s, floor_s, kind, why))
    total_recoverable = sum(t - f for calls in groups.values() for t, f, _, _ in calls)
    by_op = []
    for op, calls in groups.items():
        time_s, floor_s = sum(c[0] for c in calls), sum(c[1] for c in calls)
        kinds: dict[str, float] = {}
        for t, f, kind, _ in calls:
            kinds[kind] = kinds.get(kind, 0.0) + (t - f)
        recoverable = time_s - floor_s
        main = max((k for k in kinds if k != "at floor"), key=kinds.__getitem__, default="at floor")
        reason = None
        if main != "at floor":  # the call of that kind holding the most, with its kind's time
            biggest = max((c for c in calls if c[2] == main), key=lambda c: c[0] - c[1])
            if biggest[3] is not None:
                reason = replace(biggest[3], subject=Subject(op=op), time_s=kinds[main])
        by_op.append(FloorRow(op, len(calls), time_s, floor_s, recoverable, reason, main,
                              recoverable / total_recoverable if total_recoverable > 0 else 0.0,
                              {k: v for k, v in kinds.items() if k != "at floor" and v > 0}))
    by_op.sort(key=lambda r: -r.recoverable_s)
    fused = fused_minimum((plan or {}).get("configs", []))
    dram = None
    if not timed and len(table):
        dram = float(table["dram_rd_bytes"].fillna(0).sum() + table["dram_wr_bytes"].fillna(0).sum())
    if fused is None:
        note = ("not known for this run: its trace has no tensor identities (traced before memtraffic "
                "recorded them, or not a traced program)")
    else:
        note = f"{fused.records} trace records followed"
        if fused.unidentified:
            note += f"; {fused.unidentified} without storages counted at their own minimum"
    eager = fused.eager_bytes if fused else _eager_bytes((plan or {}).get("configs", []))
    return Floor(run, device, sum(r.time_s for r in by_op), sum(r.floor_s for r in by_op), by_op,
                 eager, fused.total if fused else None, note, dram, timed, measured, left)


def _eager_bytes(configs: Sequence[Mapping[str, Any]]) -> int | None:
    if not configs:
        return None
    return int(sum((c.get("min_read_bytes") or 0) + (c.get("min_write_bytes") or 0) for c in configs))


def _pairs(value: Any) -> list[tuple[int | None, int]]:
    """A record's [storage, bytes] pairs; a pair that is not one (a damaged trace line) is left out."""
    out: list[tuple[int | None, int]] = []
    for pair in value if isinstance(value, list) else []:
        if (isinstance(pair, list) and len(pair) == 2 and (pair[0] is None or type(pair[0]) is int)
                and type(pair[1]) is int and pair[1] >= 0):
            out.append((pair[0], pair[1]))
    return out


def fused_minimum(configs: Sequence[Mapping[str, Any]]) -> Fused | None:
    """The fused minimum of trace records (plan configs) in program order; None when no record names its
    storages (a trace written before they were recorded). See the module for the rule."""
    if not any("reads" in c or "writes" in c for c in configs):
        return None
    inside: dict[tuple[Any, int], int] = {}  # storage -> bytes of the value the region wrote there
    outside: dict[tuple[Any, int], int] = {}  # storage -> bytes read of its value from before the region
    read = write_unknown = eager = unidentified = 0
    for c in configs:
        eager += (c.get("min_read_bytes") or 0) + (c.get("min_write_bytes") or 0)
        if "reads" not in c and "writes" not in c:  # a region: its own minimum, as it stands
            unidentified += 1
            read += c.get("min_read_bytes") or 0
            write_unknown += c.get("min_write_bytes") or 0
            continue
        pid = c.get("pid")
        for ptr in c.get("freed") or []:  # released: a later pointer of the same number is new memory
            inside.pop((pid, ptr), None)
            outside.pop((pid, ptr), None)
        for ptr, nbytes in _pairs(c.get("reads")):
            if ptr is None:
                read += nbytes
                continue
            key = (pid, ptr)
            if key in inside:
                continue  # produced in the region: stays on chip
            if nbytes > outside.get(key, 0):
                read += nbytes - outside.get(key, 0)
                outside[key] = nbytes
        for ptr, nbytes in _pairs(c.get("writes")):
            if ptr is None:
                write_unknown += nbytes
                continue
            key = (pid, ptr)
            inside[key] = max(nbytes, inside.get(key, 0))
        for ptr in c.get("freed_after") or []:  # freed before the region ended
            inside.pop((pid, ptr), None)
            outside.pop((pid, ptr), None)
    return Fused(int(read), int(sum(inside.values()) + write_unknown), int(eager), len(configs), unidentified)


# --- text -------------------------------------------------------------------------------------------------


def summary_lines(f: Floor, width: int = 100) -> list[str]:
    """The short summary profile, analyze --group-by op and the HTML report put at their top, each line
    wrapped to `width` (its continuation indented)."""
    return [part for line in _summary(f) for part in textwrap.wrap(
        line, width, subsequent_indent="    ") or [""]]


def _summary(f: Floor) -> list[str]:
    if f.gpu_time_s <= 0:
        return []
    if not f.roofs.get("dram_Bps"):  # no floor to measure against: said, not shown as 0
        lines = [f"floor: GPU time {fmt_time(f.gpu_time_s * 1e9)}; no floor: no measured roofs for "
                 f"{f.device or 'this GPU'} (`memtraffic ceilings --refresh` measures them)"]
    else:
        lines = [f"floor: GPU time {fmt_time(f.gpu_time_s * 1e9)}, floor {fmt_time(f.floor_s * 1e9)} "
                 f"({f.floor_s / f.gpu_time_s:.0%} of it): {fmt_time(f.recoverable_s * 1e9)} recoverable"]
    top = [r for r in f.by_op[:TOP] if r.recoverable_s > 0 and r.reason_kind != "no roofs"]
    if top:
        names = ", ".join(f"{r.op} {fmt_time(r.recoverable_s * 1e9)} ({r.reason_kind})" for r in top)
        lines.append(f"  the top {len(top)} op types hold {f.top_share:.0%} of it: {names}")
    if f.fused_min_bytes is not None and f.eager_min_bytes is not None:
        measured = f", DRAM measured {fmt_bytes(f.dram_bytes)}" if f.dram_bytes is not None else ""
        lines.append(f"  minimum: eager {fmt_bytes(f.eager_min_bytes)}, fused {fmt_bytes(f.fused_min_bytes)}"
                     f"{measured}")
    else:
        lines.append(f"  fused minimum {f.fused_note}")
    if f.left_out:
        lines.append(f"  {f.left_out}")
    return lines


LEGEND = "\n".join([
    "time: every kernel of the op type, repeats counted as they ran",
    "floor: each call at the larger of its minimum bytes at the measured copy roof and its FLOPs at the "
    "measured roof of its dtype and unit (never above its time)",
    "recoverable = time - floor; share: of the run's recoverable time",
    "fused minimum: inputs read once and what outlives the region written once, every intermediate on "
    "chip; eager: the sum of every call's minimum"])


def table_rows(f: Floor) -> list[dict[str, str]]:
    """The op types as the table shows them (strings; `reason` is the kind)."""
    return [{"op": r.op, "calls": str(r.calls), "time": fmt_time(r.time_s * 1e9),
             "floor": fmt_time(r.floor_s * 1e9), "recoverable": fmt_time(r.recoverable_s * 1e9),
             "share": f"{r.share:.0%}", "reason": r.reason_kind} for r in f.by_op]


def floor_run(run: Any) -> Floor:
    """The Floor of a run folder or loaded run (memtraffic.runfolder.load.Run): its per-range table, every
    kernel it holds (a run with gaps is read as far as it goes)."""
    from memtraffic.analysis.analyze import analyze_run
    from memtraffic.runfolder.load import Run, load_run

    run = run if isinstance(run, Run) else load_run(run)
    return floor_of_table(analyze_run(run), run.plan, run.name)
