"""Why time sits far above a copy of the minimum when the bytes do not: one note for analyze's diagnosis.

A row qualifies when its DRAM reads are at the minimum (efficiency >= AT_MINIMUM) yet its time is SLOW
times or more the time a copy of its minimum takes at the device's measured copy roof (the roofs'
`dram_Bps`, read + write). The note names the first reason the numbers show, in this order:

1. spills: local-memory bytes (the `spills` metric set), which are traffic beside the global bytes;
2. launch: the time is within LAUNCH_NEAR of a kernel's with nothing to do (the roofs' `launch_s`);
3. compute: the minimum's FLOPs at the measured FLOP roof of the row's dtype take COMPUTE_NEAR of the
   time or more (a FLOP floor above the copy's but further from the time is said beside a later reason);
4. grid: fewer blocks than GRID_SHORT of a wave (ncu's launch__waves_per_multiprocessor);
5. L1: L1 moves L1_EXCESS times the minimum or more (caches absorbed it before DRAM; the time pays);
6. occupancy: a theoretical occupancy under LOW_OCCUPANCY (and what limits it), or an achieved one
   (`spills` set) well under the theoretical;
7. tail: between one and TAIL_WAVES waves with a last wave at most half full;
8. bytes in flight (Little's law): the copy roof needs roof x DRAM latency (the roofs' measured
   `dram_latency_s`) bytes in flight; divided over the threads the launch keeps resident, that is what
   each thread must have outstanding.
The grid, occupancy and tail reasons also give the bytes in flight each resident thread needs, when the
latency is known. A row no reason fits says what to measure.
Launch statistics (grid, waves, occupancy, registers) are recorded by ncu for every launch at no cost,
so committed reports carry them; spills and achieved occupancy need the `spills` set.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from memtraffic.vocab.finding import Finding, Level
from memtraffic.vocab.roofs import ROOFS
from memtraffic.vocab.units import fmt_bytes, fmt_rate, fmt_time

AT_MINIMUM = 0.95  # DRAM read efficiency from which bytes are "at the minimum"
SLOW = 3.0  # time, in copies of the minimum, from which time is worth explaining
LAUNCH_NEAR = 2.0  # a time within this factor of a do-nothing kernel's is launch-bound
GRID_SHORT = 0.8  # waves below this: the grid leaves SMs (or their warp slots) empty
LOW_OCCUPANCY = 50.0  # theoretical occupancy (% of the SM's warps) below which it is named
ACHIEVED_SHORT = 0.6  # achieved occupancy below this fraction of the theoretical is named
COMPUTE_NEAR = 0.5  # FLOPs at the roof taking this share of the time or more: compute-bound
L1_EXCESS = 2.0  # L1 bytes from this many times the minimum explain the time (requests, not DRAM)
TAIL_WAVES = 4.0  # a partial last wave matters when there are few waves
# The FLOP roof a row's minimum FLOPs run against, by dtype (matmuls in 16 bits use tensor cores).
FLOP_ROOF = {"fp32": "fp32_flops", "bf16": "bf16_tc_flops", "fp16": "fp16_tc_flops"}
LIMITS = {"limit_registers": "registers", "limit_shared_mem": "shared memory",
          "limit_blocks": "blocks per SM", "limit_warps": "warps per SM (block size)"}


def _num(r: Mapping[str, object], key: str) -> float | None:
    try:
        v = float(r.get(key))  # type: ignore[arg-type]  # None and text are caught below
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def copy_seconds(r: Mapping[str, object], measured: Mapping[str, float]) -> float | None:
    """Seconds a copy of the row's minimum takes at the measured copy roof (None when either is unknown)."""
    bw, minimum = _num(measured, "dram_Bps"), _num(r, "min_bytes")
    return minimum / bw if bw and minimum and minimum > 0 else None


def slow_at_minimum(r: Mapping[str, object], measured: Mapping[str, float] | None) -> bool:
    """The rule: DRAM reads at the minimum, time >= SLOW copies of it."""
    eff = _num(r, "eff_dram_rd")
    eff = eff if eff is not None else _num(r, "eff_dram")
    copy, ns = copy_seconds(r, measured or {}), _num(r, "time_ns")
    return eff is not None and eff >= AT_MINIMUM and copy is not None and ns is not None and \
        ns * 1e-9 >= SLOW * copy


