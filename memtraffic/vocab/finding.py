"""Findings as records: what a rule found, about what, with which numbers; and the one registry of rules.

A `Finding` is data: the `rule` (a key of RULES), its `subject` (run, config, op call, kernel, source line),
the memory `level` it concerns, its `evidence` (named numbers, a few named words) and the time it holds.
Analysis makes findings; only views turn them into words, through `say` (one short sentence for a table's
notes) and `explain` (the arithmetic behind it, for --explain, the JSON and the HTML). Nothing reads the
words back: code that needs to know what was found looks at `rule` and `evidence`.

RULES is one plain dict, read top to bottom: each rule's kind (efficiency, time, floor, line, diff), what
it checks, its sentence and its explanation. Both texts are templates over the evidence's names; a name's
ending says how its number is written (see `fmt_value`): `_bytes` 8.39 MB, `_s` 632.7 us, `_x` a factor
(4x), `_Bps` 26.52 GB/s, `_flops` FLOP/s, `_frac` a share (80%), `_pct` a percentage already (45%), `_n`
a count (1,024), `_eff` an efficiency (0.25); words (str) as they are. A new rule is one entry here and the
code that fills its evidence where the numbers are (docs/contributing.md).

Imports nothing beyond the standard library and memtraffic.vocab.units: views and the reading side use it.
"""

from __future__ import annotations

import math
import string
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from memtraffic.vocab.units import fmt_bytes, fmt_rate, fmt_time

GOOD = 0.9  # an efficiency below this is a finding (and a factor above 1 / GOOD)
SECTOR_BYTES = 32  # the unit L1 and L2 move global memory in
SAY_WIDTH = 100  # the most characters a rule's sentence may take on a terminal

Kind = Literal["efficiency", "time", "floor", "line", "diff"]
Level = Literal["", "L1", "L1 ld", "L1 st", "L2", "DRAM", "DRAM rd", "DRAM wr", "local"]
Evidence = Mapping[str, float | int | str]


@dataclass(frozen=True)
class Subject:
    """What a finding is about, as people name it (never an NVTX range id): the run, the config (a variant
    with its shape, dtype and parameters, e.g. 'softmax_naive 1048576x2 fp32 num_warps=4'), the op type
    and its call number in program order, the kernel, the source line ('softmax_rows.py:38', or an
    instruction address where the report has no line info). Empty fields are unknown or not relevant."""

    run: str = ""
    config: str = ""
    op: str = ""
    call: int | None = None
    kernel: str = ""
    line: str = ""

    def label(self) -> str:
        """The subject in a few words: 'aten.addmm call 14', 'softmax_rows.py:38', a config, a kernel."""
        if self.line:
            return self.line
        if self.op:
            return self.op + (f" call {self.call}" if self.call is not None else "")
        return self.config or self.kernel or self.run

    def to_dict(self) -> dict[str, str | int | None]:
        return {"run": self.run, "config": self.config, "op": self.op, "call": self.call,
                "kernel": self.kernel, "line": self.line}


@dataclass(frozen=True)
class Finding:
    """One thing a rule found (see the module). `time_s`: the seconds it holds (a floor's recoverable time,
    a row's time above a copy of its minimum), None where it holds no time of its own."""

    rule: str
    subject: Subject = field(default_factory=Subject)
    level: Level = ""
    evidence: Evidence = field(default_factory=dict, hash=False)
    time_s: float | None = None

    def __post_init__(self) -> None:
        if self.rule not in RULES:
            raise KeyError(f"no rule {self.rule!r} in memtraffic.vocab.finding.RULES")

    def to_dict(self) -> dict[str, object]:
        """The record as JSON has it (numbers that are not finite become None)."""
        return {"rule": self.rule, "subject": self.subject.to_dict(), "level": self.level,
                "evidence": {k: _plain(v) for k, v in self.evidence.items()}, "time_s": _plain(self.time_s)}


@dataclass(frozen=True)
class Rule:
    """One rule of the registry: its kind, what it checks, its sentence and its explanation (templates
    over its findings' evidence names), and where its numbers vary from row to row little, the sentence
    that says it once for several rows (`group`)."""

    kind: Kind
    checks: str
    say: str
    explain: str
    group: str = ""  # said once for several rows whose numbers differ (no evidence names); '' where none


