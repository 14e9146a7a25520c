"""Per-aten-op NVTX ranges and compulsory traffic of a PyTorch program (measuring side: imports torch).

`with memtraffic.ops() as records:` traces every aten op that runs in the block, backward included
(autograd's worker threads inherit the dispatch mode from the thread that calls backward). Each call
is pushed as the NVTX range `mt|op|<seq>|<overload>` when CUDA is available, so every kernel it launches
(cuBLAS, torch, Triton, an extension) lands in it under `ncu --nvtx`, and its record
(memtraffic.runfolder.trace) holds the op's compulsory traffic, by the rules and convention of
memtraffic.inprogram.op_rules (element bytes of the distinct data it must move; inputs read once,
outputs written once, except gathers, scatters, losses, metadata-only and backward ops), and model
FLOPs from torch.utils.flop_counter's formulas or ours (`FLOP_FORMULAS`, ops it has none for), else None.

The tracer reads shapes, strides, dtypes and data pointers, and the values of index tensors that
live on the CPU (to count distinct indices); it never synchronizes the device or copies GPU data.

Not seen: ops of threads the program starts itself (a dispatch mode belongs to one thread and the
autograd threads it starts); kernels launched outside aten ops, such as a Triton kernel called
directly (wrap it in memtraffic.region, or register it with torch.library; under `profile` each
Triton launch gets its own range: memtraffic.inprogram.triton_launches). torch.compile compiles under
this mode (`ignore_compile_internals`, torch >= 2.9): the trace holds the ops the compiled code calls
(extern kernels, graph breaks), its Triton kernels their own ranges. On an older torch dynamo runs
the function eagerly under any dispatch mode, and a traced program that calls torch.compile gets one
warning saying so (`warn`).

CompositeImplicitAutograd ops (linear, dropout, sdpa) reach the mode whole under inference_mode;
they run their C++ kernel, as the plain program does, so the mode sees the same ops with and without
grad (a Python decomposition may differ: eval-mode dropout is a clone there, the input in C++).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode, _get_current_dispatch_mode_stack
from torch.utils._pytree import tree_leaves
from torch.utils.flop_counter import flop_registry, sdpa_backward_flop_count, sdpa_flop_count

from memtraffic.inprogram import distinct
from memtraffic.inprogram.liveness import identities, watch_all
from memtraffic.inprogram.op_rules import RULES, VALUE_DEPENDENT, CallMinimum, OpArgs, storage_of, union_bytes
from memtraffic.inprogram.op_rules import tensor_bytes as tensor_bytes  # re-exported: the public helper
from memtraffic.runfolder import trace
from memtraffic.runfolder.records import TensorEntry, TraceRecord
from memtraffic.runfolder.trace import (
    TORCH_MARK_ENV,
    add_decision,
    collect,
    emit,
    make_record,
    next_seq,
    short_dtype,
)
from memtraffic.vocab import launches

aten = torch.ops.aten

# Write their target without reading it.
_OVERWRITE = {aten.copy_, aten.fill_, aten.zero_, aten.uniform_, aten.normal_, aten.random_,
              aten.exponential_, aten.bernoulli_}
# Take a tensor only for its shape, dtype and device.
_TEMPLATE = {aten.empty_like, aten.zeros_like, aten.ones_like, aten.full_like, aten.rand_like,
             aten.randn_like, aten.randint_like, aten.new_empty, aten.new_empty_strided, aten.new_zeros,
             aten.new_ones, aten.new_full}
# Of these, the ones whose tensor gives only its dtype and device (the size is an argument): a decode
# loop's attention_mask.new_ones((1, 1)) is one signature whatever the mask's length.
_NEW = {aten.new_empty, aten.new_empty_strided, aten.new_zeros, aten.new_ones, aten.new_full}
# Allocate without initializing: no kernel, no traffic.
_ALLOCATE = {aten.empty, aten.empty_like, aten.empty_strided, aten.new_empty, aten.new_empty_strided}


def _key(t: torch.Tensor) -> tuple[object, ...]:
    """Same memory, same geometry: the same data for traffic purposes."""
    try:
        return (t.data_ptr(), tuple(t.shape), tuple(t.stride()), t.dtype)
    except RuntimeError:  # tensors without storage (meta, some subclasses): identity is all we have
        return (id(t),)


def _describe(t: torch.Tensor) -> TensorEntry:
    return {"shape": list(t.shape), "dtype": short_dtype(t.dtype)}


def _tensors(value: object) -> list[torch.Tensor]:
    return [t for t in tree_leaves(value) if isinstance(t, torch.Tensor)]


def _arguments(func: torch._ops.OpOverload, args: tuple[Any, ...],
               kwargs: OpArgs) -> Iterator[tuple[Any, Any]]:
    """(schema argument, value) pairs of one call."""
    schema_args = func._schema.arguments
    for arg, value in zip(schema_args, args, strict=False):
        yield arg, value
    by_name = {a.name: a for a in schema_args}
    for name, value in kwargs.items():
        if name in by_name:
            yield by_name[name], value


def op_record(func: torch._ops.OpOverload, args: tuple[Any, ...], kwargs: OpArgs, out: Any,
              seq: int, range_name: str) -> TraceRecord:
    """The trace record of one finished op call (rules and convention: memtraffic.inprogram.op_rules)."""
    packet = func.overloadpacket
    named: OpArgs = {}
    inputs: dict[tuple[object, ...], torch.Tensor] = {}
    generic = CallMinimum()
    storages: set[int] = set()
    for arg, value in _arguments(func, args, kwargs):
        named[arg.name] = value
        written = arg.alias_info is not None and arg.alias_info.is_write
        for t in _tensors(value):
            storages.add(storage_of(t) or 0)
            if written:
                generic.write.append(t)
            if arg.is_out:
                continue
            inputs.setdefault(_key(t), t)
            if packet not in _TEMPLATE and not (written and packet in _OVERWRITE):
                generic.read.append(t)
    outputs = _tensors(out)
    fresh = [t for t in outputs if storage_of(t) is None or storage_of(t) not in storages]
    if outputs and not fresh and not generic.write:  # a view or alias of its inputs: no data moves
        generic.read = []
    if packet in _ALLOCATE:
        fresh = []
    generic.write += fresh
    traffic = generic
    rule = RULES.get(packet)
    if rule is not None:
        traffic = CallMinimum()
        try:
            rule(traffic, named, fresh)
        except Exception:  # arguments the rule does not know (a new overload): the generic rule holds
            traffic = generic
    read, write, note = traffic.totals()
    main = outputs[0] if outputs and packet not in _ALLOCATE else None
    record = make_record("op", seq, str(func), range_name, [_describe(t) for t in inputs.values()],
                         [_describe(t) for t in outputs], read, write, _flops(func, args, kwargs, out),
                         note=note, main=None if main is None else _describe(main))
    # Which storages it moves (the fused minimum follows data from op to op with them); views and
    # allocations are watched too: they keep a storage alive.
    record["reads"] = identities(traffic.read, traffic.read_bytes, union_bytes)
    record["writes"] = identities(traffic.write, traffic.write_bytes, union_bytes)
    watch_all([*inputs.values(), *outputs])
    return record


ALIGNMENT = 16  # bytes: vectorized (128-bit) loads need it, kernels fall back to narrower ones without


def _tensor_signature(t: torch.Tensor, storages: dict[int, int]) -> tuple[object, ...]:
    """Shape, strides, dtype, device, layout, data_ptr % ALIGNMENT, and which earlier argument's storage
    it shares (its number among the call's distinct storages): what a kernel's traffic depends on, values
    aside. The stride of a dimension of size 1 is left out (None): no address depends on it, and torch's
    own layout checks (is_contiguous, the BLAS leading dimension) ignore it too. A decode loop's
    one-token slice of a growing tensor, (1, 1) with stride (n, 1), is then one signature, not one per
    token."""
    shape = tuple(t.shape)
    base = (shape, str(t.dtype), str(t.device), str(t.layout))
    try:
        shared = storages.setdefault(storage_of(t) or 0, len(storages))
        strides = tuple(None if size == 1 else stride for size, stride in zip(shape, t.stride(), strict=True))
        return (*base, strides, t.data_ptr() % ALIGNMENT, shared)
    except (RuntimeError, NotImplementedError):  # no strides or storage (sparse, meta, some subclasses)
        return base


# Float arguments kernels may specialize on (pow's square and root paths, a zero or unit alpha): keyed by
# value; any other float only by its sign, so steps with a new learning rate or step size are repeats.
_SPECIAL_FLOATS = {0.0, 1.0, -1.0, 2.0, -2.0, 3.0, 0.5, -0.5, float("inf"), float("-inf")}


def call_signature(func: torch._ops.OpOverload, args: tuple[Any, ...], kwargs: OpArgs) -> tuple[object, ...]:
    """What one op call's traffic depends on, its data values aside (memtraffic.vocab.launches): the
    overload, every tensor argument's _tensor_signature (a new_* op's template tensor: its dtype, device
    and layout only), other arguments by value (floats other than _SPECIAL_FLOATS by sign only)."""
    storages: dict[int, int] = {}
    if func.overloadpacket in _NEW and args and isinstance(args[0], torch.Tensor):
        template = args[0]
        args = ((str(template.dtype), str(template.device), str(template.layout)), *args[1:])

    def part(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return _tensor_signature(value, storages)
        if isinstance(value, list | tuple):
            return tuple(part(v) for v in value)
        if isinstance(value, float) and value not in _SPECIAL_FLOATS and value == value:
            return ("float", value > 0)  # a learning rate, a step size: the same kernel whatever its value
        if value is None or isinstance(value, bool | int | float | str):
            return value
        if isinstance(value, torch.dtype | torch.device | torch.layout | torch.memory_format):
            return str(value)
        if isinstance(value, torch.SymInt | torch.SymFloat | torch.SymBool):
            return str(value)
        return type(value).__name__  # a Generator, an opaque object: its type is all we key on

    return (str(func), part(args), tuple(sorted((k, part(v)) for k, v in kwargs.items())))


def _shape(t: torch.Tensor) -> tuple[int, ...]:
    return tuple(t.shape)


# Closed-form FLOPs of ops torch.utils.flop_counter has no formula for, by its own counting (2 per
# multiply-add; attention: Q @ K^T and P @ V, causal masks not subtracted, as torch counts the GPU kernels).
FLOP_FORMULAS: dict[torch._ops.OpOverloadPacket, Callable[..., int]] = {
    aten._scaled_dot_product_flash_attention_for_cpu:
        lambda q, k, v, *_, **__: sdpa_flop_count(_shape(q), _shape(k), _shape(v)),
    aten._scaled_dot_product_flash_attention_for_cpu_backward:
        lambda grad, q, k, v, *_, **__: sdpa_backward_flop_count(_shape(grad), _shape(q), _shape(k),
                                                                 _shape(v)),
}


def _flops(func: torch._ops.OpOverload, args: tuple[Any, ...], kwargs: OpArgs,
           out: Any) -> int | None:
    ours = FLOP_FORMULAS.get(func.overloadpacket)
    formula = flop_registry.get(func.overloadpacket)
    try:
        if ours is not None:
            return int(ours(*args, **kwargs))
        return None if formula is None else int(formula(*args, **kwargs, out_val=out))
    except Exception:  # a formula that does not take this overload's arguments: FLOPs unknown
        return None


def _decompose(func: torch._ops.OpOverload, args: tuple[Any, ...], kwargs: OpArgs) -> Any:
    """Run a CompositeImplicitAutograd op as a plain run does: its C++ kernel where it has one (its
    Python decomposition may differ, e.g. eval-mode dropout returns a clone there, the input in C++)."""
    key = torch._C.DispatchKey.CompositeImplicitAutograd
    if torch._C._dispatch_has_kernel_for_dispatch_key(func.name(), key):
        return func._op_dk(key, *args, **kwargs)
    return func.decompose(*args, **kwargs)


@functools.cache
def _composite(func: torch._ops.OpOverload) -> bool:
    key = torch._C.DispatchKey.CompositeImplicitAutograd
    return key in func.py_kernels or torch._C._dispatch_has_kernel_for_dispatch_key(func.name(), key)


class OpTracer(TorchDispatchMode):
    """Pushes an NVTX range around each aten op (with CUDA) and emits its record after it returns."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # torch's, unannotated
        self._nvtx = torch.cuda.is_available()
        self.enabled = True
        # Under ncu's range replay an unsupported driver call inside a range (creating the CUDA context:
        # cuDevicePrimaryCtxRetain, H100 2026-11-26) fails the program, and every range costs a replay
        # even when it holds no kernel: the context is made before the first range, and ops with no
        # GPU argument get none.
        self._range_replay = os.environ.get(launches.REPLAY_ENV) == "range"
        self._primed = False

    def _prime(self) -> None:
        """Create the CUDA context and the cuBLAS handle outside any range (range replay)."""
        self._primed = True
        torch.empty(1, device="cuda")
        torch.cuda.current_blas_handle()

    @classmethod
    def ignore_compile_internals(cls) -> bool:
        """torch.compile compiles under this mode (torch >= 2.9 asks): the mode is off while dynamo and
        Inductor trace, and sees what the compiled code calls at run time (extern kernels such as
        cuBLAS matmuls, graph breaks); the generated Triton kernels get their ranges from
        memtraffic.inprogram.triton_launches."""
        return True

    def __torch_dispatch__(self, func: torch._ops.OpOverload, types: Sequence[type],
                           args: tuple[Any, ...] = (), kwargs: OpArgs | None = None) -> Any:
        kwargs = kwargs or {}
        if not self.enabled:
            return func(*args, **kwargs)
        # CompositeImplicitAutograd ops (linear, sdpa, dropout...) reach the mode whole under
        # inference_mode, where autograd's keys are skipped; decompose them as autograd does, so the
        # same ops are traced with and without grad, and matmuls get their FLOPs.
        if _composite(func):
            with self:
                return _decompose(func, args, kwargs)
        seq = next_seq()
        # Measured, or a repeat of an earlier call with the same signature (memtraffic.vocab.launches):
        # a repeat's range is one ncu skips. Ops whose traffic may depend on values are measured more.
        decision = distinct.decide(f"mt|op|{seq}|{func}", call_signature(func, args, kwargs),
                                   value_dependent=func.overloadpacket in VALUE_DEPENDENT)
        nvtx = self._nvtx and (not self._range_replay or _touches_gpu(args, kwargs))
        if nvtx and self._range_replay and not self._primed:
            self._prime()
        if nvtx:
            torch.cuda.nvtx.range_push(decision.range)
        try:
            out = func(*args, **kwargs)
        finally:
            if nvtx:
                torch.cuda.nvtx.range_pop()
            distinct.done(decision)
        record = op_record(func, args, kwargs, out, seq, decision.range)
        add_decision(record, decision)
        emit(record)
        return out