def local_bytes(r: Mapping[str, object]) -> float:
    """Local-memory bytes through L1 (loads + stores; 0 when not measured)."""
    return sum(_num(r, k) or 0.0 for k in ("l1_local_ld_bytes", "l1_local_st_bytes"))


def _limiter(r: Mapping[str, object]) -> str:
    """'limited by registers (40 a thread): 2 blocks an SM': the resources that allow the fewest blocks per
    SM (all of them when several tie)."""
    limits = {k: v for k in LIMITS if (v := _num(r, k)) is not None}
    if not limits:
        return ""
    fewest = min(limits.values())
    names = []
    for key in (k for k in limits if limits[k] == fewest):
        what = LIMITS[key]
        if key == "limit_registers" and _num(r, "registers"):
            what += f" ({_num(r, 'registers'):.0f} a thread)"
        elif key == "limit_shared_mem" and _num(r, "shared_mem_per_block"):
            what += f" ({fmt_bytes(_num(r, 'shared_mem_per_block'))} a block)"
        names.append(what)
    listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
    return f"limited by {listed}: {fewest:.0f} blocks an SM"


def _resident_threads(r: Mapping[str, object]) -> float | None:
    """Threads the launch keeps on the GPU at once: the whole grid under one wave, else one wave's."""
    grid, block, waves = _num(r, "grid_size"), _num(r, "block_size"), _num(r, "waves")
    if not (grid and block and waves):
        return None
    return grid * block if waves < 1 else grid * block / waves


def in_flight(r: Mapping[str, object], measured: Mapping[str, float]) -> dict[str, float | str]:
    """Little's law: the bytes the copy roof needs in flight, and per resident thread, as evidence ({} when
    unknown): `need_bytes`, `thread_n` (bytes each resident thread must have outstanding), `in_flight`
    (the arithmetic in words, for the explanation)."""
    bw, latency, threads = _num(measured, "dram_Bps"), _num(measured, "dram_latency_s"), _resident_threads(r)
    if not (bw and latency and threads):
        return {}
    need = bw * latency
    # bytes a thread to 3 significant digits: a reader divides the two numbers before it and gets these
    text = (f"the copy roof needs {fmt_bytes(need)} in flight ({fmt_rate(bw)} x {fmt_time(latency * 1e9)} "
            f"DRAM latency), {_per_thread(need / threads)} for each of the {threads:,.0f} resident threads")
    req, requests = _num(r, "req_ld_bytes"), _num(r, "l1_ld_requests")
    if req and requests:  # a warp's load instruction is one request of 32 threads
        text += (f", whose load instructions ask {_per_thread(req / requests / 32)} a thread "
                 f"({fmt_bytes(req)} over {requests:,.0f} warp requests)")
    return {"need_bytes": need, "threads_n": threads, "thread_n": need / threads, "in_flight": text}


def _per_thread(x: float) -> str:
    return f"{x:.3g} B"


def explain_time(r: Mapping[str, object], measured: Mapping[str, float] | None) -> Finding | None:
    """The finding for a row at the minimum in bytes but slow in time (see the module); None otherwise."""
    if not measured or not slow_at_minimum(r, measured):
        return None
    copy = copy_seconds(r, measured)
    assert copy is not None
    return _reason(r, measured, copy, _num(r, "time_ns") or 0.0)[1]


def time_reason(r: Mapping[str, object], measured: Mapping[str, float]) -> tuple[str, Finding]:
    """(kind, finding): the first reason of the module's order that fits a row, without the rule's gate (the
    floor of a program asks it of every row). Kinds: spills, launch, compute, grid, L1, occupancy, tail,
    latency (bytes in flight), unknown (none fits; the finding says what to measure)."""
    copy = copy_seconds(r, measured) or 0.0
    return _reason(r, measured, copy, _num(r, "time_ns") or 0.0)


