"""Row softmax for rows too long for one program's registers, still reading and writing each element once.

softmax_online reads a long row twice (a max+sum loop, then a write loop) and hopes L2 keeps the row
between the two reads; on the H100 a 512 KB fp32 row per SM does not stay (DRAM read efficiency 0.65
at 16384x131072, reports/h100/long_rows_16384x131072). softmax_split splits each row into `parts`
chunks of up to BLOCK_N elements and gives them to a group of `parts` programs that run at the same
time. Each program:

1. reads its chunk once and keeps it in registers (BLOCK_N / (32*num_warps) values a thread),
2. publishes its chunk's max m_p and sum s_p = sum(exp(x - m_p)) (two floats) to a small stats
   buffer, then counts itself in with a release atomic on the row's counter,
3. spins (acquire atomic) until every program of the group has counted in for this row,
4. reads the group's stats, combines them (M = max m_p, S = sum s_p * exp(m_p - M)) and writes its
   chunk, exp(x - M) / S, from registers.

Groups walk rows g, g + groups, ... (a persistent grid); each row has its own counter, and the row is
ready when it reaches `parts`. Bytes: MN read once, MN written once, plus per row and program two stats
floats written and two stats vectors read (every warp reads them: Triton hands the same small tensor
to each warp), and the counters' zeroing (a fill kernel writing 4 bytes a row).

Programs that wait for each other must all be resident at once: the grid is checked against the
compiled kernel's occupancy before launch, so a grid too large for the GPU is an error, not a hang;
the auto grid is as many whole groups as fit.
The Triton interpreter runs programs one after another, so there a row can only be one part.
"""

from __future__ import annotations

import os
from typing import Any

import torch
import triton
import triton.language as tl

from memtraffic.model import Shape, Traffic, element_size
from memtraffic.variants import Variant

from . import sectors
from ._params import int_range, optional, power_of_two, resolve_params
from .softmax_online import sm_count
from .softmax_rows import contiguous_2d

DEFAULTS: dict[str, Any] = {"BLOCK_N": None, "num_warps": None, "programs": None}
_RULES = {"BLOCK_N": optional(power_of_two(1, 65536)), "num_warps": optional(power_of_two(1, 32)),
          "programs": optional(int_range(1, 1 << 20))}
CHUNK_BYTES = 16384  # auto chunk: 4096 fp32 or 8192 bf16 elements per program
VALUES_PER_THREAD = 32  # auto num_warps: each thread holds this many elements of the chunk
CHUNK_MAX = 32768  # largest auto chunk (32 warps: 32 values a thread, as softmax_online's one pass)
MAX_PARTS = 64  # programs per row; rows longer than CHUNK_MAX * MAX_PARTS: use softmax_online


