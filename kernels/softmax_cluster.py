"""Row softmax with each row spread over the blocks of one thread-block cluster (CUDA C++, Hopper).

softmax_split's programs of a row exchange their (max, sum) through global memory and so must be resident
together: a persistent grid, which loses what a flat grid streams (reports/bench/2026-11-23-h100-split-probe:
the same chunks without the exchange ran 89.6% of a copy as a persistent grid, 99.7% as one program a
chunk). A cluster's blocks are started together by the hardware, and they read and write each other's
shared memory (distributed shared memory), which Triton 3.6 does not expose. So here the grid is flat, one
cluster a row, and the exchange never leaves the SMs:

1. block r of the row's cluster reads its chunk straight into registers (`per_thread` elements a thread,
   16-byte loads when rows are 16-byte aligned, else one element a load): N*E bytes read once a row;
2. each warp takes its max m_w (shuffles), e = exp(x - m_w), kept in registers, and s_w = sum e;
3. lanes 0..C-1 of each warp store the packed (m_w, s_w) into that lane's block's shared memory with
   `st.async`, which counts its bytes on the receiving block's transaction barrier (mbarrier): a block
   waits only until the C * warps words of its row are in, never for a cluster-wide barrier;
4. every warp combines the words: M = max m_w, S = sum s_w * exp(m_w - M), and writes
   e * exp(m_w - M) / S: N*E bytes written once. One exp per element.

A row of one block (C = 1) exchanges its warps' words through its own shared memory. The cluster's
barrier runs once, at the start (arrive) and before the first remote store (wait), so that no block
stores into a peer whose transaction barrier is not yet set up; the wait is past by then. A block exits
once its own words are in: no peer stores into it later. A row of only -inf gives NaN, as torch.softmax.

Auto: 32 elements a thread on 256 threads (57-61 registers, four blocks an SM on the H100), from the sweeps
in reports/bench/2026-11-24-h100-cluster-probe: 8192x32768 bf16 at a copy's speed, where softmax_split's
programs waiting through global memory lose 4-5%. A cluster's blocks share one GPC, and clusters of 16 pack
badly at four blocks an SM (28 resident, 448 blocks of 528): for 16-byte-aligned 16-bit rows in more than 8
blocks the auto caps registers at 48 (min_blocks=5, five blocks an SM), 16384x131072 bf16 from 0.97 to
1.00 of a copy (README "A cluster a row"). The cap is free only without spills: 16-bit elements are held
two a register, offsets in 32 bits, the max taken on packed pairs. It is a kernel for long rows: a row
takes a block however short it is (1048576x2 fp32: 1.31 ms, softmax_tiled 8.5 us, bench r8).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from memtraffic.vocab.errors import GpuNotFoundError
from memtraffic.vocab.ops import Shape, Traffic, element_size
from memtraffic.vocab.variant import Variant

from . import cuda_build
from ._params import int_range, one_of, optional, power_of_two, resolve_params
from .sectors import SECTOR, WARP
from .softmax_rows import contiguous_2d

DEFAULTS: dict[str, Any] = {"per_thread": None, "threads": None, "cluster": None, "min_blocks": None}
PER_THREAD = (16, 32, 64)  # elements a thread holds: the compiled choices
MAX_THREADS = 512
MAX_CLUSTER = 16  # the H100's largest (non-portable) cluster; 8 is the portable size
CAPPED_BLOCKS = 5  # min_blocks: registers capped so that five blocks of 256 threads fit an SM (48)
CAPPED_FROM_CLUSTER = 9  # auto min_blocks: capped for 16-bit rows in clusters of more than 8 blocks
_RULES = {"per_thread": optional(power_of_two(PER_THREAD[0], PER_THREAD[-1])),
          "threads": optional(power_of_two(WARP, MAX_THREADS)),
          "cluster": optional(int_range(1, MAX_CLUSTER)), "min_blocks": optional(one_of(0, CAPPED_BLOCKS))}
AUTO_PER_THREAD = 32
AUTO_THREADS = 256
_NEEDS_SM90 = "softmax_cluster needs thread-block clusters: a GPU of compute capability 9.0 (Hopper) or newer"

_CUDA_SOURCE = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cstdint>
#include <cstring>
#include <type_traits>

constexpr int MAX_CLUSTER = 16;
constexpr int MAX_WARPS = 16;  // 512 threads
constexpr float LOG2E = 1.4426950408889634f;

// Conversions by intrinsic: torch builds extensions without the implicit half/bfloat16 ones.
__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
__device__ __forceinline__ uint32_t pair_of(__half, float lo, float hi) {  // two elements in one word
  const __half2 h = __floats2half2_rn(lo, hi);
  uint32_t w;
  memcpy(&w, &h, 4);
  return w;
}
__device__ __forceinline__ uint32_t pair_of(__nv_bfloat16, float lo, float hi) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  uint32_t w;
  memcpy(&w, &h, 4);
  return w;
}

// VEC elements, one load and one store: 16 bytes (VEC = 16 / sizeof(T)) or one element. Held as words,
// two 16-bit elements a register: as T[VEC], nvcc gives each 16-bit element a register of its own.
template <typename T, int VEC>
struct Vec {
  using W = std::conditional_t<sizeof(T) * VEC >= 4, uint32_t, uint16_t>;
  static constexpr int WORDS = sizeof(T) * VEC / sizeof(W);
  alignas(sizeof(T) * VEC) W w[WORDS];

  __device__ __forceinline__ float get(int i) const {  // element i as float
    if constexpr (sizeof(T) == 4) {
      return __uint_as_float(w[i]);
    } else {
      const uint16_t bits = WORDS * 2 == VEC ? (uint16_t)(w[i / 2] >> (16 * (i % 2))) : (uint16_t)w[0];
      T t;
      memcpy(&t, &bits, 2);
      return to_float(t);
    }
  }
  __device__ __forceinline__ void set(const float* f) {  // from VEC floats, rounded to T
    if constexpr (sizeof(T) == 4) {
      for (int i = 0; i < VEC; ++i) w[i] = __float_as_uint(f[i]);
    } else if constexpr (VEC == 1) {
      const T t = from_float<T>(f[0]);
      memcpy(&w[0], &t, 2);
    } else {
      for (int i = 0; i < WORDS; ++i) w[i] = pair_of(T(), f[2 * i], f[2 * i + 1]);
    }
  }
  __device__ __forceinline__ void fill_neg_inf() {
    float f[VEC];
    for (int i = 0; i < VEC; ++i) f[i] = -INFINITY;
    set(f);
  }
  // The largest element. 16-bit pairs by packed max (exact): the elements are converted to float only
  // where they are used next, not here, where the floats would be held until then (fp16: 24 bytes spilled
  // at 48 registers)
  __device__ __forceinline__ float max() const {
    if constexpr (sizeof(T) == 2 && WORDS * 2 == VEC) {
      using T2 = std::conditional_t<std::is_same_v<T, __half>, __half2, __nv_bfloat162>;
      T2 acc, v;
      memcpy(&acc, &w[0], 4);
#pragma unroll
      for (int i = 1; i < WORDS; ++i) {
        memcpy(&v, &w[i], 4);
        acc = __hmax2(acc, v);
      }
      return fmaxf(to_float(acc.x), to_float(acc.y));
    } else {
      float m = get(0);
#pragma unroll
      for (int i = 1; i < VEC; ++i) m = fmaxf(m, get(i));
      return m;
    }
  }
};

template <typename T, int VEC>
__device__ __forceinline__ Vec<T, VEC> load(const Vec<T, VEC>* p) {  // read-only path, as __ldg
  Vec<T, VEC> r;
  if constexpr (sizeof(r) == 16) {
    const uint4 u = __ldg(reinterpret_cast<const uint4*>(p));
    memcpy(&r, &u, 16);
  } else if constexpr (sizeof(r) == 4) {
    const unsigned u = __ldg(reinterpret_cast<const unsigned*>(p));
    memcpy(&r, &u, 4);
  } else {
    static_assert(sizeof(r) == 2, "one element of 2 bytes");
    const unsigned short u = __ldg(reinterpret_cast<const unsigned short*>(p));
    memcpy(&r, &u, 2);
  }
  return r;
}

__device__ __forceinline__ float ex2(float v) {  // 2^v, one MUFU op (ex2(-inf) = 0)
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
  return r;
}
// exp(x - shift), the difference taken first: x * log2(e) - shift * log2(e) by one fma is off by up to
// half an ulp of x * log2(e), ~1e31 for x near the float maximum, which exp turns into inf or 0
__device__ __forceinline__ float exp_shifted(float x, float shift) { return ex2((x - shift) * LOG2E); }
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ uint32_t smem(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ float shift_of(float m) { return m == -INFINITY ? 0.0f : m; }

// A warp's (max, sum) as one word, max in the low half
__device__ __forceinline__ uint64_t pack(float m, float s) {
  return ((uint64_t)__float_as_uint(s) << 32) | __float_as_uint(m);
}

// Every warp reads the n words and returns the row's max M and sum S = sum s_w * exp(m_w - M)
__device__ __forceinline__ void combine(const uint64_t* words, int n, float& M, float& S) {
  float m = -INFINITY;
  for (int i = threadIdx.x % 32; i < n; i += 32) m = fmaxf(m, __uint_as_float((uint32_t)words[i]));
  M = warp_max(m);
  const float shift = shift_of(M);
  float s = 0.0f;
  for (int i = threadIdx.x % 32; i < n; i += 32) {
    const uint64_t w = words[i];
    const float mw = __uint_as_float((uint32_t)w), sw = __uint_as_float((uint32_t)(w >> 32));
    if (sw != 0.0f) s += sw * exp_shifted(mw, shift);  // a warp of only -inf has sw = 0
  }
  S = warp_sum(s);
}

// One cluster of `cluster` blocks a row; block r holds vectors r*T*NV + k*T + t (k < NV) of the row, T =
// blockDim.x, each VEC elements (16 bytes, or one element when rows are not 16-byte aligned).
template <typename T, int VEC, int NV>
__device__ __forceinline__ void softmax_rows(T* __restrict__ out, const T* __restrict__ in, int64_t n_cols,
                                             int cluster) {
  using V = Vec<T, VEC>;
  __shared__ uint64_t words[MAX_CLUSTER * MAX_WARPS];  // (m_w, s_w) of every warp of the row
  __shared__ uint64_t bar;  // transaction barrier: the words' bytes
  const int warps = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t row = blockIdx.x / cluster;
  const int rank = blockIdx.x % cluster;  // clusters are runs of `cluster` consecutive blocks
#if __CUDA_ARCH__ >= 900
  if (cluster > 1) {
    if (threadIdx.x == 0) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem(&bar)) : "memory");
      asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                   ::"r"(smem(&bar)), "r"(cluster * warps * 8) : "memory");
    }
    asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
  }
#else
  if (cluster > 1) __trap();  // the host refuses clusters before sm_90
#endif

  // 1. this block's vectors of the row: NV * VEC elements a thread, E bytes each, read once
  // Offsets within a row in 32 bits (a row is at most 16 x 512 x 64 elements): 64-bit ones cost the
  // registers that decide how many blocks fit an SM.
  const int nvec = (int)(n_cols / VEC);
  const V* src = reinterpret_cast<const V*>(in + row * n_cols);
  const int first = rank * blockDim.x * NV + threadIdx.x;
  V x[NV];
#pragma unroll
  for (int k = 0; k < NV; ++k) {
    const int j = first + k * blockDim.x;
    if (j < nvec) {
      x[k] = load(src + j);
    } else {
      x[k].fill_neg_inf();
    }
  }

  // 2. the warp's max m_w, e = exp(x - m_w) kept in registers, and s_w = sum e
  float m = -INFINITY;
#pragma unroll
  for (int k = 0; k < NV; ++k) m = fmaxf(m, x[k].max());
  m = warp_max(m);
  const float shift = shift_of(m);  // 0 for a warp of only -inf: e = 0
  float e[NV * VEC];
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < NV; ++k)
#pragma unroll
    for (int i = 0; i < VEC; ++i) {
      e[k * VEC + i] = exp_shifted(x[k].get(i), shift);
      s += e[k * VEC + i];
    }
  s = warp_sum(s);

  // 3. the warps' words to every block of the row, 4. the row's (M, S)
  const uint64_t word = pack(m, s);
  float M, S;
  if (cluster > 1) {
#if __CUDA_ARCH__ >= 900
    asm volatile("barrier.cluster.wait.aligned;" ::: "memory");  // every peer's barrier is set up
    if (lane < cluster) {
      uint32_t dst, dst_bar;
      const uint32_t mine = smem(&words[rank * warps + warp]);
      asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(dst) : "r"(mine), "r"(lane));
      asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(dst_bar) : "r"(smem(&bar)), "r"(lane));
      asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b64 [%0], %1, [%2];"
                   ::"r"(dst), "l"(word), "r"(dst_bar) : "memory");
    }
    uint32_t done = 0;
    while (!done) {
      asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;"
                   " selp.u32 %0, 1, 0, p; }"
                   : "=r"(done) : "r"(smem(&bar)) : "memory");
    }
#endif
  } else {
    if (lane == 0) words[warp] = word;
    __syncthreads();
  }
  combine(words, cluster * warps, M, S);

  // 5. y = e * exp(m_w - M) / S, written once. A warp of only -inf has e = 0 (its f must not be inf);
  // a row of only -inf (S = 0) gives NaN, as torch.softmax
  const float f = m == -INFINITY ? (S == 0.0f ? NAN : 0.0f) : exp_shifted(m, shift_of(M)) / S;
  V* dst = reinterpret_cast<V*>(out + row * n_cols);
#pragma unroll
  for (int k = 0; k < NV; ++k) {
    const int j = first + k * blockDim.x;
    if (j < nvec) {
      float y[VEC];
#pragma unroll
      for (int i = 0; i < VEC; ++i) y[i] = e[k * VEC + i] * f;
      V v;
      v.set(y);
      dst[j] = v;
    }
  }
}

// The kernel as nvcc allocates it (57 registers a thread at 32 16-bit elements, 61 at 32 floats; sm_90,
// nvcc 13.0), and the same capped so that MINB blocks of up to 256 threads fit an SM (48 registers at 5,
// no spills for 16-byte-aligned 16-bit rows; 8 bytes for floats, 220 for unaligned 16-bit rows): five
// blocks an SM pack whole clusters of 16 into the H100's GPCs, four leave slots no cluster can take
// (reports/bench/2026-11-24-h100-cluster-probe, calls 5, 6 and 9). An explicit minimum of 1 is not the
// same as none: nvcc then took 72 registers (three blocks an SM).
template <typename T, int VEC, int NV>
__global__ void __launch_bounds__(512) softmax_cluster_kernel(T* __restrict__ out, const T* __restrict__ in,
                                                              int64_t n_cols, int cluster) {
  softmax_rows<T, VEC, NV>(out, in, n_cols, cluster);
}
template <typename T, int VEC, int NV, int MINB>
__global__ void __launch_bounds__(256, MINB) softmax_cluster_kernel_capped(
    T* __restrict__ out, const T* __restrict__ in, int64_t n_cols, int cluster) {
  softmax_rows<T, VEC, NV>(out, in, n_cols, cluster);
}

template <typename T, int VEC, int NV, int MINB>
void launch(torch::Tensor& y, const torch::Tensor& x, int64_t cluster, int64_t threads) {
  const int64_t m = x.size(0), n = x.size(1);
  void (*kernel)(T*, const T*, int64_t, int);
  if constexpr (MINB > 0) kernel = softmax_cluster_kernel_capped<T, VEC, NV, MINB>;
  else kernel = softmax_cluster_kernel<T, VEC, NV>;
  if (cluster > 8)
    C10_CUDA_CHECK(
        cudaFuncSetAttribute((const void*)kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3((unsigned)(m * cluster));
  config.blockDim = dim3((unsigned)threads);
  config.stream = c10::cuda::getCurrentCUDAStream();
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = (unsigned)cluster;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  config.attrs = attr;
  config.numAttrs = cluster > 1 ? 1 : 0;
  if (cluster > 1) {
    int fit = 0;
    C10_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&fit, (const void*)kernel, &config));
    TORCH_CHECK(fit > 0, "softmax_cluster: a cluster of ", cluster, " blocks of ", threads,
                " threads does not fit on this GPU: lower cluster (raise per_thread or threads)");
  }
  C10_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, reinterpret_cast<T*>(y.data_ptr()),
                                    reinterpret_cast<const T*>(x.data_ptr()), n, (int)cluster));
}

template <typename T, int VEC>
void dispatch_per_thread(torch::Tensor& y, const torch::Tensor& x, int64_t per_thread, int64_t cluster,
                         int64_t threads, int64_t min_blocks) {
  if (min_blocks == 5) {
    TORCH_CHECK(per_thread == 32 && threads <= 256,
                "softmax_cluster: min_blocks=5 needs per_thread=32, threads <= 256");
    return launch<T, VEC, 32 / VEC, 5>(y, x, cluster, threads);
  }
  TORCH_CHECK(min_blocks == 0, "softmax_cluster: min_blocks must be 0 or 5");
  switch (per_thread) {
    case 16: launch<T, VEC, 16 / VEC, 0>(y, x, cluster, threads); break;
    case 32: launch<T, VEC, 32 / VEC, 0>(y, x, cluster, threads); break;
    case 64: launch<T, VEC, 64 / VEC, 0>(y, x, cluster, threads); break;
    default: TORCH_CHECK(false, "softmax_cluster: per_thread must be 16, 32 or 64");
  }
}

template <typename T>
void dispatch(torch::Tensor& y, const torch::Tensor& x, bool vec16, int64_t per_thread, int64_t cluster,
              int64_t threads, int64_t min_blocks) {
  if (vec16) dispatch_per_thread<T, 16 / sizeof(T)>(y, x, per_thread, cluster, threads, min_blocks);
  else dispatch_per_thread<T, 1>(y, x, per_thread, cluster, threads, min_blocks);
}

torch::Tensor softmax_cluster_forward(torch::Tensor x, int64_t per_thread, int64_t threads, int64_t cluster,
                                      int64_t min_blocks) {
  TORCH_CHECK(x.is_cuda() && x.dim() == 2 && x.is_contiguous(),
              "softmax_cluster: x must be a contiguous 2-D CUDA tensor");
  TORCH_CHECK(threads % 32 == 0 && threads <= 512,
              "softmax_cluster: threads must be a multiple of 32, <= 512");
  TORCH_CHECK(cluster >= 1 && cluster <= 16, "softmax_cluster: cluster must be 1..16");
  const at::cuda::CUDAGuard guard(x.device());
  auto y = torch::empty_like(x);
  if (x.numel() == 0) return y;
  const int64_t e = x.element_size();
  const bool vec16 = (x.size(1) * e) % 16 == 0 && reinterpret_cast<uintptr_t>(x.data_ptr()) % 16 == 0 &&
                     reinterpret_cast<uintptr_t>(y.data_ptr()) % 16 == 0;
  const int64_t vec = vec16 ? 16 / e : 1;
  const int64_t nv = (per_thread + vec - 1) / vec;
  TORCH_CHECK(cluster * threads * nv * vec >= x.size(1), "softmax_cluster: ", cluster, " x ", threads,
              " threads x ", per_thread, " elements do not cover a row of ", x.size(1));
  switch (x.scalar_type()) {
    case at::kFloat: dispatch<float>(y, x, vec16, per_thread, cluster, threads, min_blocks); break;
    case at::kHalf: dispatch<__half>(y, x, vec16, per_thread, cluster, threads, min_blocks); break;
    case at::kBFloat16: dispatch<__nv_bfloat16>(y, x, vec16, per_thread, cluster, threads, min_blocks); break;
    default: TORCH_CHECK(false, "softmax_cluster: dtype must be float32, float16 or bfloat16");
  }
  return y;
}
"""

