"""The one registry of finding rules, and the efficiency checks of an analyzed row.

RULES is one plain dict, read top to bottom: each rule's kind (efficiency, time, floor, line, diff), what
it checks, its sentence (`say`) and its explanation (`explain`), templates over its findings' evidence
names (memtraffic.vocab.finding.fill writes each value as its name's ending says). An efficiency rule
carries its check beside its words: `when` it applies to a row's `Facts` and the findings it makes there
(`find`, each a `Finding` record with its evidence); `diagnose` runs those in RULES' order, then adds why
time is far above a copy of the minimum (memtraffic.analysis.time_notes). Time, floor, line and diff
rules are made where their numbers are (time_notes, floor, lines, diff). Adding an efficiency rule is one
entry here (docs/contributing.md).

`say` and `explain` look a finding's rule up and fill its templates: views (and the JSON and CSV writers)
turn records into words with them; nothing reads the words back. `told_once` says a rule found on several
rows once for them all (its numbers as ranges), as every view does.
"""

from __future__ import annotations

import math
import string
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal, TypeGuard

from memtraffic.analysis.time_notes import explain_time, local_bytes
from memtraffic.vocab.arch import Chip, chip_for_gpu
from memtraffic.vocab.finding import GOOD, SECTOR_BYTES, Finding, Level, Subject, fill, fmt_value
from memtraffic.vocab.units import ABOVE

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["GOOD", "SECTOR_BYTES", "CHECKS", "NOT_A_RESULT", "REPEATED", "RULES", "Facts", "Role", "Rule",
           "Told", "diagnose", "explain", "needs_full_set", "not_results", "ok", "predicted", "reuses_tiles",
           "say", "sentences", "to_dicts", "told_once"]
SAY_WIDTH = 100  # the most characters a rule's sentence may take on a terminal
REPEATED = 2  # a rule found on this many rows or more is said once for them, with the count
LSU_NEGLIGIBLE = 0.01  # L1 (LSU) bytes under this fraction of L2's: the kernel moves its data another way


PREDICTED = 0.01  # L1 bytes within this fraction of the row's model prediction: the model accounts for them
SHOWN_MAX = 2.0  # an efficiency above this is not a result: a counter missed bytes, or the minimum is off
TILE_REUSE = 16.0  # FLOPs a minimum byte from which an op re-reads its tiles from L1 by design (a matmul)

# Why an efficiency is not given (null in the JSON, '-' in tables), per efficiency column.
_LEVEL_OF = {"eff_l1_ld": "L1 ld", "eff_l1_st": "L1 st", "eff_l2": "L2", "eff_dram": "DRAM",
             "eff_dram_rd": "DRAM rd", "eff_dram_wr": "DRAM wr"}
_MINIMUM_OF = {"eff_l1_ld": "min_read_bytes", "eff_dram_rd": "min_read_bytes", "eff_l1_st": "min_write_bytes",
               "eff_dram_wr": "min_write_bytes"}
NOT_A_RESULT = {
    "bypass": "the L1 (LSU) counters miss loads or stores outside their pipe (TMA, async copies)",
    "cached": "less than the minimum counted here (efficiency above 2): bytes a cache kept, traffic outside "
              "the counted pipe, or a minimum that over-counts the op",
    "no minimum": "the minimum at this level is 0",
    "tiles": "a compute-heavy op (a matmul) re-reads its tiles from L1 by design: judged by L2, DRAM and "
             "its FLOPs",
}

# A direction of an analyzed row: its name, efficiency, L1 bytes, the model's predicted bytes, the minimum.
_DIRECTIONS = (("ld", "eff_l1_ld", "l1_ld_bytes", "pred_read_bytes", "min_read_bytes"),
               ("st", "eff_l1_st", "l1_st_bytes", "pred_write_bytes", "min_write_bytes"))


def needs_full_set(rows: pd.DataFrame) -> pd.Series:
    """Which rows of an analyzed table a first look (the one-pass `bytes` set) leaves unexplained: L1 load
    or store efficiency below GOOD, in a direction whose L1 bytes are not those its variant's model
    predicts (`pred_read_bytes`/`pred_write_bytes`, within PREDICTED). Only the bytes the instructions
    asked for and the sectors (the `traffic` set, six replay passes) tell scattered accesses from repeated
    ones there, so `measure --metrics auto` measures those configs again with it and `profile` names those
    op types for `--ops`. Where the model predicts the bytes (a three-pass softmax reads its input three
    times), the sectors have nothing left to explain. A boolean Series (False where an efficiency is
    unknown)."""
    unexplained: pd.Series = rows.apply(lambda r: _unexplained(r.to_dict()), axis=1).astype(bool) \
        if len(rows) else rows["eff_l1_ld"] < GOOD
    return unexplained


def _unexplained(r: Mapping[str, object]) -> bool:
    """A direction of the row below GOOD whose L1 bytes are not its model's prediction."""
    explained = predicted(r)
    return any(ok(e := r.get(eff)) and e < GOOD and d not in explained for d, eff, *_ in _DIRECTIONS)


def predicted(r: Mapping[str, object]) -> list[str]:
    """The directions ('ld', 'st') of a row below GOOD whose L1 bytes are its model's prediction (within
    PREDICTED): traffic the variant's algorithm makes by design."""
    out = []
    for d, eff, moved, pred, _ in _DIRECTIONS:
        e, m, p = r.get(eff), r.get(moved), r.get(pred)
        if ok(e) and e < GOOD and ok(m) and ok(p) and p > 0 and abs(m - p) <= PREDICTED * p:
            out.append(d)
    return out


def reuses_tiles(r: Mapping[str, object]) -> bool:
    """An op whose minimum FLOPs a minimum byte reach TILE_REUSE: its L1 re-reads are its algorithm."""
    flops, minimum = r.get("model_flops"), r.get("min_bytes")
    return ok(flops) and ok(minimum) and minimum > 0 and flops / minimum >= TILE_REUSE


def not_results(r: Mapping[str, object]) -> dict[str, str]:
    """The efficiency columns of a row that are not results, each with why (a key of NOT_A_RESULT): a
    counter that cannot see the op's traffic, bytes a cache kept (an efficiency above SHOWN_MAX), a
    minimum of 0, or a matmul's L1 re-reads. Tables show '-', the JSON null."""
    out: dict[str, str] = {}
    bypass = Facts(dict(r)).bypass
    for key in _LEVEL_OF:
        e = r.get(key)
        if not ok(e):
            continue
        if key.startswith("eff_l1") and (("loads" if key == "eff_l1_ld" else "stores") in bypass):
            out[key] = "bypass"
        elif key.startswith("eff_l1") and reuses_tiles(r):
            out[key] = "tiles"
        elif e == 0 and r.get(_MINIMUM_OF.get(key, "min_bytes")) == 0:
            out[key] = "no minimum"
        elif e > SHOWN_MAX:
            out[key] = "cached"
    return out


def ok(x: object) -> TypeGuard[float]:
    """A finite number (not None, not NaN)."""
    return x is not None and isinstance(x, int | float) and math.isfinite(x)


@dataclass(frozen=True)
class Role:
    """A row's place among its range's kernels (--group-by kernel): the main one carries the minimum."""

    main: bool
    main_kernel: str
    kernels: int


@dataclass
class Facts:
    """What the rules read of one row: the row itself and its context. `bound`: why the row's minimum is
    only an upper bound, if it is; `role`: the row's place among its range's kernels; `roofs`: the
    device's measured roofs (the time note needs them: memtraffic.analysis.time_notes)."""

    r: dict[str, Any]
    bound: str = ""
    role: Role | None = None
    roofs: Mapping[str, float] | None = None
    subject: Subject = field(default_factory=Subject)
    chip: Chip | None = field(init=False)
    bypass: list[str] = field(init=False)  # 'loads' and/or 'stores' whose L1 counters read ~0

    def __post_init__(self) -> None:
        self.chip = chip_for_gpu(self.r.get("device") if isinstance(self.r.get("device"), str) else None)
        # TMA (bulk async) copies move data between global and shared memory without the LSU, so the L1
        # counters read ~0 while L2 moved the data (cuBLAS's bf16 gemm on Hopper): the L1 columns say
        # nothing.
        self.bypass = [d for d, l1, l2 in (("loads", self.r.get("l1_ld_bytes"), self.r.get("l2_rd_bytes")),
                                           ("stores", self.r.get("l1_st_bytes"), self.r.get("l2_wr_bytes")))
                       if ok(l1) and ok(l2) and l2 > 0 and l1 < LSU_NEGLIGIBLE * l2]

    @property
    def tma(self) -> bool:
        """A GPU older than Hopper has no TMA (an unknown device name is not ruled out)."""
        return self.chip is None or self.chip.has_tma

    @property
    def async_copies(self) -> str:
        if self.tma or self.chip is None:
            return "TMA or other async copies"
        return f"async copies; {self.chip.name} has no TMA"

    @cached_property
    def slow(self) -> Finding | None:
        """Why time is far above a copy of the minimum (None when it is not, or unknown)."""
        return explain_time(self.r, self.roofs)

    def found(self, rule: str, level: Level = "", **evidence: float | str) -> Finding:
        """A finding of this row."""
        return Finding(rule, self.subject, level, evidence)

    @property
    def n_kernels(self) -> int:
        return self.r.get("n_kernels") or 1

    def above(self, key: str) -> bool:
        """The level moved less than the minimum (its efficiency above ABOVE)."""
        return ok(self.r.get(key)) and self.r[key] > ABOVE


# --- what the efficiency rules' checks compute -----------------------------------------------------------


def _num(r: Mapping[str, object], key: str) -> float:
    v = r.get(key)
    return float(v) if ok(v) else math.nan


def _role(f: Facts) -> list[Finding]:
    """main_kernel or helper_kernel, by the row's role among its range's kernels."""
    assert f.role is not None
    return [f.found("main_kernel" if f.role.main else "helper_kernel", main=f.role.main_kernel,
                    kernels_n=f.role.kernels)]


def _spills(f: Facts) -> list[Finding]:
    r, spilled = f.r, local_bytes(f.r)
    minimum = _num(r, "min_bytes")
    return [f.found("spills", "local", local_bytes=spilled, registers_n=_num(r, "registers"),
                    local_ld_bytes=r.get("l1_local_ld_bytes") or 0,
                    local_st_bytes=r.get("l1_local_st_bytes") or 0,
                    min_bytes=minimum, local_x=spilled / minimum if minimum > 0 else math.nan)]


def _lsu_bypass(f: Facts) -> list[Finding]:
    both = len(f.bypass) == 2
    who = "loads and stores" if both else f.bypass[0]
    l1 = sum(_num(f.r, k) for k, d in (("l1_ld_bytes", "loads"), ("l1_st_bytes", "stores")) if d in f.bypass)
    l2 = sum(_num(f.r, k) for k, d in (("l2_rd_bytes", "loads"), ("l2_wr_bytes", "stores")) if d in f.bypass)
    level: Level = "L1" if both else ("L1 ld" if who == "loads" else "L1 st")
    return [f.found("lsu_bypass", level, what=who, via=f.async_copies, l1_bytes=l1, l2_bytes=l2)]


def _low_sector_use(f: Facts) -> dict[str, float]:
    """Sector waste: per direction ('ld', 'st') the sector efficiency where the instructions asked for
    fewer bytes than the 32-byte sectors moved."""
    waste = {d: f.r.get(f"sector_eff_{d}") for d in ("ld", "st")}
    return {d: s for d, s in waste.items() if ok(s) and 0 < s < GOOD}  # 0: no request counted


def _sector_waste(f: Facts) -> list[Finding]:
    low = _low_sector_use(f)

    def one(d: str, what: str, level: Level) -> Finding:
        moved = _num(f.r, f"l1_{d}_bytes")
        return f.found("sector_waste", level, what=what, used_n=round(SECTOR_BYTES * low[d]),
                       sector_eff=low[d], sector_x=1 / low[d], requested_bytes=_num(f.r, f"req_{d}_bytes"),
                       moved_bytes=moved)
    if len(low) == 2 and round(SECTOR_BYTES * low["ld"]) == round(SECTOR_BYTES * low["st"]):
        both = one("ld", "loads and stores", "L1")
        moved = _num(f.r, "l1_ld_bytes") + _num(f.r, "l1_st_bytes")
        requested = _num(f.r, "req_ld_bytes") + _num(f.r, "req_st_bytes")
        return [f.found("sector_waste", "L1", **{**both.evidence, "moved_bytes": moved,
                                                  "requested_bytes": requested,
                                                  "sector_eff": requested / moved if moved else math.nan})]
    return [one(d, "loads" if d == "ld" else "stores", "L1 ld" if d == "ld" else "L1 st") for d in low]


def _extra_requests(f: Facts) -> list[tuple[str, float]]:
    """Requests beyond the minimum, per direction: (direction, requested / minimum)."""
    out = []
    for d, req, minimum in (("ld", f.r.get("req_ld_bytes"), f.r.get("min_read_bytes")),
                            ("st", f.r.get("req_st_bytes"), f.r.get("min_write_bytes"))):
        if ok(req) and ok(minimum) and minimum > 0 and req > minimum / GOOD:
            out.append((d, req / minimum))
    return out


