"""The compulsory traffic of one aten op call: the generic rule and the ops it is wrong for.

The convention, for every op: the minimum is the bytes of the distinct elements any correct
implementation must read and write, each counted once at its element size (no rounding to 32-byte
sectors, so a scattered access such as one logit per row of a loss counts its element, and the sectors
hardware moves around it show as excess). Storage, not tensor objects, decides "distinct": two views of
one storage (`A @ A.T`, `x[1:] - x[:-1]`) are read once, as the union of the byte ranges they address.

Generic rule: each input is read once, each output written once; an in-place op's target read and
written; `out=` arguments and the targets of ops that overwrite without reading (copy_, fill_, random
fills) written only; views, aliases and allocations move nothing. Ops where that is wrong (`RULES`):

- gathers (embedding, index_select, index, gather, take) read the distinct rows/elements they index;
- scatters in place (index_put_, index_add_, index_copy_, index_fill_, index_reduce_, scatter_,
  scatter_add_, scatter_reduce_, masked_fill_, masked_scatter_, put_) write, and read when they
  accumulate, only the distinct rows/elements they touch, plus the index and the source they use;
- losses (nll_loss forward, nll_loss2d forward) read one logit per counted row, the targets, and the
  weights of the distinct targets; their backward reads the targets, not the logits, and writes the
  whole gradient;
- metadata-only in-place ops (t_, transpose_, unsqueeze_, squeeze_, as_strided_, resize_, set_, detach_
  ...) move nothing;
- backward ops read only what their formula uses: pooling backward not the forward input,
  convolution_backward the weight only for the input gradient and the input only for the weight
  gradient, norm backward never the bias, the weight only for the input gradient;
- convolution reads only the input pixels its windows sample (stride larger than the kernel skips some).

Data-dependent rules count distinct indices by reading index tensors that live on the CPU. A CUDA
index tensor is never read (that would synchronise the device): the rule then assumes every index
distinct, an upper bound on the minimum, and says so in the record's `min_note`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import torch

aten = torch.ops.aten

RUN_LIMIT = 1 << 20  # contiguous runs enumerated per view for storage unions; beyond, a bound is used


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


def storage_of(t: torch.Tensor) -> int | None:
    """The data pointer of the tensor's storage; None for tensors without one (meta, fake, sparse)."""
    if t.layout != torch.strided:
        return None
    try:
        ptr = t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return None
    return ptr or None  # 0: no allocation (empty or meta), aliases nothing


