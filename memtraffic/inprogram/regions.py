"""`memtraffic.region`: an NVTX range with a stated minimum, for code of any framework (JAX, CuPy, torch).

    with memtraffic.region("attention", inputs=[q, k, v], outputs=[o]):
        o[...] = attention(q, k, v)
    with memtraffic.region("step", read_bytes=8 << 20, write_bytes=8 << 20) as r:
        y = step(x)          # JAX and friends create outputs inside: add them
        r.outputs.append(y)

The minimum is each distinct input's bytes read once and each output's written once (arrays with
.nbytes, or .size and .itemsize), or the bytes given; explicit bytes win per direction. The range
`mt|region|<name>|<seq>` holds every kernel launched inside (an `mt|op|...` range of a traced torch op
inside it is more specific and wins). The record (memtraffic.runfolder.trace) is written when the block
ends. Torch-free: it imports no framework to push the range.

A region is measured every time it runs: the code inside is the user's, and the same name, shapes and
dtypes do not prove the same work (a loop whose length depends on data, a cache that warms). With
`repeats_same=True` the user says it does: under `memtraffic profile --distinct K` the first K calls of
each signature (name, each input's and output's shape, dtype and pointer alignment as far as the array
tells, the bytes and FLOPs given) are measured and the others reuse the first one's counters
(memtraffic.vocab.launches). Traced ops inside a measured region are decided op by op.
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

from memtraffic.inprogram import distinct
from memtraffic.runfolder.records import TensorEntry
from memtraffic.runfolder.trace import add_decision, emit, make_record, next_seq, paused, short_dtype
from memtraffic.vocab.errors import UsageError

_Nvtx = tuple[Callable[[str], object], Callable[[], object]]
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


def use_nvtx(push: Callable[[str], object], pop: Callable[[], object]) -> None:
    """Regions push and pop through these from now on (the timer's and the Triton hooks' wrapped torch
    NVTX functions), without searching for an NVTX library."""
    global _nvtx, _searched
    _searched, _nvtx = True, (push, pop)


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
    inputs: list[object] = field(default_factory=list)
    outputs: list[object] = field(default_factory=list)
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


def _array_bytes(obj: object, what: str, name: str) -> int:
    """.nbytes, else .size x .itemsize (numpy, CuPy, JAX, torch arrays all have one of them)."""
    nbytes = getattr(obj, "nbytes", None)
    if nbytes is None:
        size, itemsize = getattr(obj, "size", None), getattr(obj, "itemsize", None)
        if callable(size) or size is None or itemsize is None:
            raise UsageError(f"region {name!r}: {what} ({type(obj).__name__}) has no .nbytes nor .size and "
                             ".itemsize: pass arrays, or read_bytes=/write_bytes=")
        nbytes = size * itemsize
    return _count(nbytes, f"{what}'s size", name) or 0


def _describe(obj: object) -> TensorEntry:
    shape = getattr(obj, "shape", ())
    dtype = getattr(obj, "dtype", None)
    return {"shape": [int(d) for d in shape], "dtype": "" if dtype is None else short_dtype(dtype)}


def _pointer_alignment(obj: object) -> int | None:
    """data pointer % 16 of a torch, CuPy or numba array (CUDA array interface), else None."""
    try:
        if (data_ptr := getattr(obj, "data_ptr", None)) is not None:
            return int(data_ptr()) % 16
        interface = (getattr(obj, "__cuda_array_interface__", None)
                     or getattr(obj, "__array_interface__", None))
        return None if interface is None else int(interface["data"][0]) % 16
    except Exception:  # an array that cannot say where it lives: keyed without it
        return None


def _signature(r: Region) -> tuple[object, ...]:
    arrays = tuple((tuple(d["shape"]), d["dtype"], _pointer_alignment(o))
                   for o in (*r.inputs, *r.outputs) for d in [_describe(o)])
    return ("region", r.name, len(r.inputs), arrays, r.read_bytes, r.write_bytes, r.flops)


def _distinct(objs: Sequence[object]) -> list[object]:
    return list({id(o): o for o in objs}.values())  # the same array passed twice is read once


def _minimum(r: Region) -> tuple[int, int]:
    reads = sum(_array_bytes(o, f"input #{i}", r.name) for i, o in enumerate(_distinct(r.inputs)))
    writes = sum(_array_bytes(o, f"output #{i}", r.name) for i, o in enumerate(_distinct(r.outputs)))
    return (reads if r.read_bytes is None else r.read_bytes,
            writes if r.write_bytes is None else r.write_bytes)


@contextmanager
def region(name: str, inputs: Sequence[object] = (), outputs: Sequence[object] = (), *,
           read_bytes: int | None = None, write_bytes: int | None = None,
           flops: int | None = None, repeats_same: bool = False) -> Iterator[Region]:
    """An NVTX range `mt|region|<name>|<seq>` whose minimum traffic analysis uses (see module docstring).
    `repeats_same`: calls with the same signature do the same work, so a repeat may reuse the first
    call's counters under `profile --distinct` (default: every call measured)."""
    if not isinstance(name, str) or not name or "|" in name:
        raise UsageError(f"region name {name!r}: give a non-empty string without '|'")
    r = Region(name, list(inputs), list(outputs), _count(read_bytes, "read_bytes", name),
               _count(write_bytes, "write_bytes", name), _count(flops, "flops", name))
    _minimum(r)  # bad inputs fail here, before the block runs
    if paused():  # the program's tracer waits for its window: nothing here is profiled or recorded
        yield r
        return
    seq = next_seq()
    decision = distinct.decide(f"mt|region|{name}|{seq}", _signature(r), always=not repeats_same)
    nvtx = _push_pop()
    if nvtx:
        nvtx[0](decision.range)
    try:
        yield r
    finally:
        if nvtx:
            nvtx[1]()
        distinct.done(decision)
        read, write = _minimum(r)
        record = make_record("region", seq, name, decision.range, [_describe(o) for o in _distinct(r.inputs)],
                             [_describe(o) for o in _distinct(r.outputs)], read, write, r.flops)
        add_decision(record, decision)
        emit(record)
