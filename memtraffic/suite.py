"""Looking up variants by name and describing the suite for a shape (what `memtraffic list` prints)."""

from __future__ import annotations

import difflib
from typing import Any

import torch

from kernels import VARIANTS, Variant
from memtraffic.exceptions import UsageError
from memtraffic.model import OPS, Shape, dtype_name, format_shape


def get_variant(name: str) -> Variant:
    """The variant called `name`, or a UsageError that suggests the nearest names."""
    if name in VARIANTS:
        return VARIANTS[name]
    near = difflib.get_close_matches(name, VARIANTS, n=3, cutoff=0.5)
    hint = f"did you mean {', '.join(near)}?" if near else "run 'memtraffic list' to see them"
    raise UsageError(f"unknown variant {name!r}: {hint}")


def unsupported_reason(
    variant: Variant, shape: Shape, dtype: torch.dtype, params: dict[str, Any]
) -> str | None:
    """None if the variant can run this case, else why not (wrong rank, dtype, or its own constraint)."""
    op = OPS[variant.op]
    if len(shape) != len(op.dims.split("x")):
        return f"{variant.name} ({op.name}) takes a {op.dims} shape, got {format_shape(shape)}"
    if dtype not in variant.dtypes:
        names = ", ".join(dtype_name(d) for d in variant.dtypes)
        return f"{variant.name} does not support {dtype_name(dtype)} (it takes {names})"
    return variant.check(shape, dtype, {**variant.params, **params})


def describe(variant: Variant, shape: Shape | None, dtype: torch.dtype) -> dict[str, Any]:
    """One row of `memtraffic list`: minimum vs predicted bytes, FLOPs and intensity for a shape."""
    op = OPS[variant.op]
    shape = shape if shape is not None else op.default_shape
    row: dict[str, Any] = {
        "name": variant.name,
        "op": op.name,
        "description": variant.description,
        "constraints": variant.constraints,
        "shape": format_shape(shape),
        "dtype": dtype_name(dtype),
    }
    reason = unsupported_reason(variant, shape, dtype, {})
    if reason is not None:
        return {**row, "supported": False, "reason": reason}
    minimum = op.minimum(shape, dtype)
    predicted = variant.predicted(shape, dtype, dict(variant.params))
    flops = op.flops(shape)
    return {
        **row,
        "supported": True,
        "min_read_bytes": minimum.read,
        "min_write_bytes": minimum.write,
        "pred_read_bytes": predicted.read,
        "pred_write_bytes": predicted.write,
        "flops": flops,
        "intensity": flops / minimum.total,  # FLOP per byte at the minimum traffic
        "params": dict(variant.params),
    }
