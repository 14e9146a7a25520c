"""What fusing would save (memtraffic.analysis.fusion): chains traced on CPU tensors with memtraffic.ops(),
whose fused minimums are known by hand, and the committed eager/compiled pair of the transformer block."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import memtraffic
from memtraffic.analysis.floor import floor_run
from memtraffic.analysis.fusion import Fusion, Group, fusion_groups, match
from memtraffic.cli import app
from memtraffic.vocab.launches import measured_range

T, D, H = 64, 32, 96  # tokens, width, hidden
F32 = 4
ROOFS = {"dram_Bps": 1e12, "launch_s": 1e-6, "fp32_flops": 1e13}
H100 = Path(__file__).resolve().parents[2] / "reports" / "h100"
EAGER, COMPILED = H100 / "floor_eager_block", H100 / "floor_compiled_block"


def groups_of(records: list, seconds: float = 1e-4) -> list[Group]:
    """The groups of traced records, each call taking `seconds` in one kernel; in program order."""
    times = {measured_range(r["range"]): (seconds, 1) for r in records}
    return sorted(fusion_groups(records, times, ROOFS).groups, key=lambda g: g.seqs[0])


def op_types(g: Group) -> list[str]:
    return [op.split(".")[1] for op in g.ops]


def test_an_rmsnorm_is_one_group_reading_x_and_w_once_and_writing_y_once():
    x, w = torch.randn(T, D), torch.randn(D)
    with memtraffic.ops() as records:
        y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w
    [g] = groups_of(records)
    assert op_types(g) == ["pow", "mean", "add", "rsqrt", "mul", "mul"]
    assert g.fused_min_bytes == (T * D + D + T * D) * F32  # x and w read once, y written once
    # eager: pow and the two muls each move the tensor twice (and w), mean reads it, the [T, 1] chain is small
    assert g.eager_min_bytes == (2 * T * D + (T * D + T) + 2 * T + 2 * T + (T * D + T + T * D)
                                 + (T * D + D + T * D)) * F32
    assert (g.how.kind, g.how.saved_bytes) == ("compile", g.eager_min_bytes - g.fused_min_bytes)
    assert g.fused_time_s == pytest.approx(max(g.fused_min_bytes / ROOFS["dram_Bps"], ROOFS["launch_s"]))
    assert g.saving_s == pytest.approx(g.time_s - g.fused_time_s) and g.time_s == pytest.approx(6e-4)
    [launched] = groups_of(records, seconds=1.5e-6)  # each call within 2x of an empty kernel: launch-bound
    assert (launched.how.kind, launched.how.launches) == ("graphs", 6)
    assert y.shape == (T, D)


def test_a_swiglu_gate_after_its_matmuls_is_a_group_of_silu_and_mul():
    x, w1, w3 = torch.randn(T, D), torch.randn(H, D), torch.randn(H, D)
    with torch.no_grad(), memtraffic.ops() as records:
        g_out = F.silu(x @ w1.T) * (x @ w3.T)
    [gate] = [g for g in groups_of(records) if "silu" in op_types(g)]
    assert op_types(gate) == ["silu", "mul"]  # the matmuls are barriers, not members
    assert gate.fused_min_bytes == 3 * T * H * F32  # both matmul outputs read, the gate written
    assert gate.eager_min_bytes == (2 * T * H + 3 * T * H) * F32
    # freed right after: as the second matmul's epilogue, its output is neither written nor read back
    assert gate.how.kind == "compile" and gate.how.matmul == "aten.mm.default"
    assert gate.how.epilogue_bytes == 2 * T * H * F32
    assert g_out.shape == (T, H)


def test_a_bias_and_gelu_after_a_matmul_are_its_epilogue():
    x, w, b = torch.randn(T, D), torch.randn(H, D), torch.randn(H)
    with torch.no_grad(), memtraffic.ops() as records:
        y = F.gelu(x @ w.T + b)
    [epi] = [g for g in groups_of(records) if "gelu" in op_types(g)]
    assert op_types(epi) == ["add", "gelu"]
    assert epi.fused_min_bytes == (T * H + H + T * H) * F32  # the matmul's output and b in, y out
    assert epi.eager_min_bytes == ((T * H + H + T * H) + 2 * T * H) * F32
    assert epi.how.epilogue_bytes == 2 * T * H * F32  # the matmul's output: its write and the add's read
    with torch.no_grad(), memtraffic.ops() as records:
        y = F.gelu(x @ w.T)
    [alone] = [g for g in groups_of(records) if "gelu" in op_types(g)]
    assert (alone.how.kind, alone.how.epilogue_bytes) == ("epilogue", 2 * T * H * F32)
    assert y.shape == (T, H)


def residual_block(kill: str = "") -> tuple[list, Group]:
    """h = x + x @ w, then layer_norm(h); later h + (its norm @ w2) reads h again and h is freed. `kill`:
    'x' overwrites x in place before that later read, 'x late' after it, 'a' frees the matmul's output,
    'view' reads h later through a transposed view, 'row' besides keeps a row of h past the trace."""
    x, w, w2 = torch.randn(T, D), torch.randn(D, D), torch.randn(D, D)
    with torch.no_grad(), memtraffic.ops() as records:
        a = x @ w
        h = x + a
        y = F.layer_norm(h, (D,))
        u = y @ w2
        if kill == "a":
            del a
        if kill == "x":
            x.mul_(2)
        out = h + u if kill not in ("view", "row") else (h.t() + u.t()).t()
        row = h[0] if kill == "row" else None
        del h
        if kill == "x late":
            x.mul_(2)
    [g] = [g for g in groups_of(records) if "native_layer_norm" in op_types(g)]
    assert op_types(g) == ["add", "native_layer_norm"] and out.shape == (T, D)
    assert (row is not None) == (kill == "row")
    return records, g


NORM_STATS = 2 * T * F32  # layer_norm's mean and rstd, [T, 1] each: written by eager, freed unread


def test_a_residual_sum_read_again_later_is_recomputable_from_the_tensors_it_was_made_from():
    """h outlives the add + layer norm group (a later add reads it), but that reader could compute x + a
    again from x (the program's input) and a (the matmul's output), both still held: the group's fused
    minimum reads x and a and writes the norm's output, not h; h's bytes are said apart."""
    _, g = residual_block()
    assert g.recomputable_bytes == T * D * F32 == g.how.recomputed_bytes
    assert g.fused_min_bytes == 2 * T * D * F32 + T * D * F32  # x, a in; y out
    assert g.eager_min_bytes == 3 * T * D * F32 + (T * D + T * D) * F32 + NORM_STATS
    # the write of h and its read by the norm (the intermediate), and the stats nothing reads
    assert g.how.saved_bytes == g.eager_min_bytes - g.fused_min_bytes == 2 * T * D * F32 + NORM_STATS
    # a freed source can be kept longer (memory, not traffic): Inductor keeps a matmul's output this way
    _, freed = residual_block("a")
    assert freed.recomputable_bytes == T * D * F32


def test_a_residual_sum_whose_source_is_overwritten_in_place_before_its_reader_must_be_written():
    _, g = residual_block("x")  # x.mul_(2) between the group and h's later reader: x + a is gone
    assert g.recomputable_bytes == 0 and g.how.recomputed_bytes == 0
    assert g.fused_min_bytes == 2 * T * D * F32 + 2 * T * D * F32  # x, a in; h and y out
    _, late = residual_block("x late")  # overwritten after h's last reader: recomputable again
    assert late.recomputable_bytes == T * D * F32
    # read through a view, h is still recomputable; a view of it held when the trace ends keeps its
    # storage, which anything after the trace may read
    assert residual_block("view")[1].recomputable_bytes == T * D * F32
    assert residual_block("row")[1].recomputable_bytes == 0


def test_what_outlives_the_trace_or_comes_from_a_reduction_is_never_recomputable():
    """Still held when the trace ends, h may be read by anything after it; the norm's output is no
    elementwise function of its inputs (a mean over the row): both are written."""
    x, w, w2 = torch.randn(T, D), torch.randn(D, D), torch.randn(D, D)
    with torch.no_grad(), memtraffic.ops() as records:
        h = x + x @ w
        y = F.layer_norm(h, (D,))
        out = h + y @ w2
    [g] = [g for g in groups_of(records) if "native_layer_norm" in op_types(g)]
    assert g.recomputable_bytes == 0 and g.fused_min_bytes == 4 * T * D * F32
    del out


def test_an_in_place_pointwise_result_is_not_recomputable():
    """h.mul_(2) overwrites h in place: its new value is no fresh tensor, its old one is gone; the later
    reader reads what the group wrote."""
    x, w, w2 = torch.randn(T, D), torch.randn(D, D), torch.randn(D, D)
    with torch.no_grad(), memtraffic.ops() as records:
        h = x + x @ w
        h.mul_(2)
        y = F.layer_norm(h, (D,))
        out = h + y @ w2
        del h
    [g] = [g for g in groups_of(records) if "native_layer_norm" in op_types(g)]
    assert op_types(g) == ["add", "mul_", "native_layer_norm"]
    assert g.recomputable_bytes == 0 and out.shape == (T, D)


def test_a_value_read_directly_and_through_a_matmul_splits_the_groups():
    """c = a + a @ w: c cannot run with a in one kernel, the matmul comes between them."""
    x, w = torch.randn(T, D), torch.randn(D, D)
    with torch.no_grad(), memtraffic.ops() as records:
        a = x * 2
        c = a + a @ w
    assert [op_types(g) for g in groups_of(records)] == [["mul"], ["add"]]
    assert c.shape == (T, D)


def test_what_outlives_the_group_is_written_and_a_fill_joins_its_reader():
    """A training step's loss and its backward: the fill of the gradient (ones_like) joins the backward."""
    x, target = torch.randn(T, D, requires_grad=True), torch.randn(T, D)
    with memtraffic.ops() as records:
        loss = F.mse_loss(x * 3, target)
        loss.backward()
    kinds = [op_types(g) for g in groups_of(records)]
    assert any({"mse_loss", "ones_like", "mse_loss_backward"} <= set(k) for k in kinds), kinds
    assert all(g.fused_min_bytes <= g.eager_min_bytes for g in groups_of(records))


