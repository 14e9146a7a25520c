"""What every kernel variant declares: how to run it and what traffic it should cause."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from memtraffic.model import OPS, Op, Shape, Traffic

ALL_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@dataclass(frozen=True)
class Variant:
    """One implementation of an op.

    run(*inputs, **params) returns the output tensor. predicted(shape, dtype, params) is this
    implementation's own model of the global-memory bytes its loads and stores move through L1
    (sector granularity and redundant requests included); the op's minimum is the lower bound.
    check(shape, dtype, params) returns None when the variant can take that case, else the reason.
    """

    name: str
    op: str
    description: str
    run: Callable[..., torch.Tensor]
    predicted: Callable[[Shape, torch.dtype, dict[str, Any]], Traffic]
    params: dict[str, Any] = field(default_factory=dict)
    constraints: str = ""
    dtypes: tuple[torch.dtype, ...] = ALL_DTYPES
    check: Callable[[Shape, torch.dtype, dict[str, Any]], str | None] = lambda shape, dtype, params: None
    needs_cuda: bool = False  # True where there is no CPU/interpreter path (e.g. CUDA C++ kernels)

    @property
    def operation(self) -> Op:
        return OPS[self.op]
