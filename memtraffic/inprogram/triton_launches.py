"""An NVTX range per Triton kernel launch, with the minimum of Inductor's generated kernels (imports torch).

`install()` (sitecustomize / launch.py call it under MEMTRAFFIC_TRITON) wraps two launch paths:
- Inductor's `CachingAutotuner.run`, which every kernel torch.compile generates goes through: each
  launch becomes the range `mt|triton|<seq>|<kernel_name>` and a trace record (a plan config) whose
  minimum comes from the launch's buffers (`kernel_minimum`, the rule below), with Inductor's FLOP
  estimate where it made one (`kernel_flop`, only under its benchmark_kernel config) and the aten ops
  the kernel fused (the `Original ATen: [...]` comment Inductor writes above the kernel in the module
  that launches it, `fused_aten`);
- `triton.runtime.jit.JITFunction.run`, which every other `@triton.jit` kernel goes through: a range
  per launch named by the kernel, without a minimum (a kernel's source says nothing about which
  pointers it reads), unless it runs inside one of our ranges (a region, an op, a variant), whose
  minimum then holds it: no range of its own is pushed there. triton.autotune's benchmark launches
  (`Autotuner._bench`) get none either.

The rule for a generated kernel (Inductor names its pointer arguments in_ptrN, out_ptrN, in_out_ptrN, and a
template's inputs arg_NAME, as a matmul's arg_A, arg_B): each distinct storage passed as in_ptr, in_out_ptr
or arg_ is read once, each passed as out_ptr, in_out_ptr, ws_ptr (a workspace: a mix-order reduction's
partial sums, read by a later kernel) or named in the kernel's `mutated_arg_names` written once; a storage
counts the bytes of the view passed, its distinct elements (a broadcast dimension, stride 0, counts once)
times the element size; two views of one storage count the larger. An in_out_ptr the kernel's source only
stores through (a buffer Inductor reuses for an output) is written, not read. Scalars (xnumel, seeds) move
nothing. It is what any implementation of the fused op must move when the kernel reads every element of what
it is given; a kernel that reads part of a buffer (a slice Inductor passes whole) makes it a bound from above.

Why wrap `run` rather than Triton's launch hooks: a hook receives the kernel's arguments only when the
JIT function declares a `launch_metadata` function (Triton 3.x, `CompiledKernel.launch_metadata`), and
Inductor's static CUDA launcher (torch >= 2.8) does not call the hooks; `run` sees the tensors, the
kernel's `inductor_meta`, and its caller (the generated module) on every torch and Triton version.
The first call of an Inductor kernel autotunes before it launches: the wrapper settles that first
(`_settle`), so the benchmark launches stay outside the range.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.util
import re
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeGuard

from memtraffic.inprogram import distinct
from memtraffic.inprogram.liveness import identities
from memtraffic.runfolder.records import TensorEntry, TraceRecord
from memtraffic.runfolder.trace import add_decision, emit, make_record, next_seq, paused, short_dtype
from memtraffic.vocab import launches

RANGE_PREFIX = "mt|triton|"
_ROLE = re.compile(r"(in_out_ptr|in_ptr|out_ptr)\d+|(arg)_\w+|(ws_ptr)")
_KERNEL_DEF = re.compile(r"(\w+) = async_compile\.triton\(")
_ORIGINAL_ATEN = re.compile(r"Original ATen: \[([^\]]*)\]")
_SOURCE_NODES = re.compile(r"Source Nodes: \[([^\]]*)\]")


# --- the minimum of one launch (tested on CPU with recorded arguments) -------------------------------------


class TensorLike(Protocol):
    """What the launch rule reads of an argument: a torch tensor, or a recorded stand-in of one."""

    @property
    def shape(self) -> Sequence[int]: ...
    @property
    def dtype(self) -> object: ...
    def stride(self) -> Sequence[int]: ...
    def element_size(self) -> int: ...


def view_bytes(t: TensorLike) -> int:
    """Bytes of the distinct elements a view reaches: dimensions of stride 0 (broadcast) count once."""
    count = 1
    for size, stride in zip(t.shape, t.stride(), strict=True):
        if size == 0:
            return 0
        if stride != 0:
            count *= size
    element: int = t.element_size()
    return count * element


def _storage(t: Any) -> int:
    try:
        return int(t.untyped_storage().data_ptr())
    except (AttributeError, RuntimeError):  # no storage (a fake tensor): the tensor is its own
        return id(t)


def _is_tensor(value: object) -> TypeGuard[TensorLike]:
    return all(hasattr(value, a) for a in ("shape", "stride", "element_size", "dtype"))


def only_stored(name: str, source: str) -> bool:
    """True when the kernel source uses the pointer `name` only to store through it (`tl.store(name ...`):
    Inductor passes a reused buffer as in_out_ptr even where the kernel never reads it."""
    body = re.search(r"^def \w+\(", source, flags=re.M)  # the function (Triton's JITFunction.src)
    source = source[body.start():] if body else source
    uses = len(re.findall(rf"\b{name}\b", source))
    stores = len(re.findall(rf"tl\.store\(\s*{name}\b", source))
    in_signature = len(re.findall(rf"def \w+\([^)]*\b{name}\b", source))
    return stores > 0 and uses == stores + in_signature


def kernel_minimum(arg_names: Sequence[str], args: Sequence[object], mutated: Iterable[str] = (),
                   source: str | None = None) -> tuple[int, int, list[TensorLike], list[TensorLike]]:
    """(read bytes, write bytes, tensors read, tensors written) of one launch of a generated kernel,
    by the module's rule: distinct storages read once (in_ptr, in_out_ptr) and written once (out_ptr,
    in_out_ptr, mutated_arg_names), each counting its largest view passed. With the kernel's `source`,
    an in_out_ptr it only stores through is not read."""
    mutated = set(mutated)
    reads: dict[int, TensorLike] = {}
    writes: dict[int, TensorLike] = {}
    for name, value in zip(arg_names, args, strict=False):
        role = _ROLE.fullmatch(name)
        if role is None or not _is_tensor(value):
            continue
        # a template's inputs (matmul: arg_A, arg_B) are read; a workspace (ws_ptr: a mix-order
        # reduction's partial sums, which a later kernel reads) is written
        kind = "out_ptr" if role.group(3) else role.group(1) or "in_ptr"
        key = _storage(value)
        targets = []
        if kind == "in_ptr" or (kind == "in_out_ptr" and not (source and only_stored(name, source))):
            targets.append(reads)
        if kind in ("out_ptr", "in_out_ptr") or name in mutated:
            targets.append(writes)
        for table in targets:
            if key not in table or view_bytes(value) > view_bytes(table[key]):
                table[key] = value
    return (sum(view_bytes(t) for t in reads.values()), sum(view_bytes(t) for t in writes.values()),
            list(reads.values()), list(writes.values()))


def _largest(views: Sequence[TensorLike]) -> int:
    return max(view_bytes(v) for v in views)


def io_entry(t: TensorLike) -> TensorEntry:
    return {"shape": [int(d) for d in t.shape], "dtype": short_dtype(t.dtype)}


# --- what Inductor says about a kernel ----------------------------------------------------------------------


def fused_ops(wrapper_source: str) -> dict[str, dict[str, list[str]]]:
    """kernel variable -> {"aten": [...], "nodes": [...]} from a module Inductor generated: the comment
    block it writes above each `NAME = async_compile.triton(...)` names the fused aten ops
    ('# Topologically Sorted Source Nodes: [add, relu], Original ATen: [aten.add, aten.relu]')."""
    lines = wrapper_source.splitlines()
    out: dict[str, dict[str, list[str]]] = {}
    for i, line in enumerate(lines):
        match = _KERNEL_DEF.match(line)
        if not match:
            continue
        j = i - 1
        comment = []
        while j >= 0 and lines[j].startswith("#"):
            comment.append(lines[j])
            j -= 1
        text = "\n".join(reversed(comment))
        aten, nodes = _ORIGINAL_ATEN.search(text), _SOURCE_NODES.search(text)
        out[match.group(1)] = {"aten": _names(aten.group(1)) if aten else [],
                               "nodes": _names(nodes.group(1)) if nodes else []}
    return out


def _names(text: str) -> list[str]:
    return [n.strip() for n in text.split(",") if n.strip()]


@functools.lru_cache(maxsize=256)
def _fused_in_file(filename: str) -> dict[str, dict[str, list[str]]]:
    try:
        return fused_ops(Path(filename).read_text(errors="replace"))
    except OSError:
        return {}


def inductor_record(seq: int, range_name: str, kernel_name: str, arg_names: Sequence[str],
                    args: Sequence[object], inductor_meta: dict[str, Any],
                    fused: dict[str, list[str]] | None, source: str | None = None) -> TraceRecord:
    """The trace record (plan config) of one launch of an Inductor kernel."""
    read, write, tensors_read, tensors_written = kernel_minimum(
        arg_names, args, inductor_meta.get("mutated_arg_names") or (), source)
    flops = inductor_meta.get("kernel_flop")
    if flops is None:
        flops = _template_mm_flops(dict(zip(arg_names, args, strict=False)))
    record = make_record("triton", seq, kernel_name, range_name, [io_entry(t) for t in tensors_read],
                         [io_entry(t) for t in tensors_written], read, write,
                         None if flops is None else int(flops),
                         main=io_entry(max(tensors_written, key=view_bytes)) if tensors_written else None)
    # The storages it moves, for the fused minimum (memtraffic.inprogram.liveness; one view per storage)
    record["reads"] = identities(tensors_read, 0, _largest)
    record["writes"] = identities(tensors_written, 0, _largest)
    fused = fused or {}
    params: dict[str, object] = {"fused_aten": fused.get("aten", []), "source_nodes": fused.get("nodes", [])}
    if fused.get("aten") == [] or not fused:
        params["fused_aten_note"] = "the launching module names no aten ops for this kernel"
    if inductor_meta.get("kernel_num_gb") is not None:  # Inductor's own estimate, beside ours
        params["inductor_estimate_bytes"] = int(float(inductor_meta["kernel_num_gb"]) * 1e9)
    record["params"] = params
    return record


def _template_mm_flops(named: dict[str, object]) -> int | None:
    """2*M*N*K (times the batch) of a matmul template's launch (inputs arg_A [.., M, K], arg_B [.., K, N])."""
    a, b = named.get("arg_A"), named.get("arg_B")
    if a is None or b is None or not (_is_tensor(a) and _is_tensor(b)) or min(len(a.shape), len(b.shape)) < 2:
        return None
    batch = 1
    for d in a.shape[:-2]:
        batch *= int(d)
    return 2 * batch * int(a.shape[-2]) * int(a.shape[-1]) * int(b.shape[-1])