def compute_evidence(r: Mapping[str, object], measured: Mapping[str, float], seconds: float | None = None
                     ) -> dict[str, float | str]:
    """The FLOPs' floor of a row as evidence ({} when its FLOPs or roof are unknown): `gflop_n`, `roof`
    (its name), `roof_flops`, `flops_s` (the FLOPs at the roof; `seconds` instead where given) and
    `share_frac` of the row's time."""
    flops, roof_key = _num(r, "model_flops"), FLOP_ROOF.get(str(r.get("dtype") or ""))
    roof = _num(measured, roof_key) if roof_key else None
    ns = _num(r, "time_ns") or 0.0
    if not (flops and roof and roof_key and ns):
        return {}
    need = seconds if seconds is not None else flops / roof
    return {"gflop_n": flops / 1e9, "roof": ROOFS[roof_key][0], "roof_flops": roof, "flops_s": need,
            "share_frac": need * 1e9 / ns, "time_s": ns * 1e-9}


def _reason(r: Mapping[str, object], measured: Mapping[str, float], copy: float,
            ns: float) -> tuple[str, Finding]:
    base: dict[str, float | str] = {"time_s": ns * 1e-9, "copy_s": copy, "time_x": ns * 1e-9 / copy if copy
                                    else math.nan, "roof_Bps": _num(measured, "dram_Bps") or math.nan}
    held = max(ns * 1e-9 - copy, 0.0)
    flight = in_flight(r, measured)
    more: dict[str, float | str] = {**base, **flight, "in_flight": str(flight.get("in_flight", ""))}

    def found(kind: str, rule: str, level: Level = "", **evidence: float | str) -> tuple[str, Finding]:
        return kind, Finding(rule, level=level, evidence={**more, **evidence}, time_s=held)

    spilled, minimum = local_bytes(r), _num(r, "min_bytes") or 0.0
    if spilled > 0:
        return found("spills", "time_spills", "local", local_bytes=spilled,
                     local_x=spilled / minimum if minimum else math.nan)
    floor, kernels = _num(measured, "launch_s"), _num(r, "n_kernels") or 1.0
    if floor and ns * 1e-9 <= LAUNCH_NEAR * floor * kernels:
        return found("launch", "launch_bound", launch_s=floor, kernels_n=kernels)
    compute = compute_evidence(r, measured)
    if compute and float(compute["flops_s"]) >= copy:  # the FLOPs' floor is above the bytes' floor
        if float(compute["flops_s"]) * 1e9 >= COMPUTE_NEAR * ns:
            return found("compute", "compute_bound", "", **compute)
        more.update(compute)  # said beside the reason found, in its explanation
        flops_ns = float(compute["flops_s"]) * 1e9
        at = (f"the minimum's {float(compute['gflop_n']):.3g} GFLOP take {fmt_time(flops_ns)} at the "
              f"measured {compute['roof']} roof ({float(compute['share_frac']):.0%} of the time)")
        more["in_flight"] = "; ".join(p for p in (str(more["in_flight"]), at) if p)
    waves, grid, block = _num(r, "waves"), _num(r, "grid_size"), _num(r, "block_size")
    sms = _num(r, "sm_count")
    if waves is not None and waves < GRID_SHORT and grid and block:
        return found("grid", "grid_short", waves_n=waves, grid_n=grid, block_n=block,
                     sms_n=sms if sms else math.nan)
    amps = {d: 1 / e for d, k in (("loads", "eff_l1_ld"), ("stores", "eff_l1_st")) if (e := _num(r, k))}
    worst = max(amps, key=amps.__getitem__, default=None)
    if worst is not None and amps[worst] >= L1_EXCESS:
        return found("L1", "l1_requests", "L1 ld" if worst == "loads" else "L1 st", what=worst,
                     l1_x=amps[worst])
    occ, achieved = _num(r, "occupancy_pct"), _num(r, "warps_active_pct")
    if occ is not None and occ < LOW_OCCUPANCY:
        return found("occupancy", "low_occupancy", occupancy_pct=occ, limiter=_limiter(r) or "limit unknown")
    if occ and achieved is not None and achieved < ACHIEVED_SHORT * occ:
        return found("occupancy", "achieved_occupancy", occupancy_pct=occ, achieved_pct=achieved)
    if waves is not None and 1 <= waves < TAIL_WAVES and 0 < waves % 1 <= 0.5:
        return found("tail", "tail_wave", waves_n=waves, last_frac=waves % 1)
    if flight:
        return found("latency", "latency")
    return found("unknown", "time_unknown")
