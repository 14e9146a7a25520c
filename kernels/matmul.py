"""C = A @ B (A MxK, B KxN, row-major): a tiled Triton kernel and torch.matmul (cuBLAS on a GPU).

The minimum reads A and B once and writes C once. A tiled kernel reads more at L1: every program
loads its whole A row-panel and B column-panel, so A is read once per column of tiles and B once per
row of tiles. L2 absorbs most of that repetition (hence GROUP_M); the L1 counters see all of it.
"""

from __future__ import annotations

import os
from typing import Any

import torch
import triton
import triton.language as tl

from memtraffic.vocab.ops import Shape, Traffic, element_size
from memtraffic.vocab.variant import Variant

from ._params import int_range, params_check, power_of_two, resolve
from .sectors import load_copies

TRITON_DEFAULTS: dict[str, Any] = {
    "BLOCK_M": 128,
    "BLOCK_N": 128,
    "BLOCK_K": 32,
    "GROUP_M": 8,
    "num_warps": 8,
    "num_stages": 3,
}
# tl.dot needs every tile extent >= 16.
TRITON_RULES = {
    "BLOCK_M": power_of_two(16, 256),
    "BLOCK_N": power_of_two(16, 256),
    "BLOCK_K": power_of_two(16, 256),
    "GROUP_M": int_range(1, 64),
    "num_warps": power_of_two(1, 16),
    "num_stages": int_range(1, 8),
}


def upcast(a: torch.Tensor) -> bool:
    """True only for bf16 under TRITON_INTERPRET=1, whose tl.dot multiplies bf16 bit patterns
    (triton-lang/triton#11584, unsupported upstream). Compiled GPU kernels keep bf16 tensor-core dots."""
    return a.dtype == torch.bfloat16 and os.environ.get("TRITON_INTERPRET") == "1"


def input_precision(a: torch.Tensor) -> str:
    """tl.dot's input_precision: 'ieee' for fp32 inputs, so that fp32 means fp32. Triton's default for
    fp32 is TF32 (inputs rounded to a 10-bit mantissa), which fails the float64 check at fp32 tolerance;
    ieee runs on FMA units (CUDA cores), far slower than tensor cores. 16-bit inputs ignore it."""
    return "ieee" if a.dtype == torch.float32 else "tf32"


@triton.jit
def _matmul_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    UPCAST: tl.constexpr, PRECISION: tl.constexpr,
):
    # GROUP_M swizzle: consecutive programs walk down GROUP_M rows of tiles before moving right, so the
    # B column-panels they share are still in L2. It changes L2/DRAM traffic, not L1 traffic.
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    first_pid_m = (pid // num_pid_in_group) * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (pid % num_pid_in_group) % group_size_m
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    # Masks rather than the tutorial's `% M` wrap: wrapped rows would be loaded twice and break the model.
    mask_m = offs_m[:, None] < M
    mask_n = offs_n[None, :] < N
    a_ptrs = a_ptr + offs_m[:, None].to(tl.int64) * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :].to(tl.int64) * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs, mask=mask_m & (offs_k[None, :] < K - k0), other=0.0)  # BLOCK_M x BLOCK_K of A
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < K - k0) & mask_n, other=0.0)  # BLOCK_K x BLOCK_N of B
        if UPCAST:  # interpreter only, see upcast()
            a, b = a.to(tl.float32), b.to(tl.float32)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)  # fp32 accumulate; fp32 inputs: ieee, not TF32
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + offs_m[:, None].to(tl.int64) * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask_m & mask_n)  # write the tile once