def _runs(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(starts, ends): the byte ranges of the storage a strided tensor addresses, as contiguous runs;
    None when there would be more than RUN_LIMIT of them."""
    dims = sorted(((size, stride) for size, stride in zip(t.shape, t.stride(), strict=True)
                   if size > 1 and stride != 0), key=lambda d: -d[1])
    run = 1
    while dims and dims[-1][1] == run:  # the innermost dense dimensions make one run
        run *= dims.pop()[0]
    if math.prod(size for size, _ in dims) > RUN_LIMIT:
        return None
    starts = torch.tensor([t.storage_offset()], dtype=torch.int64)
    for size, stride in dims:
        starts = (starts[:, None] + torch.arange(size, dtype=torch.int64) * stride).flatten()
    size = t.element_size()
    return starts * size, (starts + run) * size


def _union_length(starts: torch.Tensor, ends: torch.Tensor) -> int:
    order = starts.argsort()
    s, e = starts[order], ends[order]
    reach = torch.cummax(e, 0).values
    before = torch.cat([s[:1], reach[:-1]])  # how far the earlier ranges reach
    return int(torch.clamp(e - torch.maximum(s, before), min=0).sum())


def union_bytes(tensors: Sequence[torch.Tensor]) -> int:
    """Bytes of the distinct storage the tensors address: tensors (views) of one storage count the
    union of their ranges once; a tensor passed twice counts once."""
    by_storage: dict[object, list[torch.Tensor]] = {}
    for t in tensors:
        ptr = storage_of(t)
        by_storage.setdefault(ptr if ptr is not None else ("id", id(t)), []).append(t)
    total = 0
    for views in by_storage.values():
        if len(views) == 1:
            total += tensor_bytes(views[0])
            continue
        found = [_runs(v) for v in views if v.numel()]
        runs = [r for r in found if r is not None]
        if len(runs) < len(found):  # too many runs to enumerate: no view counts twice
            total += min(sum(map(tensor_bytes, views)), max(map(tensor_bytes, views)) * len(views))
            continue
        if runs:
            total += _union_length(torch.cat([r[0] for r in runs]), torch.cat([r[1] for r in runs]))
    return total


# --- reading index tensors ------------------------------------------------------------------------------

def readable(t: torch.Tensor) -> bool:
    """Index values may be read: a plain tensor on the CPU (reading one on a GPU would synchronise)."""
    return type(t) is torch.Tensor and t.device.type == "cpu" and t.layout == torch.strided


def _count(t: torch.Tensor) -> int:
    return int(t.shape[0])


def distinct_values(index: torch.Tensor) -> int | None:
    """Distinct values of an index tensor; None where it cannot be read without synchronising."""
    return _count(torch.unique(index.flatten())) if readable(index) else None


def true_count(mask: torch.Tensor, shape: Sequence[int]) -> int | None:
    """Elements a boolean mask selects once broadcast to `shape`; None where it cannot be read."""
    return _count(torch.nonzero(mask.expand(*shape))) if readable(mask) else None


def distinct_positions(index: torch.Tensor, dim: int) -> int | None:
    """Distinct elements that gather/scatter address along `dim` with this index (index value x the
    index's other coordinates); None where the index cannot be read."""
    if not readable(index):
        return None
    if index.dim() == 0:
        return 1
    dim %= index.dim()
    inner = math.prod(index.shape[dim + 1:])
    pos = torch.arange(index.numel(), dtype=torch.int64).reshape(index.shape)
    others = (pos // (index.shape[dim] * inner)) * inner + pos % inner  # position without `dim`
    key = index.to(torch.int64) * (index.numel() // max(index.shape[dim], 1)) + others
    return _count(torch.unique(key.flatten()))


def distinct_tuples(indices: Sequence[torch.Tensor]) -> int | None:
    """Distinct index tuples of broadcast integer index tensors (advanced indexing); None if unreadable."""
    if not all(readable(i) for i in indices):
        return None
    flat = torch.stack([i.to(torch.int64).flatten() for i in torch.broadcast_tensors(*indices)], dim=1)
    return _count(torch.unique(flat, dim=0))


# --- rules ----------------------------------------------------------------------------------------------

@dataclass
class CallMinimum:
    """What one call must move: whole tensors (unioned by storage) plus counted parts, in bytes."""

    read: list[torch.Tensor] = field(default_factory=list)
    write: list[torch.Tensor] = field(default_factory=list)
    read_bytes: int = 0
    write_bytes: int = 0
    notes: list[str] = field(default_factory=list)

    def totals(self) -> tuple[int, int, str]:
        return (union_bytes(self.read) + self.read_bytes, union_bytes(self.write) + self.write_bytes,
                "; ".join(dict.fromkeys(self.notes)))


UNREAD = "index on the GPU not read (no device sync): assumes distinct indices, an upper bound"


def _slice_bytes(t: torch.Tensor, dims: Sequence[int]) -> int:
    """Bytes of one slice of `t` with the given dimensions fixed (broadcast dimensions count once)."""
    fixed = {d % t.dim() for d in dims} if t.dim() else set()
    n = math.prod(size for d, (size, stride) in enumerate(zip(t.shape, t.stride(), strict=True))
                  if d not in fixed and stride != 0)
    return n * t.element_size()


def _rows(traffic: CallMinimum, t: torch.Tensor, dim: int, index: torch.Tensor) -> int:
    """Bytes of the distinct slices of `t` along `dim` that `index` picks."""
    if t.numel() == 0 or index.numel() == 0:
        return 0
    n = distinct_values(index)
    if n is None:
        n = min(index.numel(), t.shape[dim])
        traffic.notes.append(UNREAD)
    return n * _slice_bytes(t, [dim])


def _positions(traffic: CallMinimum, t: torch.Tensor, dim: int, index: torch.Tensor) -> int:
    """Bytes of the distinct elements of `t` that gather/scatter address with `index` along `dim`."""
    if t.numel() == 0 or index.numel() == 0:
        return 0
    n = distinct_positions(index, dim)
    if n is None:
        n = min(index.numel(), t.numel())
        traffic.notes.append(UNREAD)
    return n * t.element_size()


def _indexed(traffic: CallMinimum, t: torch.Tensor, indices: Sequence[torch.Tensor | None]) -> int:
    """Bytes of the distinct elements of `t` that advanced indexing `t[indices]` addresses."""
    given = []  # (first dimension of `t` it indexes, index); a boolean mask covers as many as it has
    dim = 0
    for i in indices:
        if i is not None:
            given.append((dim, i))
        dim += i.dim() if i is not None and i.dtype == torch.bool else 1
    if t.numel() == 0 or not given:
        return 0
    fixed = [d for start, i in given for d in range(start, start + (i.dim() if i.dtype == torch.bool else 1))]
    count = 1  # masks and integer indices together broadcast jointly: their product bounds the tuples
    masks = [i for _, i in given if i.dtype == torch.bool]
    ints = [i for _, i in given if i.dtype != torch.bool]
    for (d, m) in ((d, i) for d, i in given if i.dtype == torch.bool):
        n = true_count(m, t.shape[d:d + m.dim()])
        count *= n if n is not None else m.numel()
    if ints:
        n = distinct_tuples(ints)
        if n is None:
            shape = torch.broadcast_shapes(*(i.shape for i in ints))
            n = min(math.prod(shape), math.prod(t.shape[d] for d, i in given if i.dtype != torch.bool))
        count *= n
    if (masks and any(not readable(m) for m in masks)) or (ints and not all(readable(i) for i in ints)):
        traffic.notes.append(UNREAD)
    return min(count * _slice_bytes(t, fixed), tensor_bytes(t))


# An aten op's arguments by schema name: tensors, ints, lists of either, strings or None depending on the
# op, so object; the rules read what their op's schema gives (_tensor) or test the type (isinstance).
OpArgs = dict[str, object]
Rule = Callable[[CallMinimum, OpArgs, list[torch.Tensor]], None]


def _tensor(a: OpArgs, name: str) -> torch.Tensor:
    """Argument `name`, a tensor in the schema of every op whose rule reads it so."""
    return cast(torch.Tensor, a[name])


def _int(a: OpArgs, name: str) -> int:
    """Argument `name`, an int in the schema of every op whose rule reads it so."""
    return cast(int, a[name])


def _indices(a: OpArgs) -> list[torch.Tensor | None]:
    """aten.index's `indices`: a tensor (or None) per indexed dimension."""
    return cast("list[torch.Tensor | None]", a["indices"])


def _flags(mask: object) -> Sequence[bool]:
    """A backward op's output_mask (which gradients are requested); all of them where it has none."""
    return cast("Sequence[bool]", mask or [True] * 3)


def _whole(traffic: CallMinimum, *values: Any) -> None:
    traffic.read += [v for v in values if isinstance(v, torch.Tensor)]


def _embedding(tr: CallMinimum, a: OpArgs, out: list[torch.Tensor]) -> None:
    tr.read_bytes += _rows(tr, _tensor(a, "weight"), 0, _tensor(a, "indices"))
    _whole(tr, a["indices"])
    tr.write += out


def _index_select(tr: CallMinimum, a: OpArgs, out: list[torch.Tensor]) -> None:
    tr.read_bytes += _rows(tr, _tensor(a, "self"), _int(a, "dim"), _tensor(a, "index"))
    _whole(tr, a["index"])
    tr.write += out


def _index(tr: CallMinimum, a: OpArgs, out: list[torch.Tensor]) -> None:
    tr.read_bytes += _indexed(tr, _tensor(a, "self"), _indices(a))
    _whole(tr, *_indices(a))
    tr.write += out


def _gather(tr: CallMinimum, a: OpArgs, out: list[torch.Tensor]) -> None:
    tr.read_bytes += _positions(tr, _tensor(a, "self"), _int(a, "dim"), _tensor(a, "index"))
    _whole(tr, a["index"])
    tr.write += out


def _flat(tr: CallMinimum, t: torch.Tensor, index: torch.Tensor) -> int:
    """Bytes of the distinct elements of `t` that a flat index (take, put_) addresses."""
    n = distinct_values(index)
    if n is None:
        n = index.numel()
        tr.notes.append(UNREAD)
    return min(n * t.element_size(), tensor_bytes(t))


def _take(tr: CallMinimum, a: OpArgs, out: list[torch.Tensor]) -> None:
    tr.read_bytes += _flat(tr, _tensor(a, "self"), _tensor(a, "index"))
    _whole(tr, a["index"])
    tr.write += out


def _source_part(src: Any, elements: int) -> int:
    """Bytes a scatter reads of its source: at most `elements` of it (a scalar source: none)."""
    if not isinstance(src, torch.Tensor):
        return 0
    return min(tensor_bytes(src), elements * src.element_size())


def _index_put_(tr: CallMinimum, a: OpArgs, out: list[torch.Tensor]) -> None:
    touched = _indexed(tr, _tensor(a, "self"), _indices(a))
    _whole(tr, *_indices(a), a["values"])
    tr.read_bytes += touched if a.get("accumulate") else 0
    tr.write_bytes += touched


def _index_add_(tr: CallMinimum, a: OpArgs, out: list[torch.Tensor]) -> None:
    touched = _rows(tr, _tensor(a, "self"), _int(a, "dim"), _tensor(a, "index"))
    _whole(tr, a["index"], a["source"])
    tr.read_bytes += touched if a.get("include_self", True) else 0
    tr.write_bytes += touched


def _index_copy_(tr: CallMinimum, a: OpArgs, out: list[torch.Tensor]) -> None:
    touched = _rows(tr, _tensor(a, "self"), _int(a, "dim"), _tensor(a, "index"))
    _whole(tr, a["index"], a.get("source"), a.get("value"))
    tr.write_bytes += touched


def _scatter_(tr: CallMinimum, a: OpArgs, out: list[torch.Tensor]) -> None:
    index = _tensor(a, "index")
    touched = _positions(tr, _tensor(a, "self"), _int(a, "dim"), index)
    _whole(tr, index)
    tr.read_bytes += _source_part(a.get("src", a.get("value")), index.numel())
    reduces = a.get("reduce") is not None and a.get("include_self", True)
    tr.read_bytes += touched if reduces else 0
    tr.write_bytes += touched


def _scatter_add_(tr: CallMinimum, a: OpArgs, out: list[torch.Tensor]) -> None:
    _scatter_(tr, {**a, "reduce": "sum"}, out)


def _masked(tr: CallMinimum, a: OpArgs) -> int:
    self, mask = _tensor(a, "self"), _tensor(a, "mask")
    n = true_count(mask, self.shape)
    if n is None:
        n = self.numel()
        tr.notes.append("mask on the GPU not read (no device sync): assumes every element selected, "
                        "an upper bound")
    _whole(tr, mask)
    return n


def _masked_fill_(tr: CallMinimum, a: OpArgs, out: list[torch.Tensor]) -> None:
    n = _masked(tr, a)
    _whole(tr, a.get("value"))
    tr.write_bytes += min(n * _tensor(a, "self").element_size(), tensor_bytes(_tensor(a, "self")))


def _masked_scatter_(tr: CallMinimum, a: OpArgs, out: list[torch.Tensor]) -> None:
    n = _masked(tr, a)
    tr.read_bytes += _source_part(a["source"], n)
    tr.write_bytes += min(n * _tensor(a, "self").element_size(), tensor_bytes(_tensor(a, "self")))


def _put_(tr: CallMinimum, a: OpArgs, out: list[torch.Tensor]) -> None:
    index = _tensor(a, "index")
    touched = _flat(tr, _tensor(a, "self"), index)
    _whole(tr, index)
    tr.read_bytes += _source_part(a["source"], index.numel())
    tr.read_bytes += touched if a.get("accumulate") else 0
    tr.write_bytes += touched


def _nothing(tr: CallMinimum, a: OpArgs, out: list[torch.Tensor]) -> None:
    return None


def _counted_rows(tr: CallMinimum, target: torch.Tensor, ignore_index: int) -> int:
    """Rows a loss reads a logit of: targets equal to ignore_index read none."""
    if readable(target):
        return _count(torch.nonzero(target.flatten() != ignore_index))
    tr.notes.append("targets on the GPU not read (no device sync): counts every row, an upper bound")
    return target.numel()


def _class_weights(tr: CallMinimum, weight: Any, target: torch.Tensor) -> int:
    if not isinstance(weight, torch.Tensor):
        return 0
    n = distinct_values(target)
    if n is None:
        n = min(target.numel(), weight.numel())
        tr.notes.append(UNREAD)
    return min(n, weight.numel()) * weight.element_size()


def _nll_loss_forward(tr: CallMinimum, a: OpArgs, out: list[torch.Tensor]) -> None:
    logits, target = _tensor(a, "self"), _tensor(a, "target")
    tr.read_bytes += _counted_rows(tr, target, _int(a, "ignore_index")) * logits.element_size()
    tr.read_bytes += _class_weights(tr, a.get("weight"), target)
    _whole(tr, target)
    tr.write += out


def _nll_loss_backward(tr: CallMinimum, a: OpArgs, out: list[torch.Tensor]) -> None:
    # grad_input is zero but for one element per row: all of it is written; the logits are not read
    tr.read_bytes += _class_weights(tr, a.get("weight"), _tensor(a, "target"))
    _whole(tr, a["grad_output"], a["target"], a["total_weight"])
    tr.write += out


def _without(*unread: str, only_if: dict[str, int] | None = None) -> Rule:
    """Backward ops: every tensor argument but `unread` is read; `only_if` {arg: i}: arg read only when
    output_mask[i] (that gradient is requested)."""
    def rule(tr: CallMinimum, a: OpArgs, out: list[torch.Tensor]) -> None:
        mask = _flags(a.get("output_mask"))
        for name, value in a.items():
            if name in unread or (only_if and name in only_if and not mask[only_if[name]]):
                continue
            _whole(tr, *(value if isinstance(value, list | tuple) else [value]))
        tr.write += out
    return rule


def sampled(size: int, out: int, kernel: int, stride: int, padding: int, dilation: int) -> int:
    """Input positions along one dimension that a convolution's windows touch (padding excluded)."""
    if out <= 0 or size <= 0:
        return 0
    if dilation == 1 and stride <= kernel:  # consecutive windows leave no gap
        lo, hi = -padding, (out - 1) * stride - padding + kernel - 1
        return max(0, min(hi, size - 1) - max(lo, 0) + 1)
    pos = (torch.arange(out)[:, None] * stride - padding + torch.arange(kernel)[None] * dilation).flatten()
    return _count(torch.unique(pos[(pos >= 0) & (pos < size)]))


def _conv_input_bytes(x: torch.Tensor, w: torch.Tensor, out_spatial: Sequence[int], a: OpArgs) -> int:
    spatial = x.shape[2:]
    n = len(spatial)

    def per_dim(v: Any) -> list[int]:  # an int or one int per spatial dimension
        values: list[int] = list(v) if isinstance(v, list | tuple) else [v]
        return values * n if len(values) == 1 else values

    if isinstance(a["padding"], str) or len(out_spatial) != n:  # 'same'/'valid' strings: count it all
        return tensor_bytes(x)
    stride, padding, dilation = per_dim(a["stride"]), per_dim(a["padding"]), per_dim(a["dilation"])
    counted = math.prod(sampled(spatial[d], out_spatial[d], w.shape[2 + d], stride[d], padding[d],
                                dilation[d]) for d in range(n))
    return min(tensor_bytes(x), x.shape[0] * x.shape[1] * counted * x.element_size())


def _convolution(tr: CallMinimum, a: OpArgs, out: list[torch.Tensor]) -> None:
    x, w = _tensor(a, "input"), _tensor(a, "weight")
    if a.get("transposed") or not out or x.dim() < 3:
        _whole(tr, x)
    else:
        tr.read_bytes += _conv_input_bytes(x, w, out[0].shape[2:], a)
    _whole(tr, w, a.get("bias"))
    tr.write += out


def _convolution_backward(tr: CallMinimum, a: OpArgs, out: list[torch.Tensor]) -> None:
    mask = cast("Sequence[bool]", a["output_mask"])  # bool[3] in the schema
    x, w, grad = _tensor(a, "input"), _tensor(a, "weight"), _tensor(a, "grad_output")
    _whole(tr, grad)
    if mask[0]:  # the input gradient needs the weight
        _whole(tr, w)
    if mask[1]:  # the weight gradient needs the input pixels the windows sampled
        if a.get("transposed") or x.dim() < 3:
            _whole(tr, x)
        else:
            tr.read_bytes += _conv_input_bytes(x, w, grad.shape[2:], a)
    tr.write += out


def _batch_norm_backward(tr: CallMinimum, a: OpArgs, out: list[torch.Tensor]) -> None:
    # training uses the saved batch statistics, eval the running ones; the weight only for grad_input
    unused = ("running_mean", "running_var") if a.get("train") else ("save_mean", "save_invstd")
    _without(*unused, only_if={"weight": 0})(tr, a, out)


RULES: dict[torch._ops.OpOverloadPacket, Rule] = {
    aten.embedding: _embedding,
    aten.index_select: _index_select,
    aten.index: _index,
    aten._unsafe_index: _index,
    aten.gather: _gather,
    aten.take: _take,
    aten.index_put_: _index_put_,
    aten._index_put_impl_: _index_put_,
    aten.index_add_: _index_add_,
    aten.index_reduce_: _index_add_,
    aten.index_copy_: _index_copy_,
    aten.index_fill_: _index_copy_,
    aten.scatter_: _scatter_,
    aten.scatter_add_: _scatter_add_,
    aten.scatter_reduce_: _scatter_,
    aten.masked_fill_: _masked_fill_,
    aten.masked_scatter_: _masked_scatter_,
    aten.put_: _put_,
    aten.nll_loss_forward: _nll_loss_forward,
    aten.nll_loss2d_forward: _nll_loss_forward,
    aten.nll_loss_backward: _nll_loss_backward,
    aten.nll_loss2d_backward: _nll_loss_backward,
    **{op: _nothing for op in (aten.t_, aten.transpose_, aten.unsqueeze_, aten.squeeze_, aten.as_strided_,
                               aten.resize_, aten.resize_as_, aten.set_, aten.detach_, aten.swapdims_,
                               aten.swapaxes_)},
    aten.max_pool2d_with_indices_backward: _without("self"),
    aten.max_pool3d_with_indices_backward: _without("self"),
    aten.avg_pool2d_backward: _without("self"),
    aten.avg_pool3d_backward: _without("self"),
    aten._adaptive_avg_pool2d_backward: _without("self"),
    aten._adaptive_avg_pool3d_backward: _without("self"),
    aten.adaptive_max_pool2d_backward: _without("self"),
    aten.convolution: _convolution,
    aten.convolution_backward: _convolution_backward,
    aten.native_layer_norm_backward: _without("bias", only_if={"weight": 0}),
    aten.native_group_norm_backward: _without(only_if={"weight": 0}),
    aten.native_batch_norm_backward: _batch_norm_backward,
}


def _packets(*names: str) -> frozenset[Any]:
    """The overload packets of these aten names that this torch has."""
    return frozenset(getattr(aten, n) for n in names if hasattr(aten, n))


# Ops whose traffic depends on the values they are given, not only on shapes and strides: what they
# index, sort, select or count. `memtraffic profile` measures the first --value-calls of each signature.
VALUE_DEPENDENT = _packets(
    # gathers and scatters (the rules above count the distinct rows they touch)
    "embedding", "index_select", "index", "_unsafe_index", "gather", "take", "index_put_", "_index_put_impl_",
    "index_put", "index_add_", "index_add", "index_reduce_", "index_copy_", "index_fill_", "scatter_",
    "scatter", "scatter_add_", "scatter_add", "scatter_reduce_", "scatter_reduce", "masked_fill_",
    "masked_scatter_", "masked_scatter", "put_", "embedding_dense_backward", "embedding_backward",
    "_embedding_bag", "_embedding_bag_backward", "embedding_bag", "gather_backward", "index_select_backward",
    "max_pool2d_with_indices_backward", "max_pool3d_with_indices_backward", "adaptive_max_pool2d_backward",
    "max_unpool2d", "max_unpool3d", "_unsafe_index_put",
    # losses that read one logit per target
    "nll_loss_forward", "nll_loss2d_forward", "nll_loss_backward", "nll_loss2d_backward",
    # sorts, selections and counts
    "sort", "argsort", "topk", "kthvalue", "median", "nanmedian", "mode", "msort", "unique_consecutive",
    "_unique", "_unique2", "unique_dim", "nonzero", "nonzero_static", "masked_select", "bincount", "histc",
    "histogram", "searchsorted", "bucketize", "multinomial", "randperm", "_local_scalar_dense",
)