# --- the ranges ---------------------------------------------------------------------------------------------

_local = threading.local()  # .open: our `mt|` ranges open on this thread (see track_ranges)


def signature(kernel: str, args: Sequence[object], kwargs: dict[str, object]) -> tuple[object, ...]:
    """What a launch's traffic may depend on, as plain values: the kernel, each tensor's shape, strides,
    dtype, device, alignment (data_ptr % 16) and which earlier argument shares its storage, the
    scalars, and the plain keyword arguments (constexprs, grid)."""
    seen: dict[int, int] = {}
    parts: list[object] = [kernel]
    for i, a in enumerate(args):
        if _is_tensor(a):
            key = _storage(a)
            shared = seen.setdefault(key, i)
            ptr = getattr(a, "data_ptr", None)  # a recorded stand-in has none
            parts.append((tuple(a.shape), tuple(a.stride()), str(a.dtype), str(getattr(a, "device", "")),
                          ptr() % 16 if ptr is not None else None, shared))
        elif isinstance(a, (int, float, bool, str)) or a is None:
            parts.append(a)
        else:
            parts.append(type(a).__name__)
    parts += [(k, v) for k, v in sorted(kwargs.items()) if isinstance(v, (int, float, bool, str, tuple))]
    return tuple(parts)


def _decide(name: str, sig: tuple[object, ...]) -> tuple[launches.Decision, str]:
    """(decision, range to push): memtraffic.inprogram.distinct decides whether this call is measured or a
    repeat of an earlier one with the same signature (its range then one ncu leaves out)."""
    decision = distinct.decide(name, sig)
    return decision, decision.range


