"""Predicting the L1 traffic of a Triton kernel's global loads and stores from its blocked layout.

Nsight Compute's L1 load/store bytes are sectors x 32: each warp-wide memory instruction (a request)
touches some set of 32-byte sectors, and every request counts its own sectors, even when another warp (or
the same warp a moment earlier) touched the same ones. So the bytes an access pattern moves through L1
follow from two things this module models:

1. Which tile elements each warp instruction covers. Triton's coalesce pass gives every global load
   and store a blocked layout: `vec` contiguous elements per thread along the fastest-varying dimension,
   then lanes, then warps (`BlockedEncodingAttr::get` with the tile's shape). When the tile has fewer
   elements than the layout covers, the extra lanes and warps wrap around and hold copies. A load is
   issued by every copy (each warp that holds the row asks for it again); a store is masked to one copy
   (Triton's redundant-data mask), so stores are never replicated.
2. Where the tile sits in memory: a request touching 8 useful bytes still moves a whole 32-byte sector,
   and a run of bytes that straddles a sector boundary moves both sectors.

`blocked_layout` and `vector_width` restate what Triton does; tests/kernels/test_softmax_kernels.py
compiles the kernels for sm_90 (no GPU needed) and checks the model's layout against the compiler's TTGIR,
so a Triton release that changes the rules fails a test instead of silently changing predictions.

Assumptions (stated so the GPU run can check them):
- The tensor starts on a 32-byte boundary (PyTorch's CUDA allocator aligns to 512 bytes) and is
  contiguous row-major MxN.
- Integer arguments divisible by 16 are specialised as such by the JIT (`tt.divisibility=16`), which is
  what lets Triton prove 16-byte alignment of a row start; otherwise a row start is only element-aligned
  and loads are scalar (vec=1).
- A vector load is never split by its mask. That holds for these kernels: the masks compare a
  contiguous index with `n_cols` or `n_rows`, and when vec > 1 the row stride (= n_cols) is divisible by 16.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

SECTOR = 32  # bytes per L1/L2 sector
WARP = 32  # threads per warp


def load_copies(tile_elems: int, num_warps: int) -> int:
    """How many warps load each element of a tile that Triton spreads over all 32*num_warps threads.

    A tile with fewer elements than threads wraps around and the extra warps hold (and load) copies;
    copies inside one warp share its request's sectors, so they cost nothing. Stores are masked to one
    copy. The closed form, for models that count whole tiles rather than sectors (gelu, matmul).
    """
    return max(1, WARP * num_warps // max(tile_elems, WARP))


@dataclass(frozen=True)
class Layout:
    """A Triton blocked layout for a 2-D tile; a kernel's 1-D tile is written (1, n) or (n, 1).

    fast is Triton's order[0]: the dimension along which a thread holds `vec` contiguous elements and
    along which lanes are numbered first. threads and warps are threadsPerWarp and warpsPerCTA per dim.
    """

    shape: tuple[int, int]
    fast: int
    vec: int
    threads: tuple[int, int]
    warps: tuple[int, int]

    @property
    def num_warps(self) -> int:
        return self.warps[0] * self.warps[1]

    def cta_tile(self, dim: int) -> int:
        """How many elements along `dim` one pass of all threads covers (sizePerThread*threads*warps)."""
        spt = self.vec if dim == self.fast else 1
        return spt * self.threads[dim] * self.warps[dim]


def vector_width(elem_bytes: int, aligned16: bool, contiguity: int, numel: int, num_warps: int) -> int:
    """Elements per thread along the fast dim, as Triton's coalesce pass picks them.

    min(contiguity, what the pointer's proven alignment allows, 16 bytes), then at most numel/threads so
    that a small tile is spread over all threads rather than packed into a few.
    """
    align = 16 // elem_bytes if aligned16 else 1
    per_thread = max(1, min(contiguity, align, 16 // elem_bytes))
    return max(1, min(per_thread, numel // (WARP * num_warps)))


def blocked_layout(shape: tuple[int, int], fast: int, vec: int, num_warps: int,
                   rank1: bool = False) -> Layout:
    """The layout Triton builds for a tile of this shape (BlockedEncodingAttr::get).

    Rank 1: all 32 lanes and all warps along the one dimension, whatever its length.
    Rank 2: starting from the fast dim, give it as many threads as it has vectors (at most all threads,
    at least one), lanes first then warps; the slow dim takes the remaining lanes and warps, even if
    that is more than its length (those threads then hold copies).
    """
    slow = 1 - fast
    threads = [1, 1]
    warps = [1, 1]
    if rank1:
        threads[fast], warps[fast] = WARP, num_warps
    else:
        per_cta = min(max(1, shape[fast] // vec), WARP * num_warps)
        threads[fast] = min(per_cta, WARP)
        warps[fast] = min(max(1, per_cta // threads[fast]), num_warps)
        threads[slow] = WARP // threads[fast]
        warps[slow] = num_warps // warps[fast]
    return Layout(shape=shape, fast=fast, vec=vec, threads=(threads[0], threads[1]),
                  warps=(warps[0], warps[1]))


@functools.lru_cache(maxsize=256)
def _instruction_elements(layout: Layout) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Tile coordinates (i, j) that each warp instruction touches, shape [instructions, 32*vec].

    Also returns a bool array, True where this thread's copy is the one a store keeps (the first owner).
    One instruction = one warp x one repetition of the CTA tile; each lane contributes its `vec` elements.
    """
    fast, slow = layout.fast, 1 - layout.fast
    lane = np.arange(WARP)
    lane_c = {fast: lane % layout.threads[fast], slow: lane // layout.threads[fast]}
    reps = [max(1, layout.shape[d] // layout.cta_tile(d)) for d in (0, 1)]
    coords: list[np.ndarray] = [np.empty(0), np.empty(0)]
    rows_i, rows_j, rows_own = [], [], []
    for warp in range(layout.num_warps):
        warp_c = {fast: warp % layout.warps[fast], slow: warp // layout.warps[fast]}
        for r0 in range(reps[0]):
            for r1 in range(reps[1]):
                rep = (r0, r1)
                owner = np.ones((WARP, layout.vec), dtype=bool)
                for d in (0, 1):
                    spt = layout.vec if d == fast else 1
                    thread = warp_c[d] * layout.threads[d] + lane_c[d]  # [32]
                    first = rep[d] * layout.cta_tile(d) + thread * spt  # first element index of each lane
                    offs = np.arange(layout.vec) if d == fast else np.zeros(layout.vec, dtype=int)
                    idx = first[:, None] + offs[None, :]
                    owner &= (first < layout.shape[d])[:, None]  # a wrapped lane holds a copy
                    coords[d] = idx % layout.shape[d]
                rows_i.append(coords[0].ravel())
                rows_j.append(coords[1].ravel())
                rows_own.append(owner.ravel())
    return np.stack(rows_i), np.stack(rows_j), np.stack(rows_own)


def _count_distinct(sectors: np.ndarray) -> int:
    """Sum over rows of the number of distinct non-negative values (negative = masked lane)."""
    s = np.sort(sectors, axis=1)
    fresh = np.ones_like(s, dtype=bool)
    fresh[:, 1:] = s[:, 1:] != s[:, :-1]
    return int(np.count_nonzero(fresh & (s >= 0)))


@functools.lru_cache(maxsize=4096)
def tile_sectors(layout: Layout, row_stride: int, elem_bytes: int, offset: int, valid: tuple[int, int]
                 ) -> tuple[int, int]:
    """(load sectors, store sectors) of one tile whose first element sits `offset` bytes past a sector
    boundary, with only the first valid[0] rows and valid[1] columns unmasked."""
    i, j, own = _instruction_elements(layout)
    inside = (i < valid[0]) & (j < valid[1])
    sector = (offset + (i * row_stride + j) * elem_bytes) // SECTOR
    loads = _count_distinct(np.where(inside, sector, -1))
    stores = _count_distinct(np.where(inside & own, sector, -1))
    return loads, stores


def _residue_counts(count: int, step_bytes: int) -> dict[int, int]:
    """For k in range(count): how many k have k*step_bytes % 32 == r, for each residue r (periodic)."""
    if count <= 0:
        return {}
    period = SECTOR // math.gcd(step_bytes, SECTOR)
    out: dict[int, int] = {}
    for t in range(min(period, count)):
        r = t * step_bytes % SECTOR
        out[r] = out.get(r, 0) + (count - t + period - 1) // period
    return out


def grid_sectors(layout: Layout, m: int, n: int, elem_bytes: int) -> tuple[int, int]:
    """(load sectors, store sectors) of one pass of `layout`'s tile over a contiguous row-major MxN matrix.

    The tiles sit at (a*BM, b*BN) for every a, b, so a pass reads each element once (the kernel's loop
    iterations or its programs, it does not matter which). A tile's sector count depends only on its
    start address mod 32 and on how many of its rows/columns are masked, so the tiles are grouped by
    those and each group is counted once: exact, and fast for M = 1M.
    """
    bm, bn = layout.shape
    ra, rb = -(-m // bm), -(-n // bn)  # tiles down and across
    row_groups = [(bm, _residue_counts(ra - 1, bm * n * elem_bytes)),
                  (m - (ra - 1) * bm, {(ra - 1) * bm * n * elem_bytes % SECTOR: 1})]
    col_groups = [(bn, _residue_counts(rb - 1, bn * elem_bytes)),
                  (n - (rb - 1) * bn, {(rb - 1) * bn * elem_bytes % SECTOR: 1})]
    loads = stores = 0
    for valid_rows, row_res in row_groups:
        for valid_cols, col_res in col_groups:
            for r_a, c_a in row_res.items():
                for r_b, c_b in col_res.items():
                    offset = (r_a + r_b) % SECTOR
                    ld, st = tile_sectors(layout, n, elem_bytes, offset, (valid_rows, valid_cols))
                    loads += c_a * c_b * ld
                    stores += c_a * c_b * st
    return loads, stores


def row_major_tile(bm: int, bn: int, n: int, elem_bytes: int, num_warps: int, rank1: bool = False) -> Layout:
    """The layout of a load/store of a (bm, bn) tile of a contiguous row-major matrix with n columns,
    addressed as ptr + row * n + col with the row stride passed as an integer argument.

    The fast dim is the columns (contiguous), except when n == 1: the JIT turns an integer argument equal
    to 1 into a constant, so the compiler then also sees the rows as contiguous and takes the dim with the
    longer contiguous run (ties go to the columns). The row start is provably 16-byte aligned only when n
    is divisible by 16 (the JIT's divisibility specialisation). A rank-1 tile (the kernel's own 1-D
    arange, bm == 1 or bn == 1) puts every thread on that dim.
    """
    if n == 1 and bm > bn:
        # rows are contiguous; their alignment varies by kernel, but for a contiguous run the sector
        # count does not depend on the vector width, so take the element-aligned case
        fast, contiguity, aligned16 = 0, bm, False
    else:
        fast, contiguity = (1, bn) if bn > 1 or bm == 1 else (0, 1)
        aligned16 = n % 16 == 0
    vec = vector_width(elem_bytes, aligned16, contiguity, bm * bn, num_warps)
    return blocked_layout((bm, bn), fast, vec, num_warps, rank1=rank1)


@dataclass(frozen=True)
class TileLaunch:
    """One launch of a tile kernel over a contiguous row-major MxN matrix, as both the launcher and the
    traffic model see it: the launcher passes exactly these arguments, the model counts their sectors.

    The kernel takes (out_ptr, in_ptr, **scalars, **constexprs). Each program (or loop step) handles one
    `tile`; every pass over the matrix covers each element once. read_passes is how many times the
    kernel's loops read each element; it writes each element once.
    """

    kernel: Any
    grid: int
    scalars: dict[str, int]
    constexprs: dict[str, int]
    num_warps: int
    shape: tuple[int, int]
    tile: tuple[int, int]
    rank1: bool
    read_passes: int

    def layout(self, elem_bytes: int) -> Layout:
        bm, bn = self.tile
        return row_major_tile(bm, bn, self.shape[1], elem_bytes, self.num_warps, rank1=self.rank1)

    def traffic_bytes(self, elem_bytes: int) -> tuple[int, int]:
        """(L1 load bytes, L1 store bytes) the launch should move."""
        m, n = self.shape
        ld, st = grid_sectors(self.layout(elem_bytes), m, n, elem_bytes)
        return self.read_passes * ld * SECTOR, st * SECTOR

    def __call__(self, out: Any, x: Any) -> None:
        self.kernel[(self.grid,)](out, x, **self.scalars, **self.constexprs, num_warps=self.num_warps)
