"""Row softmax with each long row held in shared memory across a thread-block cluster (CUDA C++, Hopper).

Why not Triton (issue 14): softmax_split holds a row's chunks in registers, and registers hold fp32 values
whatever the input, so a bf16 row puts half the bytes in flight per SM that an fp32 row does: 91.5% of a
copy at 16384x131072 bf16 against 95.9% for fp32 (H100, 2026-11-23). Taking the exchange out altogether
ran slower still (89.5%), so the waiting is not what costs; and every way of holding less that re-reads
the chunk from L2 after the exchange lost more (65-84%: the H100's L2 does not keep a streamed chunk for
the moment it takes). reports/bench/2026-11-23-h100-split-probe has those runs (scripts/split_probe.py).
Shared memory holds the input's own bytes (2 a bf16 element, not 4), is filled by cp.async without
passing through registers, and on Hopper the blocks of a cluster can read each other's (distributed
shared memory): Triton exposes neither.

A persistent grid of clusters (as many as are resident at once) walks the rows; each row goes to one
cluster of C blocks (C = 1, 2, 4 or 8, the smallest whose slices fit SLICE_BYTES; a row of one slice
needs no cluster). For each row, block r of the cluster:

1. has elements [r*S, (r+1)*S) of the row in shared memory (S = the slice, a multiple of 512 bytes),
   copied by 16-byte cp.async while it worked on the previous row (two buffers), when rows are 16-byte
   aligned; else copied one element a thread, not overlapped. Each element is read once,
2. takes the slice's max m_r and s_r = sum exp(x - m_r) from shared memory and puts (m_r, s_r) in its
   shared memory,
3. waits at the cluster barrier, reads the C pairs from its peers' shared memory (DSMEM, no global
   traffic), M = max m_r, S = sum s_r * exp(m_r - M),
4. writes exp(x - M) / S from shared memory: each element written once.

So per row of N elements of E bytes: N*E read, N*E written, in 16-byte accesses when N*E is a multiple of
16, and the next row's bytes are in flight while this row is reduced, exchanged and written. A row of
only -inf gives NaN, as torch.softmax; -inf entries elsewhere are exact.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from memtraffic.exceptions import GpuNotFoundError
from memtraffic.model import Shape, Traffic, element_size
from memtraffic.variants import Variant

from . import cuda_build
from ._params import optional, power_of_two, resolve_params
from .sectors import SECTOR, WARP
from .softmax_rows import contiguous_2d

DEFAULTS: dict[str, Any] = {"cluster": None, "num_threads": None}
_RULES = {"cluster": optional(power_of_two(1, 8)), "num_threads": optional(power_of_two(32, 512))}
SLICE_BYTES = 32 * 1024  # auto: two buffers of 32 KB, three blocks an SM (228 KB on the H100)
MAX_SLICE_BYTES = 100 * 1024  # two buffers in the 227 KB a block may have, with room to spare
ALIGN_BYTES = 512  # slices start at multiples of this: one warp's 32 x 16-byte accesses
MAX_THREADS = 512
_NEEDS_SM90 = "softmax_cluster needs thread-block clusters: a GPU of compute capability 9.0 (Hopper) or newer"

_CUDA_SOURCE = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <algorithm>
#include <cstdint>

namespace cg = cooperative_groups;

template <typename T>
struct alignas(16) Pack { T v[16 / sizeof(T)]; };  // 16 bytes: one cp.async, one vector store

// Conversions by intrinsic: torch builds extensions with __CUDA_NO_HALF_CONVERSIONS__ and
// __CUDA_NO_BFLOAT16_CONVERSIONS__, which remove the implicit ones.
__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// Max (is_max) or sum of v over the block; every thread gets the result. red: one float per warp.
__device__ __forceinline__ float block_reduce(float v, float* red, bool is_max) {
  for (int o = 16; o > 0; o >>= 1) {
    const float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = is_max ? fmaxf(v, w) : v + w;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = lane < warps ? red[lane] : (is_max ? -INFINITY : 0.0f);
  for (int o = 16; o > 0; o >>= 1) {
    const float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = is_max ? fmaxf(v, w) : v + w;
  }
  __syncthreads();  // red is reused by the next reduction
  return v;
}

// cp.async of a slice (nvec 16-byte packs) into shared memory, as one commit group
template <typename T>
__device__ __forceinline__ void copy_in(T* buf, const T* src, int64_t nvec) {
  constexpr int VEC = 16 / sizeof(T);
  for (int64_t i = threadIdx.x; i < nvec; i += blockDim.x) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(buf + i * VEC);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(src + i * VEC) : "memory");
  }
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

// A persistent grid of clusters; cluster g takes rows g, g + clusters, ... and block r of it holds the
// slice [r*slice, (r+1)*slice) of each. Two buffers: the next row's slice is copied in (cp.async, in
// flight without registers) while this row's is reduced, exchanged and written.
template <typename T>
__global__ void __launch_bounds__(512) softmax_cluster_kernel(T* __restrict__ out, const T* __restrict__ in,
                                                              int64_t n_rows, int64_t n_cols, int64_t slice,
                                                              bool vec16) {
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ float red[32];
  __shared__ float2 stats[2];  // (shift, sum) of this block's slice per buffer, read by the cluster
  cg::cluster_group cluster = cg::this_cluster();
  const int blocks = (int)cluster.num_blocks();
  const int rank = (int)cluster.block_rank();
  const int64_t clusters = gridDim.x / blocks;
  const int64_t first = blockIdx.x / blocks;
  const int64_t start = rank * slice;
  const int64_t left = n_cols - start;  // the last blocks of a cluster may get a short or empty slice
  const int64_t count = left < 0 ? 0 : (left < slice ? left : slice);
  constexpr int VEC = 16 / sizeof(T);
  const int64_t nvec = vec16 ? count / VEC : 0;  // with vec16, count is a multiple of VEC
  T* const base = reinterpret_cast<T*>(smem);  // buffer b at base + b * slice

  if (vec16 && first < n_rows) copy_in(base, in + first * n_cols + start, nvec);
  int b = 0;
  for (int64_t row = first; row < n_rows; row += clusters, b ^= 1) {
    T* buf = base + b * slice;
    const T* src = in + row * n_cols + start;
    T* dst = out + row * n_cols + start;
    // 1. the slice in shared memory: count * sizeof(T) bytes read once; the next row's copy starts now
    if (vec16) {
      const int64_t next = row + clusters;
      if (next < n_rows) copy_in(base + (b ^ 1) * slice, in + next * n_cols + start, nvec);
      else asm volatile("cp.async.commit_group;\n" ::: "memory");  // an empty group: wait_group 1 below
      asm volatile("cp.async.wait_group 1;\n" ::: "memory");  // this row's group is done
    } else {
      for (int64_t i = threadIdx.x; i < count; i += blockDim.x) buf[i] = src[i];
    }
    __syncthreads();

    // 2. the slice's max m, then s = sum exp(x - m) (shift 0 when the slice is all -inf: exp(-inf) = 0)
    const Pack<T>* bv = reinterpret_cast<const Pack<T>*>(buf);
    float m = -INFINITY;
    if (vec16) {
      for (int64_t i = threadIdx.x; i < nvec; i += blockDim.x) {
        const Pack<T> p = bv[i];
#pragma unroll
        for (int j = 0; j < VEC; ++j) m = fmaxf(m, to_float(p.v[j]));
      }
    } else {
      for (int64_t i = threadIdx.x; i < count; i += blockDim.x) m = fmaxf(m, to_float(buf[i]));
    }
    m = block_reduce(m, red, true);
    const float shift = m == -INFINITY ? 0.0f : m;
    float s = 0.0f;
    if (vec16) {
      for (int64_t i = threadIdx.x; i < nvec; i += blockDim.x) {
        const Pack<T> p = bv[i];
#pragma unroll
        for (int j = 0; j < VEC; ++j) s += __expf(to_float(p.v[j]) - shift);
      }
    } else {
      for (int64_t i = threadIdx.x; i < count; i += blockDim.x) s += __expf(to_float(buf[i]) - shift);
    }
    s = block_reduce(s, red, false);

    // 3. the row's max M and sum S from every block's (shift, sum), read from their shared memory. One
    // cluster barrier a row: stats[b] is written again two rows on, after the next row's barrier, which
    // no block passes before it has read this row's stats.
    float M = m, S = s;
    if (blocks > 1) {
      if (threadIdx.x == 0) stats[b] = make_float2(shift, s);
      cluster.sync();  // every block's stats written and visible to the cluster
      M = -INFINITY;
      float2 peer[8];  // unrolled with constant indices: registers, not a local array
#pragma unroll
      for (int r = 0; r < 8; ++r) {
        peer[r] = r < blocks ? *cluster.map_shared_rank(&stats[b], r) : make_float2(0.0f, 0.0f);
        M = fmaxf(M, peer[r].y > 0.0f ? peer[r].x : -INFINITY);  // an all -inf or empty slice has s = 0
      }
      const float Ms = M == -INFINITY ? 0.0f : M;
      S = 0.0f;
#pragma unroll
      for (int r = 0; r < 8; ++r) S += peer[r].y * __expf(peer[r].x - Ms);
    }

    // 4. write exp(x - M) / S; an all -inf row has M = -inf and gives NaN, as torch.softmax
    const float inv = 1.0f / S;
    if (vec16) {
      Pack<T>* ov = reinterpret_cast<Pack<T>*>(dst);
      for (int64_t i = threadIdx.x; i < nvec; i += blockDim.x) {
        const Pack<T> p = bv[i];
        Pack<T> q;
#pragma unroll
        for (int j = 0; j < VEC; ++j) q.v[j] = from_float<T>(__expf(to_float(p.v[j]) - M) * inv);
        ov[i] = q;
      }
    } else {
      for (int64_t i = threadIdx.x; i < count; i += blockDim.x)
        dst[i] = from_float<T>(__expf(to_float(buf[i]) - M) * inv);
    }
    __syncthreads();  // buf is refilled (two rows on) only after every thread has written from it
  }
  if (blocks > 1) cluster.sync();  // no block exits while another may still read its stats
}

template <typename T>
void launch(torch::Tensor& y, const torch::Tensor& x, int64_t cluster, int64_t slice, int64_t threads) {
  const int64_t m = x.size(0), n = x.size(1);
  const size_t smem = 2 * (size_t)slice * sizeof(T);  // two buffers
  auto kernel = softmax_cluster_kernel<T>;
  C10_CUDA_CHECK(
      cudaFuncSetAttribute((const void*)kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  const bool vec16 = (n * (int64_t)sizeof(T)) % 16 == 0 &&
                     reinterpret_cast<uintptr_t>(x.data_ptr()) % 16 == 0 &&
                     reinterpret_cast<uintptr_t>(y.data_ptr()) % 16 == 0;
  cudaLaunchConfig_t config = {};
  config.blockDim = dim3((unsigned)threads);
  config.dynamicSmemBytes = smem;
  config.stream = c10::cuda::getCurrentCUDAStream();
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = (unsigned)cluster;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  config.attrs = attr;
  config.numAttrs = 1;
  // as many clusters as are resident at once (the grid is persistent), at most one a row
  config.gridDim = dim3((unsigned)cluster);
  int resident = 0;
  C10_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&resident, (const void*)kernel, &config));
  TORCH_CHECK(resident > 0, "softmax_cluster: a cluster of ", cluster, " blocks with ", smem,
              " bytes of shared memory each does not fit on this GPU: lower the slice (raise cluster)");
  config.gridDim = dim3((unsigned)(std::min<int64_t>(m, resident) * cluster));
  C10_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, reinterpret_cast<T*>(y.data_ptr()),
                                    reinterpret_cast<const T*>(x.data_ptr()), m, n, slice, vec16));
}

torch::Tensor softmax_cluster_forward(torch::Tensor x, int64_t cluster, int64_t slice, int64_t threads) {
  TORCH_CHECK(x.is_cuda() && x.dim() == 2 && x.is_contiguous(),
              "softmax_cluster: x must be a contiguous 2-D CUDA tensor");
  const at::cuda::CUDAGuard guard(x.device());
  auto y = torch::empty_like(x);
  if (x.numel() == 0) return y;
  switch (x.scalar_type()) {
    case at::kFloat: launch<float>(y, x, cluster, slice, threads); break;
    case at::kHalf: launch<__half>(y, x, cluster, slice, threads); break;
    case at::kBFloat16: launch<__nv_bfloat16>(y, x, cluster, slice, threads); break;
    default: TORCH_CHECK(false, "softmax_cluster: dtype must be float32, float16 or bfloat16");
  }
  return y;
}
"""