def _done(decision: launches.Decision, record: TraceRecord) -> None:
    distinct.done(decision)
    add_decision(record, decision)


def _push(name: str) -> None:
    import torch

    torch.cuda.nvtx.range_push(name)


def _pop() -> None:
    import torch

    torch.cuda.nvtx.range_pop()


def inside_our_range() -> bool:
    """True while an `mt|` range (op, region, variant) is open on this thread (track_ranges counts them)."""
    return bool(getattr(_local, "open", 0))


def track_ranges() -> None:
    """Count our ranges open on each thread by wrapping torch.cuda.nvtx.range_push/pop (the tracer's) and
    pointing memtraffic.region at them (a region pushes through the first NVTX library it finds)."""
    import torch

    nvtx = torch.cuda.nvtx
    if getattr(nvtx.range_push, "_memtraffic", False):
        return
    push: Callable[[str], object] = nvtx.range_push
    pop: Callable[[], object] = nvtx.range_pop
    stack_of = _stack

    def range_push(msg: str) -> object:
        ours = isinstance(msg, str) and msg.startswith("mt|")
        stack_of().append(ours)
        if ours:
            _local.open = getattr(_local, "open", 0) + 1
        return push(msg)

    def range_pop() -> object:
        stack = stack_of()
        if stack and stack.pop():
            _local.open -= 1
        return pop()

    range_push._memtraffic = True  # type: ignore[attr-defined]
    nvtx.range_push, nvtx.range_pop = range_push, range_pop
    from memtraffic.inprogram import regions

    if torch.cuda.is_available():
        regions.use_nvtx(nvtx.range_push, nvtx.range_pop)


