"""softmax(A @ B, dim=-1): fused in one Triton kernel, or a Triton matmul followed by torch.softmax.

Fusing saves the round trip of the MxN product through memory (one write and one read of MN), at
the price of tiles as wide as a whole row: the fused kernel only takes N that fits one tile, and each
program reads all of B, so B is read once per program (M/BLOCK_M times). A larger BLOCK_M cuts those
re-reads, but the fp32 accumulator BLOCK_M x pow2(N) must stay in registers. Compiled for sm_90
(Triton 3.7, `ptxas -v`, no GPU needed), the kernel fits without spills up to BLOCK_M x pow2(N) =
32768 for 16-bit inputs (64 values a thread at 16 warps), 16384 for fp32 (its FMA dot also holds fp32
operands in registers). At N = 1024 and 16-bit that is BLOCK_M = 32: half the B re-reads of
BLOCK_M = 16, and M/32 programs to fill the GPU. Splitting a row across programs would need its max
and sum from other programs: the unfused kernel's extra pass over MN, which is what fusing saves.

fp32 inputs multiply in fp32 (tl.dot input_precision='ieee', on FMA units); Triton's default, TF32, is
not fp32 and fails the float64 check at fp32 tolerance.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from memtraffic.host.gpu import current_smem_per_block
from memtraffic.vocab.ops import Shape, Traffic, dtype_name, element_size
from memtraffic.vocab.variant import Variant

from . import matmul as _mm
from . import torch_softmax
from ._params import int_range, optional, params_check, power_of_two, resolve, resolve_params
from .matmul import upcast
from .sectors import load_copies

FUSED_DEFAULTS: dict[str, Any] = {"BLOCK_M": None, "BLOCK_K": None, "num_warps": None, "num_stages": None}
_FUSED_RULES = {
    "BLOCK_M": optional(power_of_two(16, 128)),
    "BLOCK_K": optional(power_of_two(16, 128)),
    "num_warps": optional(power_of_two(1, 16)),
    "num_stages": optional(int_range(1, 4)),
}
# Register budget: fp32 accumulator values per program (BLOCK_M x pow2(N)), see the module docstring.
ACC_LIMIT = {torch.float32: 16384, torch.float16: 32768, torch.bfloat16: 32768}
ACC_PER_THREAD = 64  # auto num_warps gives each thread this many accumulator values (at most 16 warps)
SMEM_LIMIT = 232448  # bytes of shared memory one H100 block may use (227 KiB), without a GPU to ask


def smem_limit() -> int:
    """Shared memory a block may use on this GPU (an RTX 3080 Ti has less than half an H100's)."""
    return current_smem_per_block() or SMEM_LIMIT
MIN_PROGRAMS = 128  # auto BLOCK_M stays small enough to leave this many programs (about the SM count)


@triton.jit
def _matmul_softmax_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, UPCAST: tl.constexpr,
    PRECISION: tl.constexpr,
):
    # One program owns BLOCK_M full rows of C: BLOCK_N >= N, so the softmax needs no second pass.
    pid = tl.program_id(0)
    offs_m = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    mask_m = offs_m[:, None] < M
    mask_n = offs_n[None, :] < N
    a_ptrs = a_ptr + offs_m[:, None].to(tl.int64) * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None].to(tl.int64) * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs, mask=mask_m & (offs_k[None, :] < K - k0), other=0.0)  # A row-panel: read once
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < K - k0) & mask_n, other=0.0)  # all of B, per program
        if UPCAST:  # interpreter only, see upcast()
            a, b = a.to(tl.float32), b.to(tl.float32)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)  # fp32 inputs: ieee, not TF32
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    # Epilogue on chip, fp32: padded columns get -inf so they add exp(-inf) = 0 to the row sums.
    s = tl.where(mask_n, acc, float("-inf"))
    s = s - tl.max(s, axis=1)[:, None]
    num = tl.exp(s)
    out = num / tl.sum(num, axis=1)[:, None]
    c_ptrs = c_ptr + offs_m[:, None].to(tl.int64) * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, out.to(c_ptr.dtype.element_ty), mask=mask_m & mask_n)  # write MN once