_CPP_DECL = ("torch::Tensor softmax_cluster_forward(torch::Tensor x, int64_t per_thread, int64_t threads, "
             "int64_t cluster, int64_t min_blocks);")


def cluster_config(shape: Shape, dtype: torch.dtype, per_thread: int | None = None,
                   threads: int | None = None, cluster: int | None = None,
                   min_blocks: int | None = None) -> dict[str, int]:
    """per_thread (elements a thread holds), threads (a block), cluster (blocks a row) and min_blocks
    (CAPPED_BLOCKS: registers capped so that that many blocks fit an SM; 0: as nvcc allocates), autos
    filled in.

    Auto: AUTO_PER_THREAD elements a thread on AUTO_THREADS threads, fewer threads for a short row (no
    fewer than a warp), as many blocks as cover the row; past MAX_CLUSTER blocks, twice the elements a
    thread, then twice the threads. A given value is kept; the others grow to cover the row. min_blocks
    is capped for 16-byte-aligned 16-bit rows in clusters of CAPPED_FROM_CLUSTER blocks or more where the
    kernel allows it (32 elements a thread, at most 256 threads): H100, 16384x131072 bf16 in 16 blocks a
    row, 1.003 of a copy capped against 0.966 (reports/bench/2026-11-24-h100-cluster-probe, call 9); in 4
    blocks a row capped and not ran alike (1.010); unaligned 16-bit rows spill when capped, floats lose
    2% (call 9)."""
    n = shape[1]
    p = per_thread or AUTO_PER_THREAD
    t = threads or min(AUTO_THREADS, max(WARP, 1 << (max(1, math.ceil(n / p)) - 1).bit_length()))
    c = cluster or math.ceil(n / (p * t))
    while cluster is None and c > MAX_CLUSTER:
        if per_thread is None and p < PER_THREAD[-1]:
            p *= 2
        elif threads is None and t < MAX_THREADS:
            t *= 2
        else:
            break
        c = math.ceil(n / (p * t))
    if min_blocks is None:
        e = element_size(dtype)
        capped = e == 2 and (n * e) % 16 == 0 and c >= CAPPED_FROM_CLUSTER and p == 32 and t <= 256
        min_blocks = CAPPED_BLOCKS if capped else 0
    return {"per_thread": p, "threads": t, "cluster": c, "min_blocks": min_blocks}


