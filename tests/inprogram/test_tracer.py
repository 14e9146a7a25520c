"""The aten-op tracer: a small model run under `memtraffic ops` (a real subprocess, traced from startup)
and in-process `memtraffic.ops()`, every op's bytes and FLOPs computed here by hand from the shapes.

Rules (memtraffic/trace.py): each distinct input read once, each output written once, an in-place op's
target read and written, views move nothing, FLOPs from torch.utils.flop_counter (matmuls) else None.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading

import pytest
import torch
import torch.nn.functional as F
from typer.testing import CliRunner

import memtraffic
from memtraffic.cli import app
from memtraffic.inprogram.tracer import tensor_bytes
from memtraffic.runfolder.trace import collect, read_trace

M, K, N = 6, 10, 12  # small, distinct extents: a swapped dimension changes every count
F32 = 4

MODEL = f"""
import torch
import torch.nn.functional as F

torch.manual_seed(0)
x = torch.randn({M}, {K}, requires_grad=True)
w = torch.randn({K}, {N}, requires_grad=True)
h = x @ w
h = F.layer_norm(h, ({N},))
h = F.gelu(h)
p = torch.softmax(h, dim=-1)
s = p.sum(dim=0)
t = p.t().contiguous()
t.mul_(2.0)
sq = x * x
loss = s.sum() + t.sum() + sq.sum()
loss.backward()
print("model done")
"""


def _ops(*args: str):
    return CliRunner().invoke(app, ["ops", *args])


def _write(tmp_path, name: str, source: str):
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return path


@pytest.fixture(scope="module")
def traced(tmp_path_factory) -> list[dict]:
    model = _write(tmp_path_factory.mktemp("model"), "model.py", MODEL)
    res = _ops("--format", "json", "--", sys.executable, str(model))
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def _calls(rows: list[dict], op: str) -> list[dict]:
    return [r for r in rows if r["op"] == op]


def _one(rows: list[dict], op: str) -> dict:
    (row,) = _calls(rows, op)
    return row


def _bytes(r: dict) -> tuple[int, int, int | None]:
    return r["min_read_bytes"], r["min_write_bytes"], r["model_flops"]


def test_forward_ops_bytes_and_flops_by_hand(traced):
    mm = _calls(traced, "aten.mm.default")[0]
    assert mm["shape"] == [M, N] and mm["dtype"] == "fp32"  # the result, not the first argument
    assert _bytes(mm) == (F32 * (M * K + K * N), F32 * M * N, 2 * M * K * N)
    # layer_norm also writes its mean and rstd, (M, 1) each, for the backward
    layer_norm = _one(traced, "aten.native_layer_norm.default")
    assert _bytes(layer_norm) == (F32 * M * N, F32 * (M * N + 2 * M), None)
    assert _bytes(_one(traced, "aten.gelu.default")) == (F32 * M * N, F32 * M * N, None)
    assert _bytes(_one(traced, "aten._softmax.default")) == (F32 * M * N, F32 * M * N, None)
    assert _bytes(_one(traced, "aten.sum.dim_IntList")) == (F32 * M * N, F32 * N, None)


def test_transposed_view_moves_nothing_and_its_copy_reads_its_own_elements(traced):
    forward_t = _calls(traced, "aten.t.default")[0]
    assert forward_t["shape"] == [N, M] and _bytes(forward_t) == (0, 0, None)
    clone = _one(traced, "aten.clone.default")
    assert clone["shape"] == [N, M] and _bytes(clone) == (F32 * M * N, F32 * M * N, None)


def test_in_place_op_reads_and_writes_its_target_once(traced):
    mul_ = _one(traced, "aten.mul_.Tensor")
    assert mul_["shape"] == [N, M] and _bytes(mul_) == (F32 * M * N, F32 * M * N, None)


def test_tensor_passed_twice_is_read_once(traced):
    square = [r for r in _calls(traced, "aten.mul.Tensor") if r["shape"] == [M, K]][0]  # the forward x * x
    assert len(square["inputs"]) == 1 and _bytes(square) == (F32 * M * K, F32 * M * K, None)


def test_backward_is_traced(traced):
    ops = [r["op"] for r in traced]
    for op in ("aten._softmax_backward_data.default", "aten.gelu_backward.default",
               "aten.native_layer_norm_backward.default"):
        assert ops.index(op) > ops.index("aten.mul.Tensor"), op  # after the forward
    fwd, *grads = _calls(traced, "aten.mm.default")
    # dx = dh @ w.t(): (M,N)@(N,K); dw = x.t() @ dh: (K,M)@(M,N); each transposed view read whole
    assert sorted(_bytes(g) for g in grads) == sorted([
        (F32 * (M * N + N * K), F32 * M * K, 2 * M * N * K),
        (F32 * (K * M + M * N), F32 * K * N, 2 * K * M * N),
    ])


def test_records_are_plan_configs_in_program_order(traced):
    assert [r["seq"] for r in traced] == list(range(len(traced)))
    for r in traced:
        assert r["kind"] == "op" and r["range"] == f"mt|op|{r['seq']}|{r['op']}"
    mm = traced[[r["op"] for r in traced].index("aten.mm.default")]
    assert mm["inputs"] == [{"shape": [M, K], "dtype": "fp32"}, {"shape": [K, N], "dtype": "fp32"}]
    assert mm["outputs"] == [{"shape": [M, N], "dtype": "fp32"}]
    assert mm["intensity"] == pytest.approx(2 * M * K * N / (F32 * (M * K + K * N + M * N)))


@pytest.mark.slow
def test_table_lists_calls_then_op_types_by_bytes(tmp_path):
    model = _write(tmp_path, "model.py", MODEL)
    res = _ops("--all-calls", "--", sys.executable, str(model))
    assert res.exit_code == 0, res.output
    calls, _, summary = res.stdout.partition("per op type, most bytes first")
    assert "aten._softmax.default" in calls and "model done" not in res.stdout  # program output: stderr
    assert "calls moved no data" in calls and "aten.t.default" in calls.split("calls moved no data")[1]
    types = [line.split()[0] for line in summary.splitlines()[3:]]
    assert types[0] == "aten.mm.default" and "aten.t.default" not in types
    assert summary.splitlines()[3].split()[1] == "3"  # the forward matmul and two in the backward


@pytest.mark.slow
def test_default_table_lists_the_calls_moving_the_most_bytes(tmp_path, traced):
    model = _write(tmp_path, "model.py", MODEL)
    res = _ops("--", sys.executable, str(model))
    assert res.exit_code == 0, res.output
    calls, _, summary = res.stdout.partition("per op type, most bytes first")
    moving = [r for r in traced if r["min_read_bytes"] + r["min_write_bytes"] > 0]
    assert calls.startswith(f"the 10 calls moving the most bytes, of {len(moving)} (all of them: --all-calls")
    rows = [line.split() for line in calls.splitlines()[3:13]]
    top = sorted(moving, key=lambda r: -(r["min_read_bytes"] + r["min_write_bytes"]))[:10]
    assert [int(row[0]) for row in rows] == [r["seq"] for r in top]


@pytest.mark.slow
def test_from_first_forward_leaves_initialisation_out(tmp_path):
    program = _write(tmp_path, "init.py", """
        import torch
        layer = torch.nn.Linear(8, 4)       # initialisation: uniform_ fills, not traced
        torch.nn.init.normal_(layer.weight)
        layer(torch.ones(2, 8)).sum()
    """)
    res = _ops("--from-first-forward", "--format", "json", "--", sys.executable, str(program))
    assert res.exit_code == 0, res.output
    ops = [r["op"] for r in json.loads(res.stdout)]
    assert ops[0] == "aten.t.default" and "aten.addmm.default" in ops  # the forward's first op
    assert not any(op.startswith(("aten.uniform_", "aten.normal_", "aten.ones")) for op in ops)
    res = _ops("--format", "json", "--", sys.executable, str(program))
    assert "aten.uniform_.default" in [r["op"] for r in json.loads(res.stdout)]


@pytest.mark.slow
def test_torch_compile_compiles_under_the_tracer(tmp_path):
    """The tracer ignores compile internals: the compiled function runs compiled, and the trace holds
    what its code calls at run time (the matmul Inductor hands to an extern kernel), not its fused ops."""
    program = _write(tmp_path, "compiled.py", """
        import torch
        f = torch.compile(lambda x, w: torch.relu(x @ w + 1))
        print(f(torch.ones(4, 8), torch.ones(8, 2)).sum())
    """)
    res = _ops("--format", "json", "--", sys.executable, str(program))
    assert res.exit_code == 0, res.output
    ops = {r["op"] for r in json.loads(res.stdout)}
    assert "aten.mm.out" in ops and not ops & {"aten.relu.default", "aten.add.Tensor", "aten.mm.default"}
    assert "warning" not in res.stderr


def test_an_older_torch_gets_one_warning_saying_what_was_traced(monkeypatch, capsys):
    """Before TorchDispatchMode.ignore_compile_internals, dynamo runs code eagerly under the tracer."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from memtraffic.inprogram import tracer

    monkeypatch.setattr(torch, "compile", torch.compile)  # restored after the test
    monkeypatch.delattr(TorchDispatchMode, "ignore_compile_internals")
    tracer._watch_compile()
    torch.compile(lambda x: x * 2)
    torch.compile(lambda x: x + 1)
    assert capsys.readouterr().err == f"memtraffic: warning: {tracer.COMPILE_WARNING}\n"  # once


