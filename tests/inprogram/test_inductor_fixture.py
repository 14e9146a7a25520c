"""The minimum rule on a real Inductor-generated module (tests/fixtures/inductor/, saved from the H100 run of
examples/compiled_step.py by scripts/gpu_compiled.sh, torch 2.11, 2026-11-25): each launch its `call`
makes is replayed with CPU tensors of the buffers' sizes and strides, and must give the minimum, inputs,
outputs and fused ops the launch wrapper recorded on the GPU (inductor_wrapper_configs.json)."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
import torch

from memtraffic.inprogram import triton_launches as tl

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "inductor"
WRAPPER = (FIXTURES / "inductor_wrapper.py.txt").read_text()
CONFIGS = json.loads((FIXTURES / "inductor_wrapper_configs.json").read_text())


def _sources() -> dict[str, str]:
    """kernel name -> its Triton source, as the module passes it to async_compile.triton."""
    return dict(re.findall(r"^(\w+) = async_compile\.triton\('\w+', '''\n(.*?)''', device_str", WRAPPER,
                           flags=re.M | re.S))


def _launches() -> list[tuple[str, list[str], dict[str, torch.Tensor]]]:
    """(kernel, argument expressions, the buffers by then) of every launch in `call`, in order."""
    buffers: dict[str, torch.Tensor] = {}
    out = []
    for line in WRAPPER[WRAPPER.index("    def call(self, args):"):].splitlines():
        line = line.split("#")[0].split(";")[0].strip()
        new = (re.fullmatch(r"assert_size_stride\((\w+), (\(.*?\)), (\(.*?\))\)", line)
               or re.fullmatch(r"(\w+) = empty_strided_cuda\((\(.*?\)), (\(.*?\)), torch\.float32\)", line))
        if new:  # every buffer of this graph is fp32
            buffers[new[1]] = torch.empty_strided(ast.literal_eval(new[2]), ast.literal_eval(new[3]))
        elif m := re.fullmatch(r"(\w+) = reinterpret_tensor\((\w+), (\(.*?\)), (\(.*?\)), (\d+)\)", line):
            size, stride = ast.literal_eval(m[3]), ast.literal_eval(m[4])
            buffers[m[1]] = buffers[m[2]].as_strided(size, stride, int(m[5]))
        elif m := re.fullmatch(r"(\w+) = (\w+)", line):
            buffers[m[1]] = buffers[m[2]]
        elif m := re.fullmatch(r"(\w+)\.run\((.*), stream=\w+\)", line):
            out.append((m[1], [a.strip() for a in m[2].split(",")], dict(buffers)))
    return out


def _replay(source_aware: bool) -> list[dict]:
    sources, records = _sources(), []
    for kernel, exprs, buffers in _launches():
        src = sources[kernel]
        names = re.search(r"def \w+\((.*?)\):", src, flags=re.S)[1]
        arg_names = [n.split(":")[0].strip() for n in names.split(",")]
        mutated = ast.literal_eval(re.search(r"'mutated_arg_names': (\[.*?\])", src)[1])
        args = [buffers[e] if e in buffers else int(e) for e in exprs]
        records.append(tl.inductor_record(0, "", kernel, arg_names, args, {"mutated_arg_names": mutated},
                                          tl.fused_ops(WRAPPER).get(kernel), src if source_aware else None))
    return records


def test_the_fixture_holds_what_the_gpu_run_launched():
    ran = [c["op"] for c in CONFIGS]
    launched = [k for k, _, _ in _launches()]
    assert launched and ran[:len(launched)] == launched  # the first step's forward, in launch order


@pytest.mark.parametrize("field", ["min_read_bytes", "min_write_bytes", "inputs", "params"])
def test_replayed_launches_give_the_recorded_minimum(field):
    """The record made on the GPU (before the in_out_ptr refinement) is the rule applied to the buffers."""
    for got, recorded in zip(_replay(source_aware=False), CONFIGS, strict=False):
        assert got[field] == recorded[field], (recorded["op"], field)


def test_a_reused_buffer_only_stored_through_is_not_read():
    """Two kernels store through in_out_ptr0 (a buffer Inductor reuses) and never load it: the layer
    norm's rstd (4096 floats) and the loss (one float). With the sources their minimums drop exactly
    those reads; the kernels that load theirs keep them."""
    drop = {b["op"]: a["min_read_bytes"] - b["min_read_bytes"]
            for a, b in zip(_replay(source_aware=False), _replay(source_aware=True), strict=True)}
    assert drop == {"triton_per_fused_native_layer_norm_0": 4096 * 4, "triton_poi_fused_gelu_1": 0,
                    "triton_red_fused_add_addmm_mse_loss_2": 0, "triton_per_fused_add_addmm_mse_loss_3": 4,
                    "triton_poi_fused_add_addmm_mse_loss_mse_loss_backward_4": 0}
    assert [a["min_write_bytes"] for a in _replay(False)] == [b["min_write_bytes"] for b in _replay(True)]
