"""Theoretical minimum traffic and analytic FLOPs of each operation.

The minimum is what any implementation must move through global memory: every input element read
once and every output element written once. A variant's own predicted traffic (how far above the
minimum its access pattern sits) lives beside its kernel in `kernels/`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

from memtraffic.vocab.errors import UsageError
from memtraffic.vocab.units import LIMIT

if TYPE_CHECKING:
    import torch

# No torch here: analysis of saved runs needs only shapes and dtype names. The torch parts of an op
# (seeded inputs, float64 reference) import torch when the measuring side calls them.

Shape = tuple[int, ...]
DTypeLike: TypeAlias = "str | torch.dtype"  # a dtype name ('fp32', 'float32') or a torch dtype
DeviceLike: TypeAlias = "str | torch.device"

ELEMENT_SIZE: dict[str, int] = {"fp32": 4, "fp16": 2, "bf16": 2}
_DTYPE_ALIASES = {"float32": "fp32", "float": "fp32", "float16": "fp16", "half": "fp16", "bfloat16": "bf16"}
_TORCH_NAMES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


def parse_dtype(text: str) -> str:
    """'fp32' / 'float32' / 'bf16' ... -> the short name ('fp32'); anything else is a UsageError."""
    key = _DTYPE_ALIASES.get(text.strip().lower(), text.strip().lower())
    if key not in ELEMENT_SIZE:
        raise UsageError(f"unsupported dtype {text!r}: use one of {', '.join(ELEMENT_SIZE)}")
    return key


def dtype_name(dtype: DTypeLike) -> str:
    """A torch dtype or a dtype name -> the short name used in tables and file names ('fp32')."""
    return parse_dtype(str(dtype).removeprefix("torch."))


def torch_dtype(dtype: DTypeLike) -> torch.dtype:
    """A dtype name (or torch dtype) -> the torch dtype: for the measuring side, which has torch."""
    import torch

    found: torch.dtype = getattr(torch, _TORCH_NAMES[dtype_name(dtype)])
    return found


# The largest max-abs error an output may have against the op's float64 reference, as a fraction of the
# reference's largest magnitude: what the runner (before ncu counts bytes) and bench (before timing) accept.
# Loose enough for fp32 accumulation over long rows and bf16 rounding of intermediates, tight enough that
# a wrong or unwritten output fails (TF32 matmuls did fail it: the Triton matmuls multiply fp32 as IEEE).
TOLERANCE: dict[str, float] = {"fp32": 1e-3, "fp16": 1e-2, "bf16": 5e-2}


def error_limit(dtype: DTypeLike, ref_max: float) -> float:
    """The max-abs error accepted for an output of `dtype` whose reference peaks at `ref_max`."""
    return TOLERANCE[dtype_name(dtype)] * (ref_max if ref_max > 0 else 1.0)


def element_size(dtype: DTypeLike) -> int:
    """Bytes per element of a dtype name or a torch dtype."""
    return ELEMENT_SIZE[dtype_name(dtype)]


def parse_shape(text: str) -> Shape:
    """'1048576x2' -> (1048576, 2). Every extent must be a positive integer."""
    parts = text.strip().lower().replace("*", "x").split("x")
    try:
        shape = tuple(int(p) for p in parts)
    except ValueError:
        shape = ()
    if len(shape) < 2 or any(s <= 0 for s in shape):
        raise UsageError(f"malformed shape {text!r}: write positive extents joined by 'x', e.g. 1048576x2")
    if math.prod(shape) * 8 >= LIMIT:  # its bytes (8 per element at most) and FLOPs must fit an int64
        raise UsageError(f"shape {text!r} is too large: the product of its extents times 8 bytes reaches "
                         "2**63")
    return shape


def format_shape(shape: Sequence[int]) -> str:
    return "x".join(str(s) for s in shape)


@dataclass(frozen=True)
class Traffic:
    """Bytes read from and written to global memory."""

    read: int
    write: int

    @property
    def total(self) -> int:
        return self.read + self.write


@dataclass(frozen=True)
class Op:
    """An operation: its inputs, its float64 reference, its minimum traffic and analytic FLOPs."""

    name: str
    description: str
    dims: str  # names of the shape's extents, e.g. "MxN" or "MxNxK"
    default_shape: Shape
    # (shape, dtype, device, seed) -> the op's input tensors
    make_inputs: Callable[[Shape, torch.dtype, DeviceLike, int], tuple[torch.Tensor, ...]]
    reference: Callable[..., torch.Tensor]  # float64 result from the inputs
    minimum: Callable[[Shape, DTypeLike], Traffic]  # (shape, dtype name or torch dtype)
    flops: Callable[[Shape], int]
    flops_note: str = ""


def _randn(shape: Shape, dtype: torch.dtype, device: DeviceLike, gen: torch.Generator) -> torch.Tensor:
    import torch

    # Drawn where the tensor lives: on the GPU a 16M-element input takes milliseconds, on the CPU ~0.15 s,
    # which was most of a measured config's time. The values differ between CPU and GPU; a seed replays
    # on the same kind of device.
    return torch.randn(shape, generator=gen, dtype=torch.float32, device=device).to(dtype=dtype)


def _generator(device: DeviceLike, seed: int) -> torch.Generator:
    import torch

    return torch.Generator(device=torch.device(device)).manual_seed(seed)


def _mat_inputs(shape: Shape, dtype: torch.dtype, device: DeviceLike, seed: int) -> tuple[torch.Tensor, ...]:
    m, n = shape
    return (_randn((m, n), dtype, device, _generator(device, seed)),)


def _matmul_inputs(shape: Shape, dtype: torch.dtype, device: DeviceLike,
                   seed: int) -> tuple[torch.Tensor, ...]:
    import torch

    m, n, k = shape
    gen = _generator(device, seed)
    # Scale by 1/sqrt(K) so outputs stay O(1) and softmax of them is not one-hot.
    a = _randn((m, k), torch.float32, device, gen) / math.sqrt(k)
    b = _randn((k, n), torch.float32, device, gen)
    return a.to(dtype=dtype), b.to(dtype=dtype)


def _gelu64(x: torch.Tensor) -> torch.Tensor:
    import torch

    x = x.double()
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def _mn(shape: Shape) -> int:
    return shape[0] * shape[1]


def _matmul_minimum(s: Shape, dt: DTypeLike) -> Traffic:
    """Read A (MxK) and B (KxN) once; write C (MxN) once."""
    return Traffic((s[0] * s[2] + s[2] * s[1]) * element_size(dt), s[0] * s[1] * element_size(dt))


OPS: dict[str, Op] = {
    "softmax": Op(
        name="softmax",
        description="softmax over each row (dim=-1) of an MxN row-major matrix",
        dims="MxN",
        default_shape=(1048576, 2),
        make_inputs=_mat_inputs,
        reference=lambda x: x.double().softmax(dim=-1),
        # read MN elements once; write MN elements once
        minimum=lambda s, dt: Traffic(_mn(s) * element_size(dt), _mn(s) * element_size(dt)),
        # per element: max-compare, subtract, exp, add, divide
        flops=lambda s: 5 * _mn(s),
        flops_note="5 per element (max, subtract, exp, sum, divide); exp counted as one",
    ),
    "softmax_dim0": Op(
        name="softmax_dim0",
        description="softmax over each column (dim=0) of an MxN row-major matrix",
        dims="MxN",
        default_shape=(4096, 4096),
        make_inputs=_mat_inputs,
        reference=lambda x: x.double().softmax(dim=0),
        minimum=lambda s, dt: Traffic(_mn(s) * element_size(dt), _mn(s) * element_size(dt)),
        flops=lambda s: 5 * _mn(s),
        flops_note="5 per element (max, subtract, exp, sum, divide); exp counted as one",
    ),
    "gelu": Op(
        name="gelu",
        description="elementwise GELU, tanh approximation, on an MxN tensor",
        dims="MxN",
        default_shape=(8192, 8192),
        make_inputs=_mat_inputs,
        reference=_gelu64,
        minimum=lambda s, dt: Traffic(_mn(s) * element_size(dt), _mn(s) * element_size(dt)),
        # x*x*x (2 mul), *0.044715, +x, *sqrt(2/pi), tanh, +1, *x, *0.5
        flops=lambda s: 9 * _mn(s),
        flops_note="9 per element: 6 multiplies (x*x*x is two, *0.044715, *sqrt(2/pi), *x, *0.5), "
        "2 adds (+x, +1), tanh counted as one",
    ),
    "matmul": Op(
        name="matmul",
        description="C = A @ B with A MxK, B KxN (row-major)",
        dims="MxNxK",
        default_shape=(4096, 4096, 4096),
        make_inputs=_matmul_inputs,
        reference=lambda a, b: a.double() @ b.double(),
        minimum=_matmul_minimum,
        flops=lambda s: 2 * s[0] * s[1] * s[2],
        flops_note="2*M*N*K (one multiply and one add per term)",
    ),
    "matmul_softmax": Op(
        name="matmul_softmax",
        description="softmax(A @ B, dim=-1) with A MxK, B KxN",
        dims="MxNxK",
        default_shape=(4096, 4096, 4096),
        make_inputs=_matmul_inputs,
        reference=lambda a, b: (a.double() @ b.double()).softmax(dim=-1),
        minimum=_matmul_minimum,
        flops=lambda s: 2 * s[0] * s[1] * s[2] + 5 * s[0] * s[1],
        flops_note="2*M*N*K for the product plus 5 per output element for the softmax",
    ),
}

