"""The variant suite: a plain dict, name -> Variant, in the order `memtraffic list` prints it."""

from __future__ import annotations

from kernels import torch_softmax
from kernels.variant import Variant

VARIANTS: dict[str, Variant] = {
    "torch_softmax": torch_softmax.TORCH_SOFTMAX,
    "torch_manual": torch_softmax.TORCH_MANUAL,
    "torch_compiled": torch_softmax.TORCH_COMPILED,
}

__all__ = ["VARIANTS", "Variant"]
