"""What a variant declares: a launcher, its traffic model, its parameters and the dtypes it takes.

Torch-free, so that kernels/ (and a user's variant file) declare variants with it and the loader in
memtraffic.measure.variants imports them, never the other way round.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memtraffic.core.ops import ELEMENT_SIZE, OPS, Op, Shape, Traffic

if TYPE_CHECKING:
    import torch

ALL_DTYPES = tuple(ELEMENT_SIZE)  # ("fp32", "fp16", "bf16")


@dataclass(frozen=True)
class Variant:
    """One implementation of an op.

    run(*inputs, **params) returns the output tensor. predicted(shape, dtype, params) is this
    implementation's own model of the global-memory bytes its loads and stores move through L1
    (sector granularity and redundant requests included); the op's minimum is the lower bound.
    check(shape, dtype, params) returns None when the variant can take that case, else the reason.
    dtypes names the dtypes it takes ('fp32', 'fp16', 'bf16'; torch dtypes are accepted too).
    """

    name: str
    op: str
    description: str
    run: Callable[..., torch.Tensor]
    predicted: Callable[[Shape, torch.dtype, dict[str, Any]], Traffic]
    params: dict[str, Any] = field(default_factory=dict)
    constraints: str = ""
    dtypes: tuple[Any, ...] = ALL_DTYPES
    check: Callable[[Shape, torch.dtype, dict[str, Any]], str | None] = lambda shape, dtype, params: None
    needs_cuda: bool = False  # True where there is no CPU/interpreter path (e.g. CUDA C++ kernels)

    @property
    def operation(self) -> Op:
        return OPS[self.op]