@triton.jit
def _softmax_split_kernel(out_ptr, in_ptr, stats_ptr, count_ptr, n_rows, n_cols, parts,
                          BLOCK_N: tl.constexpr, PARTS_P2: tl.constexpr):
    pid = tl.program_id(0)
    group = pid // parts
    part = pid % parts
    n_groups = tl.num_programs(0) // parts
    cols = part * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    ids = tl.arange(0, PARTS_P2)
    for row in range(group, n_rows, n_groups):
        row64 = tl.cast(row, tl.int64)  # a plain int in the interpreter, a tensor when compiled
        # read this program's chunk of the row once (BLOCK_N elements), kept in registers until the write
        x = tl.load(in_ptr + row64 * n_cols + cols, mask=mask, other=-float("inf")).to(tl.float32)
        m = tl.max(x, axis=0)
        # a chunk of only -inf (or padding) has m = -inf: shift by 0 so that s = 0, not exp(nan)
        s = tl.sum(tl.exp(x - tl.where(m == float("-inf"), 0.0, m)), axis=0)
        # write 2 floats: stats[row] = [m_0 .. m_{P-1}, s_0 .. s_{P-1}] (PARTS_P2 slots each)
        stats_row = stats_ptr + row64 * (2 * PARTS_P2)
        tl.store(stats_row + part, m)
        tl.store(stats_row + PARTS_P2 + part, s)
        tl.debug_barrier()  # every thread's stores before the release below
        # count this part in (release), then wait (acquire) until the row's `parts` programs all have;
        # the wait is a compare-and-swap that never swaps (counts are >= 0): an atomic, not a load
        arrived = tl.atomic_add(count_ptr + row64, 1, sem="acq_rel", scope="gpu") + 1
        while arrived < parts:
            arrived = tl.atomic_cas(count_ptr + row64, -1, -1, sem="acquire", scope="gpu")
        # read 2 * PARTS_P2 floats (every warp: a small tensor is replicated per warp), from L2 (.cg):
        # another program on this SM may have pulled a stale line of the stats into L1
        live = ids < parts
        ms = tl.load(stats_row + ids, mask=live, other=-float("inf"), cache_modifier=".cg")
        ss = tl.load(stats_row + PARTS_P2 + ids, mask=live, other=0.0, cache_modifier=".cg")
        mx = tl.max(ms, axis=0)
        total = tl.sum(ss * tl.exp(ms - tl.where(mx == float("-inf"), 0.0, mx)), axis=0)
        # write this chunk (BLOCK_N elements). A row of only -inf gives NaN, as torch.softmax.
        y = tl.exp(x - mx) * (1.0 / total)
        tl.store(out_ptr + row64 * n_cols + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def split_config(shape: Shape, dtype: torch.dtype, BLOCK_N: int | None = None,
                 num_warps: int | None = None, programs: int | None = None, sms: int = 2,
                 per_sm: int = 1) -> dict[str, int]:
    """Every auto (None) parameter filled in, plus parts (programs per row) and groups (rows in flight).

    Auto (from the H100 sweep of 2026-11-22, scripts/sweep_softmax.py): 16 KB chunks held at 32 values a
    thread (fp32: 4096 elements on 4 warps, bf16: 8192 on 8), so that several programs share an SM and
    one's loads overlap another's wait; chunks double while a row would need more than MAX_PARTS
    programs, and a short row is one chunk. programs: as many as the GPU keeps resident (per_sm on each
    of sms), rounded down to whole groups (a group is `parts` programs on one row), one group per row
    at most."""
    m, n = shape
    if BLOCK_N is None:
        BLOCK_N = min(triton.next_power_of_2(n), CHUNK_BYTES // element_size(dtype))
        while triton.cdiv(n, BLOCK_N) > MAX_PARTS and BLOCK_N < CHUNK_MAX:
            BLOCK_N *= 2
    parts = triton.cdiv(n, BLOCK_N)
    if num_warps is None:
        num_warps = min(32, max(1, BLOCK_N // (32 * VALUES_PER_THREAD)))
    if programs is None:
        programs = max(per_sm * sms, parts)
    groups = max(1, min(m, programs // parts))
    return {"BLOCK_N": BLOCK_N, "num_warps": num_warps, "programs": groups * parts, "parts": parts,
            "groups": groups, "PARTS_P2": triton.next_power_of_2(parts)}


def _interpreted() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def resident_per_sm(n_regs: int, num_warps: int) -> int:
    """Programs of 32*num_warps threads using n_regs registers each that an SM holds at once (H100/A100:
    2048 threads, 65536 registers, allocated per warp in units of 256)."""
    threads = 32 * num_warps
    regs_per_warp = -(-max(1, n_regs) * 32 // 256) * 256
    return max(0, min(2048 // threads, 65536 // (regs_per_warp * num_warps), 32))


def softmax_split(x: torch.Tensor, BLOCK_N: int | None = None, num_warps: int | None = None,
                  programs: int | None = None) -> torch.Tensor:
    """softmax(x, dim=-1) with each row split over a group of programs that exchange (max, sum).
    None = auto for every parameter (see split_config)."""
    x = contiguous_2d(x)
    m, n = x.shape
    sms = sm_count(x.device)
    c = split_config((m, n), x.dtype, BLOCK_N, num_warps, programs, sms)
    if c["parts"] > 1 and _interpreted():
        raise ValueError(f"softmax_split: {c['parts']} programs per row wait for each other, which the "
                         "Triton interpreter (one program at a time) cannot run; use BLOCK_N >= N or a GPU")
    out = torch.empty_like(x)
    stats = torch.empty((m, 2 * c["PARTS_P2"]), dtype=torch.float32, device=x.device)
    count = torch.zeros(m, dtype=torch.int32, device=x.device)  # per row: programs that have counted in
    meta = {"BLOCK_N": c["BLOCK_N"], "PARTS_P2": c["PARTS_P2"], "num_warps": c["num_warps"]}
    if x.device.type == "cuda":
        compiled = _softmax_split_kernel.warmup(out, x, stats, count, m, n, c["parts"], **meta, grid=(1,))
        compiled._init_handles()  # loads the binary: n_regs is known from here on
        per_sm = resident_per_sm(compiled.n_regs, c["num_warps"])
        if programs is None:
            c = split_config((m, n), x.dtype, BLOCK_N, num_warps, None, sms, per_sm)
        if c["programs"] > per_sm * sms:
            raise ValueError(f"softmax_split: {c['programs']} programs wait for each other but only "
                             f"{per_sm * sms} fit on the GPU at once ({compiled.n_regs} registers a thread): "
                             "lower programs")
    _softmax_split_kernel[(c["programs"],)](out, x, stats, count, m, n, c["parts"], **meta)
    return out


def _traffic(shape: Shape, dtype: torch.dtype, params: dict[str, Any]) -> Traffic:
    p = resolve_params("softmax_split", DEFAULTS, params, _RULES)
    m, n = shape
    c = split_config(shape, dtype, p["BLOCK_N"], p["num_warps"], p["programs"])
    e = element_size(dtype)
    # The chunks walk each row in (1, BLOCK_N) tiles, the sectors of softmax_online's loop, read once.
    layout = sectors.row_major_tile(1, c["BLOCK_N"], n, e, c["num_warps"], rank1=True)
    ld, st = sectors.grid_sectors(layout, m, n, e)
    # Stats, per row and program: two 4-byte scalar stores (a sector each) and two PARTS_P2-float loads
    # by every warp, each inside one aligned sector while PARTS_P2 <= 8 (a row's stats start at a
    # multiple of 8 * PARTS_P2 bytes); longer vectors span PARTS_P2 * 4 / 32 sectors. The counters are
    # touched by atomics only, which L1 counts apart from loads and stores.
    vec_sectors = max(1, c["PARTS_P2"] * 4 // sectors.SECTOR)
    stats_ld = m * c["parts"] * 2 * c["num_warps"] * vec_sectors
    stats_st = m * c["parts"] * 2
    # torch.zeros for the row counters: one fill kernel, 4 bytes a row in whole sectors
    count_st = triton.cdiv(4 * m, sectors.SECTOR)
    return Traffic(read=(ld + stats_ld) * sectors.SECTOR, write=(st + stats_st + count_st) * sectors.SECTOR)


def _check(shape: Shape, dtype: torch.dtype, params: dict[str, Any]) -> str | None:
    p = resolve_params("softmax_split", DEFAULTS, params, _RULES)
    c = split_config(shape, dtype, p["BLOCK_N"], p["num_warps"], p["programs"])
    if c["parts"] > MAX_PARTS:
        return (f"softmax_split: N={shape[1]} needs {c['parts']} programs per row (at most {MAX_PARTS}); "
                "raise BLOCK_N or use softmax_online")
    if p["programs"] is not None and p["programs"] < c["parts"]:
        return (f"softmax_split: programs={p['programs']} is fewer than the {c['parts']} programs one row "
                "needs")
    return None


def _run(x: torch.Tensor, **params: Any) -> torch.Tensor:
    return softmax_split(x, **resolve_params("softmax_split", DEFAULTS, params, _RULES))


SOFTMAX_SPLIT = Variant(
    name="softmax_split",
    op="softmax",
    description="Triton, each row split over a group of programs that hold their chunk in registers and "
    "exchange (max, sum) through global memory: one read and one write of long rows",
    run=_run,
    predicted=_traffic,
    params=dict(DEFAULTS),
    constraints=f"any MxN with N <= {MAX_PARTS} * BLOCK_N; BLOCK_N: power of two or auto "
    f"({CHUNK_BYTES // 1024} KB chunks, up to {CHUNK_MAX} elements for long rows); num_warps: power of two "
    "or auto; programs: grid size (whole groups, all resident) or auto (all that fit); more than one part "
    "per row needs a GPU",
    check=_check,
)
