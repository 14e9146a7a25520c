"""Per-op minimums on a corpus of real programs, each op call of the special classes checked by hand.

Convention (memtraffic.inprogram.op_rules): element bytes of the distinct data an op must move. The corpus:
a transformer block trained one step (embedding with repeated ids, attention, layer norm, MLP, cross
entropy, backward, AdamW), a small conv net (strided conv, max pool), a StaticCache-like index_copy_,
`A @ A.T`, `x[1:] - x[:-1]`, scatters and metadata-only in-place ops. Every traced call must also lie
between what it must touch and its inputs plus outputs.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import memtraffic
from memtraffic.inprogram import op_rules

F32, I64 = 4, 8
SIZES = {"fp32": 4, "fp16": 2, "bf16": 2, "fp64": 8, "int64": 8, "int32": 4, "bool": 1, "uint8": 1, "int8": 1}


def _bytes(r: dict) -> tuple[int, int]:
    return r["min_read_bytes"], r["min_write_bytes"]


def _calls(records: list[dict], op: str) -> list[dict]:
    return [r for r in records if r["op"] == op]


def _one(records: list[dict], op: str) -> dict:
    (r,) = _calls(records, op)
    return r


# --- gathers ----------------------------------------------------------------------------------------------

def test_embedding_reads_each_distinct_row_once():
    table, ids = torch.randn(1000, 128), torch.full((8,), 3)
    with memtraffic.ops() as records:
        F.embedding(ids, table)
    # one row of 128 floats and the 8 ids; 8 rows written
    assert _bytes(_one(records, "aten.embedding.default")) == (128 * F32 + 8 * I64, 8 * 128 * F32)


def test_index_gather_and_take_read_what_they_index():
    x = torch.randn(10, 6)
    rows, cols = torch.tensor([1, 1, 4]), torch.tensor([0, 0, 5])
    g = torch.tensor([[0, 0], [2, 2], [0, 0]])
    mask = torch.zeros(10, dtype=torch.bool)
    mask[[2, 7]] = True
    with memtraffic.ops() as records:
        x[rows]                     # rows 1 and 4: 2 rows of 6
        x[rows, cols]               # pairs (1,0), (4,5): 2 elements
        x[mask]                     # 2 rows selected by a mask
        torch.gather(x[:3], 1, g)   # column 0 of row 0, column 2 of row 1, column 0 of row 2: 3 elements
        torch.take(x, torch.tensor([5, 5, 5, 7]))
    index = _calls(records, "aten.index.Tensor")
    assert _bytes(index[0]) == (2 * 6 * F32 + 3 * I64, 3 * 6 * F32)
    assert _bytes(index[1]) == (2 * F32 + 6 * I64, 3 * F32)
    assert _bytes(index[2]) == (2 * 6 * F32 + 10, 2 * 6 * F32)
    assert _bytes(_one(records, "aten.gather.default")) == (3 * F32 + 6 * I64, 6 * F32)
    assert _bytes(_one(records, "aten.take.default")) == (2 * F32 + 4 * I64, 4 * F32)


def test_advanced_indexing_after_a_full_slice_and_with_a_two_dimensional_mask():
    x = torch.randn(4, 5, 6)
    mask = torch.zeros(4, 5, dtype=torch.bool)
    mask[0, 1] = mask[2, 3] = True
    with memtraffic.ops() as records:
        x[:, torch.tensor([1, 1, 2])]  # dimension 1: 2 distinct of 5, for each of 4 x 6
        x[mask]                        # the mask covers dimensions 0 and 1: 2 rows of 6
    sliced, masked = _calls(records, "aten.index.Tensor")
    assert _bytes(sliced) == (4 * 2 * 6 * F32 + 3 * I64, 4 * 3 * 6 * F32)
    assert _bytes(masked) == (2 * 6 * F32 + 4 * 5, 2 * 6 * F32)


def test_an_index_the_tracer_cannot_read_gives_a_bound_and_says_so(monkeypatch):
    monkeypatch.setattr(op_rules, "readable", lambda t: False)  # as a CUDA index: never read
    table, ids = torch.randn(1000, 128), torch.full((8,), 3)
    with memtraffic.ops() as records:
        F.embedding(ids, table)
    (r,) = records
    assert _bytes(r) == (8 * 128 * F32 + 8 * I64, 8 * 128 * F32)  # every index assumed distinct
    assert "upper bound" in r["min_note"] and "no device sync" in r["min_note"]


# --- scatters -----------------------------------------------------------------------------------------------

def test_static_cache_index_copy_writes_only_its_rows():
    cache, token = torch.zeros(1000, 128), torch.randn(8, 128)
    pos = torch.arange(100, 108)
    with memtraffic.ops() as records:
        cache.index_copy_(0, pos, token)
    assert _bytes(_one(records, "aten.index_copy_.default")) == (8 * I64 + 8 * 128 * F32, 8 * 128 * F32)


def test_in_place_scatters_touch_only_their_rows():
    dst, src = torch.zeros(1000, 128), torch.randn(8, 128)
    idx = torch.tensor([5, 5, 6, 6, 7, 7, 8, 8])  # 4 distinct rows
    rows = 4 * 128 * F32
    small, value = torch.zeros(4, 5), torch.randn(4, 5)
    sidx = torch.tensor([[0, 1, 0, 1, 0]])  # row 0 of the index: 5 distinct (index, column) positions
    mask = torch.zeros(4, 5, dtype=torch.bool)
    mask[1, :3] = True
    with memtraffic.ops() as records:
        dst[idx] = src                            # index_put_: written, not read
        dst.index_put_((idx,), src, accumulate=True)
        dst.index_add_(0, idx, src)
        dst.index_fill_(0, idx, 1.0)
        small.scatter_(0, sidx, value)            # reads 5 of value's 20 elements
        small.scatter_add_(0, sidx, value)
        small.masked_fill_(mask, 2.0)
        small.masked_scatter_(mask, value)        # reads the first 3 of value
    puts = _calls(records, "aten.index_put_.default")
    assert _bytes(puts[0]) == (8 * I64 + 8 * 128 * F32, rows)
    assert _bytes(puts[1]) == (8 * I64 + 8 * 128 * F32 + rows, rows)
    assert _bytes(_one(records, "aten.index_add_.default")) == (8 * I64 + 8 * 128 * F32 + rows, rows)
    assert _bytes(_one(records, "aten.index_fill_.int_Scalar")) == (8 * I64, rows)
    assert _bytes(_one(records, "aten.scatter_.src")) == (5 * I64 + 5 * F32, 5 * F32)
    assert _bytes(_one(records, "aten.scatter_add_.default")) == (5 * I64 + 5 * F32 + 5 * F32, 5 * F32)
    assert _bytes(_one(records, "aten.masked_fill_.Scalar")) == (20, 3 * F32)
    assert _bytes(_one(records, "aten.masked_scatter_.default")) == (20 + 3 * F32, 3 * F32)


def test_metadata_only_in_place_ops_move_nothing():
    x = torch.randn(6, 4)
    with memtraffic.ops() as records:
        x.t_()
        x.transpose_(0, 1)
        x.unsqueeze_(0)
        x.squeeze_(0)
        x.as_strided_((4, 6), (1, 4))
        x.resize_(24)
        x.set_(torch.empty(0).untyped_storage())
    moved = {r["op"]: _bytes(r) for r in records if r["op"] != "aten.empty.memory_format"}
    assert len(moved) == 7 and set(moved.values()) == {(0, 0)}, moved


# --- aliasing and strided windows ---------------------------------------------------------------------------

def test_two_views_of_one_storage_are_read_once():
    a, x = torch.randn(6, 10), torch.randn(100)
    with memtraffic.ops() as records:
        a @ a.T
        x[1:] - x[:-1]
        x[::2] + 1                                 # a strided slice reads what it samples
    assert _bytes(_one(records, "aten.mm.default")) == (6 * 10 * F32, 6 * 6 * F32)
    sub = _one(records, "aten.sub.Tensor")
    assert _bytes(sub) == (100 * F32, 99 * F32)
    assert _bytes(_one(records, "aten.add.Tensor")) == (50 * F32, 50 * F32)


def test_union_bytes_of_overlapping_and_interleaved_views():
    x = torch.randn(8, 6)
    assert op_rules.union_bytes([x[:, :2], x[:, 1:3]]) == 8 * 3 * F32  # columns 0..2
    assert op_rules.union_bytes([x[::2], x[1::2]]) == 8 * 6 * F32      # even and odd rows: all of it
    assert op_rules.union_bytes([x, x]) == 8 * 6 * F32
    assert op_rules.union_bytes([x, torch.randn(3)]) == (48 + 3) * F32


@pytest.mark.parametrize(("size", "out", "kernel", "stride", "padding", "dilation", "expected"), [
    (8, 4, 1, 2, 0, 1, 4),      # 1x1 stride 2: every other pixel
    (8, 8, 3, 1, 1, 1, 8),      # 3x3 same padding: all
    (9, 3, 2, 3, 0, 1, 6),      # 2-wide windows every 3: 0,1 3,4 6,7
    (9, 2, 2, 4, 0, 3, 4),      # dilation 3: 0,3 4,7
])
def test_convolution_samples_only_the_pixels_its_windows_touch(size, out, kernel, stride, padding, dilation,
                                                                expected):
    assert op_rules.sampled(size, out, kernel, stride, padding, dilation) == expected


# --- a small conv net, trained one step -------------------------------------------------------------------

def test_conv_net_strided_conv_max_pool_and_their_backward():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 8, 8)
    conv = nn.Conv2d(3, 4, kernel_size=1, stride=2)     # first layer: no input gradient needed
    with memtraffic.ops() as records:
        y = F.max_pool2d(conv(x), 2)                    # (2,4,4,4) -> (2,4,2,2)
        y.sum().backward()
    sampled = 2 * 3 * 4 * 4 * F32                       # 16 of 64 pixels per channel
    fwd = _one(records, "aten.convolution.default")
    assert fwd["shape"] == [2, 4, 4, 4]
    assert _bytes(fwd) == (sampled + 12 * F32 + 4 * F32, 2 * 4 * 16 * F32)
    pool_bwd = _one(records, "aten.max_pool2d_with_indices_backward.default")
    # reads the (broadcast) gradient, one element, and the indices; not the forward input
    assert _bytes(pool_bwd) == (F32 + 2 * 4 * 2 * 2 * I64, 2 * 4 * 4 * 4 * F32)
    conv_bwd = _one(records, "aten.convolution_backward.default")
    # grad_output (2,4,4,4) and the sampled input; no weight (no input gradient); writes dW and db
    assert _bytes(conv_bwd) == (2 * 4 * 16 * F32 + sampled, (12 + 4) * F32)


# --- a transformer block trained one step ------------------------------------------------------------------

B, T, D, V, H = 2, 4, 16, 50, 2


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.qkv, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.fc1, self.fc2 = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)
        self.head = nn.Linear(D, V, bias=False)
        self.drop = nn.Dropout(0.1)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.emb(ids)
        q, k, v = self.qkv(self.ln1(h)).view(B, T, 3, H, D // H).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, D)
        h = h + self.drop(self.proj(a))
        h = h + self.fc2(F.gelu(self.fc1(self.ln2(h))))
        return self.head(h)


@pytest.fixture(scope="module")
def train_step() -> list[dict]:
    torch.manual_seed(0)
    model = Block()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.tensor([[1, 2, 1, 2], [3, 3, 3, 1]])  # 3 distinct ids in 8 lookups
    targets = torch.tensor([[2, 1, 2, -100], [3, 1, 0, 0]])  # one ignored row
    with memtraffic.ops() as records:
        logits = model(ids)
        loss = F.cross_entropy(logits.view(-1, V), targets.view(-1))
        loss.backward()
        opt.step()
        opt.zero_grad()
    return records


def test_transformer_embedding_loss_and_norm_backward(train_step):
    emb = _one(train_step, "aten.embedding.default")
    assert _bytes(emb) == (3 * D * F32 + B * T * I64, B * T * D * F32)
    nll = _one(train_step, "aten.nll_loss_forward.default")
    # 7 counted rows read one logit each, the 8 targets; writes the loss and total_weight
    assert _bytes(nll) == (7 * F32 + 8 * I64, 2 * F32)
    nll_bwd = _one(train_step, "aten.nll_loss_backward.default")
    # the scalar gradient, targets, total_weight; writes the whole (8, V) gradient; logits not read
    assert _bytes(nll_bwd) == (F32 + 8 * I64 + F32, 8 * V * F32)
    emb_bwd = _one(train_step, "aten.embedding_dense_backward.default")
    assert _bytes(emb_bwd) == (B * T * D * F32 + B * T * I64, V * D * F32)
    for ln_bwd in _calls(train_step, "aten.native_layer_norm_backward.default"):
        # grad, input, mean, rstd, weight; never the bias; writes dx, dweight, dbias
        n = B * T
        assert _bytes(ln_bwd) == ((2 * n * D + 2 * n + D) * F32, (n * D + 2 * D) * F32)


def test_cpu_attention_has_flops_from_our_formula(train_step):
    fwd = _one(train_step, "aten._scaled_dot_product_flash_attention_for_cpu.default")
    bwd = _one(train_step, "aten._scaled_dot_product_flash_attention_for_cpu_backward.default")
    e = D // H
    assert fwd["model_flops"] == 2 * (2 * B * H * T * T * e)  # Q @ K^T, then P @ V
    # backward: S = Q K^T recomputed, dP = dO V^T, dV = P^T dO, dQ = dS K, dK = dS^T Q
    assert bwd["model_flops"] == 5 * (2 * B * H * T * T * e)


@pytest.fixture(scope="module")
def conv_step() -> list[dict]:
    """A small conv net (strided conv, max pool, a second conv that needs its input gradient), SGD."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(8, 4, 1, stride=2), nn.Flatten(), nn.Linear(4 * 2 * 2, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    with memtraffic.ops() as records:
        F.cross_entropy(model(torch.randn(2, 3, 16, 16)), torch.tensor([1, 7])).backward()
        opt.step()
    return records


