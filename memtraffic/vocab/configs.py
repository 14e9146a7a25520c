"""The plan's schema: every config (variant x shape x dtype x params) with its NVTX range, minimum,
prediction and FLOPs.

A plan is plain JSON (plan.json in the run folder). Its configs are what analysis joins kernels to by
NVTX range, so a run can be read without torch: the op's minimum and the variant's predicted bytes are
recorded in it when memtraffic.collect.planning builds it. Users' variant files are recorded too, so the
runner process loads the same variants. This module holds what both sides share: range names, --param
parsing, the shipped names, merging plans.
"""

from __future__ import annotations

import numbers
import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import TypedDict, TypeVar

from memtraffic.vocab.errors import MemtrafficError, UsageError
from memtraffic.vocab.ops import format_shape

# Every NVTX range memtraffic pushes starts with this, so ncu filters and reports find ours among a program's.
RANGE_PREFIX = "mt|"

# The shipped suite's names in its order (memtraffic/kernels/__init__.py's VARIANTS, checked by a test):
# what measure checks names against before importing the kernels, and the order figures draw them in.
SHIPPED_VARIANTS = (
    "softmax_naive", "softmax_tiled", "softmax_online", "softmax_3pass", "softmax_split", "softmax_cluster",
    "torch_softmax",
    "torch_manual", "torch_compiled", "softmax_column_strided", "softmax_column_coalesced", "gelu_torch_ops",
    "gelu_triton", "gelu_compiled", "gelu_cuda", "matmul_triton", "matmul_torch", "matmul_softmax_fused",
    "matmul_softmax_unfused",
)

T = TypeVar("T")
ParamValue = int | float | bool | str  # a --param value as parse_param_value reads it


class GridCount(TypedDict):
    """`list --count`'s row: a variant's configs and skipped combinations (collect.sweep makes it, views
    print it)."""

    variant: str
    configs: int
    skipped: int


class ModelError(UsageError):
    """A variant's or op's own code raised: `problem` says which call and where, the message adds the fix."""

    def __init__(self, problem: str):
        super().__init__(f"{problem}; fix the variant (or leave it out)")
        self.problem = problem


def call_model(owner: str, what: str, fn: Callable[..., T], *args: object,
               returns: type | tuple[type, ...] | None = None) -> T:
    """Call a variant's or an op's own code (a model, a check: often a user's variant file); what it
    raises, or a result that is not an instance of `returns` (when given), becomes a ModelError naming the
    variant, the call and the line that raised."""
    shown = ", ".join(map(repr, args))
    try:
        result = fn(*args)
    except MemtrafficError:
        raise
    except Exception as err:
        frames = traceback.extract_tb(err.__traceback__)
        where = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
        first = (str(err).strip().splitlines() or [""])[0]
        problem = f"{owner}: its {what}({shown}) raised {type(err).__name__}: {first}{where}"
        raise ModelError(problem) from None
    if returns is not None and (not isinstance(result, returns) or isinstance(result, bool)):
        wanted = "number" if returns is numbers.Real or not isinstance(returns, type) else returns.__name__
        raise ModelError(f"{owner}: its {what}({shown}) returned {result!r:.60}, not a {wanted}")
    return result


def parse_param_value(text: str) -> ParamValue:
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


def parse_params(items: Sequence[str]) -> dict[str, list[ParamValue]]:
    """['BLOCK_M=1,128', 'num_warps=4'] -> {'BLOCK_M': [1, 128], 'num_warps': [4]} (repeats add values)."""
    out: dict[str, list[ParamValue]] = {}
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


def range_name(variant: str, shape: Sequence[int], dtype: str, params: Mapping[str, object]) -> str:
    """'mt|softmax_tiled|1048576x2|fp32|BLOCK_M=128': the NVTX range around one measured call."""
    parts = [RANGE_PREFIX + variant, format_shape(shape), dtype]
    if params:
        parts.append(",".join(f"{k}={v}" for k, v in params.items()))
    return "|".join(parts)
