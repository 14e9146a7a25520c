"""The variant suite: a plain dict, name -> Variant, in the order `memtraffic list` prints it."""

from __future__ import annotations

from kernels import gelu, matmul, matmul_softmax, torch_softmax
from kernels.variant import Variant

VARIANTS: dict[str, Variant] = {
    "torch_softmax": torch_softmax.TORCH_SOFTMAX,
    "torch_manual": torch_softmax.TORCH_MANUAL,
    "torch_compiled": torch_softmax.TORCH_COMPILED,
    # gelu
    "gelu_torch_ops": gelu.GELU_TORCH_OPS,
    "gelu_triton": gelu.GELU_TRITON,
    "gelu_compiled": gelu.GELU_COMPILED,
    "gelu_cuda": gelu.GELU_CUDA,
    # matmul
    "matmul_triton": matmul.MATMUL_TRITON,
    "matmul_torch": matmul.MATMUL_TORCH,
    # matmul_softmax
    "matmul_softmax_fused": matmul_softmax.MATMUL_SOFTMAX_FUSED,
    "matmul_softmax_unfused": matmul_softmax.MATMUL_SOFTMAX_UNFUSED,
}

__all__ = ["VARIANTS", "Variant"]