def test_an_adam_step_over_the_same_parameters_is_one_group():
    """torch.optim.Adam (foreach): each state is read and written in place by several ops; fused, the
    parameters, gradients and both moments are read once and the parameters and moments written once."""
    torch.manual_seed(0)
    params = [torch.randn(T, D, requires_grad=True), torch.randn(D, requires_grad=True)]
    for p in params:
        p.grad = torch.randn_like(p)
    opt = torch.optim.Adam(params, lr=1e-3, foreach=True)
    opt.step()  # the moments exist from here on
    with torch.no_grad(), memtraffic.ops() as records:
        opt.step()
    [update] = [g for g in groups_of(records) if "_foreach_addcdiv_" in op_types(g)]
    assert {"_foreach_lerp_", "_foreach_mul_", "_foreach_addcmul_", "_foreach_sqrt"} <= set(op_types(update))
    size = (T * D + D) * F32
    assert update.fused_min_bytes == 7 * size  # p, grad, exp_avg, exp_avg_sq in; p and the moments out
    assert update.how.kind == "compile" and update.eager_min_bytes > update.fused_min_bytes


def test_no_identities_or_no_roofs_say_so():
    assert "no tensor identities" in fusion_groups([{"range": "r", "op": "x"}], {}, ROOFS).note
    x = torch.randn(T)
    with memtraffic.ops() as records:
        (x * 2).exp()
    assert "no measured roofs" in fusion_groups(records, {}, {}).note


def test_match_takes_the_group_sharing_most_ops_then_the_nearest_position():
    def group(ops: list[str], after: int) -> Group:
        from memtraffic.analysis.fusion import How

        return Group(ops, list(range(len(ops))), 10, 5, 2e-5, 1e-5, 1e-5, How("compile"), after_matmuls=after)

    from memtraffic.analysis.fusion import Kernel

    eager = Fusion([group(["aten.gelu.default"], 3),
                    group(["aten.gelu_backward.default", "aten.sum.dim_IntList"], 7)])
    compiled = Fusion(kernels=[
        Kernel("triton_poi_fused_gelu_gelu_backward_view_1", 9,
               ["aten.view", "aten.gelu_backward", "aten.gelu"], 1.5e-5, 7, 4),
        Kernel("triton_poi_fused_gelu_view_0", 2, ["aten.view", "aten.gelu"], 1e-5, 3, 4),
        Kernel("triton_poi_fused_view_1", 3, ["aten.view"], 1e-6, 3, 4)])
    found = match(eager, compiled)
    assert [(m.kernel, m.group) for m in found] == [("triton_poi_fused_gelu_gelu_backward_view_1", 1),
                                                    ("triton_poi_fused_gelu_view_0", 0)]
    assert found[0].reached == pytest.approx((2e-5 - 1.5e-5) / 1e-5)


