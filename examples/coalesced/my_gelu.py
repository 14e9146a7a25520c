"""A user's GELU kernel AFTER the fix: it walks a row-major MxN tensor row by row, so the 32 threads of a
warp read 32 neighbouring elements, whole sectors. examples/strided/my_gelu.py is the same kernel, line
for line, before the fix; both name their variant my_gelu, so `memtraffic diff` matches the two runs
config by config (and line by line with --group-by line):

    memtraffic measure my_gelu --variants examples/strided/my_gelu.py --shape 4096x4096 --out runs/before
    memtraffic measure my_gelu --variants examples/coalesced/my_gelu.py --shape 4096x4096 --out runs/after
    memtraffic diff runs/before runs/after
"""

import torch
import triton
import triton.language as tl

from memtraffic.vocab.ops import Traffic, element_size
from memtraffic.vocab.variant import Variant


@triton.jit
def _my_gelu(out_ptr, in_ptr, n_rows, n_cols, BLOCK: tl.constexpr):
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)  # the i-th element this kernel visits
    mask = i < n_rows * n_cols
    offs = i  # row by row, as the tensor lies in memory: neighbours are neighbours
    x = tl.load(in_ptr + offs, mask=mask, other=0.0).to(tl.float32)  # read MN
    z = 0.7978845608028654 * (x + 0.044715 * x * x * x)  # sqrt(2/pi) * (x + 0.044715 x^3)
    y = x / (1.0 + tl.exp(-2.0 * z))  # 0.5 * x * (1 + tanh(z))
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)  # write MN


def my_gelu(x: torch.Tensor, BLOCK: int = 1024, num_warps: int = 4) -> torch.Tensor:
    x = x.contiguous()
    out = torch.empty_like(x)
    n_rows, n_cols = x.shape
    _my_gelu[(triton.cdiv(x.numel(), BLOCK),)](out, x, n_rows, n_cols, BLOCK=BLOCK, num_warps=num_warps)
    return out


def predicted(shape, dtype, params) -> Traffic:
    """A warp reads and writes 32 neighbouring elements: whole sectors, each byte once (the tensor
    starts on a sector; its last sector may be partly used)."""
    m, n = shape
    moved = -(-m * n * element_size(dtype) // 32) * 32
    return Traffic(read=moved, write=moved)


VARIANTS = {
    "my_gelu": Variant(
        name="my_gelu", op="gelu", description="my GELU kernel, row by row (coalesced)",
        run=my_gelu, predicted=predicted, params={"BLOCK": 1024, "num_warps": 4},
    ),
}