# fmt: off
RULES: dict[str, Rule] = {
    # --- efficiency: one analyzed row (a config, an op call, a kernel) against its minimum ---------------
    "main_kernel": Rule(
        "efficiency", "a range with several kernels (--group-by kernel): the one its minimum is counted on",
        "main kernel of {kernels_n} in its range: the range's whole minimum is counted here",
        "the kernel moving the most L2 bytes (else the longest) of its range's {kernels_n} carries the "
        "range's minimum"),
    "helper_kernel": Rule(
        "efficiency", "a range with several kernels (--group-by kernel): the others",
        "helper kernel of {kernels_n} in its range: the minimum is counted on {main}",
        "a range of {kernels_n} kernels; its minimum is counted once, on {main}, so a helper kernel shows "
        "no efficiency of its own"),
    "spills": Rule(
        "efficiency", "local-memory bytes (registers spilled) through L1",
        "spills {local_bytes} to local memory ({local_x} the minimum): fewer live values or registers",
        "{registers_n} registers a thread; local loads {local_ld_bytes} + stores {local_st_bytes} = "
        "{local_bytes}, against a minimum of {min_bytes}: every local byte is excess"),
    "lsu_bypass": Rule(
        "efficiency", "L1 (LSU) bytes under 1% of L2's: loads or stores outside the counted pipe",
        "{what} bypass the L1 (LSU) counters ({via}): judge by L2, DRAM and FLOPs",
        "L1 counted {l1_bytes} where L2 moved {l2_bytes}: the data moved through {via}, which the L1 "
        "(LSU) counters do not see, so no L1 efficiency is given"),
    "sector_waste": Rule(
        "efficiency", "bytes the instructions asked for / bytes the 32-byte sectors moved, below GOOD",
        "{what} use {used_n} of every 32-byte sector: adjacent threads should touch adjacent addresses",
        "the instructions asked for {requested_bytes}; L1 moved {moved_bytes} in 32-byte sectors: "
        "{requested_bytes} / {moved_bytes} = {sector_eff} ({used_n} useful bytes a sector, "
        "{sector_x} amplification)"),
    "redundant_requests": Rule(
        "efficiency", "bytes the instructions asked for / the minimum, above 1 / GOOD",
        "each {what} byte requested {requested_x}: warps or programs repeat it, or the kernel makes passes",
        "{requested_bytes} requested for a minimum of {min_bytes}: {requested_x}; times the sector "
        "amplification {sector_x}, L1 moves {l1_x} the minimum ({moved_bytes})"),
    "predicted_passes": Rule(
        "efficiency", "L1 bytes above the minimum that the variant's model predicts (no request counters)",
        "each {what} byte moves {passes_x} at L1, as the variant's model predicts: passes it makes",
        "L1 moved {moved_bytes} for a minimum of {min_bytes} ({passes_x}), within 1% of the model's "
        "prediction {predicted_bytes}"),
    "kernel_passes": Rule(
        "efficiency", "a range of several kernels: each kernel is a pass over memory",
        "{kernels_n} kernels, each a pass over memory: fusing them saves passes",
        "the range launched {kernels_n} kernels; each reads its input from memory again"),
    "caches_absorb": Rule(
        "efficiency", "L1 load efficiency below GOOD while DRAM reads are at the minimum",
        "L1 and L2 absorb the extra loads before DRAM, but time pays ({rate_Bps} of minimum bytes)",
        "DRAM read efficiency {dram_rd_eff} (at the minimum) while L1 loads {l1_x} it; the minimum's "
        "{min_bytes} in {time_s} is {rate_Bps}"),
    "dram_excess": Rule(
        "efficiency", "DRAM efficiency (read + write) below GOOD",
        "DRAM moves {dram_x} the minimum",
        "DRAM moved {dram_bytes} for a minimum of {min_bytes}: {dram_x}"),
    "l2_excess": Rule(
        "efficiency", "L2 efficiency below GOOD with DRAM at the minimum",
        "L2 moves {l2_x} the minimum (DRAM at it)",
        "L2 moved {l2_bytes} for a minimum of {min_bytes}: {l2_x}; DRAM is at the minimum"),
    "bound_below_minimum": Rule(
        "efficiency", "a level moved less than a minimum known to be only an upper bound",
        "below the minimum at {levels}: {bound}",
        "the op's minimum is an upper bound ({bound}); {levels} moved less than it"),
    "l2_below_minimum": Rule(
        "efficiency", "L2 moved less than the minimum: the minimum over-counts the call",
        "below the minimum at {levels}: the minimum over-counts this call, a bound it beats",
        "L2 moved {l2_bytes} for a minimum of {min_bytes}: less than any implementation must move, so "
        "the call needed less (a data-dependent op, an input used only in part, or data it skips)"),
    "l1_loads_below_minimum": Rule(
        "efficiency", "L1 loads below the minimum: loads outside the LSU pipe are not counted",
        "L1 loads {l1_x} the minimum: loads through {via} are not in these counters",
        "L1 loads {l1_bytes} for a minimum read of {min_bytes}; the rest moved through {via}"),
    "l1_stores_below_minimum": Rule(
        "efficiency", "L1 stores below the minimum: stores outside the LSU pipe are not counted",
        "L1 stores {l1_x} the minimum: stores through {via} are not in these counters",
        "L1 stores {l1_bytes} for a minimum write of {min_bytes}; the rest moved through {via}"),
    "dram_reads_below_minimum": Rule(
        "efficiency", "DRAM reads below the minimum read",
        "DRAM reads below the minimum: part of the input came from L2 (not flushed before)",
        "DRAM read {dram_bytes} for a minimum read of {min_bytes}: the rest was in L2 already"),
    "dram_below_minimum": Rule(
        "efficiency", "DRAM bytes below the minimum (no per-direction counters)",
        "DRAM below the minimum: input served from L2, or output still in L2 at the end",
        "DRAM moved {dram_bytes} for a minimum of {min_bytes}"),
    "dram_writes_below_minimum": Rule(
        "efficiency", "DRAM writes below the minimum write",
        "DRAM writes below the minimum: the output was still in L2 when the kernel ended",
        "DRAM wrote {dram_bytes} for a minimum write of {min_bytes}: the rest stayed in L2"),
    # --- time: why a row's time is far above its floor (memtraffic.analysis.time_notes's order) ----------
    "time_spills": Rule(
        "time", "local-memory bytes beside the global ones",
        "time {time_x} a copy of the minimum: spills to local memory take it",
        "{time_s} against {copy_s} for a copy of the minimum at {roof_Bps}; {local_bytes} of local memory"),
    "launch_bound": Rule(
        "time", "time within 2x of an empty kernel's (per kernel)",
        "launch-bound: {time_s} is within 2x of an empty kernel's {launch_s}: give each launch more work",
        "{kernels_n} kernel(s) in {time_s}; an empty kernel takes {launch_s} under ncu; a copy of the "
        "minimum would take {copy_s} at {roof_Bps}",
        "launch-bound, within 2x of an empty kernel's time: give each launch more work"),
    "compute_bound": Rule(
        "time", "the minimum's FLOPs at the measured roof of the dtype take half the time or more",
        "compute-bound: the FLOPs take {flops_s} at the {roof} roof, {share_frac} of the time",
        "{gflop_n} GFLOP at the measured {roof} roof ({roof_flops}) take {flops_s} of {time_s}"),
    "compute_below_roof": Rule(
        "time", "the FLOPs set the floor, but run below the measured roof",
        "compute below its roof: the FLOPs take {flops_s} at the {roof} roof, {share_frac} of the time",
        "{gflop_n} GFLOP at the measured {roof} roof ({roof_flops}) take {flops_s} of {time_s}"),
    "grid_short": Rule(
        "time", "fewer blocks than 0.8 of one wave",
        "too few threads to fill the GPU: the grid fills {waves_n} of one wave",
        "{grid_n} blocks of {block_n} threads on {sms_n} SMs: {waves_n} waves; {in_flight}",
        "too few threads to fill the GPU: the grid fills under one wave"),
    "l1_requests": Rule(
        "time", "bytes at the minimum from L2 on, L1 moving 2x the minimum or more",
        "time {time_x} a copy of the minimum: the L1 requests take it ({l1_x} the minimum)",
        "{time_s} against {copy_s} for a copy of the minimum at {roof_Bps}; L1 {what} move {l1_x} their "
        "minimum, absorbed by L1 and L2 before DRAM; {in_flight}"),
    "low_occupancy": Rule(
        "time", "theoretical occupancy under 50%",
        "occupancy {occupancy_pct}: {limiter}",
        "theoretical occupancy {occupancy_pct} ({limiter}); {in_flight}"),
    "achieved_occupancy": Rule(
        "time", "achieved occupancy under 0.6 of the theoretical",
        "achieved occupancy {achieved_pct} of a theoretical {occupancy_pct}",
        "warps active {achieved_pct} of the SM's, the launch allowing {occupancy_pct}; {in_flight}"),
    "tail_wave": Rule(
        "time", "1 to 4 waves with a last wave at most half full",
        "a partial last wave: {waves_n} waves, the last {last_frac} full",
        "the GPU idles while the last wave runs; {in_flight}",
        "a partial last wave: the GPU idles while it runs"),
    "latency": Rule(
        "time", "bytes in flight (Little's law) below what the copy roof needs",
        "latency-bound: each thread needs {thread_n} B in flight for the copy roof",
        "{in_flight}",
        "latency-bound: too few bytes in flight a thread for the copy roof"),
    "time_unknown": Rule(
        "time", "time far above a copy of the minimum, no reason above fits",
        "no reason fits the time: measure with --metrics traffic,spills",
        "{time_s} against {copy_s} for a copy of the minimum; not launch, FLOPs, grid, occupancy or tail"),
    # --- floor: rows whose floor is not known or not measurable ------------------------------------------
    "no_minimum": Rule(
        "floor", "a row without a minimum (an op without a model, a kernel outside the traced ops)",
        "no minimum known: its whole time counts as recoverable",
        "no minimum and no FLOPs for these calls, so no floor: {time_s} counted as recoverable"),
    "no_roofs": Rule(
        "floor", "no measured roofs for the GPU",
        "no measured roofs for this GPU: memtraffic ceilings --refresh measures them",
        "the floor needs the measured copy and FLOP roofs of {device}"),
    "timing_only": Rule(
        "floor", "a timing-only run where no other reason fits",
        "no counters in a timing-only run: profile with ncu to tell bytes from latency",
        "a timing-only run records times, not bytes"),
    "timing_only_rate": Rule(
        "floor", "a timing-only row with a minimum: its bandwidth at the minimum against the copy roof",
        "timing only, no per-level bytes: {rate_Bps} at the minimum, {roof_eff} of the copy roof",
        "minimum bytes / time = {rate_Bps}; the measured copy roof's fraction {roof_eff}"),
    "timing_only_above_roof": Rule(
        "floor", "a timing-only row faster than a DRAM copy of its minimum",
        "timing only: {rate_Bps} at the minimum, {roof_eff} of the copy roof: data came from L2",
        "above the copy roof: data the previous kernels left in L2 was read from there (no cache is "
        "flushed between kernels in a timing-only run)"),
    "timing_only_no_minimum": Rule(
        "floor", "a timing-only row without a minimum",
        "timing only, no per-level bytes, and no minimum for this range",
        "a timing-only run records times, not bytes; this range has no minimum"),
    # --- line: one source line (or instruction) of a kernel ----------------------------------------------
    "line_spills": Rule(
        "line", "local-memory bytes on the line",
        "spills {local_bytes} of local memory (registers spilled, or an array indexed at run time)",
        "{local_bytes} of local memory; spills are never compulsory: every byte is excess"),
    "line_ideal_waste": Rule(
        "line", "a line whose bytes asked for are unknown (see analysis/lines.py): ncu's ideal sectors below "
        "the sectors moved",
        "{what} fill at most {used_n} of every 32-byte sector (ncu's ideal sectors)",
        "the line moved {moved_bytes} in 32-byte sectors where its accesses' distinct bytes fit in "
        "{ideal_bytes} (ncu's ideal sectors): at most {used_n} useful bytes a sector; the bytes it asked "
        "for are not counted per line (its threads' {thread_bytes} count repeated addresses too)"),
    "line_unsplit": Rule(
        "line", "a line whose bytes asked for are unknown: its L1 bytes above its kernel's minimum",
        "{what} move {l1_x} the minimum: per line, sector use and repeats are not told apart",
        "the line moved {moved_bytes} for its kernel's minimum of {min_bytes} ({l1_x}); how much of that is "
        "sector waste and how much repeated requests needs the bytes asked for, which ncu counts per kernel "
        "only (analyze gives both); the threads' {thread_bytes} count repeated addresses too"),
    "worst_line": Rule(
        "line", "the source line (or instruction) of a row's kernel with the most excess sectors",
        "worst line {line}: {kinds}, {share_frac} of its kernel's bytes",
        "of the kernel's lines, {line} has the most excess sectors ({excess_n}): {kinds}"),
    # --- diff: what changed between two runs' rows ----------------------------------------------------------
    "diff_sector_gone": Rule(
        "diff", "sector efficiency below GOOD in A, at or above it in B",
        "{what} sector waste gone (used {used_n} of every 32 bytes)",
        "sector efficiency {a_eff} -> {b_eff}"),
    "diff_sector_new": Rule(
        "diff", "sector efficiency at or above GOOD in A, below it in B",
        "{what} now waste sectors (use {used_n} of every 32 bytes)",
        "sector efficiency {a_eff} -> {b_eff}"),
    "diff_sector_changed": Rule(
        "diff", "sector efficiency below GOOD in both, changed by more than 10%",
        "{what} use {a_used_n} -> {b_used_n} of every 32-byte sector",
        "sector efficiency {a_eff} -> {b_eff}"),
    "diff_requests": Rule(
        "diff", "requested bytes / minimum changed by more than 10%, above 1 / GOOD in one run",
        "{what} request {a_x} -> {b_x} the minimum",
        "requested / minimum: {a_x} in A, {b_x} in B"),
    "diff_requests_gone": Rule(
        "diff", "requested bytes / minimum above 1 / GOOD in A, at most that in B",
        "{what} request {a_x} -> {b_x} the minimum: redundant requests gone",
        "requested / minimum: {a_x} in A, {b_x} in B"),
    "diff_kernels": Rule(
        "diff", "a different number of kernels",
        "kernels {a_n} -> {b_n}",
        "kernels in the row: {a_n} in A, {b_n} in B"),
    "diff_line_verdict": Rule(
        "diff", "a source line judged differently (lines rows)",
        "was {a}, now {b}",
        "the line's findings: {a} in A, {b} in B"),
    "diff_worst_line": Rule(
        "diff", "the worst source line a run's row names (runs measured with --source)",
        "worst line in {side}: {line}",
        "the line with the most excess sectors in {side}: {line}"),
}
# fmt: on