def test_profiler_window_mode_traces_only_between_start_and_stop(monkeypatch):
    import torch.cuda.profiler as profiler

    from memtraffic.inprogram import tracer
    from memtraffic.runfolder import trace

    monkeypatch.setattr(profiler, "start", lambda: None)
    monkeypatch.setattr(profiler, "stop", lambda: None)
    monkeypatch.setattr(torch.cuda, "cudart", lambda: None)
    monkeypatch.setattr(trace, "_paused", threading.Event())  # the window pauses the process's trace
    t = tracer.OpTracer()
    t.enabled = False
    tracer._follow_profiler(t)
    with collect() as records, t:
        torch.ones(2).sum()                # warm-up: outside the window
        torch.cuda.profiler.start()
        torch.ones(3).sum()
        torch.cuda.profiler.stop()
        torch.ones(4).sum()
        assert trace.paused()  # Inductor's launches and regions wait with it
    assert [r["outputs"][0]["shape"] for r in records] == [[3], []]


# --- in-process memtraffic.ops() -------------------------------------------------------------------------

def test_ops_context_keeps_records_and_appends_them_to_the_trace_file(tmp_path, monkeypatch):
    trace = tmp_path / "trace.jsonl"
    monkeypatch.setenv("MEMTRAFFIC_TRACE", str(trace))
    a, b = torch.randn(5, 7), torch.randn(7, 3)
    with memtraffic.ops() as records:
        torch.mm(a, b)
        with memtraffic.ops() as inner:  # nested: collects, no second tracer
            a.sum()
    assert [r["op"] for r in records] == ["aten.mm.default", "aten.sum.default"]
    assert [r["op"] for r in inner] == ["aten.sum.default"]
    # the file holds the records, then the storages freed before the blocks ended (trace.end_region), which
    # reading joins to the record before them, as the blocks did
    lines = [json.loads(line) for line in trace.read_text().splitlines()]
    assert [line for line in lines if "range" in line] == [
        {k: v for k, v in r.items() if k != "freed_after"} for r in records]
    assert read_trace(trace) == records


