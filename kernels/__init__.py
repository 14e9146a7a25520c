"""The variant suite: a plain dict, name -> Variant, in the order `memtraffic list` prints it."""

from __future__ import annotations

from memtraffic.vocab.variant import Variant

from . import (
    gelu,
    matmul,
    matmul_softmax,
    softmax_cluster,
    softmax_column,
    softmax_online,
    softmax_rows,
    softmax_split,
    torch_softmax,
)

VARIANTS: dict[str, Variant] = {
    # softmax over rows: one row per program first (the teaching baseline), then the fixes
    "softmax_naive": softmax_rows.SOFTMAX_NAIVE,
    "softmax_tiled": softmax_rows.SOFTMAX_TILED,
    "softmax_online": softmax_online.SOFTMAX_ONLINE,
    "softmax_3pass": softmax_online.SOFTMAX_3PASS,
    "softmax_split": softmax_split.SOFTMAX_SPLIT,
    "softmax_cluster": softmax_cluster.SOFTMAX_CLUSTER,
    "torch_softmax": torch_softmax.TORCH_SOFTMAX,
    "torch_manual": torch_softmax.TORCH_MANUAL,
    "torch_compiled": torch_softmax.TORCH_COMPILED,
    # softmax over columns (dim 0)
    "softmax_column_strided": softmax_column.SOFTMAX_COLUMN_STRIDED,
    "softmax_column_coalesced": softmax_column.SOFTMAX_COLUMN_COALESCED,
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
