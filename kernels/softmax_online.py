"""Row softmax for rows too long for one tile: loop over the row in BLOCK_N-column blocks.

- softmax_online: when the row fits one block (N <= BLOCK_N) it takes a single-pass path: load the row
  once, keep it in registers, write (reads MN once, writes MN once). Otherwise one loop carries the
  running max m and the running sum s together (the online normalizer: when the max grows from m to m',
  the sum so far is rescaled by exp(m - m')), then a second loop writes: reads MN twice, writes MN once
  at L1. The write loop walks the blocks in reverse, so its first reads are the blocks the first loop
  read last, the ones most likely still in L2; a persistent grid (`programs`) bounds the rows in flight,
  and with them the bytes between a block's two reads, to what L2 can keep; eviction hints ask L2 to
  keep the first read and drop the second read and the output first. Together they aim DRAM at one
  read of MN, even though L1 sees two.
- softmax_3pass: a max loop, a sum loop and a write loop, one row per program, no hints (the
  comparison). Reads MN three times, writes MN once.

Both compute in fp32 and store in the input's dtype. A row of all -inf gives NaN (0/0, as
torch.softmax); a row with -inf entries and at least one finite value is exact, even when whole blocks
are -inf (the running max is kept out of exp() until it is finite).
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from memtraffic.vocab.ops import Shape, Traffic, element_size
from memtraffic.vocab.variant import Variant

from . import sectors
from ._params import int_range, optional, power_of_two, resolve_params
from .softmax_rows import contiguous_2d

LOOP_DEFAULTS: dict[str, Any] = {"BLOCK_N": None, "num_warps": 4}
_LOOP_RULES = {"BLOCK_N": optional(power_of_two(1, 65536)), "num_warps": power_of_two(1, 32)}
DEFAULT_BLOCK_N = 1024  # softmax_3pass auto: this, or next_pow2(N) when the row is shorter

ONLINE_DEFAULTS: dict[str, Any] = {"BLOCK_N": None, "num_warps": None, "programs": None, "evict_hints": None}
_ONLINE_RULES = {"BLOCK_N": optional(power_of_two(1, 65536)), "num_warps": optional(power_of_two(1, 32)),
                 "programs": optional(int_range(0, 1 << 20)), "evict_hints": optional(int_range(0, 1))}
# softmax_online auto rule (tuned on an H100 by scripts/sweep_softmax.py; see tuned_note in its output):
# Auto rules from the H100 sweep of 2026-11-22 (scripts/sweep_softmax.py): a whole 32768-element fp32
# row held by 32 warps ran at copy speed, and for longer rows 16384-element blocks with 32 warps on one
# program per SM beat 8192-element blocks with 16 warps.
SINGLE_PASS_MAX = 32768  # rows up to this many elements are held whole in registers: one read
# ... but only 16384 for 16-bit inputs. Registers hold fp32 either way, so a 32768-element row fills an
# SM (one program of 32 warps) while its bf16 loads are half the bytes of fp32's: with nothing else on
# the SM to overlap its reduce, exp and store with loads, it ran at 90% of a copy (H100, 8192x32768
# bf16, 400 us, bench 2026-11-22-h100-r2; 400 to 402 us in the sweeps below). One program per row
# looping 8192-element blocks on 16 warps reads the row twice at L1, but up to 4 rows share an SM and
# the second read can come from L2 (132 x 4 x 64 KB = 33 MB in flight, under the 50 MB L2; not checked
# with ncu): 377 and 378 us in two sweeps (reports/bench/2026-11-23-h100-r3/sweeps), 379 us (95%) in
# that bench.
SINGLE_PASS_MAX_16BIT = 16384
MEDIUM_BLOCK_N = 8192  # block length for 16-bit rows too long for one pass but <= SINGLE_PASS_MAX
LOOP_BLOCK_N = 16384  # block length when the row is longer
L2_ROW_BUDGET = 24 * 2**20  # bytes of rows in flight a persistent grid aims for (H100 L2: 50 MB)
MAX_PROGRAMS_PER_SM = 4


@triton.jit
def _softmax_online_kernel(out_ptr, in_ptr, n_rows, in_row_stride, out_row_stride, n_cols,
                           BLOCK_N: tl.constexpr, SINGLE: tl.constexpr, KEEP: tl.constexpr,
                           DROP: tl.constexpr):
    cols = tl.arange(0, BLOCK_N)
    # One program per row (grid = n_rows) or a persistent grid walking rows pid, pid + grid, ...
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        row64 = tl.cast(row, tl.int64)  # a plain int in the interpreter, a tensor when compiled
        in_row = in_ptr + row64 * in_row_stride
        out_row = out_ptr + row64 * out_row_stride
        if SINGLE:
            # read N elements once, keep them in registers, write N elements
            mask = cols < n_cols
            x = tl.load(in_row + cols, mask=mask, other=-float("inf")).to(tl.float32)
            x = x - tl.max(x, axis=0)
            num = tl.exp(x)
            tl.store(out_row + cols, (num / tl.sum(num, axis=0)).to(out_ptr.dtype.element_ty), mask=mask,
                     eviction_policy=DROP)
        else:
            m = tl.full((), float("-inf"), tl.float32)  # running max
            s = tl.full((), 0.0, tl.float32)  # running sum of exp(x - m)
            # pass 1: read N elements, keep (m, s); KEEP asks L2 to hold them for pass 2
            for start in range(0, n_cols, BLOCK_N):
                mask = start + cols < n_cols
                x = tl.load(in_row + start + cols, mask=mask, other=-float("inf"), eviction_policy=KEEP)
                x = x.to(tl.float32)
                m_new = tl.maximum(m, tl.max(x, axis=0))
                # While every value so far is -inf, use 0 as the shift: exp(-inf - 0) = 0, not exp(nan).
                shift = tl.where(m_new == float("-inf"), 0.0, m_new)
                s = s * tl.exp(m - shift) + tl.sum(tl.exp(x - shift), axis=0)
                m = m_new
            inv = 1.0 / s
            # pass 2, last block first: read N elements again (from L2 if they are still there), write N
            n_blocks = tl.cdiv(n_cols, BLOCK_N)
            for i in range(0, n_blocks):
                start = (n_blocks - 1 - i) * BLOCK_N
                mask = start + cols < n_cols
                x = tl.load(in_row + start + cols, mask=mask, other=-float("inf"), eviction_policy=DROP)
                y = tl.exp(x.to(tl.float32) - m) * inv
                tl.store(out_row + start + cols, y.to(out_ptr.dtype.element_ty), mask=mask,
                         eviction_policy=DROP)


@triton.jit
def _softmax_3pass_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    in_row = in_ptr + row * in_row_stride
    out_row = out_ptr + row * out_row_stride
    cols = tl.arange(0, BLOCK_N)
    # pass 1: read N elements for the max
    m = tl.full((), float("-inf"), tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        mask = start + cols < n_cols
        x = tl.load(in_row + start + cols, mask=mask, other=-float("inf")).to(tl.float32)
        m = tl.maximum(m, tl.max(x, axis=0))
    # pass 2: read N elements for the sum
    s = tl.full((), 0.0, tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        mask = start + cols < n_cols
        x = tl.load(in_row + start + cols, mask=mask, other=-float("inf")).to(tl.float32)
        s += tl.sum(tl.exp(x - m), axis=0)
    inv = 1.0 / s
    # pass 3: read N elements, write N elements
    for start in range(0, n_cols, BLOCK_N):
        mask = start + cols < n_cols
        x = tl.load(in_row + start + cols, mask=mask, other=-float("inf")).to(tl.float32)
        tl.store(out_row + start + cols, (tl.exp(x - m) * inv).to(out_ptr.dtype.element_ty), mask=mask)


def loop_block_n(n: int, block_n: int | None) -> int:
    return block_n if block_n is not None else min(DEFAULT_BLOCK_N, triton.next_power_of_2(n))


def loop_launch(kernel, read_passes: int, shape: Shape, block_n: int | None, num_warps: int
                ) -> sectors.TileLaunch:
    m, n = shape
    bn = loop_block_n(n, block_n)
    # With N == 1 the JIT passes n_cols as the constant 1: every loop runs once at compile time and the
    # compiler merges the identical loads into one read (seen in the TTGIR).
    return sectors.TileLaunch(
        kernel=kernel, grid=m, scalars={"in_row_stride": n, "out_row_stride": n, "n_cols": n},
        constexprs={"BLOCK_N": bn}, num_warps=num_warps, shape=(m, n), tile=(1, bn), rank1=True,
        read_passes=1 if n == 1 else read_passes)


def sm_count(device: torch.device | str | None) -> int:
    """Streaming multiprocessors of a CUDA device; 2 elsewhere (the interpreter runs programs one at a
    time, so there a small persistent grid only exercises the row loop)."""
    if device is not None and torch.device(device).type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 2


def online_config(shape: Shape, dtype: torch.dtype, BLOCK_N: int | None = None,
                  num_warps: int | None = None, programs: int | None = None, evict_hints: int | None = None,
                  sms: int = 2) -> dict[str, Any]:
    """softmax_online's parameters with every auto (None) value filled in, plus `single` (one pass).

    Auto: rows up to SINGLE_PASS_MAX elements (SINGLE_PASS_MAX_16BIT for 16-bit inputs) are one block
    (single pass, one program per row); 16-bit rows up to SINGLE_PASS_MAX loop over MEDIUM_BLOCK_N
    blocks, one program per row; longer rows loop over LOOP_BLOCK_N blocks on a persistent grid sized
    so that the rows in flight hold about L2_ROW_BUDGET bytes (at least one program per SM, at most
    MAX_PROGRAMS_PER_SM). Looped rows get eviction hints.
    num_warps: 8 elements per thread up to 16 warps (32 for blocks over 8192 elements), and never more
    warps than a short row fills (a warp beyond that would load copies). Only BLOCK_N and num_warps
    change L1 traffic.
    """
    m, n = shape
    np2 = triton.next_power_of_2(n)
    if BLOCK_N is None:
        one_pass = SINGLE_PASS_MAX if element_size(dtype) >= 4 else SINGLE_PASS_MAX_16BIT
        BLOCK_N = np2 if np2 <= one_pass else MEDIUM_BLOCK_N if np2 <= SINGLE_PASS_MAX else LOOP_BLOCK_N
    single = n <= BLOCK_N
    if num_warps is None:
        num_warps = min(32 if BLOCK_N > 8192 else 16, max(1, BLOCK_N // 256))
    if programs is None:
        if single or np2 <= SINGLE_PASS_MAX:  # rows this short stay in L2 with a program per row
            programs = 0
        else:
            want = L2_ROW_BUDGET // (n * element_size(dtype))
            programs = min(max(want, sms), MAX_PROGRAMS_PER_SM * sms)
    if evict_hints is None:
        evict_hints = 0 if single else 1
    return {"BLOCK_N": BLOCK_N, "num_warps": num_warps, "programs": programs, "evict_hints": evict_hints,
            "single": single}


def online_launch(shape: Shape, dtype: torch.dtype = torch.float32, BLOCK_N: int | None = None,
                  num_warps: int | None = None, programs: int | None = None, evict_hints: int | None = None,
                  sms: int = 2) -> sectors.TileLaunch:
    m, n = shape
    c = online_config(shape, dtype, BLOCK_N, num_warps, programs, evict_hints, sms)
    grid = m if c["programs"] == 0 else min(m, c["programs"])
    hints = bool(c["evict_hints"])
    # With N == 1 the JIT passes n_cols as the constant 1; auto BLOCK_N is then 1 and the path single.
    return sectors.TileLaunch(
        kernel=_softmax_online_kernel, grid=grid,
        scalars={"n_rows": m, "in_row_stride": n, "out_row_stride": n, "n_cols": n},
        constexprs={"BLOCK_N": c["BLOCK_N"], "SINGLE": c["single"], "KEEP": "evict_last" if hints else "",
                    "DROP": "evict_first" if hints else ""},
        num_warps=c["num_warps"], shape=(m, n), tile=(1, c["BLOCK_N"]), rank1=True,
        read_passes=1 if c["single"] or n == 1 else 2)


def three_pass_launch(shape: Shape, BLOCK_N: int | None = None, num_warps: int = 4) -> sectors.TileLaunch:
    return loop_launch(_softmax_3pass_kernel, 3, shape, BLOCK_N, num_warps)


def softmax_online(x: torch.Tensor, BLOCK_N: int | None = None, num_warps: int | None = None,
                   programs: int | None = None, evict_hints: int | None = None) -> torch.Tensor:
    """softmax(x, dim=-1): a single pass when the row fits BLOCK_N, else an online max+sum loop and a
    reverse write loop. programs: 0 = one program per row, k = a persistent grid of k programs.
    None = auto for every parameter (see online_config)."""
    x = contiguous_2d(x)
    out = torch.empty_like(x)
    online_launch(tuple(x.shape), x.dtype, BLOCK_N, num_warps, programs, evict_hints,
                  sm_count(x.device))(out, x)
    return out


def softmax_3pass(x: torch.Tensor, BLOCK_N: int | None = None, num_warps: int = 4) -> torch.Tensor:
    """softmax(x, dim=-1): max loop, sum loop, write loop; one program per row."""
    x = contiguous_2d(x)
    out = torch.empty_like(x)
    three_pass_launch(tuple(x.shape), BLOCK_N, num_warps)(out, x)
    return out


def _online_traffic(shape: Shape, dtype: torch.dtype, params: dict[str, Any]) -> Traffic:
    p = resolve_params("softmax_online", ONLINE_DEFAULTS, params, _ONLINE_RULES)
    # Each pass walks the row in (1, BLOCK_N) tiles: per pass the same sectors as a one-tile row kernel
    # (32*vec-element chunks per warp request; num_warps copies if BLOCK_N < 32*num_warps). One pass when
    # the row fits a block; otherwise the write loop reads every element again, which L1 counts even
    # when L2 serves it. The grid and the eviction hints move DRAM and L2 traffic, not L1 traffic.
    read, write = online_launch(shape, dtype, **p).traffic_bytes(element_size(dtype))
    return Traffic(read=read, write=write)


def _3pass_traffic(shape: Shape, dtype: torch.dtype, params: dict[str, Any]) -> Traffic:
    p = resolve_params("softmax_3pass", LOOP_DEFAULTS, params, _LOOP_RULES)
    # Three passes of (1, BLOCK_N) tiles, each counted at L1 whether L2 serves it or DRAM does.
    read, write = three_pass_launch(shape, **p).traffic_bytes(element_size(dtype))
    return Traffic(read=read, write=write)


def _online_check(shape: Shape, dtype: torch.dtype, params: dict[str, Any]) -> str | None:
    resolve_params("softmax_online", ONLINE_DEFAULTS, params, _ONLINE_RULES)
    return None


def _3pass_check(shape: Shape, dtype: torch.dtype, params: dict[str, Any]) -> str | None:
    resolve_params("softmax_3pass", LOOP_DEFAULTS, params, _LOOP_RULES)
    return None


def _run_online(x: torch.Tensor, **params: Any) -> torch.Tensor:
    return softmax_online(x, **resolve_params("softmax_online", ONLINE_DEFAULTS, params, _ONLINE_RULES))


def _run_3pass(x: torch.Tensor, **params: Any) -> torch.Tensor:
    return softmax_3pass(x, **resolve_params("softmax_3pass", LOOP_DEFAULTS, params, _LOOP_RULES))


SOFTMAX_ONLINE = Variant(
    name="softmax_online",
    op="softmax",
    description="Triton, a row per program: one pass when the row fits BLOCK_N, else an online max+sum "
    "loop then a reverse write loop (2 reads + 1 write at L1), persistent grid and L2 eviction hints",
    run=_run_online,
    predicted=_online_traffic,
    params=dict(ONLINE_DEFAULTS),
    constraints=f"any MxN; BLOCK_N: power of two or auto (next_pow2(N) up to {SINGLE_PASS_MAX}, else "
    f"{LOOP_BLOCK_N}); num_warps: power of two or auto; programs: 0 (one per row), a grid size, or auto; "
    "evict_hints: 0/1 or auto",
    check=_online_check,
)

SOFTMAX_3PASS = Variant(
    name="softmax_3pass",
    op="softmax",
    description="Triton, one row per program in BLOCK_N blocks: max loop, sum loop, write loop "
    "(3 reads + 1 write)",
    run=_run_3pass,
    predicted=_3pass_traffic,
    params=dict(LOOP_DEFAULTS),
    constraints=f"any MxN; BLOCK_N: power of two or auto (min({DEFAULT_BLOCK_N}, next_pow2(N))); "
    "num_warps: power of two",
    check=_3pass_check,
)