def test_out_overwrite_template_broadcast_and_gather():
    a, b, o = torch.randn(4, 8), torch.randn(4, 8), torch.empty(4, 8)
    row, idx = torch.randn(1, 8), torch.tensor([0, 2])
    with memtraffic.ops() as records:
        torch.add(a, b, out=o)      # out= is written, not read
        o.copy_(a)                  # copy_ overwrites its target
        torch.zeros_like(a)         # the template's data is never read
        row.expand(4, 8) + a        # a broadcast row is read once, not 4 times
        torch.empty(100)            # allocation: no traffic
        a.index_select(0, idx)      # reads the two gathered rows, not all four
    by_op = {r["op"]: _bytes(r) for r in records}
    size = F32 * 4 * 8
    assert by_op["aten.add.out"] == (2 * size, size, None)
    assert by_op["aten.copy_.default"] == (size, size, None)
    assert by_op["aten.zeros_like.default"] == (0, size, None)
    assert by_op["aten.expand.default"] == (0, 0, None)
    assert by_op["aten.add.Tensor"] == (F32 * 8 + size, size, None)
    assert by_op["aten.empty.memory_format"] == (0, 0, None)
    assert by_op["aten.index_select.default"] == (F32 * 2 * 8 + 8 * 2, F32 * 2 * 8, None)


