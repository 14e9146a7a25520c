"""The trace: one JSON record per traced op call or region, appended to $MEMTRAFFIC_TRACE.

Torch-free: regions (JAX, CuPy) and the reading side use it; memtraffic.inprogram.tracer (aten ops)
adds torch.
Each record is a plan config (`range`, `kind`, `seq`, `pid`, `op`, `variant`, `shape`, `dtype`,
`params`, `inputs`, `outputs`, `min_read_bytes`, `min_write_bytes`, `min_note`, `model_flops`,
`pred_read_bytes`, `pred_write_bytes`), so analysis joins each kernel to the innermost `mt|` NVTX
range it ran in and takes that range's minimum. Records of torch ops and Inductor kernels also name the
storages they move (`reads`, `writes`: [storage, bytes] pairs, storage the data pointer of the tensors'
storage, None for counted parts of no one tensor) and `freed`, the storages whose last tensor died since
the previous record: memtraffic.analysis.floor follows the data from op to op with them (traces written
before carry none). Several processes may append to one file: each
record is one os.write of one line to a file opened with O_APPEND.
"""

from __future__ import annotations

import itertools
import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from memtraffic.runfolder.records import TensorEntry, TraceKind, TraceRecord
from memtraffic.vocab.files import require_file
from memtraffic.vocab.launches import Decision

TRACE_ENV = "MEMTRAFFIC_TRACE"  # the JSONL file every process of the program appends to
TORCH_OPS_ENV = "MEMTRAFFIC_TORCH_OPS"  # sitecustomize traces the program's aten ops: a TRACE_FROM key
TORCH_MARK_ENV = "MEMTRAFFIC_TORCH_MARK"  # a file created when the traced program imports torch; the
# tracer's warnings (one line each) are appended to it
# A JSON-lines file of {event: wall time}: the program's start, torch imported, the tracer ready
# (memtraffic/_inject/sitecustomize.py stamps them; read_startup reads them).
STARTUP_ENV = "MEMTRAFFIC_STARTUP"
STARTUP_EVENTS = ("program_start", "torch_imported", "tracer_ready")
# When tracing starts (MEMTRAFFIC_TORCH_OPS): the whole program, or from its first nn.Module forward
# (leaves initialisation out), or only between cudaProfilerStart and cudaProfilerStop (the calls ncu
# profiles under --profile-from-start off).
TRACE_FROM = {"1": "start", "forward": "first forward", "window": "profiler window"}

# Program order, shared by op calls and regions, so a region's seq comes before its ops'.
_seq = itertools.count()
_sinks: list[list[TraceRecord]] = []  # in-memory lists of open memtraffic.ops() blocks
_sinks_lock = threading.Lock()
_fd: tuple[str, int] | None = None  # (path, descriptor) of the open trace file
_freed: list[int] = []  # storages freed since the last record (memtraffic.inprogram.liveness appends)

_SHORT_DTYPES = {"float32": "fp32", "float": "fp32", "float16": "fp16", "half": "fp16", "bfloat16": "bf16",
                 "float64": "fp64", "double": "fp64"}


def next_seq() -> int:
    return next(_seq)  # atomic under the GIL: autograd threads share the counter safely


def short_dtype(dtype: object) -> str:
    """torch.float32, numpy/cupy/jax float32 -> 'fp32'; others keep their own name ('int64', 'bool')."""
    text = str(dtype).removeprefix("torch.")
    return _SHORT_DTYPES.get(text, text)


def make_record(kind: TraceKind, seq: int, op: str, range_name: str, inputs: list[TensorEntry],
                outputs: list[TensorEntry], read_bytes: int, write_bytes: int,
                flops: int | None, *, note: str = "", main: TensorEntry | None = None) -> TraceRecord:
    """A plan config; `shape`/`dtype` are those of `main` (an op's result), else of the first input,
    else of the first output ([] and '' without any). `min_note` says where the minimum is a bound
    (data the tracer could not read) rather than exact ('' when exact)."""
    empty: TensorEntry = {"shape": [], "dtype": ""}
    first = main or (inputs[0] if inputs else outputs[0] if outputs else empty)
    return {
        "range": range_name, "kind": kind, "seq": seq, "pid": os.getpid(), "op": op, "variant": "",
        "shape": list(first["shape"]), "dtype": first["dtype"], "params": {},
        "inputs": inputs, "outputs": outputs,
        "min_read_bytes": int(read_bytes), "min_write_bytes": int(write_bytes), "min_note": note,
        "model_flops": None if flops is None else int(flops),
        "pred_read_bytes": None, "pred_write_bytes": None,
    }


