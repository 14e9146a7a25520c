"""Distinct-launch profiling on the measuring side: op call signatures and the tracer's measure/reuse
decision (memtraffic.inprogram.distinct), value-dependent ops measured every time."""

from __future__ import annotations

import pytest
import torch

import memtraffic
from memtraffic.inprogram import distinct as state
from memtraffic.inprogram.tracer import call_signature
from memtraffic.vocab import launches

aten = torch.ops.aten


@pytest.fixture
def distinct():
    state.reset(1)
    yield
    state.reset(0)


def _sig(func, *args, **kwargs):
    return call_signature(func, args, kwargs)


def test_signature_keys_shape_strides_dtype_alignment_aliasing_and_scalars():
    x = torch.zeros(64, 64)
    big = torch.zeros(64 * 64 + 8)
    base = _sig(aten.add.Tensor, x, x + 1)
    assert _sig(aten.add.Tensor, torch.ones(64, 64), torch.ones(64, 64)) == base  # other values, same key
    different = [
        _sig(aten.add.Tensor, torch.zeros(64, 32), torch.zeros(64, 32)),  # shape
        _sig(aten.add.Tensor, x.t(), x + 1),  # strides
        _sig(aten.add.Tensor, x.double(), (x + 1).double()),  # dtype
        _sig(aten.add.Tensor, big[1:4097].view(64, 64), x + 1),  # misaligned (offset 4 bytes)
        _sig(aten.add.Tensor, x, x),  # both arguments one storage
        _sig(aten.add.Tensor, x, x + 1, alpha=2),  # a scalar argument
        _sig(aten.sub.Tensor, x, x + 1),  # the overload
    ]
    assert len({base, *different}) == len(different) + 1
    aligned = big[4:4100].view(64, 64)  # 16 bytes in: aligned again
    assert _sig(aten.add.Tensor, aligned, x + 1) == base
    # a learning rate is keyed by sign, a value kernels specialize on by value
    assert _sig(aten.add.Tensor, x, x + 1, alpha=-1e-3) == _sig(aten.add.Tensor, x, x + 1, alpha=-2e-3)
    assert _sig(aten.add.Tensor, x, x + 1, alpha=-1e-3) != _sig(aten.add.Tensor, x, x + 1, alpha=1e-3)
    pows = {launches.signature_digest(_sig(aten.pow.Tensor_Scalar, x, e)) for e in (2.0, 0.5, 3.0, 2.5, 2)}
    assert len(pows) == 5  # the int 2 apart from the float 2.0 too


def test_signature_leaves_out_what_no_address_depends_on():
    """A size-1 dimension's stride and a new_* op's template shape change no kernel's traffic: a decode
    loop's one-token slice of a growing tensor and its mask.new_ones((1, 1)) keep one signature."""
    # the last token of a (1, n) int64 tensor: (1, 1), strides (n, 1), 8 bytes past a 16-byte boundary
    grown = [torch.zeros(1, n, dtype=torch.int64)[:, -1:] for n in (18, 20, 22)]
    assert len({_sig(aten.clone.default, t) for t in grown}) == 1
    assert len({_sig(aten.isin.Tensor_Tensor, t, torch.zeros(1, dtype=torch.int64)) for t in grown}) == 1
    aligned = torch.zeros(1, 19, dtype=torch.int64)[:, -1:]  # 144 bytes in: 16-byte aligned
    assert _sig(aten.clone.default, aligned) != _sig(aten.clone.default, grown[0])  # alignment still counts
    # a dimension of size > 1 keeps its stride
    assert _sig(aten.clone.default, torch.zeros(4, 8)) != _sig(aten.clone.default, torch.zeros(4, 16)[:, :8])
    masks = [torch.ones(1, n, dtype=torch.int64) for n in (16, 17, 18)]
    ones = aten.new_ones.default
    assert len({_sig(ones, m, [1, 1]) for m in masks}) == 1
    assert _sig(ones, masks[0], [1, 1]) != _sig(ones, masks[0], [1, 2])  # the size it is given
    assert _sig(ones, masks[0], [1, 1]) != _sig(ones, masks[0].float(), [1, 1])  # the dtype it takes
    # *_like ops take the template's shape (and layout) for their output: still keyed on it
    assert _sig(aten.ones_like.default, masks[0]) != _sig(aten.ones_like.default, masks[1])


def test_tracer_measures_each_signature_once_and_value_dependent_ops_always(distinct):
    w = torch.randn(16, 16)
    table = torch.randn(10, 16)
    with memtraffic.ops() as records:
        for _ in range(3):
            h = torch.randn(4, 16) @ w
            torch.nn.functional.embedding(torch.tensor([1, 2, 3, 4]), table)
            h.relu()
    mm = [r for r in records if r["op"] == "aten.mm.default"]
    emb = [r for r in records if r["op"] == "aten.embedding.default"]
    assert [r.get("repeat", False) for r in mm] == [False, True, True]
    assert {r["reuses"] for r in mm[1:]} == {mm[0]["range"]}
    assert [r["range"].startswith("mt|rep|op|") for r in mm] == [False, True, True]
    assert len({r["signature"] for r in mm}) == 1
    assert not any(r.get("repeat") for r in emb) and len(emb) == 3


def test_value_dependent_ops_measured_v_times_then_reused():
    state.reset(1, 2)
    table = torch.randn(10, 16)
    try:
        with memtraffic.ops() as records:
            for i in range(4):
                torch.nn.functional.embedding(torch.tensor([i, 2, 3, 4]), table)
    finally:
        state.reset(0)
    emb = [r for r in records if r["op"] == "aten.embedding.default"]
    assert [r.get("repeat", False) for r in emb] == [False, False, True, True]
    assert {r["reuses"] for r in emb[2:]} == {emb[0]["range"]}


def test_every_call_measured_by_default_still_records_signatures():
    state.reset(0)
    with memtraffic.ops() as records:
        for _ in range(2):
            torch.ones(3) * 2
    muls = [r for r in records if r["op"] == "aten.mul.Tensor"]
    assert len(muls) == 2 and not any(r.get("repeat") for r in muls)
    assert muls[0]["signature"] == muls[1]["signature"]


def test_regions_are_measured_every_time_unless_declared_repeating(distinct):
    from memtraffic.runfolder.trace import collect

    a, b = torch.zeros(8), torch.zeros(16)
    with collect() as records:
        for _ in range(2):
            with memtraffic.region("plain", inputs=[a]):
                pass
        for x in (a, a, b):
            with memtraffic.region("same", inputs=[x], repeats_same=True):
                pass
    assert [(r["op"], r.get("repeat", False)) for r in records] == [
        ("plain", False), ("plain", False), ("same", False), ("same", True), ("same", False)]
    assert records[3]["reuses"] == records[2]["range"]
    assert records[3]["range"].startswith("mt|rep|region|same|")
