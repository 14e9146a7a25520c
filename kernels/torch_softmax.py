"""torch baselines for row softmax: the library kernel, the eager 5-op version, and torch.compile of it."""

from __future__ import annotations

import torch

from memtraffic.vocab.ops import Shape, Traffic, element_size
from memtraffic.vocab.variant import Variant

from .compiled import static_compile


def _manual(x: torch.Tensor) -> torch.Tensor:
    # Five kernels, each a full pass over memory (M rows, N columns, e bytes per element):
    row_max = x.amax(dim=1, keepdim=True)  # read MN, write M
    shifted = x - row_max  # read MN + M, write MN
    num = torch.exp(shifted)  # read MN, write MN
    den = num.sum(dim=1, keepdim=True)  # read MN, write M
    return num / den  # read MN + M, write MN


def _manual_traffic(shape: Shape, dtype: torch.dtype, params: dict) -> Traffic:
    m, n = shape
    e = element_size(dtype)
    return Traffic(read=(5 * m * n + 2 * m) * e, write=(3 * m * n + 2 * m) * e)


def _fused_traffic(shape: Shape, dtype: torch.dtype, params: dict) -> Traffic:
    # A single fused kernel that keeps each row on chip: read MN once, write MN once.
    m, n = shape
    e = element_size(dtype)
    return Traffic(read=m * n * e, write=m * n * e)


def _run_compiled(x: torch.Tensor) -> torch.Tensor:
    return static_compile(_manual)(x)


TORCH_SOFTMAX = Variant(
    name="torch_softmax",
    op="softmax",
    description="torch.softmax(x, dim=-1): the library's fused kernel",
    run=lambda x: torch.softmax(x, dim=-1),
    predicted=_fused_traffic,
    constraints="any MxN",
)

TORCH_MANUAL = Variant(
    name="torch_manual",
    op="softmax",
    description="eager max, subtract, exp, sum, divide: five kernels, five passes over memory",
    run=_manual,
    predicted=_manual_traffic,
    constraints="any MxN",
)

TORCH_COMPILED = Variant(
    name="torch_compiled",
    op="softmax",
    description="torch.compile of the 5-op version: Inductor fuses it into one reduction kernel",
    run=_run_compiled,
    predicted=_fused_traffic,
    constraints="any MxN; long rows may be read twice by Inductor's looped reduction",
)
