"""What a variant declares: a launcher, its traffic model, its parameters and the dtypes it takes.

Torch-free, so that kernels/ (and a user's variant file) declare variants with it and the loader in
memtraffic.collect.variants imports them, never the other way round.
"""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memtraffic.vocab.ops import ELEMENT_SIZE, OPS, Op, Shape, Traffic, format_shape

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


def shipped_catalog() -> list[dict[str, str]]:
    """The name, op and description of each shipped variant, in `memtraffic list`'s order, read from the
    source of memtraffic.kernels without importing it (its modules import torch and triton, which the base
    install leaves out). Anything not written as a literal there reads as ''."""
    spec = importlib.util.find_spec("memtraffic.kernels")
    folder = Path(spec.origin).parent  # type: ignore[union-attr, arg-type]
    entries = []  # (name, module, constant) from VARIANTS = {"name": module.CONSTANT, ...}
    for node in ast.walk(ast.parse((folder / "__init__.py").read_text())):
        if isinstance(node, ast.AnnAssign | ast.Assign) and isinstance(node.value, ast.Dict):
            entries += [(str(k.value), v.value.id, v.attr) for k, v in zip(node.value.keys, node.value.values,
                                                                       strict=True)
                        if isinstance(k, ast.Constant) and isinstance(v, ast.Attribute)
                        and isinstance(v.value, ast.Name)]
    calls: dict[tuple[str, str], dict[str, str]] = {}
    for module in {m for _, m, _ in entries}:
        for node in ast.parse((folder / f"{module}.py").read_text()).body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                fields = {kw.arg: kw.value.value for kw in node.value.keywords if kw.arg
                          and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str)}
                calls.update({(module, t.id): fields for t in node.targets if isinstance(t, ast.Name)})
    return [{"name": name, "op": calls.get((m, c), {}).get("op", ""),
             "description": calls.get((m, c), {}).get("description", "")} for name, m, c in entries]


def minimum_row(entry: dict[str, str], shape: Shape | None, dtype: str) -> dict[str, Any]:
    """A row of `memtraffic list` from a catalog entry and its op alone (no model, no torch): the minimum
    bytes, FLOPs and intensity at a shape; the predicted bytes are None."""
    op = OPS[entry["op"]]
    shape = shape if shape is not None else op.default_shape
    row: dict[str, Any] = {**entry, "constraints": "", "shape": format_shape(shape), "dtype": dtype}
    if len(shape) != len(op.dims.split("x")):
        return {**row, "supported": False,
                "reason": f"{entry['name']} ({op.name}) takes a {op.dims} shape, got {format_shape(shape)}"}
    minimum, flops = op.minimum(shape, dtype), op.flops(shape)
    return {**row, "supported": True, "min_read_bytes": minimum.read, "min_write_bytes": minimum.write,
            "pred_read_bytes": None, "pred_write_bytes": None, "flops": flops,
            "intensity": flops / minimum.total, "params": {}}