def _touches_gpu(args: tuple[Any, ...], kwargs: OpArgs) -> bool:
    """A CUDA tensor or device among the arguments: the op may launch a kernel."""
    for leaf in tree_leaves((args, kwargs)):
        if isinstance(leaf, torch.Tensor) and leaf.is_cuda:
            return True
        if isinstance(leaf, torch.device) and leaf.type == "cuda":
            return True
        if isinstance(leaf, str) and leaf.startswith("cuda"):
            return True
    return False


def _active() -> OpTracer | None:
    return next((m for m in _get_current_dispatch_mode_stack() if isinstance(m, OpTracer)), None)


@contextmanager
def ops() -> Iterator[list[TraceRecord]]:
    """Trace the aten ops of the block: yields the list their records (and regions') are appended to.

    Records also go to $MEMTRAFFIC_TRACE when it is set. Inside an already traced block (or a program
    started by `memtraffic ops` / `profile --torch-ops`) no second tracer is pushed: the block collects,
    and traces even where that tracer waits (for the first forward, or the profiler window).
    """
    with collect() as records:
        active = _active()
        if active is None:
            with OpTracer():
                yield records
            return
        was = active.enabled
        active.enabled = True
        try:
            yield records
        finally:
            active.enabled = was


_startup: OpTracer | None = None


def start(mode: str = "1") -> None:
    """Trace the rest of the program (the calling thread and the autograd threads it starts).

    sitecustomize calls this when the program imports torch under MEMTRAFFIC_TORCH_OPS. `mode` "1":
    every op from now; "forward": from the first nn.Module forward (initialisation left out);
    "window": only between cudaProfilerStart and cudaProfilerStop (torch.cuda.profiler.start/stop or
    torch.cuda.cudart()'s), the calls ncu profiles under --profile-from-start off. Forked children
    (DataLoader workers) inherit the mode but are not traced, like spawned ones.
    """
    global _startup
    if _startup is not None:
        return
    _startup = OpTracer()
    _startup.enabled = mode == "1"
    trace.pause(not _startup.enabled)
    _startup.__enter__()  # type: ignore[no-untyped-call]  # torch's, unannotated
    os.register_at_fork(after_in_child=_stop_startup)
    _watch_compile()
    if mode == "forward":
        _enable_at_first_forward(_startup)
    elif mode == "window":
        _follow_profiler(_startup)


def _stop_startup() -> None:
    if _startup is not None:
        _startup.enabled = False


def warn(text: str) -> None:
    """A warning about what the trace holds: on stderr, and in the mark file `memtraffic` reads back."""
    print(f"memtraffic: warning: {text}", file=sys.stderr, flush=True)
    mark = os.environ.get(TORCH_MARK_ENV)
    if mark:
        with open(mark, "a") as f:
            f.write(text + "\n")


