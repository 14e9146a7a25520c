"""The plan: every config (variant x shape x dtype x params) with its NVTX range, minimum, prediction, FLOPs.

A plan is plain JSON (plan.json in the run folder). Its configs are what analysis joins kernels to by
NVTX range, so a run can be read without torch: the op's minimum and the variant's predicted bytes are
recorded here when the plan is built. Users' variant files are recorded too, so the runner process
loads the same variants.
"""

from __future__ import annotations

import itertools
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from memtraffic.core.errors import MemtrafficError, UsageError
from memtraffic.ncu.command import RANGE_PREFIX

# The shipped suite's names in its order (memtraffic/kernels/__init__.py's VARIANTS, checked by a test):
# what measure checks names against before importing the kernels, and the order figures draw them in.
SHIPPED_VARIANTS = (
    "softmax_naive", "softmax_tiled", "softmax_online", "softmax_3pass", "softmax_split", "torch_softmax",
    "torch_manual", "torch_compiled", "softmax_column_strided", "softmax_column_coalesced", "gelu_torch_ops",
    "gelu_triton", "gelu_compiled", "gelu_cuda", "matmul_triton", "matmul_torch", "matmul_softmax_fused",
    "matmul_softmax_unfused",
)


def call_model(owner: str, what: str, fn: Callable[..., Any], *args: Any) -> Any:
    """Call a variant's or an op's own code (a model, a check: often a user's variant file); what it
    raises becomes a UsageError naming the variant, the call and the line that raised."""
    try:
        return fn(*args)
    except MemtrafficError:
        raise
    except Exception as err:
        frames = traceback.extract_tb(err.__traceback__)
        where = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
        shown = ", ".join(map(repr, args))
        raise UsageError(f"{owner}: its {what}({shown}) raised {type(err).__name__}: {err}{where}; fix the "
                         "variant (or leave it out)") from None


def parse_param_value(text: str) -> Any:
    """'128' -> 128, '0.5' -> 0.5, 'true' -> True, anything else stays a string."""
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text.strip()


def parse_params(items: Sequence[str]) -> dict[str, list[Any]]:
    """['BLOCK_M=1,128', 'num_warps=4'] -> {'BLOCK_M': [1, 128], 'num_warps': [4]} (repeats add values)."""
    out: dict[str, list[Any]] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise UsageError(f"malformed --param {item!r}: write KEY=VALUE or KEY=V1,V2, e.g. BLOCK_M=128")
        values = out.setdefault(key.strip(), [])
        for v in value.split(","):
            parsed = parse_param_value(v)
            if v.strip() and parsed not in values:
                values.append(parsed)
    return out


def range_name(variant: str, shape: Sequence[int], dtype: str, params: Mapping[str, Any]) -> str:
    """'mt|softmax_tiled|1048576x2|fp32|BLOCK_M=128': the NVTX range around one measured call."""
    parts = [RANGE_PREFIX + variant, "x".join(map(str, shape)), dtype]
    if params:
        parts.append(",".join(f"{k}={v}" for k, v in params.items()))
    return "|".join(parts)


def check_names(variants: Sequence[str], all_variants: bool = False,
                variant_files: Sequence[str | Path] = ()) -> None:
    """What build_plan would refuse about the names, without importing the kernels (torch, triton):
    measure says it before starting ncu. Names from users' files are checked when the plan is built."""
    import difflib

    if all_variants and variants:
        raise UsageError("give variant names or --all, not both")
    if not variants and not all_variants:
        raise UsageError("name at least one variant (see `memtraffic list`) or use --all")
    for path in variant_files:
        if not Path(path).expanduser().is_file():
            raise UsageError(f"--variants {Path(path).expanduser().resolve()}: no such file")
    if variant_files:
        return
    for name in variants:
        if name not in SHIPPED_VARIANTS:
            near = difflib.get_close_matches(name, SHIPPED_VARIANTS, n=3, cutoff=0.5)
            hint = f"did you mean {', '.join(near)}?" if near else "run 'memtraffic list' to see them"
            raise UsageError(f"unknown variant {name!r}: {hint}")


