"""The diagnosis of an analyzed row, as small named rules applied in a fixed order.

Each `Rule` has a name, when it applies (`when`) and what it says (`say`: one sentence or several, e.g.
one per direction). `diagnose` runs `RULES` top to bottom over a row's `Facts` and joins what the rules
that apply say with '; '. A new finding is one Rule in RULES, at the place its sentence should take in
the line, and a test in tests/analysis/test_findings.py on a committed report that triggers it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, TypeGuard

from memtraffic.analysis.time_notes import explain_time, local_bytes
from memtraffic.vocab.arch import Chip, chip_for_gpu
from memtraffic.vocab.units import ABOVE, fmt_bytes, fmt_rate, fmt_time

SECTOR_BYTES = 32
GOOD = 0.9  # efficiencies below this get a diagnosis
LSU_NEGLIGIBLE = 0.01  # L1 (LSU) bytes under this fraction of L2's: the kernel moves its data another way


PREDICTED = 0.01  # L1 bytes within this fraction of the row's model prediction: the model accounts for them

# A direction of an analyzed row: its name, efficiency, L1 bytes, the model's predicted bytes, the minimum.
_DIRECTIONS = (("ld", "eff_l1_ld", "l1_ld_bytes", "pred_read_bytes", "min_read_bytes"),
               ("st", "eff_l1_st", "l1_st_bytes", "pred_write_bytes", "min_write_bytes"))


def needs_full_set(rows: Any) -> Any:
    """Which rows of an analyzed table a first look (the one-pass `bytes` set) leaves unexplained: L1 load
    or store efficiency below GOOD, in a direction whose L1 bytes are not those its variant's model
    predicts (`pred_read_bytes`/`pred_write_bytes`, within PREDICTED). Only the bytes the instructions
    asked for and the sectors (the `traffic` set, six replay passes) tell scattered accesses from repeated
    ones there, so `measure --metrics auto` measures those configs again with it and `profile` names those
    op types for `--ops`. Where the model predicts the bytes (a three-pass softmax reads its input three
    times), the sectors have nothing left to explain. A boolean Series (False where an efficiency is
    unknown)."""
    return rows.apply(lambda r: _unexplained(r.to_dict()), axis=1).astype(bool) if len(rows) else \
        rows["eff_l1_ld"] < GOOD


def _unexplained(r: Mapping[str, Any]) -> bool:
    """A direction of the row below GOOD whose L1 bytes are not its model's prediction."""
    explained = predicted(r)
    return any(ok(e := r.get(eff)) and e < GOOD and d not in explained for d, eff, *_ in _DIRECTIONS)


def predicted(r: Mapping[str, Any]) -> list[str]:
    """The directions ('ld', 'st') of a row below GOOD whose L1 bytes are its model's prediction (within
    PREDICTED): traffic the variant's algorithm makes by design."""
    out = []
    for d, eff, moved, pred, _ in _DIRECTIONS:
        e, m, p = r.get(eff), r.get(moved), r.get(pred)
        if ok(e) and e < GOOD and ok(m) and ok(p) and p > 0 and abs(m - p) <= PREDICTED * p:
            out.append(d)
    return out


def ok(x: Any) -> TypeGuard[float]:
    """A finite number (not None, not NaN)."""
    return x is not None and isinstance(x, int | float) and math.isfinite(x)


def times(x: float) -> str:
    """'3x' for a near-whole factor, else '3.2x'."""
    return f"{x:.0f}x" if abs(x - round(x)) < 0.05 * x else f"{x:.1f}x"