def _redundant_requests(f: Facts) -> list[Finding]:
    """The same bytes asked for several times (warps, programs or passes): requested / minimum, and with
    the sector efficiency the L1 amplification it makes (moved / minimum = sector_x x requested_x)."""
    out = []
    for d, k in _extra_requests(f):
        minimum = _num(f.r, "min_read_bytes" if d == "ld" else "min_write_bytes")
        moved, sector = _num(f.r, f"l1_{d}_bytes"), _num(f.r, f"sector_eff_{d}")
        out.append(f.found("redundant_requests", "L1 ld" if d == "ld" else "L1 st",
                           what="input" if d == "ld" else "output", requested_x=k,
                           requested_bytes=_num(f.r, f"req_{d}_bytes"), min_bytes=minimum,
                           sector_x=1 / sector if sector > 0 else math.nan, moved_bytes=moved,
                           l1_x=moved / minimum))
    return out


def _unasked(f: Facts) -> list[tuple[str, float, float, float]]:
    """(direction, L1 bytes, minimum, predicted) of the predicted directions whose requested bytes were not
    measured (a first look) and whose minimum is known."""
    out = []
    for d, _, moved, pred, minimum in _DIRECTIONS:
        lo = f.r.get(minimum)
        if d in predicted(f.r) and not ok(f.r.get(f"req_{d}_bytes")) and ok(lo) and lo > 0:
            out.append((d, f.r[moved], lo, f.r[pred]))
    return out


def _predicted_passes(f: Facts) -> list[Finding]:
    """L1 bytes above the minimum that the variant's model predicts, where no request counters say more."""
    return [f.found("predicted_passes", "L1 ld" if d == "ld" else "L1 st",
                    what="input" if d == "ld" else "output", passes_x=moved / minimum, moved_bytes=moved,
                    min_bytes=minimum, predicted_bytes=pred) for d, moved, minimum, pred in _unasked(f)]


def _caches_absorb(f: Facts) -> list[Finding]:
    return [f.found("caches_absorb", "L1 ld", dram_rd_eff=min(f.r["eff_dram_rd"], 1.0),
                    l1_x=1 / f.r["eff_l1_ld"], min_bytes=_num(f.r, "min_bytes"),
                    time_s=_num(f.r, "time_ns") * 1e-9, rate_Bps=_num(f.r, "bw_min_Bps"))]


def _names(levels: Sequence[str]) -> str:
    names = {"eff_l1_ld": "L1 ld", "eff_l1_st": "L1 st", "eff_l2": "L2", "eff_dram": "DRAM",
             "eff_dram_rd": "DRAM rd"}
    return ", ".join(names[k] for k in levels)


def _levels_below(f: Facts) -> list[str]:
    return [k for k in ("eff_l1_ld", "eff_l1_st", "eff_l2", "eff_dram", "eff_dram_rd") if f.above(k)]


def wrote_below(r: Mapping[str, object]) -> bool:
    """DRAM wrote less than the minimum write (none at all included, where eff_dram_wr is undefined)."""
    wrote, minimum = r.get("dram_wr_bytes"), r.get("min_write_bytes")
    return ok(wrote) and ok(minimum) and wrote * ABOVE < minimum


def _levels_explained(f: Facts) -> bool:
    """A reason covers every level below the minimum at once (the bound, or less than the minimum at L2):
    the per-level checks after it stay silent."""
    return bool(f.bound and _levels_below(f)) or f.above("eff_l2")


def _dram_only_below(f: Facts) -> bool:
    """DRAM (read + write) below the minimum where no per-direction counters tell reads from writes."""
    return f.above("eff_dram") and not ok(f.r.get("eff_dram_rd"))


def _dram_below(f: Facts) -> list[Finding]:
    return [f.found("dram_below_minimum", "DRAM", min_bytes=_num(f.r, "min_bytes"),
                    dram_bytes=_num(f.r, "dram_rd_bytes") + _num(f.r, "dram_wr_bytes"))]


def _dram_writes_below(f: Facts) -> list[Finding]:
    return [f.found("dram_writes_below_minimum", "DRAM wr", min_bytes=_num(f.r, "min_write_bytes"),
                    dram_bytes=_num(f.r, "dram_wr_bytes"))]


def _dram_reads_below(f: Facts) -> list[Finding]:
    return [f.found("dram_reads_below_minimum", "DRAM rd", min_bytes=_num(f.r, "min_read_bytes"),
                    dram_bytes=_num(f.r, "dram_rd_bytes"))]


def _absorbed(f: Facts) -> bool:
    """L1 loads well above the minimum while DRAM reads sit at it. Said once: where the time rule blames
    the L1 requests, it says this too."""
    return (ok(f.r.get("eff_l1_ld")) and f.r["eff_l1_ld"] < GOOD and ok(f.r.get("eff_dram_rd"))
            and f.r["eff_dram_rd"] >= GOOD and (f.slow is None or f.slow.rule != "l1_requests")
            and not reuses_tiles(f.r))


