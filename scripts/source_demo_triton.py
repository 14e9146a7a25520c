"""A small Triton program, profiled by plain ncu (no memtraffic ranges) in scripts/make_source_reports.sh.

Two copies of 1M fp32 values: one reads every 4th element of its input (each 32-byte sector holds 8
values, the kernel uses 2: sector waste), one reads contiguous elements (each sector fully used).
"""

import torch
import triton
import triton.language as tl

N = 1 << 20
STRIDE = 4
BLOCK = 1024


@triton.jit
def strided_copy(out_ptr, in_ptr, n, STRIDE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(in_ptr + offs * STRIDE, mask=mask)  # one value in every STRIDE: 8 of each 32-byte sector used
    tl.store(out_ptr + offs, x, mask=mask)


@triton.jit
def contiguous_copy(out_ptr, in_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(in_ptr + offs, mask=mask), mask=mask)


def main() -> None:
    x = torch.arange(N * STRIDE, device="cuda", dtype=torch.float32)
    out = torch.empty(N, device="cuda", dtype=torch.float32)
    grid = (triton.cdiv(N, BLOCK),)
    strided_copy[grid](out, x, N, STRIDE=STRIDE, BLOCK=BLOCK)
    assert torch.equal(out, x[::STRIDE])
    contiguous_copy[grid](out, x, N, BLOCK=BLOCK)
    assert torch.equal(out, x[:N])
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
