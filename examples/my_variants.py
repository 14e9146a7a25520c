"""A variant file: your own kernel, measured like the shipped ones.

    memtraffic list --variants examples/my_variants.py --shape 4096x1000
    memtraffic measure my_row_softmax --variants examples/my_variants.py --shape 4096x1000
    memtraffic bench my_row_softmax torch_softmax --variants examples/my_variants.py --shape 4096x1000
"""

import math

import torch
import triton
import triton.language as tl

from memtraffic.vocab.ops import Traffic, element_size
from memtraffic.vocab.variant import Variant


@triton.jit
def _row_softmax(out_ptr, in_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * n_cols + cols, mask=mask, other=-float("inf")).to(tl.float32)  # read N
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * n_cols + cols, (e / tl.sum(e, axis=0)).to(out_ptr.dtype.element_ty), mask=mask)


def row_softmax(x: torch.Tensor, num_warps: int = 4) -> torch.Tensor:
    x = x.contiguous()
    out = torch.empty_like(x)
    _row_softmax[(x.shape[0],)](out, x, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]),
                                num_warps=num_warps)
    return out


def predicted(shape, dtype, params) -> Traffic:
    """One program per row reads and writes its row once, in whole 32-byte sectors. (Rows shorter than
    32 x num_warps elements are loaded by several warps at once: see softmax_naive's model.)"""
    m, n = shape
    row_sectors = math.ceil(n * element_size(dtype) / 32)  # assumes rows start on a sector
    return Traffic(read=m * row_sectors * 32, write=m * row_sectors * 32)


VARIANTS = {
    "my_row_softmax": Variant(
        name="my_row_softmax", op="softmax", description="Triton, one row per program (my first kernel)",
        run=row_softmax, predicted=predicted, params={"num_warps": 4},
        check=lambda shape, dtype, params: None if shape[1] <= 16384 else "rows up to 16384 columns",
    ),
}