def _refusal(shape: Shape, c: dict[str, int]) -> str | None:
    """Why softmax_cluster cannot take this shape with config c (one line), or None."""
    if c["cluster"] > MAX_CLUSTER or c["cluster"] * c["threads"] * c["per_thread"] < shape[1]:
        return (f"softmax_cluster: a row of {shape[1]} elements needs more than {MAX_CLUSTER} blocks of "
                f"{c['threads']} threads x {c['per_thread']} elements (per_thread={c['per_thread']}, "
                f"threads={c['threads']}, cluster={c['cluster']}); raise per_thread or threads, "
                "or use softmax_split")
    if c["min_blocks"] and (c["per_thread"] != 32 or c["threads"] > 256):
        return (f"softmax_cluster: min_blocks={c['min_blocks']} is compiled for per_thread=32 on at most 256 "
                f"threads, not per_thread={c['per_thread']} on {c['threads']}; use min_blocks=0")
    return None


def _runs_sectors(m: int, n: int, e: int, c: dict[str, int]) -> int:
    """L1 sectors of one pass over every row: each warp instruction covers 32 consecutive accesses of 16
    bytes (rows 16-byte aligned: N*E a multiple of 16) or of one element, those past the row masked.
    A run's sector count depends on where its row starts within a sector, which repeats every
    32 / gcd(N*E, 32) rows."""
    vb = 16 if (n * e) % 16 == 0 else e  # bytes an access
    nvec = n * e // vb
    per = max(1, math.ceil(c["per_thread"] * e / vb))  # accesses a thread
    block = c["threads"] * per
    period = SECTOR // math.gcd(n * e, SECTOR)
    total = 0
    for r in range(min(period, m)):
        rows = len(range(r, m, period))
        base = (r * n * e) % SECTOR
        for start in range(0, c["cluster"] * block, WARP):
            lo, hi = start, min(start + WARP, nvec)
            if lo >= hi:
                continue
            a, b = base + lo * vb, base + hi * vb
            total += rows * (-(-b // SECTOR) - a // SECTOR)
    return total


def _config(shape: Shape, dtype: torch.dtype, params: dict[str, Any]) -> dict[str, int]:
    p = resolve_params("softmax_cluster", DEFAULTS, params, _RULES)
    return cluster_config(shape, dtype, p["per_thread"], p["threads"], p["cluster"], p["min_blocks"])


def _traffic(shape: Shape, dtype: torch.dtype, params: dict[str, Any]) -> Traffic:
    sectors = _runs_sectors(shape[0], shape[1], element_size(dtype), _config(shape, dtype, params))
    return Traffic(read=sectors * SECTOR, write=sectors * SECTOR)


def _check(shape: Shape, dtype: torch.dtype, params: dict[str, Any]) -> str | None:
    c = _config(shape, dtype, params)
    reason = _refusal(shape, c) or cuda_build.unavailable("softmax_cluster")
    if reason is None and c["cluster"] > 1 and torch.cuda.get_device_capability() < (9, 0):
        return _NEEDS_SM90
    return reason


def softmax_cluster(x: torch.Tensor, per_thread: int | None = None, threads: int | None = None,
                    cluster: int | None = None, min_blocks: int | None = None) -> torch.Tensor:
    """softmax(x, dim=-1), one thread-block cluster a row (see the module's docstring)."""
    reason = cuda_build.unavailable("softmax_cluster")
    if reason is not None:
        raise GpuNotFoundError(reason)
    x = contiguous_2d(x)
    c = cluster_config(tuple(x.shape), x.dtype, per_thread, threads, cluster, min_blocks)
    reason = _refusal(tuple(x.shape), c)
    if reason is not None:
        raise ValueError(reason)
    if c["cluster"] > 1 and torch.cuda.get_device_capability(x.device) < (9, 0):
        raise GpuNotFoundError(_NEEDS_SM90)
    module = cuda_build.build("memtraffic_softmax_cluster", _CPP_DECL, _CUDA_SOURCE,
                              ("softmax_cluster_forward",))
    return module.softmax_cluster_forward(x, c["per_thread"], c["threads"], c["cluster"], c["min_blocks"])


def _run(x: torch.Tensor, **params: Any) -> torch.Tensor:
    return softmax_cluster(x, **resolve_params("softmax_cluster", DEFAULTS, params, _RULES))


SOFTMAX_CLUSTER = Variant(
    name="softmax_cluster",
    op="softmax",
    description="CUDA C++, one thread-block cluster a row, held in registers; warps' (max, sum) exchanged "
    "through distributed shared memory: one read and one write of every row (for long rows: a short row "
    "still takes a block)",
    run=_run,
    predicted=_traffic,
    params=dict(DEFAULTS),
    constraints=f"any MxN with N <= {MAX_CLUSTER} x {MAX_THREADS} x {PER_THREAD[-1]}; per_thread: "
    f"{'/'.join(map(str, PER_THREAD))} or auto; threads: power of two 32..{MAX_THREADS} or auto; cluster: "
    f"1..{MAX_CLUSTER} or auto; min_blocks: 0 (as nvcc allocates) or {CAPPED_BLOCKS} (registers capped, "
    "per_thread 32 on <= 256 threads) or auto; sm_90 or newer for clusters; CUDA GPU with nvcc and ninja, "
    "built on first use",
    check=_check,
    needs_cuda=True,
)
