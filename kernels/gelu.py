"""GELU (tanh approximation) four ways: eager torch ops, one fused Triton kernel, torch.compile, CUDA C++.

gelu(x) = 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))

The op is elementwise, so the minimum is one read and one write of MN elements. The eager version
pays a full pass over memory per operator; the fused ones should sit at the minimum.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import triton
import triton.language as tl

from memtraffic.vocab.errors import GpuNotFoundError
from memtraffic.vocab.ops import Shape, Traffic, element_size
from memtraffic.vocab.variant import Variant

from . import cuda_build
from ._params import params_check, power_of_two, resolve
from .compiled import static_compile
from .sectors import load_copies

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _mn_bytes(shape: Shape, dtype: torch.dtype) -> int:
    return shape[0] * shape[1] * element_size(dtype)


def _one_pass(shape: Shape, dtype: torch.dtype, params: dict[str, Any]) -> Traffic:
    # A fused elementwise kernel: read MN once, write MN once (contiguous, so every sector is used).
    return Traffic(read=_mn_bytes(shape, dtype), write=_mn_bytes(shape, dtype))


# --- eager torch ops ---------------------------------------------------------------------------------------


def _gelu_ops(x: torch.Tensor) -> torch.Tensor:
    # Eight kernels. Each reads its tensor inputs and writes one MN tensor; Python scalars travel as
    # kernel arguments, not through memory.
    cube = torch.pow(x, 3)  # read MN, write MN
    scaled = 0.044715 * cube  # read MN, write MN
    inner = x + scaled  # read 2MN, write MN
    z = _SQRT_2_OVER_PI * inner  # read MN, write MN
    t = torch.tanh(z)  # read MN, write MN
    one_plus = 1.0 + t  # read MN, write MN
    half_x = 0.5 * x  # read MN, write MN
    return half_x * one_plus  # read 2MN, write MN
    # Total: 10 reads + 8 writes of MN elements.


def _ops_traffic(shape: Shape, dtype: torch.dtype, params: dict[str, Any]) -> Traffic:
    resolve("gelu_torch_ops", {}, params, {})
    return Traffic(read=10 * _mn_bytes(shape, dtype), write=8 * _mn_bytes(shape, dtype))


def _run_ops(x: torch.Tensor, **params: Any) -> torch.Tensor:
    resolve("gelu_torch_ops", {}, params, {})
    return _gelu_ops(x)


# --- torch.compile of the eager ops ------------------------------------------------------------------------


def _run_compiled(x: torch.Tensor, **params: Any) -> torch.Tensor:
    resolve("gelu_compiled", {}, params, {})
    return static_compile(_gelu_ops)(x)


def _compiled_traffic(shape: Shape, dtype: torch.dtype, params: dict[str, Any]) -> Traffic:
    resolve("gelu_compiled", {}, params, {})
    return _one_pass(shape, dtype, params)


# --- one fused Triton kernel -------------------------------------------------------------------------------

TRITON_DEFAULTS: dict[str, Any] = {"BLOCK": 1024, "num_warps": 4}
_TRITON_RULES = {"BLOCK": power_of_two(16, 65536), "num_warps": power_of_two(1, 32)}


@triton.jit
def _gelu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)  # read MN once
    z = 0.7978845608028654 * (x + 0.044715 * x * x * x)  # sqrt(2/pi) * (x + 0.044715 x^3)
    # 0.5 * (1 + tanh(z)) == sigmoid(2z) == 1 / (1 + exp(-2z)). This form has no cancellation near
    # tanh = -1 and no inf/inf: exp overflows to inf for large -z (y -> -0) and underflows to 0 for
    # large z (y -> x), so |x| = 1e4 gives finite, exact limits.
    y = x / (1.0 + tl.exp(-2.0 * z))
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)  # write MN once


def _run_triton(x: torch.Tensor, **params: Any) -> torch.Tensor:
    p = resolve("gelu_triton", TRITON_DEFAULTS, params, _TRITON_RULES)
    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    if n:
        _gelu_kernel[(triton.cdiv(n, p["BLOCK"]),)](x, y, n, BLOCK=p["BLOCK"], num_warps=p["num_warps"])
    return y


def _triton_traffic(shape: Shape, dtype: torch.dtype, params: dict[str, Any]) -> Traffic:
    # 1 read + 1 write of MN, times the warp copies when BLOCK < 32*num_warps.
    p = resolve("gelu_triton", TRITON_DEFAULTS, params, _TRITON_RULES)
    one = _one_pass(shape, dtype, p)
    return Traffic(read=one.read * load_copies(p["BLOCK"], p["num_warps"]), write=one.write)


# --- CUDA C++ (load_inline, built on first use) ------------------------------------------------------------

_CUDA_SOURCE = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <algorithm>
#include <cstdint>

__device__ __forceinline__ float gelu_f(float x) {
  const float z = 0.7978845608028654f * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.0f + tanhf(z));  // tanhf saturates to +-1: no NaN for large |x|
}

// VEC elements per 16-byte access, so every warp load/store uses whole 32-byte sectors.
template <typename T, int VEC>
struct alignas(sizeof(T) * VEC) Pack { T v[VEC]; };

template <typename T, int VEC>
__global__ void gelu_vec_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t n) {
  const int64_t start = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  const int64_t nvec = n / VEC;
  const Pack<T, VEC>* xv = reinterpret_cast<const Pack<T, VEC>*>(x);
  Pack<T, VEC>* yv = reinterpret_cast<Pack<T, VEC>*>(y);
  for (int64_t i = start; i < nvec; i += stride) {  // grid-stride loop over 16-byte packs
    Pack<T, VEC> p = xv[i];
#pragma unroll
    for (int j = 0; j < VEC; ++j) p.v[j] = static_cast<T>(gelu_f(static_cast<float>(p.v[j])));
    yv[i] = p;
  }
  const int64_t tail = nvec * VEC + start;  // the last n % VEC elements, one per thread
  if (tail < n) y[tail] = static_cast<T>(gelu_f(static_cast<float>(x[tail])));
}

template <typename T>
__global__ void gelu_scalar_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t n) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] = static_cast<T>(gelu_f(static_cast<float>(x[i])));
}

torch::Tensor gelu_forward(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda(), "gelu_cuda: x must be a CUDA tensor");
  const auto st = x.scalar_type();
  TORCH_CHECK(st == at::kFloat || st == at::kHalf || st == at::kBFloat16,
              "gelu_cuda: dtype must be float32, float16 or bfloat16");
  const at::cuda::CUDAGuard guard(x.device());
  auto xc = x.contiguous();
  auto y = torch::empty_like(xc);
  const int64_t n = xc.numel();
  if (n == 0) return y;
  const int threads = 256;
  int sms = 0;
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, x.get_device()));
  const int64_t max_blocks = (int64_t)sms * 32;  // enough resident blocks; the loop strides over the rest
  auto stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, st, "gelu_cuda", [&] {
    constexpr int VEC = 16 / sizeof(scalar_t);
    const bool aligned = reinterpret_cast<uintptr_t>(xc.data_ptr()) % 16 == 0 &&
                         reinterpret_cast<uintptr_t>(y.data_ptr()) % 16 == 0;
    const int64_t work = aligned ? (n + VEC - 1) / VEC : n;
    const int64_t blocks = std::min<int64_t>((work + threads - 1) / threads, max_blocks);
    if (aligned)
      gelu_vec_kernel<scalar_t, VEC><<<blocks, threads, 0, stream>>>(
          xc.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), n);
    else
      gelu_scalar_kernel<scalar_t><<<blocks, threads, 0, stream>>>(
          xc.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), n);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
"""