def _dram_excess(f: Facts) -> list[Finding]:
    return [f.found("dram_excess", "DRAM", dram_x=1 / f.r["eff_dram"], min_bytes=_num(f.r, "min_bytes"),
                    dram_bytes=_num(f.r, "dram_rd_bytes") + _num(f.r, "dram_wr_bytes"))]


def _bound_below(f: Facts) -> list[Finding]:
    return [f.found("bound_below_minimum", levels=_names(_levels_below(f)), bound=f.bound)]


def _l2_below(f: Facts) -> list[Finding]:
    """Less than the minimum reached L2: the call needed less than its minimum counts."""
    return [f.found("l2_below_minimum", "L2", levels=_names(_levels_below(f)),
                    min_bytes=_num(f.r, "min_bytes"),
                    l2_bytes=_num(f.r, "l2_rd_bytes") + _num(f.r, "l2_wr_bytes"))]


def _lsu_name(f: Facts) -> str:
    """What moves data past the LSU counters on the row's GPU."""
    return "TMA" if f.tma else f.async_copies


def _below(rule: str, level: Level, eff: str, moved: str, minimum: str) -> Callable[[Facts], list[Finding]]:
    return lambda f: [f.found(rule, level, l1_x=1 / f.r[eff], l1_bytes=_num(f.r, moved),
                              min_bytes=_num(f.r, minimum), via=_lsu_name(f))]


Kind = Literal["efficiency", "time", "floor", "line", "diff"]


@dataclass(frozen=True)
class Rule:
    """One rule of the registry: its kind, what it checks, its sentence and its explanation (templates
    over its findings' evidence names), the shorter sentence without numbers that says it once for
    several rows where their ranges do not fit (`group`); and an efficiency rule's check: `when` it
    applies to a row and the findings it makes there (`find`)."""

    kind: Kind
    checks: str
    say: str
    explain: str
    group: str = ""  # said for several rows where their ranges make `say` too long (told_once); '' where none
    when: Callable[[Facts], bool] | None = None
    find: Callable[[Facts], list[Finding]] | None = None