def add_decision(record: TraceRecord, decision: Decision) -> None:
    """What a launch decision (memtraffic.vocab.launches) adds to the call's trace record: its signature,
    and for a repeat, `repeat` and the range it reuses."""
    record["signature"] = decision.signature
    if not decision.measured:
        record["repeat"] = True
        record["reuses"] = decision.reuses


_paused = threading.Event()  # set while a program's tracer waits (first forward, the profiler window)


def pause(paused: bool) -> None:
    """The program's op tracer waits (True) or records (False): launches of generated kernels follow it,
    so a trace made in a profiler window holds only the window's calls."""
    if paused:
        _paused.set()
    else:
        _paused.clear()


def paused() -> bool:
    return _paused.is_set()


def end_region() -> None:
    """The traced region ends (a profiler window stops, an ops() block exits): the storages freed since
    the last record were freed inside it, so they go to the trace now (`freed_after` of the last record;
    a trace file gets a line of its own that read_trace joins to the record before it)."""
    freed = _drain_freed()
    if not freed:
        return
    with _sinks_lock:
        lasts = {id(sink[-1]): sink[-1] for sink in _sinks if sink}  # nested blocks share their records
    for record in lasts.values():
        record.setdefault("freed_after", []).extend(freed)
    path = os.environ.get(TRACE_ENV)
    if path:
        os.write(_trace_fd(path), (json.dumps({"freed_after": freed, "pid": os.getpid()}) + "\n").encode())


def note_freed(storage: int) -> None:
    """A storage's last tensor died: the next record lists it in `freed`. No lock: it runs from weakref
    callbacks, at any point of any thread (list.append is atomic under the GIL)."""
    _freed.append(storage)


def _drain_freed() -> list[int]:
    n = len(_freed)
    freed = _freed[:n]
    del _freed[:n]
    return freed


def emit(record: TraceRecord) -> None:
    """Hand the record to open memtraffic.ops() blocks and append it to $MEMTRAFFIC_TRACE if set. A record
    that names storages (`reads`/`writes`) gets `freed` first: the storages freed since the last one."""
    if "reads" in record or "writes" in record:
        freed = _drain_freed()
        if freed:
            record["freed"] = freed
    with _sinks_lock:
        for sink in _sinks:
            sink.append(record)
    path = os.environ.get(TRACE_ENV)
    if path:
        os.write(_trace_fd(path), (json.dumps(record) + "\n").encode())


def _trace_fd(path: str) -> int:
    global _fd
    if _fd is None or _fd[0] != path:
        if _fd is not None:
            os.close(_fd[1])
        _fd = (path, os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644))
    return _fd[1]


@contextmanager
def collect() -> Iterator[list[TraceRecord]]:
    """The records emitted in this process while the block runs (every thread), in emission order."""
    records: list[TraceRecord] = []
    with _sinks_lock:
        _sinks.append(records)
    try:
        yield records
    finally:
        end_region()
        with _sinks_lock:
            _sinks.remove(records)


def read_trace(path: str | Path) -> list[dict[str, object]]:
    """The records of a trace file, in program order per process (processes in order of first record).

    A line that is not a whole record (the program died mid-write) is skipped, not fatal: the rest of a
    failed program's trace still explains what it ran. No file: no records; anything else by its name (a
    folder, a FIFO) is a ReportError (vocab.files.require_file). The records are JSON as read:
    records.trace_records checks each."""
    path = Path(path)
    if not require_file(path, "the run folder is damaged (restore the file, or profile again)"):
        return []
    records: list[dict[str, object]] = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and isinstance(record.get("range"), str):
            records.append(record)
        elif isinstance(record, dict) and isinstance(record.get("freed_after"), list):  # end_region's
            last = next((r for r in reversed(records) if r.get("pid") == record.get("pid")), None)
            if last is not None:
                before: list[int] = list(last.get("freed_after") or [])  # type: ignore[call-overload]
                last["freed_after"] = before + list(record["freed_after"])
    first: dict[object, int] = {}
    for r in records:
        first.setdefault(r.get("pid"), len(first))
    return sorted(records, key=lambda r: (first[r.get("pid")], r.get("seq", 0)))


def read_startup(path: Path) -> dict[str, float]:
    """Each start-up event's first wall time in a $MEMTRAFFIC_STARTUP file (the program's own process
    stamps first; processes it starts later). Lines cut or not of that form are skipped; no file: {}."""
    found: dict[str, float] = {}
    for line in path.read_text(errors="replace").splitlines() if path.is_file() else []:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            for event, t in entry.items():
                if event in STARTUP_EVENTS and isinstance(t, int | float) and not isinstance(t, bool):
                    found.setdefault(event, float(t))
    return found
