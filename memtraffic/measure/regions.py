"""`memtraffic.region`: an NVTX range with a stated minimum, for code of any framework (JAX, CuPy, torch).

    with memtraffic.region("attention", inputs=[q, k, v], outputs=[o]):
        o[...] = attention(q, k, v)
    with memtraffic.region("step", read_bytes=8 << 20, write_bytes=8 << 20) as r:
        y = step(x)          # JAX and friends create outputs inside: add them
        r.outputs.append(y)

The minimum is each distinct input's bytes read once and each output's written once (arrays with
.nbytes, or .size and .itemsize), or the bytes given; explicit bytes win per direction. The range
`mt|region|<name>|<seq>` holds every kernel launched inside (an `mt|op|...` range of a traced torch op
inside it is more specific and wins). The record (memtraffic.core.tracefile) is written when the block
ends. Torch-free: it imports no framework to push the range.
"""

from __future__ import annotations

import math
import numbers
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from memtraffic.core.errors import UsageError
from memtraffic.core.tracefile import dtype_name, emit, make_record, next_seq

_Nvtx = tuple[Callable[[str], Any], Callable[[], Any]]
_nvtx: _Nvtx | None = None
_searched = False


def _find_nvtx() -> _Nvtx | None:
    """push/pop from the `nvtx` package, else CuPy's, else torch's when the program already uses torch."""
    try:
        import nvtx

        return nvtx.push_range, nvtx.pop_range
    except ImportError:
        pass
    try:
        from cupy.cuda import nvtx as cupy_nvtx

        return cupy_nvtx.RangePush, cupy_nvtx.RangePop
    except ImportError:
        pass
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        return torch.cuda.nvtx.range_push, torch.cuda.nvtx.range_pop
    return None


def _push_pop() -> _Nvtx | None:
    global _nvtx, _searched
    if not _searched:
        _searched = True
        _nvtx = _find_nvtx()
        if _nvtx is None:
            warnings.warn("memtraffic.region: no NVTX library found (pip install nvtx, or use CuPy, or "
                          "PyTorch with CUDA): regions are recorded, but ncu will not see their ranges",
                          stacklevel=4)
    return _nvtx


@dataclass
class Region:
    """What a region reads and writes; `inputs`/`outputs` may grow inside the block."""

    name: str
    inputs: list[Any] = field(default_factory=list)
    outputs: list[Any] = field(default_factory=list)
    read_bytes: int | None = None
    write_bytes: int | None = None
    flops: int | None = None


def _count(value: Any, what: str, name: str) -> int | None:
    if value is None:
        return None
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < 0 or value != int(value):
        raise UsageError(f"region {name!r}: {what} must be a whole number >= 0, not {value!r}")
    return int(value)


def _array_bytes(obj: Any, what: str, name: str) -> int:
    """.nbytes, else .size x .itemsize (numpy, CuPy, JAX, torch arrays all have one of them)."""
    nbytes = getattr(obj, "nbytes", None)
    if nbytes is None:
        size, itemsize = getattr(obj, "size", None), getattr(obj, "itemsize", None)
        if callable(size) or size is None or itemsize is None:
            raise UsageError(f"region {name!r}: {what} ({type(obj).__name__}) has no .nbytes nor .size and "
                             ".itemsize: pass arrays, or read_bytes=/write_bytes=")
        nbytes = size * itemsize
    return _count(nbytes, f"{what}'s size", name) or 0


def _describe(obj: Any) -> dict[str, Any]:
    shape = getattr(obj, "shape", ())
    dtype = getattr(obj, "dtype", None)
    return {"shape": [int(d) for d in shape], "dtype": "" if dtype is None else dtype_name(dtype)}


def _distinct(objs: Sequence[Any]) -> list[Any]:
    return list({id(o): o for o in objs}.values())  # the same array passed twice is read once


def _minimum(r: Region) -> tuple[int, int]:
    reads = sum(_array_bytes(o, f"input #{i}", r.name) for i, o in enumerate(_distinct(r.inputs)))
    writes = sum(_array_bytes(o, f"output #{i}", r.name) for i, o in enumerate(_distinct(r.outputs)))
    return (reads if r.read_bytes is None else r.read_bytes,
            writes if r.write_bytes is None else r.write_bytes)


@contextmanager
def region(name: str, inputs: Sequence[Any] = (), outputs: Sequence[Any] = (), *,
           read_bytes: int | None = None, write_bytes: int | None = None,
           flops: int | None = None) -> Iterator[Region]:
    """An NVTX range `mt|region|<name>|<seq>` whose minimum traffic analysis uses (see module docstring)."""
    if not isinstance(name, str) or not name or "|" in name:
        raise UsageError(f"region name {name!r}: give a non-empty string without '|'")
    r = Region(name, list(inputs), list(outputs), _count(read_bytes, "read_bytes", name),
               _count(write_bytes, "write_bytes", name), _count(flops, "flops", name))
    _minimum(r)  # bad inputs fail here, before the block runs
    seq = next_seq()
    range_name = f"mt|region|{name}|{seq}"
    nvtx = _push_pop()
    if nvtx:
        nvtx[0](range_name)
    try:
        yield r
    finally:
        if nvtx:
            nvtx[1]()
        read, write = _minimum(r)
        emit(make_record("region", seq, name, range_name, [_describe(o) for o in _distinct(r.inputs)],
                         [_describe(o) for o in _distinct(r.outputs)], read, write, r.flops))