def test_sparse_tensors_count_their_values_and_indices():
    indices, values = torch.tensor([[0, 1, 3], [2, 0, 1]]), torch.randn(3)
    sparse = torch.sparse_coo_tensor(indices, values, (4, 5), check_invariants=True).coalesce()
    with memtraffic.ops() as records:
        sparse.to_dense()
    (dense,) = records
    assert _bytes(dense) == (F32 * 3 + 8 * 2 * 3, F32 * 4 * 5, None)


def test_inference_mode_traces_the_same_decomposed_ops_with_flops():
    """Under inference_mode aten.linear reaches the mode whole: it is decomposed as autograd would."""
    x, w, bias = torch.randn(3, 5), torch.randn(7, 5), torch.randn(7)
    with torch.inference_mode(), memtraffic.ops() as records:
        F.linear(x, w, bias)
    ops = [r["op"] for r in records]
    assert "aten.linear.default" not in ops
    (addmm,) = _calls(records, "aten.addmm.default")
    assert _bytes(addmm) == (F32 * (7 + 3 * 5 + 5 * 7), F32 * 3 * 7, 2 * 3 * 5 * 7)


def test_tracer_reads_no_tensor_data(monkeypatch):
    def forbidden(*_args, **_kwargs):
        raise AssertionError("the tracer must not copy data or synchronize")

    for name in ("item", "cpu", "tolist", "numpy"):
        monkeypatch.setattr(torch.Tensor, name, forbidden)
    monkeypatch.setattr(torch.cuda, "synchronize", forbidden)
    with memtraffic.ops() as records:
        torch.softmax(torch.randn(4, 4), -1).t().contiguous()
    assert len(records) == 4


def test_tensor_bytes_counts_a_view_and_a_broadcast_once():
    base = torch.randn(8, 6)
    assert tensor_bytes(base[:, :2]) == F32 * 8 * 2
    assert tensor_bytes(torch.randn(6).expand(8, 6)) == F32 * 6
    assert tensor_bytes(torch.randn(0, 6)) == 0


@pytest.mark.gpu
def test_cuda_backward_in_autograd_threads_is_traced():
    x = torch.randn(64, 32, device="cuda", requires_grad=True)
    with memtraffic.ops() as records:
        torch.softmax(x @ x.t(), -1).sum().backward()
    ops = [r["op"] for r in records]
    assert "aten._softmax_backward_data.default" in ops and ops.count("aten.mm.default") == 3


# --- the command: startup tracing, environment, errors ----------------------------------------------------