@dataclass
class Facts:
    """What the rules read of one row: the row itself and its context. `bound`: why the row's minimum is
    only an upper bound, if it is; `role`: the row's place among its range's kernels; `roofs`: the
    device's measured roofs (the time note needs them: memtraffic.analysis.time_notes)."""

    r: dict[str, Any]
    bound: str = ""
    role: str = ""
    roofs: Mapping[str, float] | None = None
    chip: Chip | None = field(init=False)
    bypass: list[str] = field(init=False)  # 'loads' and/or 'stores' whose L1 counters read ~0

    def __post_init__(self) -> None:
        self.chip = chip_for_gpu(self.r.get("device"))
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
    def slow(self) -> str:
        """Why time is far above a copy of the minimum ('' when it is not, or unknown)."""
        return explain_time(self.r, self.roofs)

    @property
    def n_kernels(self) -> int:
        return self.r.get("n_kernels") or 1

    def above(self, key: str) -> bool:
        """The level moved less than the minimum (its efficiency above ABOVE)."""
        return ok(self.r.get(key)) and self.r[key] > ABOVE


@dataclass(frozen=True)
class Rule:
    """One finding: its name, when it applies to a row, and its sentences."""

    name: str
    when: Callable[[Facts], bool]
    say: Callable[[Facts], list[str]]


# --- the rules' sentences, in RULES' order ------------------------------------------------------------------


def _spills(f: Facts) -> list[str]:
    r, spilled = f.r, local_bytes(f.r)
    regs = r.get("registers")
    at = f" at {regs:.0f} registers a thread" if ok(regs) else ""
    minimum = r.get("min_bytes")
    share = f", {times(spilled / minimum)} the minimum" if ok(minimum) and minimum > 0 else ""
    return [f"spills{at}: {fmt_bytes(spilled)} of local memory through L1 (loads "
            f"{fmt_bytes(r.get('l1_local_ld_bytes') or 0)}, stores "
            f"{fmt_bytes(r.get('l1_local_st_bytes') or 0)}{share})"]


def _lsu_bypass(f: Facts) -> list[str]:
    who = "loads/stores" if len(f.bypass) == 2 else f.bypass[0]
    return [f"{who} bypass the LSU counters ({f.async_copies}): read the L2 and DRAM levels"]


def _low_sector_use(f: Facts) -> dict[str, float]:
    """Sector waste: per direction ('ld', 'st') the sector efficiency where the instructions asked for
    fewer bytes than the 32-byte sectors moved."""
    waste = {d: f.r.get(f"sector_eff_{d}") for d in ("ld", "st")}
    return {d: s for d, s in waste.items() if ok(s) and s < GOOD}


def _sector_waste(f: Facts) -> list[str]:
    used = {d: f"{SECTOR_BYTES * s:.0f}" for d, s in _low_sector_use(f).items()}
    per = (f"of every {SECTOR_BYTES} bytes per sector: neighbouring threads should touch neighbouring "
           "addresses")
    if len(used) == 2 and used["ld"] == used["st"]:
        return [f"loads and stores use {used['ld']} {per}"]
    return [f"{'loads' if d == 'ld' else 'stores'} use {u} {per}" for d, u in used.items()]


def _extra_requests(f: Facts) -> list[tuple[str, float]]:
    """Requests beyond the minimum, per direction: (direction, requested / minimum)."""
    out = []
    for d, req, minimum in (("ld", f.r.get("req_ld_bytes"), f.r.get("min_read_bytes")),
                            ("st", f.r.get("req_st_bytes"), f.r.get("min_write_bytes"))):
        if ok(req) and ok(minimum) and minimum > 0 and req > minimum / GOOD:
            out.append((d, req / minimum))
    return out


def _redundant_requests(f: Facts) -> list[str]:
    """The same bytes asked for several times (warps, programs or passes)."""
    notes = []
    for d, k in _extra_requests(f):
        verb = "loads request" if d == "ld" else "stores write"
        what = "input" if d == "ld" else "output"
        req, minimum = (f.r["req_ld_bytes"], f.r["min_read_bytes"]) if d == "ld" else (
            f.r["req_st_bytes"], f.r["min_write_bytes"])
        asked = f"{fmt_bytes(req)} for a minimum of {fmt_bytes(minimum)}"  # numbers a reader can divide
        if f.n_kernels > 1:
            notes.append(f"{f.n_kernels} kernels: {verb} {times(k)} the minimum ({asked}), a pass over "
                         "memory each: fusing them saves passes")
        elif abs(k - round(k)) < 0.05 * k:
            act = "load" if d == "ld" else "store"
            notes.append(f"each {what} byte requested {round(k)}x ({asked}): several warps or programs {act} "
                         "the same data, or the kernel makes several passes")
        else:
            notes.append(f"{verb} {times(k)} the minimum")
    return notes