def _stack() -> list[bool]:
    if not hasattr(_local, "stack"):
        _local.stack = []
    stack: list[bool] = _local.stack  # per thread: True for each open range of ours
    return stack


def _settle(autotuner: Any, args: Sequence[Any], kwargs: dict[str, object]) -> None:
    """Compile and autotune a kernel before its first launch, as run() would, so that the benchmark
    launches of autotuning fall outside the launch's range. Any failure leaves it to run()."""
    launchers = getattr(autotuner, "launchers", None)
    if launchers is None or len(launchers) == 1:
        return
    from torch.utils._python_dispatch import _disable_current_modes

    try:
        # without the op tracer: the benchmark's own ops (a cache flush per repetition) are no op of the
        # program (H100, torch 2.11: hundreds of traced zero_ calls, each profiled)
        with _disable_current_modes():
            if len(launchers) == 0:
                autotuner.precompile()
            if len(autotuner.launchers) > 1:
                autotuner.autotune_to_one_config(*args, **kwargs)
    except Exception:  # noqa: BLE001 - run() does it again and raises what is wrong
        pass


def _wrap_inductor(run: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(run)
    def traced_run(self: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("benchmark_run") or paused():  # outside the program's traced window
            return run(self, *args, **kwargs)
        meta = getattr(self, "inductor_meta", None) or {}
        kernel = str(meta.get("kernel_name") or getattr(getattr(self, "fn", None), "__name__", "triton"))
        seq = next_seq()
        _settle(self, args, {k: v for k, v in kwargs.items() if k != "stream"})
        caller = sys._getframe(1).f_code.co_filename
        fused = _fused_in_file(caller).get(kernel) or _fused_in_file(caller).get(
            getattr(getattr(self, "fn", None), "__name__", ""))
        arg_names = list(getattr(getattr(self, "fn", None), "arg_names", None)
                         or (getattr(self, "triton_meta", None) or {}).get("signature", {}))
        decision, name = _decide(f"{RANGE_PREFIX}{seq}|{kernel}",
                                 signature(kernel, args, {k: v for k, v in kwargs.items() if k != "stream"}))
        _push(name)
        try:
            out = run(self, *args, **kwargs)
        finally:
            _pop()
        record = inductor_record(seq, name, kernel, arg_names, args, meta, fused,
                                 getattr(getattr(self, "fn", None), "src", None))
        _done(decision, record)
        emit(record)
        return out

    traced_run._memtraffic = True  # type: ignore[attr-defined]
    return traced_run


def _wrap_jit(run: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(run)
    def traced_run(self: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("warmup") or inside_our_range() or getattr(_local, "benchmarking", False) or paused():
            return run(self, *args, **kwargs)
        kernel = str(getattr(self, "__name__", None) or getattr(getattr(self, "fn", None), "__name__",
                                                                "triton"))
        seq = next_seq()
        decision, name = _decide(f"{RANGE_PREFIX}{seq}|{kernel}", signature(kernel, args, kwargs))
        _push(name)
        try:
            out = run(self, *args, **kwargs)
        finally:
            _pop()
        tensors = [a for a in args if _is_tensor(a)]
        record = make_record("triton", seq, kernel, name, [io_entry(t) for t in tensors], [], 0, 0, None)
        record.update({"min_read_bytes": None, "min_write_bytes": None})
        record["params"] = {"minimum": "none: a Triton kernel outside Inductor; wrap it in memtraffic.region "
                                      "to give its minimum"}
        _done(decision, record)
        emit(record)
        return out

    traced_run._memtraffic = True  # type: ignore[attr-defined]
    return traced_run


def _wrap_bench(bench: Callable[..., Any]) -> Callable[..., Any]:
    """triton.autotune's benchmark of one config: its launches get no range (as Inductor's autotuning)."""
    @functools.wraps(bench)
    def quiet_bench(*args: Any, **kwargs: Any) -> Any:
        was = getattr(_local, "benchmarking", False)
        _local.benchmarking = True
        try:
            return bench(*args, **kwargs)
        finally:
            _local.benchmarking = was

    quiet_bench._memtraffic = True  # type: ignore[attr-defined]
    return quiet_bench


def install() -> list[str]:
    """Wrap the launch paths that can be imported; returns which (for the run's record)."""
    wrapped = []
    try:
        from triton.runtime.autotuner import Autotuner

        if hasattr(Autotuner, "_bench") and not getattr(Autotuner._bench, "_memtraffic", False):
            Autotuner._bench = _wrap_bench(Autotuner._bench)
    except ImportError:
        pass
    try:
        from triton.runtime.jit import JITFunction

        if not getattr(JITFunction.run, "_memtraffic", False):
            JITFunction.run = _wrap_jit(JITFunction.run)
        wrapped.append("triton.JITFunction.run")
    except ImportError:
        pass
    if INDUCTOR_MODULE in sys.modules:
        _wrap_caching_autotuner(sys.modules[INDUCTOR_MODULE])
    elif not any(isinstance(f, AfterImport) and f.name == INDUCTOR_MODULE for f in sys.meta_path):
        sys.meta_path.insert(0, AfterImport(INDUCTOR_MODULE, _wrap_caching_autotuner))
    wrapped.append("inductor.CachingAutotuner.run")
    track_ranges()
    return wrapped


# Inductor's launch path is wrapped when Inductor imports it (AfterImport): importing it as torch itself
# is imported (where install runs) would cost every program Inductor's import.
INDUCTOR_MODULE = "torch._inductor.runtime.triton_heuristics"


def _wrap_caching_autotuner(module: Any) -> None:
    cls = getattr(module, "CachingAutotuner", None)
    if cls is not None and not getattr(cls.run, "_memtraffic", False):
        cls.run = _wrap_inductor(cls.run)


class AfterImport(importlib.abc.MetaPathFinder):
    """Runs `then(module)` once the module `name` has been imported (by whoever imports it)."""

    def __init__(self, name: str, then: Callable[[Any], None]) -> None:
        self.name, self.then = name, then

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        load = spec.loader.exec_module

        def exec_module(module: Any) -> None:
            load(module)
            self.then(module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec
