"""Which storages a traced program still holds: the identities the fused minimum follows (imports torch).

A trace record of an op call or an Inductor kernel names the storages it reads and writes (`reads`,
`writes`: [storage, bytes], memtraffic.runfolder.trace). `watch` keeps a weak reference to each storage
seen; torch keeps one Python object per storage alive as long as the storage lives (views, tensors saved
for backward and the caching allocator's reuse included), so its weakref dies exactly when the memory is
released, and the storage's data pointer goes to the next record's `freed`. A pointer reused by a new
allocation after that is a new storage.
"""

from __future__ import annotations

import contextlib
import functools
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from memtraffic.runfolder.trace import note_freed

_watched: dict[int, weakref.ref[object]] = {}  # storage data pointer -> a weakref to its storage object


def _released(ptr: int, ref: weakref.ref[object]) -> None:
    if _watched.get(ptr) is ref:
        del _watched[ptr]
        note_freed(ptr)


def storage_key(t: Any) -> int | None:
    """The data pointer of the tensor's storage, watched from now on; None without one (meta, sparse,
    fake, an empty allocation)."""
    try:
        storage = t.untyped_storage()
        ptr = int(storage.data_ptr())
    except (AttributeError, RuntimeError, NotImplementedError, TypeError):
        return None
    if not ptr:
        return None
    ref = _watched.get(ptr)
    if ref is None or ref() is not storage:
        with contextlib.suppress(TypeError):  # no weak references: never said to be freed
            _watched[ptr] = weakref.ref(storage, functools.partial(_released, ptr))
    return ptr


View = TypeVar("View")  # a tensor, or what a rule takes for one


def identities(tensors: Iterable[View], counted: int,
               union: Callable[[Sequence[View]], int]) -> list[list[int | None]]:
    """[storage, bytes] of the distinct storages the tensors address (their views unioned by `union`,
    memtraffic.inprogram.op_rules.union_bytes), then [None, counted] for bytes a rule counted apart from
    whole tensors (rows a gather picks); every storage watched."""
    groups: dict[object, list[View]] = {}
    for t in tensors:
        key = storage_key(t)
        groups.setdefault(key if key is not None else ("id", id(t)), []).append(t)
    out: list[list[int | None]] = []
    for group, views in groups.items():
        nbytes = int(union(views))
        if nbytes:
            out.append([group if isinstance(group, int) else None, nbytes])
    if counted:
        out.append([None, int(counted)])
    return out


def watch_all(tensors: Iterable[object]) -> None:
    """Watch these tensors' storages too (an op's views and outputs: a view keeps its storage alive)."""
    for t in tensors:
        storage_key(t)