COMPILE_WARNING = ("the program calls torch.compile, which does not compile while the op tracer runs: "
                   "the trace shows the eager aten ops and their kernels, not the compiled (fused) "
                   "kernels; profile without --torch-ops to measure those")


def _watch_compile() -> None:
    """Warn once when the program compiles, on a torch whose dynamo leaves code eager under any dispatch
    mode (before TorchDispatchMode.ignore_compile_internals)."""
    if hasattr(TorchDispatchMode, "ignore_compile_internals"):
        return
    original = torch.compile

    @functools.wraps(original)
    def compile(*args: Any, **kwargs: Any) -> Any:
        if torch.compile is compile:  # once: restore the original, then warn
            torch.compile = original
            warn(COMPILE_WARNING)
        return original(*args, **kwargs)

    torch.compile = compile


def _enable_at_first_forward(tracer: OpTracer) -> None:
    def hook(module: torch.nn.Module, args: object) -> None:
        tracer.enabled = True
        trace.pause(False)
        handle.remove()

    handle = torch.nn.modules.module.register_module_forward_pre_hook(hook)


def _follow_profiler(tracer: OpTracer) -> None:
    """Trace while the CUDA profiler runs: wrap torch.cuda.profiler.start/stop and cudart()'s calls."""
    import torch.cuda.profiler as profiler

    def switch(call: Any, on: bool) -> Any:
        @functools.wraps(call)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            tracer.enabled = on
            trace.pause(not on)
            if not on:  # the window closes: what was freed in it was freed inside the region
                trace.end_region()
            return call(*args, **kwargs)
        return wrapped

    profiler.start, profiler.stop = switch(profiler.start, True), switch(profiler.stop, False)
    cudart: Callable[[], Any] = torch.cuda.cudart  # the CUDA runtime module: untyped

    class _Cudart:
        def __init__(self, real: Any) -> None:
            self._real = real
            self.cudaProfilerStart = switch(real.cudaProfilerStart, True)
            self.cudaProfilerStop = switch(real.cudaProfilerStop, False)

        def __getattr__(self, name: str) -> Any:
            return getattr(self._real, name)

    @functools.wraps(cudart)
    def traced_cudart() -> Any:
        return _Cudart(cudart())

    torch.cuda.cudart = traced_cudart