def test_kernels_of_one_name_go_to_the_groups_writing_the_same_results_and_a_shared_stage_joins_them():
    """Two norms' weight gradients: eager has a group per norm (the first with an add), Inductor one
    reduction stage over both and four finishing kernels of one name. The finishing kernels go where the
    results they write (the n-th of their size) are written in eager; the stage feeding both norms'
    kernels makes the two groups one comparison."""
    from memtraffic.analysis.fusion import How, Kernel

    def group(ops: list[str], results: list[tuple[int, int]], time_s: float) -> Group:
        return Group(ops, list(range(len(ops))), 10, 5, time_s, 1e-5, time_s - 1e-5, How("compile"),
                     results=results)

    nlnb = "aten.native_layer_norm_backward.default"
    eager = Fusion([group([nlnb, "aten.add.Tensor"], [(2048, 0), (2048, 1)], 9e-5),
                    group([nlnb], [(2048, 2), (2048, 3)], 4e-5)], results={2048: 4})
    name = "triton_per_fused_add_native_layer_norm_backward_view_7"
    ops = ["aten.view", "aten.native_layer_norm_backward", "aten.add"]
    finish = [Kernel(name, 10 + n, ops, 3e-6, 2, 4, results=[(2048, n)]) for n in range(4)]
    stage = Kernel("triton_red_fused_add_native_layer_norm_backward_view_6", 9, ops, 6e-5, 2, 4,
                   feeds=[1, 2, 3, 4])
    found = match(eager, Fusion(kernels=[stage, *finish], results={2048: 4}))
    assert [(m.kernel, m.groups) for m in found] == [(k.name, [0, 1]) for k in [stage, *finish]]
    assert found[0].group_time_s == pytest.approx(1.3e-4) and found[0].fused_time_s == pytest.approx(2e-5)
    assert found[0].group_kernels_time_s == pytest.approx(7.2e-5)
    alone = match(eager, Fusion(kernels=finish, results={2048: 4}))  # no shared stage: a group each
    assert [m.groups for m in alone] == [[0], [0], [1], [1]]
    assert alone[2].group_kernels_time_s == pytest.approx(6e-6)
    # results the two runs hold in different numbers tell nothing: the op types decide (the add: group 0)
    assert {m.group for m in match(eager, Fusion(kernels=finish, results={2048: 5}))} == {0}


JUNK = st.sampled_from([None, "x", -5, 1.5, True, [], [[None]], [[1, -3]], [[1, "8"]], [1, [2]], {"a": 1},
                        [[None, 16], [7, 16, 3]]])
FIELDS = ["reads", "writes", "freed", "freed_after", "pid", "model_flops", "min_read_bytes",
          "min_write_bytes", "range", "op", "kind", "params", "dtype", "seq", "min_note"]
BLOCK_CONFIGS = json.loads((EAGER / "plan.json").read_text())["configs"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(BLOCK_CONFIGS) - 1), st.sampled_from(FIELDS), JUNK), max_size=6))
def test_damaged_trace_records_keep_the_bounds(damage):
    """Any field of any record replaced by a value of the wrong kind or sign (a damaged trace line): the
    groups still come, each fused minimum at most its eager one and each saving at most its time."""
    configs = [dict(c) for c in BLOCK_CONFIGS]
    for i, key, value in damage:
        configs[i][key] = value
    times = {measured_range(str(c["range"])): (1e-5, 1) for c in BLOCK_CONFIGS}
    fusion = fusion_groups(configs, times, ROOFS)
    assert all(0 <= g.fused_min_bytes <= g.eager_min_bytes and 0 <= g.saving_s <= g.time_s
               for g in fusion.groups)
    assert fusion.saving_s <= len(BLOCK_CONFIGS) * 1e-5