_CPP_DECL = "torch::Tensor gelu_forward(torch::Tensor x);"


def _run_cuda(x: torch.Tensor, **params: Any) -> torch.Tensor:
    resolve("gelu_cuda", {}, params, {})
    reason = cuda_build.unavailable("gelu_cuda")
    if reason is not None:
        raise GpuNotFoundError(reason)
    module = cuda_build.build("memtraffic_gelu_cuda", _CPP_DECL, _CUDA_SOURCE, ("gelu_forward",))
    return module.gelu_forward(x)


def _check_cuda(shape: Shape, dtype: torch.dtype, params: dict[str, Any]) -> str | None:
    resolve("gelu_cuda", {}, params, {})
    return cuda_build.unavailable("gelu_cuda")


def _cuda_traffic(shape: Shape, dtype: torch.dtype, params: dict[str, Any]) -> Traffic:
    resolve("gelu_cuda", {}, params, {})
    return _one_pass(shape, dtype, params)


GELU_TORCH_OPS = Variant(
    name="gelu_torch_ops",
    op="gelu",
    description="eager pow, mul, add, mul, tanh, add, mul, mul: 8 kernels, 10 reads + 8 writes of MN",
    run=_run_ops,
    predicted=_ops_traffic,
    constraints="any MxN",
    check=params_check("gelu_torch_ops", {}, {}),
)

GELU_TRITON = Variant(
    name="gelu_triton",
    op="gelu",
    description="one fused Triton kernel, BLOCK elements per program: 1 read + 1 write of MN "
    "(reads repeat 32*num_warps/BLOCK times when BLOCK is smaller than the thread count)",
    run=_run_triton,
    predicted=_triton_traffic,
    params=dict(TRITON_DEFAULTS),
    constraints="any MxN; BLOCK a power of two 16..65536",
    check=params_check("gelu_triton", TRITON_DEFAULTS, _TRITON_RULES),
)

GELU_COMPILED = Variant(
    name="gelu_compiled",
    op="gelu",
    description="torch.compile of the 8-op version: Inductor fuses it into one kernel, "
    "1 read + 1 write of MN",
    run=_run_compiled,
    predicted=_compiled_traffic,
    constraints="any MxN; first call per shape compiles",
    check=params_check("gelu_compiled", {}, {}),
)

GELU_CUDA = Variant(
    name="gelu_cuda",
    op="gelu",
    description="hand-written CUDA C++ kernel (load_inline), 16-byte vector accesses: 1 read + 1 write of MN",
    run=_run_cuda,
    predicted=_cuda_traffic,
    constraints="CUDA GPU with nvcc and ninja; built on first use",
    check=_check_cuda,
    needs_cuda=True,
)
