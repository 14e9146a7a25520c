"""Regions in a program that is not PyTorch: CuPy softmax in three ways, each inside memtraffic.region.

`memtraffic profile -- python examples/cupy_region.py` profiles every kernel; each region carries its
minimum (read the input once, write the output once), so the analysis shows how far each way is from
it. The fused RawKernel reads each row once; the elementwise version makes several passes.
"""

from __future__ import annotations

import cupy as cp

import memtraffic

ROWS, COLS = 8192, 1024

# One block of 256 threads per row: max, then sum of exp, then normalized write. Reads the row from
# global memory twice (max pass, exp pass), the second time mostly from L1/L2; writes it once.
_ROW_SOFTMAX = cp.RawKernel(r"""
extern "C" __global__ void row_softmax(const float* x, float* y, int cols) {
    __shared__ float red[256];
    const float* row = x + (long long)blockIdx.x * cols;
    float* out = y + (long long)blockIdx.x * cols;
    float m = __int_as_float(0xff800000);  // -inf
    for (int j = threadIdx.x; j < cols; j += blockDim.x) m = fmaxf(m, row[j]);
    red[threadIdx.x] = m; __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
        __syncthreads();
    }
    m = red[0]; __syncthreads();
    float sum = 0.f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) sum += __expf(row[j] - m);
    red[threadIdx.x] = sum; __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
        __syncthreads();
    }
    float inv = 1.f / red[0];
    for (int j = threadIdx.x; j < cols; j += blockDim.x) out[j] = __expf(row[j] - m) * inv;
}
""", "row_softmax")


def softmax_elementwise(x: cp.ndarray, out: cp.ndarray) -> None:
    e = cp.exp(x - x.max(axis=1, keepdims=True))  # max pass, subtract+exp pass
    cp.divide(e, e.sum(axis=1, keepdims=True), out=out)  # sum pass, divide pass


def main() -> None:
    x = cp.random.default_rng(0).standard_normal((ROWS, COLS), dtype=cp.float32)
    y = cp.empty_like(x)
    with memtraffic.region("softmax_elementwise", inputs=[x], outputs=[y]):
        softmax_elementwise(x, y)
    expected = y.copy()
    with memtraffic.region("softmax_rawkernel", inputs=[x], outputs=[y]):
        _ROW_SOFTMAX((ROWS,), (256,), (x, y, cp.int32(COLS)))
    # A region by byte counts: a copy reads and writes the array once. (CuPy copies a contiguous array
    # with cudaMemcpy, not a kernel, so ncu profiles nothing here: the region has no row in the table.)
    z = cp.empty_like(x)
    with memtraffic.region("copy", read_bytes=x.nbytes, write_bytes=z.nbytes):
        cp.copyto(z, x)
    cp.cuda.Device().synchronize()
    err = float(cp.abs(y - expected).max())
    assert err < 1e-5, f"the two softmaxes differ by {err}"
    print(f"softmax {ROWS}x{COLS} fp32: elementwise and RawKernel agree (max diff {err:.1e})")


if __name__ == "__main__":
    main()
