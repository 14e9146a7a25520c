"""Variants: what each declares, and the one loader for the shipped suite and users' variant files.

A variant file is any Python file that defines `VARIANTS = {"name": Variant(...), ...}` (and, for an
operation memtraffic does not know, `OPS = {"name": Op(...)}`): the same interface as the suite in
`memtraffic.kernels`. `load_variants(files)` returns the suite plus each file's variants, so `list`,
`measure`, `bench` and the profiled runner treat a user's kernel exactly like a shipped one. This is
the measuring side (it imports torch); analysis reads minimums from the run's plan instead.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import importlib.util
import numbers
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from memtraffic.vocab.configs import call_model
from memtraffic.vocab.errors import UsageError, warn
from memtraffic.vocab.files import require_file
from memtraffic.vocab.ops import OPS, Op, Shape, Traffic, dtype_name, format_shape
from memtraffic.vocab.variant import Variant


def _import_file(path: Path) -> ModuleType:
    """Import a user's variant file as a module (its folder joins sys.path so it can import neighbours)."""
    name = "memtraffic_variants_" + hashlib.sha1(str(path).encode()).hexdigest()[:12]
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UsageError(f"--variants {path}: not a Python file; give a .py file that defines VARIANTS")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look the module up by name
    if str(path.parent) not in sys.path:
        sys.path.append(str(path.parent))
    try:
        spec.loader.exec_module(module)
    except SystemExit as err:  # sys.exit() in the user's file would end memtraffic without a word
        del sys.modules[name]
        raise UsageError(f"--variants {path} called sys.exit({'' if err.code is None else repr(err.code)}) "
                         "while being imported: a variant file only defines VARIANTS") from None
    except Exception as err:  # the user's code: any error is theirs to fix, said in one line
        del sys.modules[name]
        first = (str(err).strip().splitlines() or [""])[0]
        raise UsageError(f"--variants {path} failed to import: {type(err).__name__}: {first}") from None
    return module


def load_file(path: str | Path, on_problem: Callable[[str], None] = warn) -> dict[str, Variant]:
    """The variants of one user file. A broken entry is reported through `on_problem` and left out."""
    given = Path(path).expanduser()
    if not require_file(given, "give the Python file that defines VARIANTS", usage=True, option="--variants"):
        raise UsageError(f"--variants {given.resolve()}: no such file")
    path = given.resolve()
    module = _import_file(path)
    for name, op in (getattr(module, "OPS", None) or {}).items():
        if not isinstance(op, Op):
            on_problem(f"{path}: OPS[{name!r}] is not a memtraffic.vocab.ops.Op: left out")
        elif name in OPS and OPS[name] is not op:
            raise UsageError(f"{path}: OPS[{name!r}] has the name of a built-in op: rename it")
        else:
            OPS[name] = op
    found = getattr(module, "VARIANTS", None)
    if not isinstance(found, dict):
        raise UsageError(f"{path} defines no VARIANTS dict: add VARIANTS = {{'my_kernel': Variant(...)}} "
                         "(see docs/your-code.md)")
    variants: dict[str, Variant] = {}
    for key, variant in found.items():
        if not isinstance(variant, Variant):
            on_problem(f"{path}: VARIANTS[{key!r}] is a {type(variant).__name__}, not a "
                       "memtraffic.vocab.variant.Variant: left out")
        elif variant.op not in OPS:
            on_problem(f"{path}: variant {variant.name!r} has unknown op {variant.op!r} (known: "
                       f"{', '.join(OPS)}; define others in an OPS dict): left out")
        elif key != variant.name:
            on_problem(f"{path}: VARIANTS key {key!r} differs from the variant's name {variant.name!r}: "
                       "left out")
        else:
            variants[key] = variant
    if not variants:
        raise UsageError(f"{path} has no usable variant in VARIANTS")
    return variants


@functools.cache
def _suite() -> dict[str, Variant]:
    from memtraffic.kernels import VARIANTS

    return dict(VARIANTS)


def load_variants(files: Sequence[str | Path] = (), on_problem: Callable[[str], None] = warn
                  ) -> dict[str, Variant]:
    """The shipped suite, then each file's variants (a name may not shadow another)."""
    variants = dict(_suite())
    for path in files:
        for name, variant in load_file(path, on_problem).items():
            if name in variants and variants[name] is not variant:
                raise UsageError(f"--variants {path}: variant {name!r} already exists (shipped or in an "
                                 "earlier file): rename it")
            variants[name] = variant
    return variants


def get_variant(name: str, variants: dict[str, Variant] | None = None) -> Variant:
    """The variant called `name`, or a UsageError that suggests the nearest names."""
    variants = _suite() if variants is None else variants
    if name in variants:
        return variants[name]
    near = difflib.get_close_matches(name, variants, n=3, cutoff=0.5)
    hint = f"did you mean {', '.join(near)}?" if near else "run 'memtraffic list' to see them"
    raise UsageError(f"unknown variant {name!r}: {hint}")


def unsupported_reason(
    variant: Variant, shape: Shape, dtype: torch.dtype, params: Mapping[str, object]
) -> str | None:
    """None if the variant can run this case, else why not (wrong rank, dtype, or its own constraint)."""
    op = OPS[variant.op]
    if len(shape) != len(op.dims.split("x")):
        return f"{variant.name} ({op.name}) takes a {op.dims} shape, got {format_shape(shape)}"
    takes = [dtype_name(d) for d in variant.dtypes]
    if dtype_name(dtype) not in takes:
        names = ", ".join(takes)
        return f"{variant.name} does not support {dtype_name(dtype)} (it takes {names})"
    return call_model(f"variant {variant.name}", "check", variant.check, shape, dtype,
                      {**variant.params, **params})


def list_row(variant: Variant, shape: Shape | None, dtype: torch.dtype) -> dict[str, Any]:
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
    minimum = call_model(f"op {op.name}", "minimum", op.minimum, shape, dtype, returns=Traffic)
    predicted = call_model(f"variant {variant.name}", "predicted", variant.predicted, shape, dtype,
                           dict(variant.params), returns=Traffic)
    flops = call_model(f"op {op.name}", "flops", op.flops, shape, returns=numbers.Real)
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