def test_conv_net_second_layer_backward_reads_its_weight(conv_step):
    first, second = _calls(conv_step, "aten.convolution_backward.default")[::-1]  # backward runs last first
    # the 1x1 stride-2 conv on (2,8,4,4) samples 2x2 of 4x4 pixels; its input gradient needs the weight
    grad_out, sampled, weight = 2 * 4 * 2 * 2, 2 * 8 * 2 * 2, 4 * 8
    assert _bytes(second) == ((grad_out + sampled + weight) * F32, (2 * 8 * 4 * 4 + 4 * 8 + 4) * F32)
    # the 3x3 stride-2 conv with padding 1 samples every pixel of (2,3,16,16); no input gradient
    assert _bytes(first) == ((2 * 8 * 8 * 8 + 2 * 3 * 16 * 16) * F32, (8 * 3 * 9 + 8) * F32)


@pytest.mark.parametrize("program", ["train_step", "conv_step"])
def test_every_traced_call_lies_between_what_it_must_touch_and_its_inputs_plus_outputs(program, request):
    for r in request.getfixturevalue(program):
        described = r["inputs"] + r["outputs"]
        upper = sum(math.prod(t["shape"]) * SIZES[t["dtype"]] for t in described)
        assert r["min_read_bytes"] + r["min_write_bytes"] <= upper, r
        func = _overload(r["op"])
        returns = func._schema.returns
        fresh = [t for t, ret in zip(r["outputs"], returns, strict=False) if ret.alias_info is None]
        if func.overloadpacket not in NO_FRESH_OUTPUT:
            assert r["min_write_bytes"] >= sum(math.prod(t["shape"]) * SIZES[t["dtype"]] for t in fresh), r


# allocations write nothing; these return views although their schema does not say so
NO_FRESH_OUTPUT = {torch.ops.aten.empty, torch.ops.aten.empty_like, torch.ops.aten.empty_strided,
                   torch.ops.aten.new_empty, torch.ops.aten._unsafe_view, torch.ops.aten.lift_fresh}


def _overload(name: str):
    namespace, op, overload = name.split(".")
    return getattr(getattr(getattr(torch.ops, namespace), op), overload)


# --- the program as it runs plainly -------------------------------------------------------------------------

def test_inference_mode_takes_the_kernels_a_plain_run_takes():
    """Eval-mode dropout returns its input in C++ (no copy); the Python decomposition would clone."""
    x = torch.randn(4, 8)
    drop = nn.Dropout(0.5).eval()
    with torch.inference_mode(), memtraffic.ops() as records:
        drop(x)
        F.linear(x, torch.randn(3, 8))
    ops = [r["op"] for r in records]
    assert "aten.clone.default" not in ops and "aten.dropout.default" not in ops
    assert "aten.mm.default" in ops or "aten.matmul.default" not in ops