def build_plan(variants: Sequence[str], shapes: Sequence[str], dtypes: Sequence[str], params: Sequence[str],
               all_variants: bool = False, seed: int = 0, variant_files: Sequence[str | Path] = ()
               ) -> dict[str, Any]:
    """Every variant x shape x dtype x parameter combination, with the op's minimum and the variant's model.

    Shapes are matched to variants by rank (MxN ops take 2 extents, matmuls 3), so `--all` may mix them.
    Combinations a variant cannot take (dtype, its own constraints) are listed under 'skipped' with
    the reason; an explicitly named variant that no shape fits is a UsageError. `variant_files` are
    users' variant files (see memtraffic.measure.variants); the plan records them for the runner process.
    """
    from memtraffic.core.ops import OPS, dtype_name, format_shape, parse_dtype, parse_shape, torch_dtype
    from memtraffic.measure.variants import get_variant, load_variants, unsupported_reason

    if all_variants and variants:
        raise UsageError("give variant names or --all, not both")
    files = [str(Path(f).expanduser().resolve()) for f in variant_files]
    catalogue = load_variants(files)
    names = list(catalogue) if all_variants else list(dict.fromkeys(variants))
    if not names:
        raise UsageError("name at least one variant (see `memtraffic list`) or use --all")
    chosen = [get_variant(n, catalogue) for n in names]
    dts = [torch_dtype(parse_dtype(d)) for d in (dtypes or ["fp32"])]
    shps = [parse_shape(s) for s in shapes]
    grid = parse_params(params)
    unused = [k for k in grid if not any(k in v.params for v in chosen)]
    if unused:
        takes = sorted({k for v in chosen for k in v.params}) or ["none"]
        raise UsageError(f"no selected variant takes parameter {', '.join(unused)} "
                         f"(they take: {', '.join(takes)})")

    configs: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
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
            explicit = dict(zip(keys, values, strict=True))
            entry = {"variant": variant.name, "op": op.name, "shape": list(shape), "dtype": dtype_name(dt),
                     "params": {**variant.params, **explicit}, "explicit_params": explicit}
            try:
                reason = unsupported_reason(variant, shape, dt, explicit)
            except UsageError as err:  # a parameter value the variant rejects
                reason = str(err)
            if reason is not None:
                skipped.append({**entry, "reason": reason})
                continue
            minimum = call_model(f"op {op.name}", "minimum", op.minimum, shape, dt)
            predicted = call_model(f"variant {variant.name}", "predicted", variant.predicted, shape, dt,
                                   {**variant.params, **explicit})
            configs.append({
                "id": len(configs),
                **entry,
                "range": range_name(variant.name, shape, dtype_name(dt), explicit),
                "min_read_bytes": minimum.read,
                "min_write_bytes": minimum.write,
                "pred_read_bytes": predicted.read,
                "pred_write_bytes": predicted.write,
                "model_flops": call_model(f"op {op.name}", "flops", op.flops, shape),
            })
    if not configs:
        why = "; ".join(s["reason"] for s in skipped[:3]) or "no variant matches the shapes"
        raise UsageError(f"nothing to measure: {why}")
    return {"version": 1, "seed": seed, "status_file": "status.jsonl", "variant_files": files,
            "configs": configs, "skipped": skipped}


def merge_plans(plans: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Several plans as one (ids renumbered): e.g. variants that each need their own parameters."""
    merged = {**plans[0], "configs": [], "skipped": []}
    seen: set[str] = set()
    for plan in plans:
        for config in plan["configs"]:
            if config["range"] not in seen:
                seen.add(config["range"])
                merged["configs"].append({**config, "id": len(merged["configs"])})
        merged["skipped"] += plan["skipped"]
    return merged
