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

from dataclasses import dataclass
from typing import Any

import torch
import triton
import triton.language as tl

from memtraffic.vocab.ops import Shape, Traffic, element_size
from memtraffic.vocab.variant import Variant

from . import sectors
from ._params import optional, power_of_two, resolve_params
from .softmax_rows import contiguous_2d


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


# --- BLOCK_N columns per program, rows split into chunks ------------------------------------------------


@triton.jit
def _softmax_column_coalesced_kernel(out_ptr, in_ptr, n_rows, n_cols, row_stride,
                                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # One chunk (all rows): the program owns BLOCK_N whole columns and makes both passes itself.
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
    # pass 2: read the same tiles again, last first (the most recently read are likeliest in L2), write
    n_steps = tl.cdiv(n_rows, BLOCK_M)
    for i in range(0, n_steps):
        r = (n_steps - 1 - i) * BLOCK_M + rows
        mask = (r < n_rows)[:, None] & col_mask[None, :]
        offs = r.to(tl.int64)[:, None] * row_stride + cols[None, :]
        x = tl.load(in_ptr + offs, mask=mask, other=-float("inf")).to(tl.float32)
        y = tl.exp(x - m[None, :]) * inv[None, :]
        tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _column_stats_kernel(max_ptr, sum_ptr, in_ptr, n_rows, n_cols, row_stride,
                         ROWS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # Program (chunk, column block), column blocks fastest: max and sum of exp over ROWS rows.
    pid = tl.program_id(0)
    n_col_blocks = tl.cdiv(n_cols, BLOCK_N)
    chunk = pid // n_col_blocks
    cols = (pid % n_col_blocks) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < n_cols
    rows = tl.arange(0, BLOCK_M)
    m = tl.full((BLOCK_N,), float("-inf"), tl.float32)
    s = tl.zeros((BLOCK_N,), tl.float32)
    # read ROWS x BLOCK_N elements (the model takes ROWS a multiple of BLOCK_M, so that no tile
    # straddles two chunks; the mask keeps other values correct)
    row0 = chunk * ROWS
    row_end = tl.minimum(row0 + ROWS, n_rows)
    for start in range(row0, row_end, BLOCK_M):
        r = start + rows
        mask = (r < row_end)[:, None] & col_mask[None, :]
        offs = r.to(tl.int64)[:, None] * row_stride + cols[None, :]
        x = tl.load(in_ptr + offs, mask=mask, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)
        s = s * tl.exp(m - shift) + tl.sum(tl.exp(x - shift[None, :]), axis=0)
        m = m_new
    # write 2 x BLOCK_N fp32 partials (tiny next to the ROWS x BLOCK_N elements read)
    tl.store(max_ptr + chunk * n_cols + cols, m, mask=col_mask)
    tl.store(sum_ptr + chunk * n_cols + cols, s, mask=col_mask)


@triton.jit
def _column_normalize_kernel(out_ptr, in_ptr, max_ptr, sum_ptr, n_rows, n_cols, row_stride, n_chunks,
                             ROWS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                             CHUNKS: tl.constexpr):
    # Programs in reverse order: the stats kernel read the last chunks last, and they are the likeliest
    # to be still in L2, so start there.
    pid = tl.num_programs(0) - 1 - tl.program_id(0)
    n_col_blocks = tl.cdiv(n_cols, BLOCK_N)
    chunk = pid // n_col_blocks
    cols = (pid % n_col_blocks) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < n_cols
    # read the n_chunks partials of these columns as one (CHUNKS, BLOCK_N) tile (CHUNKS >= n_chunks,
    # padding rows masked) and combine them: every program of a column block reads the same partials
    ch = tl.arange(0, CHUNKS)
    pmask = (ch < n_chunks)[:, None] & col_mask[None, :]
    poffs = ch[:, None] * n_cols + cols[None, :]
    pm = tl.load(max_ptr + poffs, mask=pmask, other=-float("inf"))
    ps = tl.load(sum_ptr + poffs, mask=pmask, other=0.0)
    m = tl.max(pm, axis=0)
    shift = tl.where(m == float("-inf"), 0.0, m)
    inv = 1.0 / tl.sum(ps * tl.exp(pm - shift[None, :]), axis=0)
    # read this chunk's tiles again, last first, and write them
    rows = tl.arange(0, BLOCK_M)
    row0 = chunk * ROWS
    row_end = tl.minimum(row0 + ROWS, n_rows)
    n_steps = tl.cdiv(row_end - row0, BLOCK_M)
    for i in range(0, n_steps):
        r = row0 + (n_steps - 1 - i) * BLOCK_M + rows
        mask = (r < row_end)[:, None] & col_mask[None, :]
        offs = r.to(tl.int64)[:, None] * row_stride + cols[None, :]
        x = tl.load(in_ptr + offs, mask=mask, other=-float("inf")).to(tl.float32)
        y = tl.exp(x - m[None, :]) * inv[None, :]
        tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


COALESCED_DEFAULTS: dict[str, Any] = {"BLOCK_M": None, "BLOCK_N": None, "ROWS": None, "num_warps": 4}
_COALESCED_RULES = {"BLOCK_M": optional(power_of_two(1, 65536)),
                    "BLOCK_N": optional(power_of_two(1, 65536)),
                    "ROWS": optional(power_of_two(1, 1 << 30)),
                    "num_warps": power_of_two(1, 32)}
COLUMN_TILE = 2048  # elements per (BLOCK_M, BLOCK_N) tile when BLOCK_M is auto
# Auto split: aim for this many programs (about 8 per SM on an H100, whatever GPU runs it, so that the
# model does not depend on the machine), with at most MAX_CHUNKS row chunks: every program of a column
# block reads all of its chunks' partials, so partial traffic grows as chunks^2.
PROGRAM_TARGET = 1024
MAX_CHUNKS = 4


@dataclass(frozen=True)
class ColumnLaunch:
    """softmax_column_coalesced at one shape: one kernel when a program owns whole columns (one chunk),
    else a stats kernel and a normalize kernel over (row chunk, column block) programs."""

    shape: tuple[int, int]
    block_m: int
    block_n: int
    rows: int  # rows per chunk, a multiple of block_m
    num_warps: int

    @property
    def n_chunks(self) -> int:
        return -(-self.shape[0] // self.rows)

    @property
    def grid(self) -> int:
        return self.n_chunks * -(-self.shape[1] // self.block_n)

    @property
    def partial_rows(self) -> int:
        """CHUNKS: the partial tile's rows, padded so the tile has at least one element per thread."""
        return max(triton.next_power_of_2(self.n_chunks), -(-32 * self.num_warps // self.block_n))

    def data_layout(self, elem_bytes: int) -> sectors.Layout:
        return sectors.row_major_tile(self.block_m, self.block_n, self.shape[1], elem_bytes, self.num_warps)

    def partial_store_layout(self) -> sectors.Layout:
        return sectors.row_major_tile(1, self.block_n, self.shape[1], 4, self.num_warps, rank1=True)

    def partial_load_layout(self) -> sectors.Layout:
        return sectors.row_major_tile(self.partial_rows, self.block_n, self.shape[1], 4, self.num_warps)

    def traffic_bytes(self, elem_bytes: int) -> tuple[int, int]:
        """(L1 load bytes, L1 store bytes): two reads and one write of the matrix, plus the partials."""
        m, n = self.shape
        ld, st = sectors.grid_sectors(self.data_layout(elem_bytes), m, n, elem_bytes)
        if self.n_chunks == 1:
            return _read_passes(m) * ld * sectors.SECTOR, st * sectors.SECTOR
        k = self.n_chunks
        # stats: each program stores BLOCK_N maxima and BLOCK_N sums (fp32), one (k x N) matrix each
        p_st = 2 * sectors.grid_sectors(self.partial_store_layout(), k, n, 4)[1]
        # normalize: each of the k programs of a column block loads all k partial rows of both
        p_ld = 2 * k * sectors.grid_sectors(self.partial_load_layout(), k, n, 4)[0]
        return (2 * ld + p_ld) * sectors.SECTOR, (st + p_st) * sectors.SECTOR

    def kernels(self) -> list[tuple[Any, dict[str, int], dict[str, int]]]:
        """(kernel, integer arguments, constexprs) of each launch in order; pointers are not listed:
        out_ptr and in_ptr are the matrices, max_ptr and sum_ptr the fp32 (n_chunks, N) partials."""
        m, n = self.shape
        const = {"BLOCK_M": self.block_m, "BLOCK_N": self.block_n}
        ints = {"n_rows": m, "n_cols": n, "row_stride": n}
        if self.n_chunks == 1:
            return [(_softmax_column_coalesced_kernel, ints, const)]
        return [(_column_stats_kernel, ints, {"ROWS": self.rows, **const}),
                (_column_normalize_kernel, {**ints, "n_chunks": self.n_chunks},
                 {"ROWS": self.rows, **const, "CHUNKS": self.partial_rows})]

    def __call__(self, out: torch.Tensor, x: torch.Tensor) -> None:
        launches = self.kernels()
        if len(launches) == 1:
            kernel, ints, const = launches[0]
            kernel[(self.grid,)](out, x, **ints, **const, num_warps=self.num_warps)
            return
        pmax = torch.empty((self.n_chunks, self.shape[1]), dtype=torch.float32, device=x.device)
        psum = torch.empty_like(pmax)
        (stats, ints, const), (normalize, ints2, const2) = launches
        stats[(self.grid,)](pmax, psum, x, **ints, **const, num_warps=self.num_warps)
        normalize[(self.grid,)](out, x, pmax, psum, **ints2, **const2, num_warps=self.num_warps)


def coalesced_config(shape: Shape, dtype: torch.dtype, block_m: int | None, block_n: int | None,
                     num_warps: int, rows: int | None = None) -> tuple[int, int, int]:
    """(BLOCK_M, BLOCK_N, ROWS).

    Auto BLOCK_N: the widest row segment of 128, 64 or 32 bytes (a whole L1 line down to one sector)
    that still leaves PROGRAM_TARGET / MAX_CHUNKS column blocks; never wider than the matrix. Auto
    BLOCK_M fills the tile to COLUMN_TILE elements, or to the matrix's rows if fewer, but never below
    one element per thread (see _coalesced_check). Auto ROWS splits the rows into just enough chunks
    (at most MAX_CHUNKS) for PROGRAM_TARGET programs; one chunk when the columns alone give that many.
    """
    m, n = shape
    e = element_size(dtype)
    if block_n is None:
        for seg in (128, 64, 32):
            block_n = min(seg // e, triton.next_power_of_2(n))
            if -(-n // block_n) * MAX_CHUNKS >= PROGRAM_TARGET:
                break
    if block_m is None:
        floor = max(1, 32 * num_warps // block_n)
        block_m = max(1, min(COLUMN_TILE // block_n, max(triton.next_power_of_2(m), floor)))
    if rows is None:
        chunks = min(MAX_CHUNKS, max(1, -(-PROGRAM_TARGET // -(-n // block_n))))
        rows = max(block_m, triton.next_power_of_2(-(-m // chunks)))
    return block_m, block_n, rows


def coalesced_launch(shape: Shape, dtype: torch.dtype, BLOCK_M: int | None = None, BLOCK_N: int | None = None,
                     ROWS: int | None = None, num_warps: int = 4) -> ColumnLaunch:
    bm, bn, rows = coalesced_config(shape, dtype, BLOCK_M, BLOCK_N, num_warps, ROWS)
    return ColumnLaunch(shape=(shape[0], shape[1]), block_m=bm, block_n=bn, rows=rows, num_warps=num_warps)


def softmax_column_coalesced(x: torch.Tensor, BLOCK_M: int | None = None, BLOCK_N: int | None = None,
                             ROWS: int | None = None, num_warps: int = 4) -> torch.Tensor:
    """softmax(x, dim=0), BLOCK_N columns per program walking down ROWS rows BLOCK_M at a time (None =
    auto); when ROWS < M, a stats kernel and a normalize kernel meet through per-chunk partials."""
    x = contiguous_2d(x)
    out = torch.empty_like(x)
    coalesced_launch(tuple(x.shape), x.dtype, BLOCK_M, BLOCK_N, ROWS, num_warps)(out, x)
    return out


def _coalesced_traffic(shape: Shape, dtype: torch.dtype, params: dict[str, Any]) -> Traffic:
    p = resolve_params("softmax_column_coalesced", COALESCED_DEFAULTS, params, _COALESCED_RULES)
    # Per pass, (BLOCK_M, BLOCK_N) tiles cover the matrix once. A warp request is a contiguous run of one
    # row (BLOCK_N >= 32*vec) or several rows' BLOCK_N-column pieces; sectors are wasted only where a
    # piece does not start or end on a 32-byte boundary (odd N, or BLOCK_N*e < 32). 2 reads + 1 write,
    # plus, with several row chunks, the fp32 partials: each chunk stores a max and a sum per column
    # (2*4*N bytes per chunk) and each program reads all chunks' partials of its columns
    # (chunks^2 * 2*4*N bytes in all).
    read, write = coalesced_launch(shape, dtype, **p).traffic_bytes(element_size(dtype))
    return Traffic(read=read, write=write)


def _coalesced_check(shape: Shape, dtype: torch.dtype, params: dict[str, Any]) -> str | None:
    p = resolve_params("softmax_column_coalesced", COALESCED_DEFAULTS, params, _COALESCED_RULES)
    bm, bn, rows = coalesced_config(shape, dtype, p["BLOCK_M"], p["BLOCK_N"], p["num_warps"], p["ROWS"])
    if bm * bn > 16384:
        return f"tile BLOCK_M x BLOCK_N = {bm}x{bn} holds more than 16384 elements: lower BLOCK_M or BLOCK_N"
    if bm * bn < 32 * p["num_warps"]:
        # Seen in the TTGIR (Triton 3.7, sm_90): with fewer elements than threads, the compiler loads the
        # first pass's tile twice, in two layouts, which this model does not predict.
        return (f"tile BLOCK_M x BLOCK_N = {bm}x{bn} is smaller than the {32 * p['num_warps']} threads of "
                f"num_warps={p['num_warps']}: raise BLOCK_M or BLOCK_N, or lower num_warps")
    if rows % bm:
        return (f"ROWS={rows} is smaller than BLOCK_M={bm}: tiles would straddle row chunks, which the "
                "model does not count; raise ROWS or lower BLOCK_M")
    return None


def _run_coalesced(x: torch.Tensor, **params: Any) -> torch.Tensor:
    p = resolve_params("softmax_column_coalesced", COALESCED_DEFAULTS, params, _COALESCED_RULES)
    return softmax_column_coalesced(x, **p)


SOFTMAX_COLUMN_COALESCED = Variant(
    name="softmax_column_coalesced",
    op="softmax_dim0",
    description="Triton, BLOCK_N contiguous columns per program walking down the rows: coalesced, "
    "2 reads + 1 write; rows split into chunks (stats kernel, then normalize kernel) for parallelism",
    run=_run_coalesced,
    predicted=_coalesced_traffic,
    params=dict(COALESCED_DEFAULTS),
    constraints="any MxN; BLOCK_M, BLOCK_N, ROWS: powers of two or auto (BLOCK_N = 32-128 bytes of a row, "
    f"ROWS = M split in up to {MAX_CHUNKS} chunks for about {PROGRAM_TARGET} programs); "
    "BLOCK_M*BLOCK_N <= 16384; ROWS >= BLOCK_M",
    check=_coalesced_check,
)