def matmul_triton(a: torch.Tensor, b: torch.Tensor, **params: Any) -> torch.Tensor:
    """A @ B with the tiled Triton kernel; params as in TRITON_DEFAULTS."""
    p = resolve("matmul_triton", TRITON_DEFAULTS, params, TRITON_RULES)
    (m, k), (k2, n) = a.shape, b.shape
    if k != k2:
        raise ValueError(f"matmul_triton: inner extents differ ({k} vs {k2})")
    c = torch.empty((m, n), dtype=a.dtype, device=a.device)
    grid = (triton.cdiv(m, p["BLOCK_M"]) * triton.cdiv(n, p["BLOCK_N"]),)
    _matmul_kernel[grid](
        a, b, c, m, n, k,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BLOCK_M=p["BLOCK_M"], BLOCK_N=p["BLOCK_N"], BLOCK_K=p["BLOCK_K"], GROUP_M=p["GROUP_M"],
        UPCAST=upcast(a), PRECISION=input_precision(a), num_warps=p["num_warps"],
        num_stages=p["num_stages"],
    )
    return c


def tiled_traffic(shape: Shape, dtype: torch.dtype, block_m: int, block_n: int, block_k: int = 32,
                  num_warps: int = 1) -> Traffic:
    """L1 bytes of a tiled matmul with no reuse across programs.

    Program (i, j) loads rows i of A (BLOCK_M x K) and columns j of B (K x BLOCK_N); masked-off
    elements at the edges are not loaded. So A is read ceil(N/BLOCK_N) times, B ceil(M/BLOCK_M) times:
        reads  = M*K*e * ceil(N/BLOCK_N) + K*N*e * ceil(M/BLOCK_M)
        writes = M*N*e
    times load_copies for tiles smaller than the thread count. Exact in 32-byte sectors when
    BLOCK_K*e and every row (K*e, N*e) are multiples of 32 bytes; otherwise row segments that straddle
    sector boundaries add up to one sector each.
    """
    m, n, k = shape
    e = element_size(dtype)
    a_reads = m * k * e * -(-n // block_n) * load_copies(block_m * block_k, num_warps)
    b_reads = k * n * e * -(-m // block_m) * load_copies(block_k * block_n, num_warps)
    return Traffic(read=a_reads + b_reads, write=m * n * e)


def _triton_traffic(shape: Shape, dtype: torch.dtype, params: dict[str, Any]) -> Traffic:
    p = resolve("matmul_triton", TRITON_DEFAULTS, params, TRITON_RULES)
    return tiled_traffic(shape, dtype, p["BLOCK_M"], p["BLOCK_N"], p["BLOCK_K"], p["num_warps"])


def _run_torch(a: torch.Tensor, b: torch.Tensor, **params: Any) -> torch.Tensor:
    resolve("matmul_torch", {}, params, {})
    return torch.matmul(a, b)


def _torch_traffic(shape: Shape, dtype: torch.dtype, params: dict[str, Any]) -> Traffic:
    # cuBLAS picks its tiles at run time and its Hopper kernels load through TMA, which the LSU load
    # counters do not see; with no honest tile model, predict the minimum and compare at L2/DRAM.
    resolve("matmul_torch", {}, params, {})
    m, n, k = shape
    e = element_size(dtype)
    return Traffic(read=(m * k + k * n) * e, write=m * n * e)


MATMUL_TRITON = Variant(
    name="matmul_triton",
    op="matmul",
    description="tiled Triton matmul, GROUP_M swizzle, fp32 accumulate (fp32 inputs multiplied in fp32, "
    "not TF32): A read ceil(N/BLOCK_N) times and B ceil(M/BLOCK_M) times at L1 (no reuse across programs)",
    run=matmul_triton,
    predicted=_triton_traffic,
    params=dict(TRITON_DEFAULTS),
    constraints="any MxNxK; blocks powers of two 16..256; fp32 is true fp32 (input_precision='ieee', CUDA "
    "cores, not TF32 tensor cores); "
    "num_stages>1 loads via cp.async (ncu counts LDGSTS apart from plain loads)",
    check=params_check("matmul_triton", TRITON_DEFAULTS, TRITON_RULES),
)

MATMUL_TORCH = Variant(
    name="matmul_torch",
    op="matmul",
    description="torch.matmul (cuBLAS on a GPU); predicted = the minimum, since cuBLAS's tiling is not "
    "known in advance",
    run=_run_torch,
    predicted=_torch_traffic,
    constraints="any MxNxK",
    check=params_check("matmul_torch", {}, {}),
)
