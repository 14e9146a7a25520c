"""softmax(A @ B, dim=-1): fused in one Triton kernel, or a Triton matmul followed by torch.softmax.

Fusing saves the round trip of the MxN product through memory (one write and one read of MN), at
the price of tiles as wide as a whole row: the fused kernel only takes N that fits one tile.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from kernels import matmul as _mm
from kernels import torch_softmax
from kernels._params import power_of_two, resolve
from kernels.matmul import _upcast
from kernels.variant import Variant
from memtraffic.model import Shape, Traffic, dtype_name, element_size

FUSED_DEFAULTS: dict[str, Any] = {"BLOCK_M": 16, "BLOCK_K": 16, "num_warps": 8, "num_stages": 2}
_FUSED_RULES = {
    "BLOCK_M": power_of_two(16, 128),
    "BLOCK_K": power_of_two(16, 128),
    "num_warps": power_of_two(1, 16),
    "num_stages": power_of_two(1, 4),
}
# The fp32 accumulator holds BLOCK_M x pow2(N) values in registers and each stage keeps a
# BLOCK_K x pow2(N) slice of B in shared memory; these caps keep both within an H100 SM at the defaults.
MAX_N = {torch.float32: 1024, torch.float16: 2048, torch.bfloat16: 2048}


@triton.jit
def _matmul_softmax_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, UPCAST: tl.constexpr,
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
        if UPCAST:  # interpreter only, see _upcast()
            a, b = a.to(tl.float32), b.to(tl.float32)
        acc = tl.dot(a, b, acc)
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


def _check_fused(shape: Shape, dtype: torch.dtype, params: dict[str, Any]) -> str | None:
    resolve("matmul_softmax_fused", FUSED_DEFAULTS, params, _FUSED_RULES)
    n, cap = shape[1], MAX_N.get(dtype, 1024)
    if n > cap:
        return (f"matmul_softmax_fused keeps whole rows in one tile: N={n} is over {cap} for "
                f"{dtype_name(dtype)}; use matmul_softmax_unfused")
    return None


def _run_fused(a: torch.Tensor, b: torch.Tensor, **params: Any) -> torch.Tensor:
    p = resolve("matmul_softmax_fused", FUSED_DEFAULTS, params, _FUSED_RULES)
    (m, k), (k2, n) = a.shape, b.shape
    if k != k2:
        raise ValueError(f"matmul_softmax_fused: inner extents differ ({k} vs {k2})")
    c = torch.empty((m, n), dtype=a.dtype, device=a.device)
    _matmul_softmax_kernel[(triton.cdiv(m, p["BLOCK_M"]),)](
        a, b, c, m, n, k,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BLOCK_M=p["BLOCK_M"], BLOCK_N=_block_n(n), BLOCK_K=p["BLOCK_K"],
        UPCAST=_upcast(a), num_warps=p["num_warps"], num_stages=p["num_stages"],
    )
    return c


def _fused_traffic(shape: Shape, dtype: torch.dtype, params: dict[str, Any]) -> Traffic:
    # Each of the ceil(M/BLOCK_M) programs reads its own A rows (A once in all) and all of B:
    #   reads = M*K*e + K*N*e * ceil(M/BLOCK_M); writes = M*N*e (no L1 reuse across programs).
    # (times load_copies for a tile smaller than the thread count, as in matmul_triton)
    p = resolve("matmul_softmax_fused", FUSED_DEFAULTS, params, _FUSED_RULES)
    m, n, k = shape
    e = element_size(dtype)
    bm, bk, nw = p["BLOCK_M"], p["BLOCK_K"], p["num_warps"]
    a_reads = m * k * e * _mm.load_copies(bm * bk, nw)
    b_reads = k * n * e * -(-m // bm) * _mm.load_copies(bk * _block_n(n), nw)
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


def _check_unfused(shape: Shape, dtype: torch.dtype, params: dict[str, Any]) -> str | None:
    resolve("matmul_softmax_unfused", _mm.TRITON_DEFAULTS, params, _mm.TRITON_RULES)
    return None


MATMUL_SOFTMAX_FUSED = Variant(
    name="matmul_softmax_fused",
    op="matmul_softmax",
    description="one Triton kernel, BLOCK_M full rows per program, softmax in the epilogue: A read once, "
    "B once per row block, MN written once",
    run=_run_fused,
    predicted=_fused_traffic,
    params=dict(FUSED_DEFAULTS),
    constraints="N <= 1024 (fp32) or 2048 (fp16/bf16); blocks powers of two >= 16",
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
    check=_check_unfused,
)
