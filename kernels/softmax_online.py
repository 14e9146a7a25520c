"""Row softmax for rows too long for one tile: loop over the row in BLOCK_N-column blocks.

- softmax_online: one loop carries the running max m and the running sum s together (the online
  normalizer: when the max grows from m to m', the sum so far is rescaled by exp(m - m')), then a
  second loop writes. Reads MN twice, writes MN once.
- softmax_3pass: a max loop, a sum loop and a write loop. Reads MN three times, writes MN once.

Both run one row per program, compute in fp32 and store in the input's dtype. A row of all -inf gives
NaN (0/0, as torch.softmax); a row with -inf entries and at least one finite value is exact, even when
whole blocks are -inf (the running max is kept out of exp() until it is finite).
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from kernels import sectors
from kernels._params import power_of_two
from kernels.softmax_rows import contiguous_2d, optional, resolve_params
from kernels.variant import Variant
from memtraffic.model import Shape, Traffic, element_size

LOOP_DEFAULTS: dict[str, Any] = {"BLOCK_N": None, "num_warps": 4}
_LOOP_RULES = {"BLOCK_N": optional(power_of_two(1, 65536)), "num_warps": power_of_two(1, 32)}
DEFAULT_BLOCK_N = 1024  # auto: this, or next_pow2(N) when the row is shorter


@triton.jit
def _softmax_online_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    in_row = in_ptr + row * in_row_stride
    out_row = out_ptr + row * out_row_stride
    cols = tl.arange(0, BLOCK_N)
    m = tl.full((), float("-inf"), tl.float32)  # running max
    s = tl.full((), 0.0, tl.float32)  # running sum of exp(x - m)
    # pass 1: read N elements, keep (m, s)
    for start in range(0, n_cols, BLOCK_N):
        mask = start + cols < n_cols
        x = tl.load(in_row + start + cols, mask=mask, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        # While every value so far is -inf, use 0 as the shift: exp(-inf - 0) = 0, not exp(nan).
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)
        s = s * tl.exp(m - shift) + tl.sum(tl.exp(x - shift), axis=0)
        m = m_new
    inv = 1.0 / s
    # pass 2: read N elements again, write N elements
    for start in range(0, n_cols, BLOCK_N):
        mask = start + cols < n_cols
        x = tl.load(in_row + start + cols, mask=mask, other=-float("inf")).to(tl.float32)
        tl.store(out_row + start + cols, (tl.exp(x - m) * inv).to(out_ptr.dtype.element_ty), mask=mask)


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


def online_launch(shape: Shape, BLOCK_N: int | None = None, num_warps: int = 4) -> sectors.TileLaunch:
    return loop_launch(_softmax_online_kernel, 2, shape, BLOCK_N, num_warps)


def three_pass_launch(shape: Shape, BLOCK_N: int | None = None, num_warps: int = 4) -> sectors.TileLaunch:
    return loop_launch(_softmax_3pass_kernel, 3, shape, BLOCK_N, num_warps)


def softmax_online(x: torch.Tensor, BLOCK_N: int | None = None, num_warps: int = 4) -> torch.Tensor:
    """softmax(x, dim=-1): one online max+sum loop, then a write loop; one program per row."""
    x = contiguous_2d(x)
    out = torch.empty_like(x)
    online_launch(tuple(x.shape), BLOCK_N, num_warps)(out, x)
    return out


def softmax_3pass(x: torch.Tensor, BLOCK_N: int | None = None, num_warps: int = 4) -> torch.Tensor:
    """softmax(x, dim=-1): max loop, sum loop, write loop; one program per row."""
    x = contiguous_2d(x)
    out = torch.empty_like(x)
    three_pass_launch(tuple(x.shape), BLOCK_N, num_warps)(out, x)
    return out


def _looped_traffic(name: str, launch):
    def predicted(shape: Shape, dtype: torch.dtype, params: dict[str, Any]) -> Traffic:
        p = resolve_params(name, LOOP_DEFAULTS, params, _LOOP_RULES)
        # Each pass walks the row in (1, BLOCK_N) tiles: per pass the same sectors as a one-tile row
        # kernel (32*vec-element chunks per warp request; num_warps copies if BLOCK_N < 32*num_warps).
        # The second and third reads mostly hit in L1/L2, but L1 counts every request.
        read, write = launch(shape, **p).traffic_bytes(element_size(dtype))
        return Traffic(read=read, write=write)

    return predicted


def _check(name: str):
    def check(shape: Shape, dtype: torch.dtype, params: dict[str, Any]) -> str | None:
        resolve_params(name, LOOP_DEFAULTS, params, _LOOP_RULES)
        return None

    return check


def _runner(name: str, fn):
    def run(x: torch.Tensor, **params: Any) -> torch.Tensor:
        return fn(x, **resolve_params(name, LOOP_DEFAULTS, params, _LOOP_RULES))

    return run


_CONSTRAINTS = (f"any MxN; BLOCK_N: power of two or auto (min({DEFAULT_BLOCK_N}, next_pow2(N))); "
                "num_warps: power of two")

SOFTMAX_ONLINE = Variant(
    name="softmax_online",
    op="softmax",
    description="Triton, one row per program in BLOCK_N blocks: online max+sum loop, then write loop "
    "(2 reads + 1 write)",
    run=_runner("softmax_online", softmax_online),
    predicted=_looped_traffic("softmax_online", online_launch),
    params=dict(LOOP_DEFAULTS),
    constraints=_CONSTRAINTS,
    check=_check("softmax_online"),
)

SOFTMAX_3PASS = Variant(
    name="softmax_3pass",
    op="softmax",
    description="Triton, one row per program in BLOCK_N blocks: max loop, sum loop, write loop "
    "(3 reads + 1 write)",
    run=_runner("softmax_3pass", softmax_3pass),
    predicted=_looped_traffic("softmax_3pass", three_pass_launch),
    params=dict(LOOP_DEFAULTS),
    constraints=_CONSTRAINTS,
    check=_check("softmax_3pass"),
)
