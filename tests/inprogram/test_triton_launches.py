"""Triton launches: the minimum rule of Inductor's generated kernels, the fused ops Inductor names, and the
range and record each launch gets (on CPU: recorded arguments as CPU tensors, a stand-in autotuner)."""

from __future__ import annotations

import itertools
import sys
import types

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from memtraffic.inprogram import triton_launches as tl
from memtraffic.runfolder.trace import collect

# The wrapper module Inductor writes (torch 2.13's format, PythonWrapperCodegen.define_kernel with
# get_kernel_metadata's comment): the comment block above each kernel names what it fused.
WRAPPER = '''
from torch._inductor.runtime import triton_helpers
async_compile = AsyncCompile()


# kernel path: /tmp/torchinductor_u/ab/cabc.py
# Topologically Sorted Source Nodes: [layer_norm], Original ATen: [aten.native_layer_norm]
# Source node to ATen node mapping:
#   layer_norm => add, mul, rsqrt, sub, var_mean
triton_per_fused_native_layer_norm_0 = async_compile.triton('triton_per_fused_native_layer_norm_0', \'\'\'
import triton
@triton.jit
def triton_per_fused_native_layer_norm_0(in_out_ptr0, in_ptr0, in_ptr1, in_ptr2, out_ptr0, out_ptr1, xnumel,
                                         r0_numel, XBLOCK : tl.constexpr):
    pass
\'\'\', device_str='cuda')


# kernel path: /tmp/torchinductor_u/cd/ccd.py
# Topologically Sorted Source Nodes: [add, gelu], Original ATen: [aten.add, aten.gelu]
triton_poi_fused_add_gelu_1 = async_compile.triton('triton_poi_fused_add_gelu_1', \'\'\'
\'\'\', device_str='cuda')

triton_poi_fused_2 = async_compile.triton('triton_poi_fused_2', \'\'\'
\'\'\', device_str='cuda')
'''


def test_fused_ops_come_from_the_comment_above_each_kernel():
    fused = tl.fused_ops(WRAPPER)
    assert fused == {
        "triton_per_fused_native_layer_norm_0": {"aten": ["aten.native_layer_norm"], "nodes": ["layer_norm"]},
        "triton_poi_fused_add_gelu_1": {"aten": ["aten.add", "aten.gelu"], "nodes": ["add", "gelu"]},
        "triton_poi_fused_2": {"aten": [], "nodes": []},
    }


def test_each_storage_is_read_once_and_written_once():
    x = torch.empty(64, 32)  # read through two names: one read
    w = torch.empty(32)
    out = torch.empty(64, 32)
    acc = torch.empty(64)  # read and written in place
    names = ["in_out_ptr0", "in_ptr0", "in_ptr1", "in_ptr2", "out_ptr0", "xnumel", "r0_numel"]
    read, write, reads, writes = tl.kernel_minimum(names, [acc, x, x, w, out, 64, 32])
    assert read == (64 + 64 * 32 + 32) * 4
    assert write == (64 + 64 * 32) * 4
    assert len(reads) == 3 and len(writes) == 2


def test_a_broadcast_input_counts_its_distinct_elements_and_views_of_one_storage_the_larger():
    bias = torch.empty(128, dtype=torch.bfloat16).expand(64, 128)  # stride 0: 128 distinct elements
    base = torch.empty(1000, dtype=torch.float16)
    head, whole = base[:10], base
    read, _, _, _ = tl.kernel_minimum(["in_ptr0", "in_ptr1", "in_ptr2"], [bias, head, whole])
    assert read == 128 * 2 + 1000 * 2


def test_mutated_inputs_are_written_and_template_inputs_read():
    p, g = torch.empty(10), torch.empty(10)
    read, write, _, _ = tl.kernel_minimum(["in_ptr0", "in_ptr1", "out_ptr0"], [p, g, torch.empty(3)],
                                          mutated=["in_ptr0"])
    assert (read, write) == (80, 40 + 12)
    a, b, c = torch.empty(16, 8), torch.empty(8, 4), torch.empty(16, 4)
    assert tl.kernel_minimum(["arg_A", "arg_B", "out_ptr0"], [a, b, c])[:2] == ((128 + 32) * 4, 64 * 4)
    assert tl._template_mm_flops({"arg_A": a, "arg_B": b}) == 2 * 16 * 8 * 4


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(0, 5), min_size=1, max_size=3),
       broadcast=st.lists(st.booleans(), min_size=3, max_size=3))