def _unasked(f: Facts) -> list[tuple[str, float, float]]:
    """(direction, L1 bytes, minimum) of the predicted directions whose requested bytes were not measured (a
    first look) and whose minimum is known."""
    out = []
    for d, _, moved, _, minimum in _DIRECTIONS:
        lo = f.r.get(minimum)
        if d in predicted(f.r) and not ok(f.r.get(f"req_{d}_bytes")) and ok(lo) and lo > 0:
            out.append((d, f.r[moved], lo))
    return out


def _predicted_passes(f: Facts) -> list[str]:
    """L1 bytes above the minimum that the variant's model predicts, where no request counters say more."""
    return [f"each {'input byte loaded' if d == 'ld' else 'output byte stored'} {times(moved / minimum)} "
            f"({fmt_bytes(moved)} for a minimum of {fmt_bytes(minimum)}), as the variant's model predicts: "
            "passes over memory its algorithm makes" for d, moved, minimum in _unasked(f)]


def _caches_absorb(f: Facts) -> list[str]:
    bw, ns, minimum = f.r.get("bw_min_Bps"), f.r.get("time_ns"), f.r.get("min_bytes")
    paid = (f": the minimum's {fmt_bytes(minimum)} in {fmt_time(ns)} is {fmt_rate(bw)}"
            if ok(bw) and ok(ns) and ok(minimum) else "")
    return ["L1/L2 absorb the extra loads before DRAM (DRAM read efficiency "
            f"{min(f.r['eff_dram_rd'], 1.0):.2f}), but time pays{paid}"]


def _names(levels: Sequence[str]) -> str:
    names = {"eff_l1_ld": "L1 ld", "eff_l1_st": "L1 st", "eff_l2": "L2", "eff_dram": "DRAM",
             "eff_dram_rd": "DRAM rd"}
    return ", ".join(names[k] for k in levels)


def _levels_below(f: Facts) -> list[str]:
    return [k for k in ("eff_l1_ld", "eff_l1_st", "eff_l2", "eff_dram", "eff_dram_rd") if f.above(k)]


def wrote_below(r: dict[str, Any]) -> bool:
    """DRAM wrote less than the minimum write (none at all included, where eff_dram_wr is undefined)."""
    wrote, minimum = r.get("dram_wr_bytes"), r.get("min_write_bytes")
    return ok(wrote) and ok(minimum) and wrote * ABOVE < minimum


def _levels_explained(f: Facts) -> bool:
    """A reason covers every level below the minimum at once (the bound, or less than the minimum at L2):
    the per-level rules after it stay silent."""
    return bool(f.bound and _levels_below(f)) or f.above("eff_l2")


def _dram_below(f: Facts) -> list[str]:
    if f.above("eff_dram") and not ok(f.r.get("eff_dram_rd")):  # the table shows DRAM rd+wr then
        return ["DRAM bytes below the minimum: input served from L2, or output still in L2 when the kernel "
                "ended"]
    return ["DRAM writes below the minimum: output still in L2 when the kernel ended"]


def _lsu_name(f: Facts) -> str:
    """What moves data past the LSU counters on the row's GPU."""
    return "TMA" if f.tma else f.async_copies