def _block_n(n: int) -> int:
    return max(16, triton.next_power_of_2(n))


def smem_bytes(block_m: int, block_n: int, block_k: int, num_stages: int, elem_bytes: int) -> int:
    """Shared memory for the A and B tiles of the K loop: max(1, num_stages - 1) buffers of
    BLOCK_K x (BLOCK_N + BLOCK_M) elements (what Triton 3.7 allocated for sm_90 at N = 1024 and 2048)."""
    return max(1, num_stages - 1) * block_k * (block_n + block_m) * elem_bytes


def fused_config(shape: Shape, dtype: torch.dtype, params: dict[str, Any]) -> dict[str, int]:
    """BLOCK_M, BLOCK_K, num_warps, num_stages with auto (None) values filled in.

    Auto BLOCK_M: the largest power of two up to 128 whose accumulator fits ACC_LIMIT and that leaves
    at least MIN_PROGRAMS programs (16 at least). num_warps: ACC_PER_THREAD accumulator values a thread,
    4 to 16 warps. BLOCK_K and num_stages: (32, 3) for 16-bit inputs when the tiles fit shared memory,
    else (16, 3); fp32: (16, 2).
    """
    m, n, _ = shape
    bn = _block_n(n)
    bm = params.get("BLOCK_M")
    if bm is None:
        bm = 16
        while bm < 128 and 2 * bm * bn <= ACC_LIMIT.get(dtype, 16384) and -(-m // (2 * bm)) >= MIN_PROGRAMS:
            bm *= 2
    nw = params.get("num_warps")
    if nw is None:
        nw = min(16, max(4, bm * bn // (32 * ACC_PER_THREAD)))
    e = element_size(dtype)
    bk, st = params.get("BLOCK_K"), params.get("num_stages")
    if bk is None or st is None:
        prefs = [(16, 2)] if dtype == torch.float32 else [(32, 3), (16, 3)]
        fits = [c for c in prefs if smem_bytes(bm, bn, bk or c[0], st or c[1], e) <= smem_limit()]
        auto_bk, auto_st = (fits or prefs[-1:])[0]
        bk, st = bk or auto_bk, st or auto_st
    return {"BLOCK_M": bm, "BLOCK_K": bk, "num_warps": nw, "num_stages": st}


def _fused_params(shape: Shape, dtype: torch.dtype, params: dict[str, Any]) -> dict[str, int]:
    return fused_config(shape, dtype, resolve_params("matmul_softmax_fused", FUSED_DEFAULTS, params,
                                                     _FUSED_RULES))


def _check_fused(shape: Shape, dtype: torch.dtype, params: dict[str, Any]) -> str | None:
    p = _fused_params(shape, dtype, params)
    n = shape[1]
    bm, bn, nw = p["BLOCK_M"], _block_n(n), p["num_warps"]
    cap = ACC_LIMIT.get(dtype, 16384)
    if 16 * bn > cap:
        return (f"matmul_softmax_fused keeps whole rows in one tile: N={n} is over {cap // 16} for "
                f"{dtype_name(dtype)}; use matmul_softmax_unfused")
    if bm * bn > cap:
        return (f"BLOCK_M={bm} x pow2(N)={bn} accumulator values are over the {cap} that fit registers for "
                f"{dtype_name(dtype)}: lower BLOCK_M")
    if bm * bn > 2 * ACC_PER_THREAD * 32 * nw:
        return (f"{bm * bn // (32 * nw)} accumulator values a thread at num_warps={nw} would spill: "
                f"raise num_warps (at most {2 * ACC_PER_THREAD} a thread)")
    smem = smem_bytes(bm, bn, p["BLOCK_K"], p["num_stages"], element_size(dtype))
    if smem > (limit := smem_limit()):
        return (f"BLOCK_K={p['BLOCK_K']} x num_stages={p['num_stages']} needs about {smem} bytes of shared "
                f"memory, over the {limit} a block may use: lower BLOCK_K or num_stages")
    return None


def _run_fused(a: torch.Tensor, b: torch.Tensor, **params: Any) -> torch.Tensor:
    p = _fused_params((a.shape[0], b.shape[1], a.shape[1]), a.dtype, params)
    (m, k), (k2, n) = a.shape, b.shape
    if k != k2:
        raise ValueError(f"matmul_softmax_fused: inner extents differ ({k} vs {k2})")
    c = torch.empty((m, n), dtype=a.dtype, device=a.device)
    _matmul_softmax_kernel[(triton.cdiv(m, p["BLOCK_M"]),)](
        a, b, c, m, n, k,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BLOCK_M=p["BLOCK_M"], BLOCK_N=_block_n(n), BLOCK_K=p["BLOCK_K"],
        UPCAST=upcast(a), PRECISION=_mm.input_precision(a), num_warps=p["num_warps"],
        num_stages=p["num_stages"],
    )
    return c


def _fused_traffic(shape: Shape, dtype: torch.dtype, params: dict[str, Any]) -> Traffic:
    # Each of the ceil(M/BLOCK_M) programs reads its own A rows (A once in all) and all of B:
    #   reads = M*K*e + K*N*e * ceil(M/BLOCK_M); writes = M*N*e (no L1 reuse across programs).
    # (times load_copies for a tile smaller than the thread count, as in matmul_triton)
    p = _fused_params(shape, dtype, params)
    m, n, k = shape
    e = element_size(dtype)
    bm, bk, nw = p["BLOCK_M"], p["BLOCK_K"], p["num_warps"]
    a_reads = m * k * e * load_copies(bm * bk, nw)
    b_reads = k * n * e * -(-m // bm) * load_copies(bk * _block_n(n), nw)
    return Traffic(read=a_reads + b_reads, write=m * n * e)


def _run_unfused(a: torch.Tensor, b: torch.Tensor, **params: Any) -> torch.Tensor:
    p = resolve("matmul_softmax_unfused", _mm.TRITON_DEFAULTS, params, _mm.TRITON_RULES)
    c = _mm.matmul_triton(a, b, **p)  # writes C (MN)
    return torch.softmax(c, dim=-1)


def _unfused_traffic(shape: Shape, dtype: torch.dtype, params: dict[str, Any]) -> Traffic:
    # The tiled matmul (which writes C, MN) plus torch.softmax reading C and writing the result.
    p = resolve("matmul_softmax_unfused", _mm.TRITON_DEFAULTS, params, _mm.TRITON_RULES)
    mm = _mm.tiled_traffic(shape, dtype, p["BLOCK_M"], p["BLOCK_N"], p["BLOCK_K"], p["num_warps"])
    sm = torch_softmax.TORCH_SOFTMAX.predicted(shape[:2], dtype, {})
    return Traffic(read=mm.read + sm.read, write=mm.write + sm.write)


MATMUL_SOFTMAX_FUSED = Variant(
    name="matmul_softmax_fused",
    op="matmul_softmax",
    description="one Triton kernel, BLOCK_M full rows per program, softmax in the epilogue: A read once, "
    "B once per row block, MN written once; fp32 inputs multiplied in fp32, not TF32",
    run=_run_fused,
    predicted=_fused_traffic,
    params=dict(FUSED_DEFAULTS),
    constraints="N <= 1024 (fp32) or 2048 (fp16/bf16); BLOCK_M x pow2(N) <= 16384 (fp32) or 32768 "
    "(16-bit); blocks powers of two >= 16 or auto; tiles within shared memory",
    check=_check_fused,
)

MATMUL_SOFTMAX_UNFUSED = Variant(
    name="matmul_softmax_unfused",
    op="matmul_softmax",
    description="matmul_triton then torch.softmax: the matmul's traffic plus MN read + MN write",
    run=_run_unfused,
    predicted=_unfused_traffic,
    params=dict(_mm.TRITON_DEFAULTS),
    constraints="any MxNxK; params are matmul_triton's",
    check=params_check("matmul_softmax_unfused", _mm.TRITON_DEFAULTS, _mm.TRITON_RULES),
)
