"""The findings of an analyzed row: the efficiency rules of memtraffic.vocab.finding.RULES, checked in a
fixed order.

Each `Check` names its rule, when it applies (`when`) and the findings it makes (`find`: one or several,
e.g. one per direction), each a `Finding` record with its evidence. `diagnose` runs CHECKS top to bottom
over a row's `Facts`. The words are the registry's (vocab/finding.py), written only by views.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeGuard

from memtraffic.analysis.time_notes import explain_time, local_bytes
from memtraffic.vocab.arch import Chip, chip_for_gpu
from memtraffic.vocab.finding import GOOD, SECTOR_BYTES, Finding, Level, Subject
from memtraffic.vocab.units import ABOVE

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["GOOD", "SECTOR_BYTES", "CHECKS", "NOT_A_RESULT", "Facts", "Role", "not_results", "reuses_tiles",
           "diagnose", "needs_full_set", "ok", "predicted"]
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


@dataclass(frozen=True)
class Check:
    """When one rule applies to a row, and the findings it makes there."""

    rule: str
    when: Callable[[Facts], bool]
    find: Callable[[Facts], list[Finding]]


# --- the findings, in CHECKS' order -------------------------------------------------------------------------


def _num(r: Mapping[str, object], key: str) -> float:
    v = r.get(key)
    return float(v) if ok(v) else math.nan


def _role(f: Facts) -> list[Finding]:
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
    return {d: s for d, s in waste.items() if ok(s) and s < GOOD}


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


def _dram_below(f: Facts) -> list[Finding]:
    if f.above("eff_dram") and not ok(f.r.get("eff_dram_rd")):  # the table shows DRAM rd+wr then
        return [f.found("dram_below_minimum", "DRAM", min_bytes=_num(f.r, "min_bytes"),
                        dram_bytes=_num(f.r, "dram_rd_bytes") + _num(f.r, "dram_wr_bytes"))]
    return [f.found("dram_writes_below_minimum", "DRAM wr", min_bytes=_num(f.r, "min_write_bytes"),
                    dram_bytes=_num(f.r, "dram_wr_bytes"))]


def _lsu_name(f: Facts) -> str:
    """What moves data past the LSU counters on the row's GPU."""
    return "TMA" if f.tma else f.async_copies


def _below(rule: str, level: Level, eff: str, moved: str, minimum: str) -> Callable[[Facts], list[Finding]]:
    return lambda f: [f.found(rule, level, l1_x=1 / f.r[eff], l1_bytes=_num(f.r, moved),
                              min_bytes=_num(f.r, minimum), via=_lsu_name(f))]


def _time(f: Facts) -> list[Finding]:
    assert f.slow is not None
    return [replace(f.slow, subject=f.subject)]


# Below the minimum: a reason for each level that moved less than the minimum (efficiency above ABOVE);
# output left in L2 (DRAM writes below the minimum, which tables show only inside DRAM rd+wr) is said too,
# also on a row otherwise at the minimum: no efficiency above ABOVE goes without its reason.
CHECKS: list[Check] = [
    Check("role", lambda f: f.role is not None, _role),
    Check("spills", lambda f: local_bytes(f.r) > 0, _spills),  # excess at L1, and at L2/DRAM past L1
    Check("lsu_bypass", lambda f: bool(f.bypass), _lsu_bypass),
    # A matmul's L1 re-reads are its algorithm (reuses_tiles): no L1 finding for it.
    Check("sector_waste", lambda f: bool(_low_sector_use(f)) and not reuses_tiles(f.r), _sector_waste),
    Check("redundant_requests", lambda f: bool(_extra_requests(f)) and not reuses_tiles(f.r),
          _redundant_requests),
    Check("predicted_passes", lambda f: bool(_unasked(f)) and not reuses_tiles(f.r), _predicted_passes),
    Check("kernel_passes", lambda f: f.n_kernels > 1,
          lambda f: [f.found("kernel_passes", kernels_n=f.n_kernels)]),
    # Caches absorbing traffic: L1 well above the minimum while DRAM reads sit at it.
    # Said once: where the time rule blames the L1 requests, it says this too.
    Check("caches_absorb",
          lambda f: (ok(f.r.get("eff_l1_ld")) and f.r["eff_l1_ld"] < GOOD and ok(f.r.get("eff_dram_rd"))
                     and f.r["eff_dram_rd"] >= GOOD and (f.slow is None or f.slow.rule != "l1_requests")
                     and not reuses_tiles(f.r)),
          _caches_absorb),
    Check("dram_excess", lambda f: ok(f.r.get("eff_dram")) and f.r["eff_dram"] < GOOD,
          lambda f: [f.found("dram_excess", "DRAM", dram_x=1 / f.r["eff_dram"],
                             min_bytes=_num(f.r, "min_bytes"),
                             dram_bytes=_num(f.r, "dram_rd_bytes") + _num(f.r, "dram_wr_bytes"))]),
    Check("bound_below_minimum", lambda f: bool(f.bound and _levels_below(f)),
          lambda f: [f.found("bound_below_minimum", levels=_names(_levels_below(f)), bound=f.bound)]),
    # less than the minimum reached L2: the call needed less than its minimum counts
    Check("l2_below_minimum", lambda f: not f.bound and f.above("eff_l2"),
          lambda f: [f.found("l2_below_minimum", "L2", levels=_names(_levels_below(f)),
                             min_bytes=_num(f.r, "min_bytes"),
                             l2_bytes=_num(f.r, "l2_rd_bytes") + _num(f.r, "l2_wr_bytes"))]),
    Check("l1_loads_below_minimum",
          lambda f: not _levels_explained(f) and f.above("eff_l1_ld") and "loads" not in f.bypass,
          _below("l1_loads_below_minimum", "L1 ld", "eff_l1_ld", "l1_ld_bytes", "min_read_bytes")),
    Check("l1_stores_below_minimum",
          lambda f: not _levels_explained(f) and f.above("eff_l1_st") and "stores" not in f.bypass,
          _below("l1_stores_below_minimum", "L1 st", "eff_l1_st", "l1_st_bytes", "min_write_bytes")),
    Check("dram_reads_below_minimum", lambda f: not _levels_explained(f) and f.above("eff_dram_rd"),
          lambda f: [f.found("dram_reads_below_minimum", "DRAM rd", min_bytes=_num(f.r, "min_read_bytes"),
                             dram_bytes=_num(f.r, "dram_rd_bytes"))]),
    Check("dram_below_minimum",
          lambda f: not _levels_explained(f) and ((f.above("eff_dram") and not ok(f.r.get("eff_dram_rd")))
                                                  or wrote_below(f.r)),
          _dram_below),
    # why time is far above a copy of the minimum when the bytes are not: last (its rule is a time rule)
    # (spills already said by their own check).
    Check("time", lambda f: f.slow is not None and f.slow.rule != "time_spills", _time),
]


def diagnose(r: dict[str, Any], bound: str = "", role: Role | None = None,
             roofs: Mapping[str, float] | None = None,
             subject: Subject | None = None, checks: Sequence[Check] = CHECKS) -> list[Finding]:
    """The findings of one row, in CHECKS' order: where an efficiency falls below GOOD or rises above
    ABOVE, where the kernel spills, and why time is far above a copy of the minimum when DRAM reads are
    at it (empty when none applies)."""
    facts = Facts(r, bound, role, roofs, subject or Subject())
    return [found for check in checks if check.when(facts) for found in check.find(facts)]
