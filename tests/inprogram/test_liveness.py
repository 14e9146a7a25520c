"""The storages a trace follows (memtraffic.inprogram.liveness) and the fused minimum they give
(memtraffic.analysis.floor.fused_minimum), on CPU tensors traced with memtraffic.ops(): graphs whose fused
minimum is known by hand. Inputs from before the block are read once; what outlives the block (outputs,
parameters, gradients, tensors kept for backward) is written once; the rest never leaves the chip."""

from __future__ import annotations

import json

import torch
import torch.nn.functional as F

import memtraffic
from memtraffic.analysis.floor import fused_minimum
from memtraffic.runfolder.trace import TRACE_ENV, read_trace

N = 1000  # elements
F32 = 4


def nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def test_a_chain_of_elementwise_ops_reads_its_input_once_and_writes_its_output_once():
    x = torch.randn(N)
    with memtraffic.ops() as records:
        y = ((x * 2) + 1).exp()
    fused = fused_minimum(records)
    assert (fused.read_bytes, fused.write_bytes) == (N * F32, N * F32)
    assert fused.eager_bytes == 3 * 2 * N * F32  # three ops, each a read and a write of the tensor
    assert y.shape == (N,)


def test_the_records_name_the_storages_they_move_and_those_freed_before_them():
    x = torch.randn(N)
    with memtraffic.ops() as records:
        y = ((x * 2) + 1).exp()
    mul, add, exp = records
    assert mul["reads"] == [[x.untyped_storage().data_ptr(), N * F32]]
    assert add["reads"] == mul["writes"] and exp["reads"] == add["writes"]  # each op reads the one before
    assert exp["writes"] == [[y.untyped_storage().data_ptr(), N * F32]]
    # Python drops a temporary once the call that takes it returns: the product before exp's record, the
    # sum after it, so the end of the block lists it
    assert exp["freed"] == [mul["writes"][0][0]]
    assert exp["freed_after"] == [add["writes"][0][0]]


def test_a_residual_block_reads_input_weight_and_bias_once():
    torch.manual_seed(0)
    lin = torch.nn.Linear(64, 64)
    x = torch.randn(32, 64)
    with torch.no_grad(), memtraffic.ops() as records:
        y = x + F.relu(lin(x))
    fused = fused_minimum(records)
    weights = nbytes(lin.weight) + nbytes(lin.bias)
    assert fused.read_bytes == nbytes(x) + weights  # x is read by the matmul and the add: once
    assert fused.write_bytes == nbytes(y)  # h and relu(h) stay on chip
    assert fused.eager_bytes > fused.total


def test_intermediates_kept_for_backward_are_written_once():
    x = torch.randn(N, requires_grad=True)
    with memtraffic.ops() as records:
        loss = x.exp().sin().sum()  # exp's result is saved by exp and sin backward; sin's is not kept
    kept = fused_minimum(records)
    with torch.no_grad(), memtraffic.ops() as records:
        total = x.exp().sin().sum()
    nothing_kept = fused_minimum(records)
    assert nothing_kept.write_bytes == F32  # the sum alone
    assert kept.write_bytes == N * F32 + F32  # exp's result too: backward reads it
    assert kept.read_bytes == nothing_kept.read_bytes == N * F32
    loss.backward()
    assert total == loss


def test_a_training_step_writes_its_gradients_and_updated_parameters_once():
    torch.manual_seed(0)
    lin = torch.nn.Linear(16, 8, bias=False)
    x = torch.randn(4, 16)
    opt = torch.optim.SGD(lin.parameters(), lr=0.1)
    with memtraffic.ops() as records:
        lin(x).square().mean().backward()
        opt.step()
    fused = fused_minimum(records)
    w = nbytes(lin.weight)
    assert fused.read_bytes == nbytes(x) + w
    assert fused.write_bytes == 2 * w  # the gradient (alive in .grad) and the updated weight, in place


def test_frees_after_the_last_record_of_a_trace_file_join_that_record(tmp_path, monkeypatch):
    path = tmp_path / "trace.jsonl"
    monkeypatch.setenv(TRACE_ENV, str(path))
    x = torch.randn(N)
    with memtraffic.ops():
        (x * 2).exp()  # the result is dropped at once: freed inside the block
    records = read_trace(path)
    assert records[-1]["freed_after"]  # the end-of-region line joined the last record
    assert fused_minimum(records).write_bytes == 0
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert "range" not in lines[-1] and lines[-1]["freed_after"] == records[-1]["freed_after"]


def test_a_trace_without_storages_has_no_fused_minimum():
    old = [{"range": "mt|op|0|aten.exp.default", "kind": "op", "min_read_bytes": 8, "min_write_bytes": 8}]
    assert fused_minimum(old) is None
