"""How far a program is from its floor: time at the minimum per op, the recoverable time and why, and the
fused minimum of the traced region (`memtraffic floor`).

Per row of analyze's per-range table (an op call, an Inductor kernel, a region; only its per-range
columns are read: time, bytes per level, minimum, FLOPs, reused, launch statistics, so a range measured
as one row reads the same): the floor is the larger of its minimum bytes at the measured copy roof
(the roofs' `dram_Bps`, read + write) and its FLOPs at the measured roof of its dtype and unit
(time_notes.FLOP_ROOF: 16-bit FLOPs on tensor cores), never above the time measured (a row faster than
a copy of its minimum read from L2). Recoverable time = time - floor, with the first reason that fits:
spills, launch-bound, bytes above the minimum at a level (DRAM, L2, L1), compute below its roof, the
grid too small for one wave, occupancy, a tail wave, bytes in flight (latency): memtraffic.analysis.
time_notes's order. A profile's rows group by op type as analysis.per_op does (an op type's reason is the
one holding most of its recoverable time); a measure run's stay one per config (variant, shape, dtype,
params), as analyze's rows: its configs are alternatives, not parts of one program. Repeats reusing
their first call's counters count as they ran.
Launches that are not the program's work (analysis.outside: autotuning, its cache flushes) are left out
of the time and the floor, and said in one line; so are ranges without their kernels' own time (a
range-replayed row no pass without ncu timed: runfolder.timings). A run with no such time, or on a GPU
without measured roofs, has no floor (Floor.no_floor), never a floor of 0.

The fused minimum follows the data (trace records' `reads`, `writes`, `freed`; runfolder.trace): every
storage read before anything in the region wrote it is an input, read once; every value written in the
region and still alive when the trace ends (parameters, gradients, optimizer state, outputs, what is
kept for later) is written once; values overwritten or freed inside the region never leave the chip.
Beside it: the eager minimum (the sum of every call's minimum) and the DRAM bytes measured, and the fusion
groups (memtraffic.analysis.fusion): the chains of calls whose intermediates stay inside them, each with
its time now and at its fused floor.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import pandas as pd

from memtraffic.analysis.findings import to_dicts
from memtraffic.analysis.fusion import HOW_KINDS, Fusion, fusion_groups, storage_pairs
from memtraffic.analysis.outside import left_out, left_out_line
from memtraffic.analysis.per_op import OUTSIDE
from memtraffic.analysis.row import frame_rows
from memtraffic.analysis.time_notes import FLOP_ROOF, compute_evidence, copy_seconds, time_reason
from memtraffic.host.roofs_cache import find_roofs
from memtraffic.runfolder.timings import NO_KERNEL_TIME
from memtraffic.vocab.errors import ReportError, warn
from memtraffic.vocab.finding import GOOD, Finding, Subject
from memtraffic.vocab.launches import measured_range
from memtraffic.vocab.units import fmt_bytes, fmt_time, wrap

if TYPE_CHECKING:
    from memtraffic.runfolder.load import Run
    from memtraffic.runfolder.records import Plan

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
    "no roofs": "no measured roofs for this GPU (memtraffic roofs --refresh): no floor",
    "timing only": "a timing-only run: no counters to tell bytes from latency",
    "unknown": "no reason fits: measure with --metrics traffic,spills",
    "at floor": "at its floor",
}


@dataclass
class FloorRow:
    """One op type (or region name) of a profile, or one config of a measure run: its time, floor and
    recoverable time in seconds, and why."""

    op: str
    calls: int
    time_s: float
    floor_s: float
    recoverable_s: float
    reason: Finding | None  # of the kind holding most of the recoverable time (None when none is recoverable)
    reason_kind: str  # a key of KINDS
    share: float  # of the run's recoverable time
    reasons_s: dict[str, float] = field(default_factory=dict)  # kind -> recoverable seconds
    # a measure run's config (analyze's columns; '' and {} for a profile's op type)
    variant: str = ""
    shape: str = ""
    dtype: str = ""
    params: dict[str, object] = field(default_factory=dict)
    config: str = ""  # its name for people (analyze.row_label): 'softmax_tiled 1048576x2 fp32 BLOCK_M=128'

    @property
    def name(self) -> str:
        """What the table calls the row: the config of a measure run, else the op type."""
        return self.config or self.op


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
    # Rows without their kernels' time (range replay without a timing pass: runfolder.timings), left out.
    untimed: int = 0
    time_sources: list[str] = field(default_factory=list)  # where the rows' times come from
    fusion: Fusion = field(default_factory=Fusion)  # what fusing would save (analysis.fusion)

    @property
    def recoverable_s(self) -> float:
        return self.gpu_time_s - self.floor_s

    @property
    def no_floor(self) -> str:
        """Why the run has no floor ('no floor: ...'), '' when it has one: no row with its kernels' own time
        (ncu's range durations only), or no measured roofs for its GPU (a floor of 0 would be false)."""
        if self.untimed and not self.by_op:
            return (f"no floor: the {self.untimed} ranges of this run have no kernel time: ncu's range "
                    "replay gives a range only its duration, ncu's own (about 200 us for an op whose kernels "
                    "take 1-2 us), and no pass without ncu timed their kernels; profile again with --replay "
                    "kernel (the default) or --timing-only")
        if not self.roofs.get("dram_Bps"):
            return (f"no floor: no measured roofs for {self.device or 'this GPU'} (`memtraffic roofs "
                    "--refresh` on that GPU measures them)")
        return ""

    @property
    def per_config(self) -> bool:
        """A measure run's floor: one row per config instead of per op type."""
        return any(r.config for r in self.by_op)

    @property
    def unit(self) -> str:
        """What a row is, for the summary and the table ('configs' or 'op types')."""
        return "configs" if self.per_config else "op types"

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
        table: pd.DataFrame = pd.DataFrame([{**asdict(r), "reason": r.reason} for r in self.by_op])
        return table

    def to_dict(self) -> dict[str, object]:
        """The JSON of `memtraffic floor --format json`."""
        fused, dram = self.fused_min_bytes, self.dram_bytes
        return {
            "run": self.run, "device": self.device, "gpu_time_s": self.gpu_time_s,
            "floor_s": _plain(self.floor_s),
            "recoverable_s": _plain(self.recoverable_s), "top5_share": _plain(self.top_share),
            "by_op": [_row_dict(r) for r in self.by_op],
            "eager_min_bytes": self.eager_min_bytes, "fused_min_bytes": fused, "fused_note": self.fused_note,
            "dram_bytes": None if dram is None else int(dram),
            "dram_over_fused": dram / fused if dram is not None and fused else None,
            "timing_only": self.timing_only, "roofs": self.roofs, "reason_kinds": KINDS,
            "left_out": self.left_out, "no_floor": self.no_floor or None, "untimed_ranges": self.untimed,
            "time_sources": self.time_sources,
            "groups": [g.to_dict() for g in self.fusion.groups], "groups_note": self.fusion.note,
            "how_kinds": HOW_KINDS,
        }


def _row_dict(r: FloorRow) -> dict[str, object]:
    """A FloorRow as JSON has it: its reason as a finding record with its sentence."""
    return {**asdict(r), "reason": to_dicts([r.reason])[0] if r.reason else None}


def _plain(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _num(r: Mapping[str, object], key: str) -> float | None:
    try:
        v = float(r.get(key))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def row_floor(r: Mapping[str, object], measured: Mapping[str, float]) -> float | None:
    """Seconds at the floor of one row (copy of the minimum or FLOPs at the roof, the larger); None when
    neither is known."""
    copy = copy_seconds(r, measured)
    flops, key = _num(r, "model_flops"), FLOP_ROOF.get(str(r.get("dtype") or ""))
    roof = _num(measured, key) if key else None
    compute = flops / roof if flops and roof else None
    known = [x for x in (copy, compute) if x is not None]
    return max(known) if known else None


def row_reason(r: Mapping[str, object], measured: Mapping[str, float],
               timed: bool = False) -> tuple[str, Finding]:
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


def _compute_dominates(r: Mapping[str, object], measured: Mapping[str, float]) -> bool:
    copy = copy_seconds(r, measured) or 0.0
    floor = row_floor(r, measured)
    return floor is not None and floor > copy


def _measured_roofs(devices: Sequence[str]) -> tuple[str, dict[str, float]]:
    for device in devices:
        entry = find_roofs(device) if device else None
        if entry is not None:
            return device, {k: float(v) for k, v in entry.get("measured", {}).items()
                            if isinstance(v, int | float)}
    return (devices[0] if devices else ""), {}


def floor_of_table(table: pd.DataFrame, plan: Plan | None = None, run: str = "") -> Floor:
    """The Floor of an analyzed per-range table (analyze.analyze_run) and the run's plan."""
    left = left_out_line(table) or ""
    configs = plan.get("configs", []) if plan else []
    # the GPU of every launch, those left out too: a run of only those still names its GPU
    devices = [d for d in dict.fromkeys(table["device"]) if isinstance(d, str) and d] if len(table) else []
    table = table[~left_out(table)]
    device, measured = _measured_roofs(devices)
    timed = "timing_only" in table.columns  # timing_only_table.mark: times, no counters
    found = frame_rows(table)  # analyze's table, or a saved one: its columns
    untimed = sum(1 for r in found if r.get("time_source") == NO_KERNEL_TIME)
    rows = [r for r in found if _num(r, "time_ns")]
    sources = sorted({str(r["time_source"]) for r in rows if isinstance(r.get("time_source"), str)})
    roofed = bool(measured.get("dram_Bps"))  # without roofs no floor: NaN, never 0
    groups: dict[str, list[tuple[float, float, str, Finding | None]]] = {}
    first: dict[str, dict[str, object]] = {}  # group -> its first row (a measure run's config)
    for r in rows:
        time_s = (_num(r, "time_ns") or 0.0) * 1e-9
        floor = row_floor(r, measured)
        floor_s = min(floor, time_s) if floor is not None else 0.0 if roofed else math.nan
        kind, why = ("at floor", None) if floor_s >= time_s else row_reason(r, measured, timed)
        key = _group(r)
        first.setdefault(key, r)
        groups.setdefault(key, []).append((time_s, floor_s, kind, why))
    total_recoverable = sum(t - f for calls in groups.values() for t, f, _, _ in calls)
    by_op = []
    for key, calls in groups.items():
        op, config = str(first[key].get("op") or OUTSIDE), str(_config(first[key]).get("config") or "")
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
                reason = replace(biggest[3], subject=Subject(op=op, config=config), time_s=kinds[main])
        by_op.append(FloorRow(op, len(calls), time_s, floor_s, recoverable, reason, main,
                              recoverable / total_recoverable if total_recoverable > 0 else 0.0,
                              {k: v for k, v in kinds.items() if k != "at floor" and v > 0},
                              **_config(first[key])))
    by_op.sort(key=lambda r: -r.recoverable_s if roofed else -r.time_s)
    fused = fused_minimum(configs)
    dram = None
    if not timed and len(table):
        dram = float(table["dram_rd_bytes"].fillna(0).sum() + table["dram_wr_bytes"].fillna(0).sum())
    per_config = any(r.config for r in by_op)
    if per_config:  # alternatives measured apart: their sum is no program's minimum
        fused = None
        note = "not for a measure run: its configs are alternatives, not the steps of one program"
    elif fused is None:
        note = ("not known for this run: its trace has no tensor identities (traced before memtraffic "
                "recorded them, or not a traced program)")
    else:
        note = f"{fused.records} trace records followed"
        if fused.unidentified:
            note += f"; {fused.unidentified} without storages counted at their own minimum"
    eager = fused.eager_bytes if fused else None
    if fused is None and not per_config:
        eager = _eager_bytes(configs)
    times: dict[str, tuple[float, int]] = {}  # range -> its kernels' seconds and count
    for r in rows:
        key = measured_range(str(r.get("range") or ""))
        t, k = times.get(key, (0.0, 0))
        times[key] = (t + (_num(r, "time_ns") or 0.0) * 1e-9, k + int(_num(r, "n_kernels") or 1))
    fusion = fusion_groups(configs, times, measured)
    return Floor(run, device, sum(r.time_s for r in by_op), sum(r.floor_s for r in by_op), by_op,
                 eager, fused.total if fused else None, note, dram, timed, measured, left, untimed, sources,
                 fusion)


def _is_config(r: Mapping[str, object]) -> bool:
    """A row of a measure run's config (a variant), not a profile's op call, region or kernel."""
    return isinstance(r.get("variant"), str) and bool(r.get("variant"))


def _group(r: Mapping[str, object]) -> str:
    """The row a table row adds to: its config (its range) in a measure run, its op type in a profile."""
    return f"config {r.get('range')}" if _is_config(r) else f"op {r.get('op') or OUTSIDE}"


class _ConfigFields(TypedDict, total=False):
    """FloorRow's config fields."""

    variant: str
    shape: str
    dtype: str
    params: dict[str, object]
    config: str


def _config(r: Mapping[str, object]) -> _ConfigFields:
    """FloorRow's config fields of a measure run's row (analyze's columns); none for a profile's."""
    if not _is_config(r):
        return {}
    from memtraffic.analysis.analyze import row_label

    params = r.get("params")
    return {"variant": str(r["variant"]), "shape": str(r.get("shape") or ""),
            "dtype": str(r.get("dtype") or ""),
            "params": dict(params) if isinstance(params, dict) else {},
            "config": row_label({"range": "", "op": "", **r})}


def _eager_bytes(configs: Sequence[Mapping[str, Any]]) -> int | None:
    if not configs:
        return None
    return int(sum((c.get("min_read_bytes") or 0) + (c.get("min_write_bytes") or 0) for c in configs))


def fused_minimum(configs: Sequence[Mapping[str, Any]]) -> Fused | None:
    """The fused minimum of trace records (plan configs) in program order; None when no record names its
    storages (a trace written before they were recorded). See the module for the rule."""
    if not any("reads" in c or "writes" in c for c in configs):
        return None
    inside: dict[tuple[object, int], int] = {}  # storage -> bytes of the value the region wrote there
    outside: dict[tuple[object, int], int] = {}  # storage -> bytes read of its value from before the region
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
        for ptr, nbytes in storage_pairs(c.get("reads")):
            if ptr is None:
                read += nbytes
                continue
            key = (pid, ptr)
            if key in inside:
                continue  # produced in the region: stays on chip
            if nbytes > outside.get(key, 0):
                read += nbytes - outside.get(key, 0)
                outside[key] = nbytes
        for ptr, nbytes in storage_pairs(c.get("writes")):
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
    return [part for line in _summary(f) for part in wrap(line, width)]


def _summary(f: Floor) -> list[str]:
    if f.gpu_time_s <= 0:  # nothing timed: the reason when rows lack their kernels' time, else nothing
        return [f.no_floor] if f.untimed else []
    if f.no_floor:  # no floor to measure against: said, not shown as 0
        lines = [f"floor: GPU time {fmt_time(f.gpu_time_s * 1e9)}; {f.no_floor}"]
    else:
        lines = [f"floor: GPU time {fmt_time(f.gpu_time_s * 1e9)}, floor {fmt_time(f.floor_s * 1e9)} "
                 f"({f.floor_s / f.gpu_time_s:.0%} of it): {fmt_time(f.recoverable_s * 1e9)} recoverable"]
    top = [r for r in f.by_op[:TOP] if r.recoverable_s > 0 and r.reason_kind != "no roofs"]
    if top:
        names = ", ".join(f"{r.name} {fmt_time(r.recoverable_s * 1e9)} ({r.reason_kind})" for r in top)
        lines.append(f"  the top {len(top)} {f.unit} hold {f.top_share:.0%} of it: {names}")
    if f.fused_min_bytes is not None and f.eager_min_bytes is not None:
        measured = f", DRAM measured {fmt_bytes(f.dram_bytes)}" if f.dram_bytes is not None else ""
        lines.append(f"  minimum: eager {fmt_bytes(f.eager_min_bytes)}, fused {fmt_bytes(f.fused_min_bytes)}"
                     f"{measured}")
    else:
        lines.append(f"  fused minimum {f.fused_note}")
    if f.left_out:
        lines.append(f"  {f.left_out}")
    if f.untimed:
        lines.append(f"  {f.untimed} ranges without their kernels' time left out of the time and the floor "
                     "(range replay: ncu's range duration is not the kernels' time, and the pass without ncu "
                     "did not time them)")
    return lines


LEGEND = "\n".join([
    "time: every kernel of the op type, repeats counted as they ran",
    "floor: each call at the larger of its minimum bytes at the measured copy roof and its FLOPs at the "
    "measured roof of its dtype and unit (never above its time)",
    "recoverable = time - floor; share: of the run's recoverable time",
    "fused minimum: inputs read once and what outlives the region written once, every intermediate on "
    "chip; eager: the sum of every call's minimum"])


def legend(f: Floor) -> str:
    """LEGEND, its rows named as the run's are (a measure run's configs: variant, shape, dtype, params)."""
    if not f.per_config:
        return LEGEND
    return ("config: variant, shape, dtype and the parameters set; " + LEGEND.replace("op type", "config"))


def table_rows(f: Floor) -> list[dict[str, str]]:
    """The op types (a measure run's configs) as the table shows them (strings; `op` is the row's name,
    `reason` the kind)."""
    return [{"op": r.name, "calls": str(r.calls), "time": fmt_time(r.time_s * 1e9),
             "floor": fmt_time(r.floor_s * 1e9), "recoverable": fmt_time(r.recoverable_s * 1e9),
             "share": f"{r.share:.0%}", "reason": r.reason_kind} for r in f.by_op]


def floor_run(run: Run | str | Path, partial: bool = True, warn_gaps: bool = False) -> Floor:
    """The Floor of a run folder or loaded run (memtraffic.runfolder.load.Run): its per-range table, every
    kernel it holds. A run with gaps (interrupted, a cut report, configs missing) is read as far as it goes
    when `partial` (each gap a warning with `warn_gaps`: `memtraffic floor --partial`), else each gap is
    warned and PartialRunError says 'incomplete: N of M ...' (`memtraffic floor`, as analyze).
    ReportError when no kernel there has a time."""
    from memtraffic.analysis.analyze import PartialRunError, analyze_run, gaps
    from memtraffic.runfolder.load import Run, load_run

    run = run if isinstance(run, Run) else load_run(run)
    table = analyze_run(run)
    found = gaps(table)
    if found and (warn_gaps or not partial):
        for line in found:
            warn(line)
    if found and not partial:
        raise PartialRunError(f"{run.path} is incomplete: {_reached(table, run.plan)} ({len(found)} "
                              f"{'gap' if len(found) == 1 else 'gaps'} named above): its floor would be a "
                              "part's; measure what is missing again, or pass --partial for the floor of "
                              "what is there")
    f = floor_of_table(table, run.plan, run.name)
    if not f.by_op and not f.left_out and not f.untimed:  # left_out and untimed rows say themselves
        raise ReportError(f"{run.path}: no kernel launch with a time in its reports: there is no time to set "
                          "against a floor (profile or measure the program again)")
    return f


def _reached(table: pd.DataFrame, plan: Plan | None) -> str:
    """'N of M configs measured' (measure) or 'N of M traced op calls and regions reached' (profile)."""
    configs = list((plan.get("configs") if plan else None) or [])
    timed = table[pd.to_numeric(table["time_ns"], errors="coerce") > 0] if "time_ns" in table else table
    found = set(timed["range"]) if "range" in timed else set()
    if not configs:
        return "its plan or trace lists no config"
    if all(c.get("kind", "variant") == "variant" for c in configs):
        return f"{sum(c.get('range') in found for c in configs)} of {len(configs)} configs measured"
    reached = max((i + 1 for i, c in enumerate(configs) if c.get("range") in found), default=0)
    return f"{reached} of {len(configs)} traced op calls and regions reached"