def test_view_bytes_counts_distinct_elements(sizes, broadcast):
    """Every view a user can pass (any sizes, zeros, broadcast dimensions) against counting its addresses."""
    base = [1 if b else s for s, b in zip(sizes, broadcast, strict=False)]
    view = torch.empty(base, dtype=torch.float16).expand(*sizes)
    addresses = {sum(i * stride for i, stride in zip(index, view.stride(), strict=True))
                 for index in itertools.product(*(range(s) for s in view.shape))}
    assert tl.view_bytes(view) == len(addresses) * 2


class _StandIn:
    """What the wrapper reads of Inductor's CachingAutotuner."""

    def __init__(self, meta):
        self.inductor_meta = meta
        self.fn = types.SimpleNamespace(arg_names=["in_ptr0", "out_ptr0", "xnumel", "XBLOCK"],
                                        __name__="triton_poi_fused_add_gelu_1")
        self.launchers = [object(), object()]
        self.tuned = False

    def autotune_to_one_config(self, *args, **kwargs):
        self.tuned = True
        self.launchers = self.launchers[:1]

    def run(self, *args, stream=None, **kwargs):
        assert self.tuned  # autotuned before the launch, outside its range
        return "launched"


def test_an_inductor_launch_gets_a_range_and_record(tmp_path, monkeypatch):
    pushed: list[str] = []
    monkeypatch.setattr(tl, "_push", pushed.append)
    monkeypatch.setattr(tl, "_pop", lambda: pushed.append("pop"))
    module = tmp_path / "output_code.py"
    module.write_text(WRAPPER + "\ndef call(k, x, y):\n    return k.run(x, y, 12, stream=0)\n")
    namespace: dict = {}
    exec(compile(module.read_text().split("async_compile = AsyncCompile()")[1].replace(
        "async_compile.triton(", "(lambda *a, **k: None)("), str(module), "exec"), namespace)
    kernel = _StandIn({"kernel_name": "triton_poi_fused_add_gelu_1", "mutated_arg_names": []})
    kernel.run = types.MethodType(tl._wrap_inductor(_StandIn.run), kernel)
    x, y = torch.empty(3, 4), torch.empty(3, 4)
    with collect() as records:
        assert namespace["call"](kernel, x, y) == "launched"
    (record,) = records
    assert record["range"] == pushed[0] and pushed[1] == "pop"
    assert record["range"].startswith("mt|triton|")
    assert record["range"].endswith("|triton_poi_fused_add_gelu_1")
    assert record["kind"] == "triton" and record["op"] == "triton_poi_fused_add_gelu_1"
    assert (record["min_read_bytes"], record["min_write_bytes"]) == (48, 48)
    assert record["params"]["fused_aten"] == ["aten.add", "aten.gelu"]
    assert record["model_flops"] is None


def test_a_plain_triton_kernel_inside_a_region_or_autotuning_gets_no_range(monkeypatch):
    pushed: list[str] = []
    monkeypatch.setattr(tl, "_push", pushed.append)
    monkeypatch.setattr(tl, "_pop", lambda: None)
    run = tl._wrap_jit(lambda self, *args, **kwargs: "ok")
    fn = types.SimpleNamespace(__name__="my_kernel")
    with collect() as records:
        assert run(fn, torch.empty(4), grid=(1,)) == "ok"
        tl._local.open = 1  # what track_ranges counts while a region is open on this thread
        try:
            assert run(fn, torch.empty(4), grid=(1,)) == "ok"
        finally:
            tl._local.open = 0
        assert tl._wrap_bench(lambda: run(fn, torch.empty(4), grid=(1,)))() == "ok"  # triton.autotune's
    (record,) = records
    assert record["op"] == "my_kernel" and record["min_read_bytes"] is None and len(pushed) == 1


def test_install_wraps_both_launch_paths_once(monkeypatch):
    pytest.importorskip("triton")
    from triton.runtime.jit import JITFunction

    monkeypatch.setattr(JITFunction, "run", JITFunction.run)  # restored after the test
    monkeypatch.setattr(torch.cuda.nvtx, "range_push", torch.cuda.nvtx.range_push)
    monkeypatch.setattr(torch.cuda.nvtx, "range_pop", torch.cuda.nvtx.range_pop)
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    monkeypatch.setattr(CachingAutotuner, "run", CachingAutotuner.run)
    first = tl.install()
    assert tl.install() == first == ["triton.JITFunction.run", "inductor.CachingAutotuner.run"]
    assert JITFunction.run._memtraffic and CachingAutotuner.run._memtraffic