def fmt_factor(x: float) -> str:
    """A factor as every view writes it: '16x', '4x', '3.2x', '0.84x'."""
    if not math.isfinite(x):
        return "-"
    if x < 1:
        return f"{x:.2f}x"
    if x >= 10 or abs(x - round(x)) < 0.05 * x:
        return f"{x:.0f}x"
    return f"{x:.1f}x"


def fmt_value(name: str, value: float | int | str | None) -> str:
    """One evidence value written as its name's ending says (see the module)."""
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    if not math.isfinite(value):
        return "-"
    if name.endswith("_bytes"):
        return fmt_bytes(value)
    if name.endswith("_s"):
        return fmt_time(value * 1e9)
    if name.endswith("_x"):
        return fmt_factor(value)
    if name.endswith("_Bps"):
        return fmt_rate(value)
    if name.endswith("_flops"):
        return fmt_rate(value, "FLOP/s")
    if name.endswith("_frac"):
        return f"{value:.0%}"
    if name.endswith("_pct"):
        return f"{value:.0f}%"
    if name.endswith("_eff"):
        return f"{value:.2f}"
    if name.endswith("_n"):
        return f"{value:,.0f}" if float(value).is_integer() or abs(value) >= 10 else f"{value:.3g}"
    return f"{value:.3g}"


class _Missing(dict[str, str]):
    def __missing__(self, key: str) -> str:
        return "-"


def _fill(template: str, evidence: Evidence) -> str:
    values = _Missing({k: fmt_value(k, v) for k, v in evidence.items()})
    return string.Formatter().vformat(template, (), values)


def say(f: Finding) -> str:
    """The finding's one sentence (its rule's `say` over its evidence)."""
    return _fill(RULES[f.rule].say, f.evidence)


def explain(f: Finding) -> str:
    """The arithmetic behind the finding (its rule's `explain` over its evidence)."""
    return _fill(RULES[f.rule].explain, f.evidence)


def sentences(found: Iterable[Finding]) -> str:
    """The findings' sentences in one line (a table cell, results.csv's diagnosis column), each once."""
    return "; ".join(dict.fromkeys(say(f) for f in found))


def to_dicts(found: Iterable[Finding]) -> list[dict[str, object]]:
    """Findings as JSON has them, each with its sentence and explanation beside the record."""
    return [{**f.to_dict(), "say": say(f), "explain": explain(f)} for f in found]


def _plain(v: float | int | str | None) -> float | int | str | None:
    return None if isinstance(v, float) and not math.isfinite(v) else v