_CPP_DECL = ("torch::Tensor softmax_cluster_forward(torch::Tensor x, int64_t cluster, int64_t slice, "
             "int64_t threads);")


def cluster_config(shape: Shape, dtype: torch.dtype, cluster: int | None = None,
                   num_threads: int | None = None) -> dict[str, int]:
    """Blocks a row (cluster), elements a block holds (slice) and threads a block, autos filled in.

    Auto cluster: the smallest power of two whose slices fit SLICE_BYTES (at most 8, the portable
    cluster size). The slice is the row split evenly, rounded up to ALIGN_BYTES. Auto threads: one per
    16 bytes of the slice, rounded up to a power of two, from one warp to MAX_THREADS."""
    n = shape[1]
    e = element_size(dtype)
    if cluster is None:
        cluster = 1
        while cluster < 8 and cluster * SLICE_BYTES < n * e:
            cluster *= 2
    per = ALIGN_BYTES // e
    slice_ = max(per, -(-math.ceil(n / cluster) // per) * per)
    if num_threads is None:
        vectors = -(-slice_ * e // 16)
        num_threads = min(MAX_THREADS, max(WARP, -(-vectors // WARP) * WARP))
        num_threads = 1 << (num_threads - 1).bit_length()  # a power of two: the block reduction's warps
    return {"cluster": cluster, "slice": slice_, "num_threads": num_threads}


def _slices_sectors(m: int, n: int, e: int, cluster: int, slice_: int) -> int:
    """L1 sectors of one pass over every slice of every row (the copy in, and the same for the write).

    Each warp instruction covers the next 32 accesses of a slice: 16 bytes each when rows are 16-byte
    aligned (N*E a multiple of 16), else one element each. A request counts every 32-byte sector it
    touches, so the count depends on where each row starts within a sector; that repeats every
    32 / gcd(N*E, 32) rows."""
    vec16 = (n * e) % 16 == 0
    req = WARP * (16 if vec16 else e)  # bytes per warp instruction: a multiple of 32
    period = SECTOR // math.gcd(n * e, SECTOR)
    total = 0
    for r in range(min(period, m)):
        rows = len(range(r, m, period))
        base = (r * n * e) % SECTOR
        for c in range(cluster):
            nbytes = max(0, min(slice_, n - c * slice_)) * e
            off = (base + c * slice_ * e) % SECTOR
            full, rest = divmod(nbytes, req)
            sectors = full * ((off + req - 1) // SECTOR + 1)
            if rest:
                sectors += (off + rest - 1) // SECTOR + 1
            total += rows * sectors
    return total


def _traffic(shape: Shape, dtype: torch.dtype, params: dict[str, Any]) -> Traffic:
    p = resolve_params("softmax_cluster", DEFAULTS, params, _RULES)
    c = cluster_config(shape, dtype, p["cluster"], p["num_threads"])
    m, n = shape
    sectors = _slices_sectors(m, n, element_size(dtype), c["cluster"], c["slice"])
    return Traffic(read=sectors * SECTOR, write=sectors * SECTOR)


def _check(shape: Shape, dtype: torch.dtype, params: dict[str, Any]) -> str | None:
    p = resolve_params("softmax_cluster", DEFAULTS, params, _RULES)
    c = cluster_config(shape, dtype, p["cluster"], p["num_threads"])
    if c["slice"] * element_size(dtype) > MAX_SLICE_BYTES:
        return (f"softmax_cluster: a row of {shape[1]} elements in {c['cluster']} blocks needs "
                f"{c['slice'] * element_size(dtype) // 1024} KB of shared memory a block (at most "
                f"{MAX_SLICE_BYTES // 1024}); use softmax_split or softmax_online")
    reason = cuda_build.unavailable("softmax_cluster")
    if reason is None and torch.cuda.get_device_capability() < (9, 0):
        return _NEEDS_SM90
    return reason


def softmax_cluster(x: torch.Tensor, cluster: int | None = None,
                    num_threads: int | None = None) -> torch.Tensor:
    """softmax(x, dim=-1) with each row held in the shared memory of a cluster of blocks (sm_90+)."""
    reason = cuda_build.unavailable("softmax_cluster")
    if reason is not None:
        raise GpuNotFoundError(reason)
    x = contiguous_2d(x)
    c = cluster_config(tuple(x.shape), x.dtype, cluster, num_threads)
    if torch.cuda.get_device_capability(x.device) < (9, 0):
        raise GpuNotFoundError(_NEEDS_SM90)
    module = cuda_build.build("memtraffic_softmax_cluster", _CPP_DECL, _CUDA_SOURCE,
                              ("softmax_cluster_forward",))
    return module.softmax_cluster_forward(x, c["cluster"], c["slice"], c["num_threads"])


def _run(x: torch.Tensor, **params: Any) -> torch.Tensor:
    return softmax_cluster(x, **resolve_params("softmax_cluster", DEFAULTS, params, _RULES))


SOFTMAX_CLUSTER = Variant(
    name="softmax_cluster",
    op="softmax",
    description="CUDA C++, each row in the shared memory of a thread-block cluster (cp.async in, "
    "(max, sum) exchanged through distributed shared memory): one read and one write of long rows",
    run=_run,
    predicted=_traffic,
    params=dict(DEFAULTS),
    constraints=f"any MxN with N*E <= 8 x {MAX_SLICE_BYTES // 1024} KB; cluster: 1/2/4/8 or auto (slices of "
    f"{SLICE_BYTES // 1024} KB); num_threads: power of two 32..512 or auto; sm_90 or newer; "
    "CUDA GPU with nvcc and ninja, built on first use",
    check=_check,
    needs_cuda=True,
)
