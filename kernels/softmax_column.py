"""Softmax over dim 0 (down each column) of a row-major MxN matrix: the reduction runs across rows, so
consecutive elements of one reduction are N elements apart in memory.

- softmax_column_strided: one program per column, walking down it BLOCK_M rows at a time. Each lane's
  element is N*e bytes from its neighbour's, so (once N*e >= 32) every element load is its own 32-byte
  sector: 4 useful bytes of 32 for fp32, 8x the minimum per pass.
- softmax_column_coalesced: each program owns BLOCK_N contiguous columns and walks down the rows in
  (BLOCK_M, BLOCK_N) tiles, keeping a running max and sum per column. A warp's request is a run of
  contiguous row bytes, so sectors are fully used.

Both make two passes: an online max+sum pass (reads MN), then a write pass (reads MN, writes MN).
They compute in fp32 and store in the input's dtype; an all -inf column gives NaN, as torch.softmax.
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


def _read_passes(m: int) -> int:
    # Two loops over the rows, each loading every element. With M == 1 the JIT passes n_rows as the
    # constant 1, each loop runs once at compile time, and the compiler merges the two identical loads.
    return 1 if m == 1 else 2


# --- one program per column -----------------------------------------------------------------------------


@triton.jit
def _softmax_column_strided_kernel(out_ptr, in_ptr, n_rows, row_stride, BLOCK_M: tl.constexpr):
    col = tl.program_id(0).to(tl.int64)
    rows = tl.arange(0, BLOCK_M)
    m = tl.full((), float("-inf"), tl.float32)
    s = tl.full((), 0.0, tl.float32)
    # pass 1: read M elements of this column, N*e bytes apart: one sector per element
    for start in range(0, n_rows, BLOCK_M):
        r = start + rows
        x = tl.load(in_ptr + r.to(tl.int64) * row_stride + col, mask=r < n_rows, other=-float("inf"))
        x = x.to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)  # keep exp() finite while all is -inf
        s = s * tl.exp(m - shift) + tl.sum(tl.exp(x - shift), axis=0)
        m = m_new
    inv = 1.0 / s
    # pass 2: read the column again and write it, again one sector per element
    for start in range(0, n_rows, BLOCK_M):
        r = start + rows
        offs = r.to(tl.int64) * row_stride + col
        x = tl.load(in_ptr + offs, mask=r < n_rows, other=-float("inf")).to(tl.float32)
        tl.store(out_ptr + offs, (tl.exp(x - m) * inv).to(out_ptr.dtype.element_ty), mask=r < n_rows)


STRIDED_DEFAULTS: dict[str, Any] = {"BLOCK_M": None, "num_warps": 4}
_STRIDED_RULES = {"BLOCK_M": optional(power_of_two(1, 65536)), "num_warps": power_of_two(1, 32)}


def strided_block_m(m: int, block_m: int | None) -> int:
    return block_m if block_m is not None else min(256, triton.next_power_of_2(m))


def strided_launch(shape: Shape, BLOCK_M: int | None = None, num_warps: int = 4) -> sectors.TileLaunch:
    m, n = shape
    bm = strided_block_m(m, BLOCK_M)
    return sectors.TileLaunch(
        kernel=_softmax_column_strided_kernel, grid=n, scalars={"n_rows": m, "row_stride": n},
        constexprs={"BLOCK_M": bm}, num_warps=num_warps, shape=(m, n), tile=(bm, 1), rank1=True,
        read_passes=_read_passes(m))


def softmax_column_strided(x: torch.Tensor, BLOCK_M: int | None = None, num_warps: int = 4) -> torch.Tensor:
    """softmax(x, dim=0), one program per column (BLOCK_M: rows per loop step, None = auto)."""
    x = contiguous_2d(x)
    out = torch.empty_like(x)
    strided_launch(tuple(x.shape), BLOCK_M, num_warps)(out, x)
    return out


def _strided_traffic(shape: Shape, dtype: torch.dtype, params: dict[str, Any]) -> Traffic:
    p = resolve_params("softmax_column_strided", STRIDED_DEFAULTS, params, _STRIDED_RULES)
    # A warp request covers 32 consecutive rows of one column. With N*e >= 32 the 32 addresses fall in
    # 32 different sectors: per pass M*N sectors = 32*M*N bytes (8x fp32, 16x bf16). With narrower rows
    # (N*e < 32) neighbouring rows share sectors and the model counts the sectors each request spans.
    # Reads: 2 passes. Writes: 1 pass, same sectors (an L1 store request moves whole sectors too).
    read, write = strided_launch(shape, **p).traffic_bytes(element_size(dtype))
    return Traffic(read=read, write=write)


def _strided_check(shape: Shape, dtype: torch.dtype, params: dict[str, Any]) -> str | None:
    resolve_params("softmax_column_strided", STRIDED_DEFAULTS, params, _STRIDED_RULES)
    return None


def _run_strided(x: torch.Tensor, **params: Any) -> torch.Tensor:
    return softmax_column_strided(x, **resolve_params("softmax_column_strided", STRIDED_DEFAULTS, params,
                                                      _STRIDED_RULES))


SOFTMAX_COLUMN_STRIDED = Variant(
    name="softmax_column_strided",
    op="softmax_dim0",
    description="Triton, one program per column walking down it: every element load is its own 32-B "
    "sector (2 reads + 1 write)",
    run=_run_strided,
    predicted=_strided_traffic,
    params=dict(STRIDED_DEFAULTS),
    constraints="any MxN; BLOCK_M: power of two or auto (min(256, next_pow2(M))); num_warps: power of two",
    check=_strided_check,
)


# --- BLOCK_N columns per program ------------------------------------------------------------------------


@triton.jit
def _softmax_column_coalesced_kernel(out_ptr, in_ptr, n_rows, n_cols, row_stride,
                                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < n_cols
    rows = tl.arange(0, BLOCK_M)
    m = tl.full((BLOCK_N,), float("-inf"), tl.float32)  # running max per column
    s = tl.zeros((BLOCK_N,), tl.float32)  # running sum per column
    # pass 1: read M x BLOCK_N elements; each tile row is BLOCK_N*e contiguous bytes
    for start in range(0, n_rows, BLOCK_M):
        r = start + rows
        mask = (r < n_rows)[:, None] & col_mask[None, :]
        offs = r.to(tl.int64)[:, None] * row_stride + cols[None, :]
        x = tl.load(in_ptr + offs, mask=mask, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)  # keep exp() finite while all is -inf
        s = s * tl.exp(m - shift) + tl.sum(tl.exp(x - shift[None, :]), axis=0)
        m = m_new
    inv = 1.0 / s
    # pass 2: read the same tiles again, write them
    for start in range(0, n_rows, BLOCK_M):
        r = start + rows
        mask = (r < n_rows)[:, None] & col_mask[None, :]
        offs = r.to(tl.int64)[:, None] * row_stride + cols[None, :]
        x = tl.load(in_ptr + offs, mask=mask, other=-float("inf")).to(tl.float32)
        y = tl.exp(x - m[None, :]) * inv[None, :]
        tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


COALESCED_DEFAULTS: dict[str, Any] = {"BLOCK_M": None, "BLOCK_N": None, "num_warps": 4}
_COALESCED_RULES = {"BLOCK_M": optional(power_of_two(1, 65536)),
                    "BLOCK_N": optional(power_of_two(1, 65536)),
                    "num_warps": power_of_two(1, 32)}
COLUMN_TILE = 2048  # elements per (BLOCK_M, BLOCK_N) tile when BLOCK_M is auto


def coalesced_config(shape: Shape, dtype: torch.dtype, block_m: int | None, block_n: int | None,
                     num_warps: int) -> tuple[int, int]:
    """(BLOCK_M, BLOCK_N): auto BLOCK_N spans 128 bytes of a row (one full L1 line; wider would leave
    fewer programs, since each program owns whole columns); auto BLOCK_M fills the tile to COLUMN_TILE
    elements, or to the matrix's rows if fewer, but never below one element per thread (see
    _coalesced_check)."""
    m, n = shape
    if block_n is None:
        block_n = min(128 // element_size(dtype), triton.next_power_of_2(n))
    if block_m is None:
        floor = max(1, 32 * num_warps // block_n)
        block_m = max(1, min(COLUMN_TILE // block_n, max(triton.next_power_of_2(m), floor)))
    return block_m, block_n


def coalesced_launch(shape: Shape, dtype: torch.dtype, BLOCK_M: int | None = None, BLOCK_N: int | None = None,
                     num_warps: int = 4) -> sectors.TileLaunch:
    m, n = shape
    bm, bn = coalesced_config(shape, dtype, BLOCK_M, BLOCK_N, num_warps)
    return sectors.TileLaunch(
        kernel=_softmax_column_coalesced_kernel, grid=triton.cdiv(n, bn),
        scalars={"n_rows": m, "n_cols": n, "row_stride": n}, constexprs={"BLOCK_M": bm, "BLOCK_N": bn},
        num_warps=num_warps, shape=(m, n), tile=(bm, bn), rank1=False, read_passes=_read_passes(m))


def softmax_column_coalesced(x: torch.Tensor, BLOCK_M: int | None = None, BLOCK_N: int | None = None,
                             num_warps: int = 4) -> torch.Tensor:
    """softmax(x, dim=0), BLOCK_N columns per program walking down the rows BLOCK_M at a time."""
    x = contiguous_2d(x)
    out = torch.empty_like(x)
    coalesced_launch(tuple(x.shape), x.dtype, BLOCK_M, BLOCK_N, num_warps)(out, x)
    return out


def _coalesced_traffic(shape: Shape, dtype: torch.dtype, params: dict[str, Any]) -> Traffic:
    p = resolve_params("softmax_column_coalesced", COALESCED_DEFAULTS, params, _COALESCED_RULES)
    # Per pass, (BLOCK_M, BLOCK_N) tiles cover the matrix once. A warp request is a contiguous run of one
    # row (BLOCK_N >= 32*vec) or several rows' BLOCK_N-column pieces; sectors are wasted only where a
    # piece does not start or end on a 32-byte boundary (odd N, or BLOCK_N*e < 32). 2 reads + 1 write.
    read, write = coalesced_launch(shape, dtype, **p).traffic_bytes(element_size(dtype))
    return Traffic(read=read, write=write)


def _coalesced_check(shape: Shape, dtype: torch.dtype, params: dict[str, Any]) -> str | None:
    p = resolve_params("softmax_column_coalesced", COALESCED_DEFAULTS, params, _COALESCED_RULES)
    bm, bn = coalesced_config(shape, dtype, p["BLOCK_M"], p["BLOCK_N"], p["num_warps"])
    if bm * bn > 16384:
        return f"tile BLOCK_M x BLOCK_N = {bm}x{bn} holds more than 16384 elements: lower BLOCK_M or BLOCK_N"
    if bm * bn < 32 * p["num_warps"]:
        # Seen in the TTGIR (Triton 3.7, sm_90): with fewer elements than threads, the compiler loads the
        # first pass's tile twice, in two layouts, which this model does not predict.
        return (f"tile BLOCK_M x BLOCK_N = {bm}x{bn} is smaller than the {32 * p['num_warps']} threads of "
                f"num_warps={p['num_warps']}: raise BLOCK_M or BLOCK_N, or lower num_warps")
    return None


def _run_coalesced(x: torch.Tensor, **params: Any) -> torch.Tensor:
    p = resolve_params("softmax_column_coalesced", COALESCED_DEFAULTS, params, _COALESCED_RULES)
    return softmax_column_coalesced(x, **p)


SOFTMAX_COLUMN_COALESCED = Variant(
    name="softmax_column_coalesced",
    op="softmax_dim0",
    description="Triton, BLOCK_N contiguous columns per program walking down the rows: coalesced, "
    "2 reads + 1 write",
    run=_run_coalesced,
    predicted=_coalesced_traffic,
    params=dict(COALESCED_DEFAULTS),
    constraints="any MxN; BLOCK_M, BLOCK_N: powers of two or auto (BLOCK_N = 128 bytes of a row); "
    "BLOCK_M*BLOCK_N <= 16384",
    check=_coalesced_check,
)