# Below the minimum: a reason for each level that moved less than the minimum (efficiency above ABOVE);
# output left in L2 (DRAM writes below the minimum, which tables show only inside DRAM rd+wr) is said too,
# also on a row otherwise at the minimum: no efficiency above ABOVE goes without its reason. A matmul's L1
# re-reads are its algorithm (reuses_tiles): no L1 finding for it.
# fmt: off
RULES: dict[str, Rule] = {
    # --- efficiency: one analyzed row (a config, an op call, a kernel) against its minimum ---------------
    "main_kernel": Rule(
        "efficiency", "a range with several kernels (--group-by kernel): the one its minimum is counted on",
        "main kernel of {kernels_n} in its range: the range's whole minimum is counted here",
        "the kernel moving the most L2 bytes (else the longest) of its range's {kernels_n} carries the "
        "range's minimum",
        when=lambda f: f.role is not None and f.role.main,
        find=_role),
    "helper_kernel": Rule(
        "efficiency", "a range with several kernels (--group-by kernel): the others",
        "helper kernel of {kernels_n} in its range: the minimum is counted on {main}",
        "a range of {kernels_n} kernels; its minimum is counted once, on {main}, so a helper kernel shows "
        "no efficiency of its own",
        when=lambda f: f.role is not None and not f.role.main,
        find=_role),
    "spills": Rule(
        "efficiency", "local-memory bytes (registers spilled) through L1",
        "spills {local_bytes} to local memory ({local_x} the minimum): fewer live values or registers",
        "{registers_n} registers a thread; local loads {local_ld_bytes} + stores {local_st_bytes} = "
        "{local_bytes}, against a minimum of {min_bytes}: every local byte is excess",
        when=lambda f: local_bytes(f.r) > 0,
        find=_spills),
    "lsu_bypass": Rule(
        "efficiency", "L1 (LSU) bytes under 1% of L2's: loads or stores outside the counted pipe",
        "{what} bypass the L1 (LSU) counters ({via}): judge by L2, DRAM and FLOPs",
        "L1 counted {l1_bytes} where L2 moved {l2_bytes}: the data moved through {via}, which the L1 "
        "(LSU) counters do not see, so no L1 efficiency is given",
        when=lambda f: bool(f.bypass),
        find=_lsu_bypass),
    "sector_waste": Rule(
        "efficiency", "bytes the instructions asked for / bytes the 32-byte sectors moved, below GOOD",
        "{what} use {used_n} of every 32-byte sector: adjacent threads should touch adjacent addresses",
        "the instructions asked for {requested_bytes}; L1 moved {moved_bytes} in 32-byte sectors: "
        "{requested_bytes} / {moved_bytes} = {sector_eff} ({used_n} useful bytes a sector, "
        "{sector_x} amplification)",
        when=lambda f: bool(_low_sector_use(f)) and not reuses_tiles(f.r),
        find=_sector_waste),
    "redundant_requests": Rule(
        "efficiency", "bytes the instructions asked for / the minimum, above 1 / GOOD",
        "each {what} byte requested {requested_x}: warps or programs repeat it, or the kernel makes passes",
        "{requested_bytes} requested for a minimum of {min_bytes}: {requested_x}; times the sector "
        "amplification {sector_x}, L1 moves {l1_x} the minimum ({moved_bytes})",
        when=lambda f: bool(_extra_requests(f)) and not reuses_tiles(f.r),
        find=_redundant_requests),
    "predicted_passes": Rule(
        "efficiency", "L1 bytes above the minimum that the variant's model predicts (no request counters)",
        "each {what} byte moves {passes_x} at L1, as the variant's model predicts: passes it makes",
        "L1 moved {moved_bytes} for a minimum of {min_bytes} ({passes_x}), within 1% of the model's "
        "prediction {predicted_bytes}",
        when=lambda f: bool(_unasked(f)) and not reuses_tiles(f.r),
        find=_predicted_passes),
    "kernel_passes": Rule(
        "efficiency", "a range of several kernels: each kernel is a pass over memory",
        "{kernels_n} kernels, each a pass over memory: fusing them saves passes",
        "the range launched {kernels_n} kernels; each reads its input from memory again",
        when=lambda f: f.n_kernels > 1,
        find=lambda f: [f.found("kernel_passes", kernels_n=f.n_kernels)]),
    "caches_absorb": Rule(
        "efficiency", "L1 load efficiency below GOOD while DRAM reads are at the minimum",
        "L1 and L2 absorb the extra loads before DRAM, but time pays ({rate_Bps} of minimum bytes)",
        "DRAM read efficiency {dram_rd_eff} (at the minimum) while L1 loads {l1_x} it; the minimum's "
        "{min_bytes} in {time_s} is {rate_Bps}",
        when=_absorbed,
        find=_caches_absorb),
    "dram_excess": Rule(
        "efficiency", "DRAM efficiency (read + write) below GOOD",
        "DRAM moves {dram_x} the minimum",
        "DRAM moved {dram_bytes} for a minimum of {min_bytes}: {dram_x}",
        when=lambda f: ok(f.r.get("eff_dram")) and f.r["eff_dram"] < GOOD,
        find=_dram_excess),
    "l2_excess": Rule(
        "efficiency", "L2 efficiency below GOOD with DRAM at the minimum",
        "L2 moves {l2_x} the minimum (DRAM at it)",
        "L2 moved {l2_bytes} for a minimum of {min_bytes}: {l2_x}; DRAM is at the minimum"),
    "bound_below_minimum": Rule(
        "efficiency", "a level moved less than a minimum known to be only an upper bound",
        "below the minimum at {levels}: {bound}",
        "the op's minimum is an upper bound ({bound}); {levels} moved less than it",
        when=lambda f: bool(f.bound and _levels_below(f)),
        find=_bound_below),
    "l2_below_minimum": Rule(
        "efficiency", "L2 moved less than the minimum: the minimum over-counts the call",
        "below the minimum at {levels}: the minimum over-counts this call, a bound it beats",
        "L2 moved {l2_bytes} for a minimum of {min_bytes}: less than any implementation must move, so "
        "the call needed less (a data-dependent op, an input used only in part, or data it skips)",
        when=lambda f: not f.bound and f.above("eff_l2"),
        find=_l2_below),
    "l1_loads_below_minimum": Rule(
        "efficiency", "L1 loads below the minimum: loads outside the LSU pipe are not counted",
        "L1 loads {l1_x} the minimum: loads through {via} are not in these counters",
        "L1 loads {l1_bytes} for a minimum read of {min_bytes}; the rest moved through {via}",
        when=lambda f: not _levels_explained(f) and f.above("eff_l1_ld") and "loads" not in f.bypass,
        find=_below("l1_loads_below_minimum", "L1 ld", "eff_l1_ld", "l1_ld_bytes", "min_read_bytes")),
    "l1_stores_below_minimum": Rule(
        "efficiency", "L1 stores below the minimum: stores outside the LSU pipe are not counted",
        "L1 stores {l1_x} the minimum: stores through {via} are not in these counters",
        "L1 stores {l1_bytes} for a minimum write of {min_bytes}; the rest moved through {via}",
        when=lambda f: not _levels_explained(f) and f.above("eff_l1_st") and "stores" not in f.bypass,
        find=_below("l1_stores_below_minimum", "L1 st", "eff_l1_st", "l1_st_bytes", "min_write_bytes")),
    "dram_reads_below_minimum": Rule(
        "efficiency", "DRAM reads below the minimum read",
        "DRAM reads below the minimum: part of the input came from L2 (not flushed before)",
        "DRAM read {dram_bytes} for a minimum read of {min_bytes}: the rest was in L2 already",
        when=lambda f: not _levels_explained(f) and f.above("eff_dram_rd"),
        find=_dram_reads_below),
    "dram_below_minimum": Rule(
        "efficiency", "DRAM bytes below the minimum (no per-direction counters)",
        "DRAM below the minimum: input served from L2, or output still in L2 at the end",
        "DRAM moved {dram_bytes} for a minimum of {min_bytes}",
        when=lambda f: not _levels_explained(f) and _dram_only_below(f),
        find=_dram_below),
    "dram_writes_below_minimum": Rule(
        "efficiency", "DRAM writes below the minimum write",
        "DRAM writes below the minimum: the output was still in L2 when the kernel ended",
        "DRAM wrote {dram_bytes} for a minimum write of {min_bytes}: the rest stayed in L2",
        when=lambda f: not _levels_explained(f) and not _dram_only_below(f) and wrote_below(f.r),
        find=_dram_writes_below),
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
        "no measured roofs for this GPU: memtraffic roofs --refresh measures them",
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

# The efficiency rules with a check, in the order diagnose runs them (the order a row's findings are said).
CHECKS: dict[str, Rule] = {name: rule for name, rule in RULES.items() if rule.when is not None}


def diagnose(r: dict[str, Any], bound: str = "", role: Role | None = None,
             roofs: Mapping[str, float] | None = None, subject: Subject | None = None) -> list[Finding]:
    """The findings of one row, in CHECKS' order: where an efficiency falls below GOOD or rises above
    ABOVE, where the kernel spills; then why time is far above a copy of the minimum when the bytes are
    not (a time rule; spills already said by their own check). Empty when none applies."""
    facts = Facts(r, bound, role, roofs, subject or Subject())
    found = [f for rule in CHECKS.values() if rule.when and rule.find and rule.when(facts)
             for f in rule.find(facts)]
    if facts.slow is not None and facts.slow.rule != "time_spills":
        found.append(replace(facts.slow, subject=facts.subject))
    return found


def say(f: Finding) -> str:
    """The finding's one sentence (its rule's `say` over its evidence)."""
    return fill(_rule(f).say, f.evidence)


def explain(f: Finding) -> str:
    """The arithmetic behind the finding (its rule's `explain` over its evidence)."""
    return fill(_rule(f).explain, f.evidence)


def _rule(f: Finding) -> Rule:
    if f.rule not in RULES:
        raise KeyError(f"no rule {f.rule!r} in memtraffic.analysis.findings.RULES")
    return RULES[f.rule]


def sentences(found: Iterable[Finding]) -> str:
    """The findings' sentences in one line (a table cell, results.csv's diagnosis column), each once."""
    return "; ".join(dict.fromkeys(say(f) for f in found))


def to_dicts(found: Iterable[Finding]) -> list[dict[str, object]]:
    """Findings as JSON has them, each with its sentence and explanation beside the record."""
    return [{**f.to_dict(), "say": say(f), "explain": explain(f)} for f in found]


# --- told once: one rule found on several rows -------------------------------------------------------------


@dataclass(frozen=True)
class Told:
    """A rule found on several rows, said once: `sentence` is its `say` with each number that differs
    between the rows written as its range ('1.49-1.53 TB/s') and words that differ joined ('loads and
    stores'); `rows` the rows' indices (each once, in order); `members` each (row index, finding);
    `varies` the evidence names whose written value differs, which `values` writes for one finding."""

    rule: str
    sentence: str
    rows: tuple[int, ...]
    members: tuple[tuple[int, Finding], ...]
    varies: tuple[str, ...]

    def values(self, f: Finding) -> str:
        """The finding's own values of the names that vary ('' where none does)."""
        out, out_word = "", False
        for k in self.varies:
            v = f.evidence.get(k)
            out += ("" if not out else " " if out_word else ", ") + fmt_value(k, v)
            out_word = isinstance(v, str)  # 'input 5x', '88.5 us, 87%'
        return out

    @property
    def numbers_vary(self) -> bool:
        """A number differs between the rows (not only words)."""
        return any(not isinstance(f.evidence.get(k), str) for k in self.varies for _, f in self.members)

    def per_row(self) -> list[tuple[int, str, list[Finding]]]:
        """Each row (index), its own values ('input 5x, output 3x'; '' where none varies), its findings."""
        out = []
        for i in self.rows:
            mine = [f for j, f in self.members if j == i]
            out.append((i, ", ".join(v for v in map(self.values, mine) if v), mine))
        return out


def told_once(rows: Sequence[Sequence[Finding]], room: int = SAY_WIDTH
              ) -> tuple[list[list[Finding]], list[Told]]:
    """Each row's findings less those said once for several rows; and those (`Told`, in the order rows
    show them). A rule found on REPEATED rows or more is one sentence for them all, whatever its numbers
    and words: its advice is said once. Where that sentence takes more than `room` characters, the rule's
    `group` sentence (without numbers) says it, if it has one; where joined words (phrases, not 'input'
    and 'output') make it longer than twice SAY_WIDTH, it is said once per distinct wording. A rule on
    fewer rows stays with its rows."""
    by_rule: dict[str, list[tuple[int, int]]] = {}
    for i, found in enumerate(rows):
        for j, f in enumerate(found):
            by_rule.setdefault(f.rule, []).append((i, j))
    told: list[Told] = []
    for rule, at in by_rule.items():
        if len({i for i, _ in at}) < REPEATED:
            continue
        members = [(i, rows[i][j]) for i, j in at]
        one = _told(rule, members, room)
        if len(one.sentence) <= 2 * SAY_WIDTH:
            told.append(one)
            continue
        worded: dict[tuple[str, ...], list[tuple[int, Finding]]] = {}
        for i, f in members:
            worded.setdefault(_words(f), []).append((i, f))
        told += [_told(rule, ms, room) for ms in worded.values() if len({i for i, _ in ms}) >= REPEATED]
    said = {(i, id(f)) for t in told for i, f in t.members}
    own = [[f for f in found if (i, id(f)) not in said] for i, found in enumerate(rows)]
    return own, told


def _fields(template: str) -> list[str]:
    return list(dict.fromkeys(name for _, name, _, _ in string.Formatter().parse(template) if name))


def _words(f: Finding) -> tuple[str, ...]:
    return tuple(str(f.evidence.get(k)) for k in _fields(_rule(f).say) if isinstance(f.evidence.get(k), str))


def _told(rule: str, members: Sequence[tuple[int, Finding]], room: int) -> Told:
    said: dict[str, str] = {}
    varies = []
    for name in _fields(RULES[rule].say):
        values = [f.evidence.get(name) for _, f in members]
        written = list(dict.fromkeys(fmt_value(name, v) for v in values))
        if len(written) > 1:
            varies.append(name)
        numbers = sorted(v for v in values if ok(v))
        if len(written) == 1 or not numbers or any(isinstance(v, str) for v in values):
            # a word inside another ('loads' in 'loads and stores') is said by it
            said[name] = _joined([w for w in written
                                  if not any(w != o and w in o.split(" ") for o in written)])
        else:
            said[name] = _span(fmt_value(name, numbers[0]), fmt_value(name, numbers[-1]))
    sentence = fill(RULES[rule].say, said)
    if len(sentence) > room and RULES[rule].group and varies:
        sentence = RULES[rule].group
    return Told(rule, sentence, tuple(dict.fromkeys(i for i, _ in members)), tuple(members), tuple(varies))


def _joined(words: Sequence[str]) -> str:
    """'loads', 'loads and stores', 'a, b and c'."""
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _span(lo: str, hi: str) -> str:
    """Two written values as a range: '1.49-1.53 TB/s', '2-10x', '700 ns to 1.20 us'."""
    if lo == hi:
        return lo
    a, b = _number_unit(lo), _number_unit(hi)
    if a[1] == b[1] and a[0] and b[0]:
        return f"{a[0]}-{b[0]}{a[1]}"
    return f"{lo} to {hi}"


def _number_unit(text: str) -> tuple[str, str]:
    """'1.53 TB/s' -> ('1.53', ' TB/s'); '16x' -> ('16', 'x'); a word -> ('', word)."""
    end = 1 if text.startswith("-") else 0
    while end < len(text) and (text[end].isdigit() or text[end] in ".,"):
        end += 1
    return (text[:end], text[end:]) if any(c.isdigit() for c in text[:end]) else ("", text)