def test_a_module_is_wrapped_when_it_is_imported(tmp_path, monkeypatch):
    """Inductor's launch path is wrapped when the program (Inductor) imports it, not before."""
    module = "class CachingAutotuner:\n    def run(self):\n        pass\n"
    (tmp_path / "i34_late_module.py").write_text(module)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    seen = []
    sys.meta_path.insert(0, tl.AfterImport("i34_late_module", seen.append))
    import i34_late_module

    assert seen == [i34_late_module] and not any(isinstance(f, tl.AfterImport) for f in sys.meta_path)
    tl._wrap_caching_autotuner(i34_late_module)
    assert i34_late_module.CachingAutotuner.run._memtraffic
    monkeypatch.delitem(sys.modules, "i34_late_module")


def test_the_launch_range_decision_names_the_range_and_fills_the_record(monkeypatch):
    """memtraffic.inprogram.distinct (issue 33's interface): decide() before the push, done() after the pop,
    its keys in the record (runfolder.trace.add_decision); a repeat is pushed under the range it gives."""
    calls: list = []

    def decide(name, sig, always=False):
        calls.append(("decide", name, sig))
        return tl.launches.Decision("mt|rep|triton|x", False, "abcd", "mt|triton|0|k")

    monkeypatch.setattr(tl.distinct, "decide", decide)
    monkeypatch.setattr(tl.distinct, "done", lambda d: calls.append(("done",)))
    pushed: list[str] = []
    monkeypatch.setattr(tl, "_push", pushed.append)
    monkeypatch.setattr(tl, "_pop", lambda: None)
    run = tl._wrap_jit(lambda self, *args, **kwargs: "ok")
    x = torch.empty(4, 2)
    with collect() as records:
        run(types.SimpleNamespace(__name__="k"), x, x, 3, grid=(1,), BLOCK=16)
    (record,) = records
    assert pushed == ["mt|rep|triton|x"] and record["range"] == "mt|rep|triton|x"
    assert (record["signature"], record["repeat"], record["reuses"]) == ("abcd", True, "mt|triton|0|k")
    (_, name, sig), done = calls
    assert name.startswith("mt|triton|") and done == ("done",)
    # the second tensor shares the first one's storage; the scalar, the constexpr and the grid are in it
    assert sig == ("k", ((4, 2), (2, 1), "torch.float32", "cpu", x.data_ptr() % 16, 0),
                   ((4, 2), (2, 1), "torch.float32", "cpu", x.data_ptr() % 16, 0), 3, ("BLOCK", 16),
                   ("grid", (1,)))


LAUNCH_PATH_PROGRAM = """
import sys
import torch
import torch._inductor.runtime.triton_heuristics as th
from triton.runtime.jit import JITFunction
print("wrapped", getattr(th.CachingAutotuner.run, "_memtraffic", False),
      getattr(JITFunction.run, "_memtraffic", False))
"""


def test_profile_ranges_triton_launches_through_a_python_stand_in_for_ncu(tmp_path, monkeypatch):
    """The stand-in ncu is a Python script: it runs sitecustomize, which takes MEMTRAFFIC_TRITON out of
    the environment the program inherits. The launcher's --triton still reaches the program."""
    from stand_ins import PASS_THROUGH, fake_ncu

    from memtraffic.collect import profile as prof
    from memtraffic.ncu import command as ncu_mod

    monkeypatch.setenv("MEMTRAFFIC_NCU", str(fake_ncu(tmp_path / "ncu", PASS_THROUGH)))
    from memtraffic.ncu import session as session_mod

    monkeypatch.setattr(prof, "gpu_name", lambda: "Fake GPU")
    monkeypatch.setattr(session_mod, "query_metric_names", lambda ncu, key=None: ncu_mod.parse_query_metrics(
        "\n".join(ncu_mod.base_name(n) for n in ncu_mod.resolve_metrics("traffic"))))
    program = tmp_path / "prog.py"
    program.write_text(LAUNCH_PATH_PROGRAM)
    lines: list[str] = []
    with pytest.raises(Exception, match="ncu profiled no kernel"):  # a CPU: nothing to profile
        prof.profile(prof.ProfileOptions(command=[sys.executable, str(program)], out=tmp_path / "run"),
                     lines.append)
    assert "wrapped True True" in lines