# --- the committed pair ------------------------------------------------------------------------------------


def test_the_eager_blocks_groups_keep_their_bounds():
    res = CliRunner().invoke(app, ["floor", str(EAGER), "--format", "json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    groups = out["groups"]
    assert groups and all({"ops", "eager_min_bytes", "fused_min_bytes", "time_s", "fused_time_s", "saving_s",
                           "how"} <= set(g) for g in groups)
    assert all(g["fused_min_bytes"] <= g["eager_min_bytes"] and 0 <= g["saving_s"] <= g["time_s"]
               for g in groups)
    assert sum(g["saving_s"] for g in groups) <= out["gpu_time_s"]
    assert all(0 <= g["recomputable_bytes"] <= g["eager_min_bytes"] - g["fused_min_bytes"] for g in groups)
    assert any("aten.native_layer_norm.default" in g["ops"] and "aten.add.Tensor" in g["ops"] for g in groups)
    assert any("aten.gelu.default" in g["ops"] for g in groups)
    assert all(g["how"]["kind"] in out["how_kinds"] for g in groups)
    text = CliRunner().invoke(app, ["floor", str(EAGER)]).output.splitlines()
    start = next(i for i, line in enumerate(text) if line.startswith("fusion groups: "))
    assert all(len(line) <= 100 for line in text[start:start + 8])


def test_the_report_page_shows_the_groups():
    from memtraffic.views.html_report import build_report

    page = build_report(EAGER)
    assert "<h2>What fusing would save</h2>" in page
    assert "aten.stack.default + aten.clone.default + aten.sum.dim_IntList" in page


def test_the_compiled_blocks_kernels_meet_the_groups_they_fused():
    eager, compiled = floor_run(EAGER), floor_run(COMPILED)
    found = match(eager.fusion, compiled.fusion)
    assert len(found) >= 3
    by_kernel = {m.kernel: m for m in found}
    gelu = by_kernel["triton_poi_fused_gelu_view_2"]
    assert gelu.group_ops == ["aten.gelu.default"]
    ln = by_kernel["triton_per_fused_native_layer_norm_0"]
    assert ln.group_ops == ["aten.native_layer_norm.default"]
    # a split reduction (the attention output's bias gradient): both stages go with the group of its sum
    first, second = by_kernel["triton_red_fused_sum_view_8"], by_kernel["triton_per_fused_sum_view_9"]
    assert first.group == second.group and "aten.native_layer_norm_backward.default" in first.group_ops
    # one reduction stage computes both norms' weight gradients: the two norms' backward groups are compared
    # together, and every group of the eager block has kernels
    nlnb = "aten.native_layer_norm_backward.default"
    norms = [i for i, g in enumerate(eager.fusion.groups) if nlnb in g.ops]
    assert len(norms) == 2 and by_kernel[
        "triton_red_fused_add_native_layer_norm_native_layer_norm_backward_view_6"].groups == norms
    assert {i for m in found for i in m.groups} == set(range(len(eager.fusion.groups)))
    for m in found:  # issue 55's done-when: no group's kernels run under 0.8x its fused floor
        assert m.group_kernels_time_s >= 0.8 * m.fused_time_s, m
    # Inductor recomputes the residual sum from the matmul's output: the floor leaves that write out
    add_ln = by_kernel["triton_per_fused_add_native_layer_norm_view_1"]
    assert eager.fusion.groups[add_ln.group].recomputable_bytes == 16777216
    assert add_ln.group_kernels_min_bytes >= add_ln.group_fused_min_bytes
    res = CliRunner().invoke(app, ["diff", str(EAGER), str(COMPILED), "--format", "json"])
    assert res.exit_code == 0, res.output
    fusion = json.loads(res.output)["fusion"]
    assert [f["kernel"] for f in fusion] == [m.kernel for m in found]
    assert all({"kernel", "ops", "fused_time_s", "time_s", "groups"} <= set(f) for f in fusion)
    text = CliRunner().invoke(app, ["diff", str(EAGER), str(COMPILED)]).output
    assert "reached" in text and "triton_poi_fused_gelu_view_2: 45.0 us" in text
    assert "one kernel fused across these 2 groups: compared together" in text
    assert "no kernel of B of their own" not in text