def test_children_spawned_or_forked_are_not_traced_and_an_existing_sitecustomize_runs(tmp_path, monkeypatch):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(f"open({str(tmp_path / 'chained')!r}, 'w').close()\n")
    monkeypatch.setenv("PYTHONPATH", str(site))
    child = "import torch; torch.ones(3).sum()"
    prog = _write(tmp_path, "parent.py", f"""
        import multiprocessing, subprocess, sys, torch
        torch.ones(2, 2).neg()
        subprocess.run([sys.executable, "-c", {child!r}], check=True)
        forked = multiprocessing.get_context("fork").Process(target=lambda: torch.zeros(4).exp())
        forked.start()
        forked.join()
    """)
    res = _ops("--format", "json", "--", sys.executable, str(prog))
    assert res.exit_code == 0, res.output
    assert [r["op"] for r in json.loads(res.stdout)] == ["aten.ones.default", "aten.neg.default"]
    assert (tmp_path / "chained").exists()


def test_command_exiting_non_zero_keeps_what_was_traced_and_its_code(tmp_path):
    prog = _write(tmp_path, "fail.py", """
        import sys, torch, memtraffic
        with memtraffic.region("block", read_bytes=96, write_bytes=4):
            torch.ones(3).sum()
        sys.exit(3)
    """)
    res = _ops("--", sys.executable, str(prog))
    assert res.exit_code == 3
    calls = res.stdout.split("per op type")[0]
    rows = calls.splitlines()[2:5]
    assert ["[region] block" in rows[0], "aten.ones.default" in rows[1], "aten.sum.default" in rows[2]] == [
        True, True, True]
    assert "block" not in res.stdout.split("per op type")[1]  # regions stay out of the op summary
    assert res.stderr.strip().splitlines()[-1] == (
        f"error: `{sys.executable} {prog}` exited with code 3; the ops traced before it ended are above")


def test_command_killed_by_a_signal_exits_as_a_shell_would():
    res = _ops("--", sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    assert res.exit_code == 137 and "was killed by signal 9; no op was traced" in res.stderr


def test_program_that_never_imports_torch(tmp_path):
    res = _ops("--", sys.executable, "-c", "print(1)")
    assert res.exit_code == 1 and res.stdout == ""
    assert res.stderr.startswith("error: ") and "never imported torch" in res.stderr
    assert res.stderr.count("\n") == 1


def test_program_that_imports_torch_but_runs_no_op():
    res = _ops("--", sys.executable, "-c", "import torch")
    assert res.exit_code == 1 and "imported torch but ran no aten op" in res.stderr


@pytest.mark.parametrize(("args", "message"), [
    ([], "error: no command to trace: write `memtraffic ops -- python train.py ARGS`"),
    (["--", "no-such-command-xyz"],
     "error: command not found: 'no-such-command-xyz' is not on PATH or not an executable file"),
    (["--format", "yaml", "--", "true"], "error: unknown format 'yaml': use one of table, json, csv"),
])
def test_bad_command_line_is_one_line_exit_2(args, message):
    res = _ops(*args)
    assert res.exit_code == 2 and res.stderr == message + "\n"


def test_tracer_env_puts_the_injector_first_and_keeps_the_rest(tmp_path):
    from memtraffic.collect.trace_ops import INJECT_DIR, tracer_env

    trace, mark = tmp_path / "t.jsonl", tmp_path / "m"
    env = tracer_env(trace, {"PYTHONPATH": "/mine", "HOME": "/h"}, torch_mark=mark)
    assert env == {"PYTHONPATH": f"{INJECT_DIR}:/mine", "HOME": "/h", "MEMTRAFFIC_TORCH_OPS": "1",
                   "MEMTRAFFIC_TRACE": str(trace), "MEMTRAFFIC_TORCH_MARK": str(mark)}
    assert (INJECT_DIR / "sitecustomize.py").is_file()
    assert tracer_env(trace, {})["PYTHONPATH"] == str(INJECT_DIR)


def test_import_memtraffic_does_not_import_torch():
    code = ("import sys, memtraffic, memtraffic.inprogram.regions, memtraffic.collect.trace_ops; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
