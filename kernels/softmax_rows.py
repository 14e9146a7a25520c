"""Row softmax in one pass over memory: the whole row sits in registers, so the kernel reads MN elements
once and writes MN elements once. Two ways to map rows onto programs:

- softmax_naive: one row per program, the classic Triton fused-softmax tutorial kernel. With short rows
  the 1-D tile is smaller than the warps covering it, and every warp issues the same load.
- softmax_tiled: BLOCK_M rows per program as a 2-D tile, reduced along axis 1. Short rows are packed
  so that every thread holds distinct elements and a warp's request covers contiguous bytes.

Both compute in fp32 and store in the input's dtype. A row of all -inf gives NaN (0/0, as torch.softmax).
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from memtraffic.vocab.ops import Shape, Traffic, element_size
from memtraffic.vocab.variant import Variant

from . import sectors
from ._params import optional, power_of_two, resolve_params

MAX_TILE = 16384  # elements of a row (or tile) held in registers; beyond this use softmax_online


# --- one row per program --------------------------------------------------------------------------------


@triton.jit
def _softmax_naive_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    # read N elements (the whole row; padding lanes are masked and read nothing). When BLOCK_N is smaller
    # than 32*num_warps, the layout wraps and each warp holds (and loads) the full row: num_warps copies.
    x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)  # registers only (cross-warp reduce goes through shared memory)
    num = tl.exp(x)
    den = tl.sum(num, axis=0)
    # write N elements; Triton masks the duplicate copies, so the store is issued once per element
    tl.store(out_ptr + row * out_row_stride + cols, (num / den).to(out_ptr.dtype.element_ty), mask=mask)


NAIVE_DEFAULTS: dict[str, Any] = {"num_warps": 4}
_NAIVE_RULES = {"num_warps": power_of_two(1, 32)}


def contiguous_2d(x: torch.Tensor) -> torch.Tensor:
    """The kernels address x as row * N + col: a 2-D row-major contiguous tensor (the model assumes it)."""
    if x.dim() != 2:
        raise ValueError(f"expected a 2-D tensor, got shape {tuple(x.shape)}")
    return x.contiguous()


def naive_launch(shape: Shape, num_warps: int = 4) -> sectors.TileLaunch:
    m, n = shape
    return sectors.TileLaunch(
        kernel=_softmax_naive_kernel, grid=m, scalars={"in_row_stride": n, "out_row_stride": n, "n_cols": n},
        constexprs={"BLOCK_N": triton.next_power_of_2(n)}, num_warps=num_warps, shape=(m, n),
        tile=(1, triton.next_power_of_2(n)), rank1=True, read_passes=1)


def softmax_naive(x: torch.Tensor, num_warps: int = 4) -> torch.Tensor:
    """softmax(x, dim=-1), one program per row, BLOCK_N = next power of two >= N."""
    x = contiguous_2d(x)
    out = torch.empty_like(x)
    naive_launch(tuple(x.shape), num_warps)(out, x)
    return out


def _naive_traffic(shape: Shape, dtype: torch.dtype, params: dict[str, Any]) -> Traffic:
    p = resolve_params("softmax_naive", NAIVE_DEFAULTS, params, _NAIVE_RULES)
    # One (1, BLOCK_N) tile per row; a warp request is 32*vec contiguous elements of the row.
    # Example 1048576x2 fp32, 4 warps: a row is 8 bytes in one sector (4x), and each of the 4 warps
    # loads it (4x): 32 B * 4 per row = 16x the 8 MB minimum; the store goes out once: 32 B per row (4x).
    read, write = naive_launch(shape, p["num_warps"]).traffic_bytes(element_size(dtype))
    return Traffic(read=read, write=write)


def _naive_check(shape: Shape, dtype: torch.dtype, params: dict[str, Any]) -> str | None:
    resolve_params("softmax_naive", NAIVE_DEFAULTS, params, _NAIVE_RULES)
    if shape[1] > MAX_TILE:
        return f"softmax_naive keeps a row in registers: N <= {MAX_TILE} (use softmax_online for longer rows)"
    return None


def _run_naive(x: torch.Tensor, **params: Any) -> torch.Tensor:
    return softmax_naive(x, **resolve_params("softmax_naive", NAIVE_DEFAULTS, params, _NAIVE_RULES))


SOFTMAX_NAIVE = Variant(
    name="softmax_naive",
    op="softmax",
    description="Triton, one row per program (the fused-softmax tutorial): short rows waste sectors and "
    "every warp loads the same row",
    run=_run_naive,
    predicted=_naive_traffic,
    params=dict(NAIVE_DEFAULTS),
    constraints=f"N <= {MAX_TILE}; BLOCK_N = next_pow2(N); num_warps a power of two",
    check=_naive_check,
)


# --- BLOCK_M rows per program ---------------------------------------------------------------------------


@triton.jit
def _softmax_tiled_kernel(out_ptr, in_ptr, n_rows, n_cols, in_row_stride, out_row_stride,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, FLAT: tl.constexpr):
    if FLAT:
        # N == BLOCK_N < 16, M % 16 == 0: the tile is one contiguous run of BLOCK_M*N elements. Flat, the
        # compiler sees that and loads 16 bytes a thread; as row * stride + col it only proves N
        # contiguous elements (8 bytes at N=2 fp32), because the stride is a runtime value.
        offs = tl.program_id(0).to(tl.int64) * (BLOCK_M * BLOCK_N) + tl.arange(0, BLOCK_M * BLOCK_N)
        flat_mask = offs < tl.cast(n_rows, tl.int64) * BLOCK_N  # whole rows: the last tile's extra rows
        x = tl.load(in_ptr + offs, mask=flat_mask, other=-float("inf"))  # read BLOCK_M*N elements
        x = tl.reshape(x, (BLOCK_M, BLOCK_N)).to(tl.float32)
    else:
        rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = tl.arange(0, BLOCK_N)
        mask = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]
        rows64 = rows.to(tl.int64)[:, None]
        # read BLOCK_M*N elements: BLOCK_M consecutive rows are one contiguous run of bytes, and a warp's
        # request covers whole rows when they are short (32 B of 8-byte rows = 4 rows per sector)
        x = tl.load(in_ptr + rows64 * in_row_stride + cols[None, :], mask=mask, other=-float("inf"))
        x = x.to(tl.float32)
    x = x - tl.max(x, axis=1)[:, None]
    num = tl.exp(x)
    den = tl.sum(num, axis=1)
    # write BLOCK_M*N elements, the same contiguous run
    y = (num / den[:, None]).to(out_ptr.dtype.element_ty)
    if FLAT:
        tl.store(out_ptr + offs, tl.reshape(y, (BLOCK_M * BLOCK_N,)), mask=flat_mask)
    else:
        tl.store(out_ptr + rows64 * out_row_stride + cols[None, :], y, mask=mask)


TILED_DEFAULTS: dict[str, Any] = {"BLOCK_M": None, "num_warps": None}
_TILED_RULES = {"BLOCK_M": optional(power_of_two(1, MAX_TILE)), "num_warps": optional(power_of_two(1, 32))}
FLAT_BELOW = 16  # N below this (a power of two, M a multiple of 16) takes the flat path: 16-byte loads
TILE_TARGET = 2048  # elements per program when BLOCK_M is auto: 1024 rows of N=2, 2 rows of N=1000


def tiled_config(shape: Shape, block_m: int | None, num_warps: int | None) -> tuple[int, int, int]:
    """(BLOCK_M, BLOCK_N, num_warps) for a shape: auto values fill the tile to about TILE_TARGET elements
    (never more rows than the matrix has) and give big tiles more warps (4 up to 2048 elements, 16 at
    8192)."""
    m, n = shape
    block_n = triton.next_power_of_2(n)
    if block_m is None:
        block_m = max(1, min(TILE_TARGET // block_n, triton.next_power_of_2(m)))
    if num_warps is None:
        num_warps = min(16, max(4, block_m * block_n // 512))
    return block_m, block_n, num_warps


def tiled_launch(shape: Shape, block_m: int | None = None, num_warps: int | None = None
                 ) -> sectors.TileLaunch:
    m, n = shape
    bm, bn, warps = tiled_config(shape, block_m, num_warps)
    # Flat only when M is a multiple of 16: the JIT then proves that the mask bound (M*N) never cuts a
    # 16-byte vector. Otherwise the compiler splits each thread's vector at the mask's granularity and a
    # warp request covers every other half-sector: 2x the bytes (bf16 1000003x4 on the H100).
    flat = n == bn and 1 < n < FLAT_BELOW and bm > 1 and m % 16 == 0
    return sectors.TileLaunch(
        kernel=_softmax_tiled_kernel, grid=triton.cdiv(m, bm),
        scalars={"n_rows": m, "n_cols": n, "in_row_stride": n, "out_row_stride": n},
        constexprs={"BLOCK_M": bm, "BLOCK_N": bn, "FLAT": flat}, num_warps=warps,
        # flat: one contiguous run of bm*n elements per program, i.e. a 1 x MN matrix in (1, bm*n) tiles
        shape=(1, m * n) if flat else (m, n), tile=(1, bm * bn) if flat else (bm, bn), rank1=flat,
        read_passes=1)


def softmax_tiled(x: torch.Tensor, BLOCK_M: int | None = None, num_warps: int | None = None) -> torch.Tensor:
    """softmax(x, dim=-1) with BLOCK_M rows per program (None = auto from the shape)."""
    x = contiguous_2d(x)
    out = torch.empty_like(x)
    tiled_launch(tuple(x.shape), BLOCK_M, num_warps)(out, x)
    return out


def _tiled_traffic(shape: Shape, dtype: torch.dtype, params: dict[str, Any]) -> Traffic:
    p = resolve_params("softmax_tiled", TILED_DEFAULTS, params, _TILED_RULES)
    # Once the tile is at least as big as the layout (32*num_warps*vec elements), no thread holds a copy.
    # Short rows: a warp request covers 32*vec/BLOCK_N whole rows, a contiguous run, so only the
    # sectors at the run's ends can be partly wasted. Long rows: requests are 32*vec-element row
    # chunks, as in softmax_naive. A tile smaller than the layout (user-set BLOCK_M) is replicated.
    read, write = tiled_launch(shape, p["BLOCK_M"], p["num_warps"]).traffic_bytes(element_size(dtype))
    return Traffic(read=read, write=write)


def _tiled_check(shape: Shape, dtype: torch.dtype, params: dict[str, Any]) -> str | None:
    p = resolve_params("softmax_tiled", TILED_DEFAULTS, params, _TILED_RULES)
    bm, bn, _ = tiled_config(shape, p["BLOCK_M"], p["num_warps"])
    if bn > MAX_TILE:
        return f"softmax_tiled keeps whole rows in registers: N <= {MAX_TILE} (use softmax_online)"
    if bm * bn > MAX_TILE:
        return f"tile BLOCK_M x BLOCK_N = {bm}x{bn} holds more than {MAX_TILE} elements: lower BLOCK_M"
    return None


def _run_tiled(x: torch.Tensor, **params: Any) -> torch.Tensor:
    return softmax_tiled(x, **resolve_params("softmax_tiled", TILED_DEFAULTS, params, _TILED_RULES))


SOFTMAX_TILED = Variant(
    name="softmax_tiled",
    op="softmax",
    description="Triton, BLOCK_M rows per program as one 2-D tile: short rows packed so no sector or "
    "warp is wasted",
    run=_run_tiled,
    predicted=_tiled_traffic,
    params=dict(TILED_DEFAULTS),
    constraints=f"N <= {MAX_TILE} and BLOCK_M*next_pow2(N) <= {MAX_TILE}; BLOCK_M, num_warps: powers of two "
    "or auto",
    check=_tiled_check,
)