# Below the minimum: a reason for each level that moved less than the minimum (efficiency above ABOVE);
# output left in L2 (DRAM writes below the minimum, which tables show only inside DRAM rd+wr) is said too,
# also on a row otherwise at the minimum: no efficiency above ABOVE goes without its reason.
RULES: list[Rule] = [
    Rule("role", lambda f: bool(f.role), lambda f: [f.role]),
    Rule("spills", lambda f: local_bytes(f.r) > 0, _spills),  # excess at L1, and at L2/DRAM past L1
    Rule("lsu_bypass", lambda f: bool(f.bypass), _lsu_bypass),
    Rule("sector_waste", lambda f: bool(_low_sector_use(f)), _sector_waste),
    Rule("redundant_requests", lambda f: bool(_extra_requests(f)), _redundant_requests),
    Rule("predicted_passes", lambda f: bool(_unasked(f)), _predicted_passes),
    Rule("kernel_passes", lambda f: f.n_kernels > 1 and not _extra_requests(f),
         lambda f: [f"{f.n_kernels} kernels in this range: each is a pass over memory"]),
    # Caches absorbing traffic: L1 well above the minimum while DRAM reads sit at it.
    Rule("caches_absorb",
         lambda f: (ok(f.r.get("eff_l1_ld")) and f.r["eff_l1_ld"] < GOOD and ok(f.r.get("eff_dram_rd"))
                    and f.r["eff_dram_rd"] >= GOOD),
         _caches_absorb),
    Rule("dram_excess", lambda f: ok(f.r.get("eff_dram")) and f.r["eff_dram"] < GOOD,
         lambda f: [f"DRAM moves {times(1 / f.r['eff_dram'])} the minimum"]),
    Rule("bound_below_minimum", lambda f: bool(f.bound and _levels_below(f)),
         lambda f: [f"below the minimum at {_names(_levels_below(f))}: {f.bound}"]),
    # less than the minimum reached L2: the call needed less than its minimum counts
    Rule("l2_below_minimum", lambda f: not f.bound and f.above("eff_l2"),
         lambda f: [f"below the minimum at {_names(_levels_below(f))}: the call moved less than its minimum "
                    "through L2, so the minimum over-counts it (a data-dependent op, an input used only in "
                    "part, or data the op skips); read it as a bound this call beats"]),
    Rule("l1_loads_below_minimum",
         lambda f: not _levels_explained(f) and f.above("eff_l1_ld") and "loads" not in f.bypass,
         lambda f: [f"L1 load bytes below the minimum ({1 / f.r['eff_l1_ld']:.2f}x): loads that bypass the "
                    f"LSU path ({_lsu_name(f)}) are not in these counters"]),
    Rule("l1_stores_below_minimum",
         lambda f: not _levels_explained(f) and f.above("eff_l1_st") and "stores" not in f.bypass,
         lambda f: [f"L1 store bytes below the minimum ({1 / f.r['eff_l1_st']:.2f}x): stores that bypass "
                    f"the LSU path ({_lsu_name(f)}) are not in these counters"]),
    Rule("dram_reads_below_minimum", lambda f: not _levels_explained(f) and f.above("eff_dram_rd"),
         lambda f: ["DRAM reads below the minimum: part of the input was served from L2 (cached before the "
                    "kernel, not flushed)"]),
    Rule("dram_below_minimum",
         lambda f: not _levels_explained(f) and ((f.above("eff_dram") and not ok(f.r.get("eff_dram_rd")))
                                                 or wrote_below(f.r)),
         _dram_below),
    # why time is far above a copy of the minimum when the bytes are not: last
    Rule("time", lambda f: bool(f.slow), lambda f: [f.slow]),
]


def findings(r: dict[str, Any], bound: str = "", role: str = "", roofs: Mapping[str, float] | None = None,
             rules: Sequence[Rule] = RULES) -> list[tuple[str, list[str]]]:
    """(rule name, its sentences) for each rule that applies to the row, in the rules' order."""
    facts = Facts(r, bound, role, roofs)
    return [(rule.name, rule.say(facts)) for rule in rules if rule.when(facts)]


def diagnose(r: dict[str, Any], bound: str = "", role: str = "", roofs: Mapping[str, float] | None = None
             ) -> str:
    """One factual line naming what the numbers show where an efficiency falls below ~0.9 or rises
    above 1.05, where the kernel spills, and why time is far above a copy of the minimum when DRAM
    reads are at it ('' otherwise): the sentences of the RULES that apply, joined with '; '."""
    return "; ".join(s for _, said in findings(r, bound, role, roofs) for s in said)
