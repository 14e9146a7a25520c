"""Per-aten-op NVTX ranges and compulsory traffic of a PyTorch program (measuring side: imports torch).

`with memtraffic.ops() as records:` traces every aten op that runs in the block, backward included
(autograd's worker threads inherit the dispatch mode from the thread that calls backward). Each call
is pushed as the NVTX range `mt|op|<seq>|<overload>` when CUDA is available, so every kernel it launches
(cuBLAS, torch, Triton, an extension) lands in it under `ncu --nvtx`, and its record
(memtraffic.core.tracefile) holds the compulsory traffic:

- each distinct input tensor is read once: its own elements x element size (a view counts its own
  elements, a broadcast (stride-0) dimension once, a tensor passed twice once);
- each output is written once; an in-place op's mutated tensor is read and written once; `out=`
  arguments, and the targets of ops that overwrite without reading (copy_, fill_, zero_, random
  fills), are written only;
- view and alias ops (outputs share an input's storage, nothing mutated) and allocations move nothing;
- model FLOPs from torch.utils.flop_counter's formulas where it has one (matmuls, convolutions,
  attention), else None.

Only shapes, strides, dtypes and data pointers are read: the tracer never synchronizes the device
or copies tensor data.

Not seen: ops of threads the program starts itself (a dispatch mode belongs to one thread and the
autograd threads it starts); kernels launched outside aten ops, such as a Triton kernel called
directly (wrap it in memtraffic.region, or register it with torch.library). torch.compile does not
compile while a dispatch mode is active (torch 2.13: the function runs eagerly, and stays eager
after): the trace then shows the eager ops, not the compiled kernels.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode, _get_current_dispatch_mode_stack
from torch.utils._pytree import tree_leaves
from torch.utils.flop_counter import flop_registry

from memtraffic.core.tracefile import collect, dtype_name, emit, make_record, next_seq

aten = torch.ops.aten

# Write their target without reading it.
_OVERWRITE = {aten.copy_, aten.fill_, aten.zero_, aten.uniform_, aten.normal_, aten.random_,
              aten.exponential_, aten.bernoulli_}
# Take a tensor only for its shape, dtype and device.
_TEMPLATE = {aten.empty_like, aten.zeros_like, aten.ones_like, aten.full_like, aten.rand_like,
             aten.randn_like, aten.randint_like, aten.new_empty, aten.new_empty_strided, aten.new_zeros,
             aten.new_ones, aten.new_full}
# Allocate without initializing: no kernel, no traffic.
_ALLOCATE = {aten.empty, aten.empty_like, aten.empty_strided, aten.new_empty, aten.new_empty_strided}
# Read only the rows they gather from their first input: at most the output's size of it.
_GATHER = {aten.embedding, aten.index_select, aten.index, aten.gather}


def tensor_bytes(t: torch.Tensor) -> int:
    """Bytes of the distinct elements a tensor addresses: broadcast (stride-0) dimensions count once;
    a sparse tensor, its stored values and indices."""
    if t.layout == torch.sparse_coo:
        return tensor_bytes(t._values()) + tensor_bytes(t._indices())
    if t.layout in (torch.sparse_csr, torch.sparse_bsr):
        return sum(tensor_bytes(x) for x in (t.values(), t.crow_indices(), t.col_indices()))
    if t.layout in (torch.sparse_csc, torch.sparse_bsc):
        return sum(tensor_bytes(x) for x in (t.values(), t.ccol_indices(), t.row_indices()))
    n = math.prod(size for size, stride in zip(t.shape, t.stride(), strict=True) if stride != 0)
    return 0 if t.numel() == 0 else n * t.element_size()


def _key(t: torch.Tensor) -> tuple[Any, ...]:
    """Same memory, same geometry: the same data for traffic purposes."""
    try:
        return (t.data_ptr(), tuple(t.shape), tuple(t.stride()), t.dtype)
    except RuntimeError:  # tensors without storage (meta, some subclasses): identity is all we have
        return (id(t),)


def _storage(t: torch.Tensor) -> int | None:
    try:
        ptr = t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return None
    return ptr or None  # 0: no allocation (empty or meta), aliases nothing


def _describe(t: torch.Tensor) -> dict[str, Any]:
    return {"shape": list(t.shape), "dtype": dtype_name(t.dtype)}


def _tensors(value: Any) -> list[torch.Tensor]:
    return [t for t in tree_leaves(value) if isinstance(t, torch.Tensor)]


def _arguments(func: torch._ops.OpOverload, args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> Iterator[tuple[Any, Any]]:
    """(schema argument, value) pairs of one call."""
    schema_args = func._schema.arguments
    for arg, value in zip(schema_args, args, strict=False):
        yield arg, value
    by_name = {a.name: a for a in schema_args}
    for name, value in kwargs.items():
        if name in by_name:
            yield by_name[name], value


def op_record(func: torch._ops.OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any,
              seq: int, range_name: str) -> dict[str, Any]:
    """The trace record of one finished op call (see the module docstring for the rules)."""
    packet = func.overloadpacket
    reads: dict[tuple[Any, ...], int] = {}
    writes: dict[tuple[Any, ...], int] = {}
    inputs: dict[tuple[Any, ...], torch.Tensor] = {}
    storages: set[int] = set()
    for arg, value in _arguments(func, args, kwargs):
        written = arg.alias_info is not None and arg.alias_info.is_write
        for t in _tensors(value):
            key = _key(t)
            storages.add(_storage(t) or 0)
            if written:
                writes[key] = tensor_bytes(t)
            if arg.is_out:
                continue
            inputs.setdefault(key, t)
            if packet not in _TEMPLATE and not (written and packet in _OVERWRITE):
                reads[key] = tensor_bytes(t)
    outputs = _tensors(out)
    fresh = [t for t in outputs if _storage(t) is None or _storage(t) not in storages]
    if outputs and not fresh and not writes:  # a view or alias of its inputs: no data moves
        reads = {}
    if packet not in _ALLOCATE:
        for t in fresh:
            writes.setdefault(_key(t), tensor_bytes(t))
    if packet in _GATHER and inputs:
        source = next(iter(inputs))
        reads[source] = min(reads[source], sum(tensor_bytes(t) for t in outputs))
    return make_record("op", seq, str(func), range_name, [_describe(t) for t in inputs.values()],
                       [_describe(t) for t in outputs], sum(reads.values()), sum(writes.values()),
                       _flops(func, args, kwargs, out))


def _flops(func: torch._ops.OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any],
           out: Any) -> int | None:
    formula = flop_registry.get(func.overloadpacket)
    if formula is None:
        return None
    try:
        return int(formula(*args, **kwargs, out_val=out))
    except Exception:  # a formula that does not take this overload's arguments: FLOPs unknown
        return None


@functools.cache
def _composite(func: torch._ops.OpOverload) -> bool:
    key = torch._C.DispatchKey.CompositeImplicitAutograd
    return key in func.py_kernels or torch._C._dispatch_has_kernel_for_dispatch_key(func.name(), key)


class OpTracer(TorchDispatchMode):
    """Pushes an NVTX range around each aten op (with CUDA) and emits its record after it returns."""

    def __init__(self) -> None:
        super().__init__()
        self._nvtx = torch.cuda.is_available()
        self.enabled = True

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if not self.enabled:
            return func(*args, **kwargs)
        # CompositeImplicitAutograd ops (linear, sdpa, dropout...) reach the mode whole under
        # inference_mode, where autograd's keys are skipped; decompose them as autograd does, so the
        # same ops are traced with and without grad, and matmuls get their FLOPs.
        if _composite(func):
            with self:
                return func.decompose(*args, **kwargs)
        seq = next_seq()
        name = f"mt|op|{seq}|{func}"
        if self._nvtx:
            torch.cuda.nvtx.range_push(name)
        try:
            out = func(*args, **kwargs)
        finally:
            if self._nvtx:
                torch.cuda.nvtx.range_pop()
        emit(op_record(func, args, kwargs, out, seq, name))
        return out


def _active() -> bool:
    return any(isinstance(m, OpTracer) for m in _get_current_dispatch_mode_stack())


@contextmanager
def ops() -> Iterator[list[dict[str, Any]]]:
    """Trace the aten ops of the block: yields the list their records (and regions') are appended to.

    Records also go to $MEMTRAFFIC_TRACE when it is set. Inside an already traced block (or a program
    started by `memtraffic ops` / `profile --torch-ops`) no second tracer is pushed: the block only
    collects.
    """
    with collect() as records:
        if _active():
            yield records
        else:
            with OpTracer():
                yield records


_startup: OpTracer | None = None


def start() -> None:
    """Trace the rest of the program (the calling thread and the autograd threads it starts).

    sitecustomize calls this when the program imports torch under MEMTRAFFIC_TORCH_OPS=1. Forked
    children (DataLoader workers) inherit the mode but are not traced, like spawned ones.
    """
    global _startup
    if _startup is None:
        _startup = OpTracer()
        _startup.__enter__()
        os.register_at_fork(after_in_child=_stop_startup)


def _stop_startup() -> None:
    if _startup is not None:
        _startup.enabled = False
