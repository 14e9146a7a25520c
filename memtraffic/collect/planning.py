"""Building a plan: the variants loaded, each config's minimum and prediction computed (see vocab.configs)."""

from __future__ import annotations

import difflib
import itertools
import numbers
from collections.abc import Sequence
from pathlib import Path

from memtraffic.runfolder.records import Config, Plan, Skipped
from memtraffic.vocab.configs import SHIPPED_VARIANTS, ModelError, call_model, parse_params, range_name
from memtraffic.vocab.errors import UsageError
from memtraffic.vocab.files import require_file
from memtraffic.vocab.ops import (
    OPS,
    Shape,
    Traffic,
    dtype_name,
    format_shape,
    parse_dtype,
    parse_shape,
    torch_dtype,
)

VARIANT_FILE = "give the Python file that defines VARIANTS"

# A combination of the grid: variant, op, shape, dtype, every parameter, those the user set.
_Combination = tuple[str, str, list[int], str, dict[str, object], dict[str, object]]


def _skipped(where: _Combination, reason: str) -> Skipped:
    """A combination the plan leaves out, and why."""
    variant, op, shape, dtype, params, explicit = where
    return {"variant": variant, "op": op, "shape": shape, "dtype": dtype, "params": params,
            "explicit_params": explicit, "reason": reason}


def check_names(variants: Sequence[str], all_variants: bool = False,
                variant_files: Sequence[str | Path] = ()) -> None:
    """What build_plan would refuse about the names, without importing the kernels (torch, triton):
    measure says it before starting ncu. Names from users' files are checked when the plan is built."""
    if all_variants and variants:
        raise UsageError("give variant names or --all, not both")
    if not variants and not all_variants:
        raise UsageError("name at least one variant (see `memtraffic list`) or use --all")
    for path in variant_files:
        if not require_file(Path(path).expanduser(), VARIANT_FILE, usage=True, option="--variants"):
            raise UsageError(f"--variants {Path(path).expanduser().resolve()}: no such file")
    if variant_files:
        return
    for name in variants:
        if name not in SHIPPED_VARIANTS:
            near = difflib.get_close_matches(name, SHIPPED_VARIANTS, n=3, cutoff=0.5)
            hint = f"did you mean {', '.join(near)}?" if near else "run 'memtraffic list' to see them"
            raise UsageError(f"unknown variant {name!r}: {hint}")


def build_plan(variants: Sequence[str], shapes: Sequence[str | Shape], dtypes: Sequence[str],
               params: Sequence[str], all_variants: bool = False, seed: int = 0,
               variant_files: Sequence[str | Path] = ()) -> Plan:
    """Every variant x shape x dtype x parameter combination, with the op's minimum and the variant's model.

    Shapes are '4096x4096' strings or parsed tuples, matched to variants by rank (MxN ops take 2 extents,
    matmuls 3), so `--all` may mix them.
    Combinations a variant cannot take (dtype, its own constraints) are listed under 'skipped' with
    the reason; an explicitly named variant that no shape fits is a UsageError. `variant_files` are
    users' variant files (see memtraffic.collect.variants); the plan records them for the runner process.
    """
    if all_variants and variants:
        raise UsageError("give variant names or --all, not both")
    for f in variant_files:  # named as given, before a link to a device resolves to /dev/...
        require_file(Path(f).expanduser(), VARIANT_FILE, usage=True, option="--variants")
    files = [str(Path(f).expanduser().resolve()) for f in variant_files]
    # torch and the kernels, imported here only: measure's parent starts ncu before it builds a plan
    from memtraffic.collect.variants import get_variant, load_variants, unsupported_reason

    catalogue = load_variants(files)
    names = list(catalogue) if all_variants else list(dict.fromkeys(variants))
    if not names:
        raise UsageError("name at least one variant (see `memtraffic list`) or use --all")
    chosen = [get_variant(n, catalogue) for n in names]
    dts = [torch_dtype(parse_dtype(d)) for d in (dtypes or ["fp32"])]
    shps = [parse_shape(s) if isinstance(s, str) else tuple(s) for s in shapes]
    grid = parse_params(params)
    unused = [k for k in grid if not any(k in v.params for v in chosen)]
    if unused:
        takes = sorted({k for v in chosen for k in v.params}) or ["none"]
        raise UsageError(f"no selected variant takes parameter {', '.join(unused)} "
                         f"(they take: {', '.join(takes)})")

    configs: list[Config] = []
    skipped: list[Skipped] = []
    for variant in chosen:
        op = OPS[variant.op]
        rank = len(op.dims.split("x"))
        v_shapes = [s for s in shps if len(s) == rank] if shps else [op.default_shape]
        if not v_shapes:
            if all_variants:
                continue
            given = ", ".join(format_shape(s) for s in shps)
            raise UsageError(f"{variant.name} ({op.name}) takes a {op.dims} shape; none of {given} is one")
        keys = [k for k in grid if k in variant.params]
        combos = list(itertools.product(*(grid[k] for k in keys)))
        for shape, dt, values in itertools.product(v_shapes, dts, combos):
            explicit: dict[str, object] = dict(zip(keys, values, strict=True))
            where: _Combination = (variant.name, op.name, list(shape), dtype_name(dt),
                                   {**variant.params, **explicit}, explicit)
            try:
                reason = unsupported_reason(variant, shape, dt, explicit)
            except UsageError as err:  # a parameter value the variant rejects
                reason = str(err)
            if reason is not None:
                skipped.append(_skipped(where, reason))
                continue
            try:  # a model that raises (a user's variant file) skips this config, not the others
                minimum = call_model(f"op {op.name}", "minimum", op.minimum, shape, dt, returns=Traffic)
                predicted = call_model(f"variant {variant.name}", "predicted", variant.predicted, shape, dt,
                                       {**variant.params, **explicit}, returns=Traffic)
                flops = call_model(f"op {op.name}", "flops", op.flops, shape, returns=numbers.Real)
            except ModelError as err:
                skipped.append(_skipped(where, err.problem))
                continue
            configs.append({
                "id": len(configs), "variant": variant.name, "op": op.name, "shape": list(shape),
                "dtype": dtype_name(dt), "params": {**variant.params, **explicit},
                "explicit_params": explicit,
                "range": range_name(variant.name, shape, dtype_name(dt), explicit),
                "min_read_bytes": minimum.read,
                "min_write_bytes": minimum.write,
                "pred_read_bytes": predicted.read,
                "pred_write_bytes": predicted.write,
                "model_flops": flops,
            })
    if not configs:
        why = "; ".join(s.get("reason", "") for s in skipped[:3]) or "no variant matches the shapes"
        raise UsageError(f"nothing to measure: {why}")
    return {"version": 1, "seed": seed, "status_file": "status.jsonl", "variant_files": files,
            "configs": configs, "skipped": skipped}
