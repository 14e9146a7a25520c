"""memtraffic.region: records (bytes from arrays or given), the NVTX range it pushes, bad input."""

from __future__ import annotations

import json
import subprocess
import sys
import types

import numpy as np
import pytest
import torch

import memtraffic
from memtraffic.inprogram import regions
from memtraffic.vocab.errors import UsageError


@pytest.fixture
def fake_nvtx(monkeypatch) -> list[str]:
    """A stand-in `nvtx` package recording pushes and pops."""
    calls: list[str] = []
    module = types.SimpleNamespace(push_range=lambda name: calls.append(f"push {name}"),
                                   pop_range=lambda: calls.append("pop"))
    monkeypatch.setitem(sys.modules, "nvtx", module)
    monkeypatch.setattr(regions, "_searched", False)
    return calls


def test_region_bytes_from_arrays_counts_an_array_passed_twice_once(tmp_path, monkeypatch, fake_nvtx):
    trace = tmp_path / "trace.jsonl"
    monkeypatch.setenv("MEMTRAFFIC_TRACE", str(trace))
    q, k = np.zeros((16, 8), np.float32), np.zeros((16, 8), np.float16)
    o = np.zeros((16, 8), np.float64)
    with memtraffic.region("attn", inputs=[q, k, q], outputs=[o], flops=4096) as r:
        assert isinstance(r, regions.Region)
    (record,) = [json.loads(line) for line in trace.read_text().splitlines()]
    seq = record["seq"]
    assert fake_nvtx == [f"push mt|region|attn|{seq}", "pop"]
    assert record == {
        "range": f"mt|region|attn|{seq}", "kind": "region", "seq": seq, "pid": record["pid"], "op": "attn",
        "variant": "", "shape": [16, 8], "dtype": "fp32", "params": {},
        "inputs": [{"shape": [16, 8], "dtype": "fp32"}, {"shape": [16, 8], "dtype": "fp16"}],
        "outputs": [{"shape": [16, 8], "dtype": "fp64"}],
        "min_read_bytes": 16 * 8 * (4 + 2), "min_write_bytes": 16 * 8 * 8, "min_note": "",
        "model_flops": 4096,
        "pred_read_bytes": None, "pred_write_bytes": None, "signature": record["signature"],
    }


def test_explicit_bytes_win_per_direction_and_outputs_may_be_added_inside(fake_nvtx):
    x = np.zeros(100, np.float32)
    with memtraffic.ops() as records, memtraffic.region("step", inputs=[x], read_bytes=12) as r:
        y = torch.ones(10, dtype=torch.bfloat16)  # an op inside: its range nests in the region's
        r.outputs.append(y)
    region, op = sorted(records, key=lambda rec: rec["seq"])
    assert (region["kind"], op["kind"]) == ("region", "op") and op["seq"] > region["seq"]
    assert (region["min_read_bytes"], region["min_write_bytes"], region["model_flops"]) == (12, 20, None)
    assert region["outputs"] == [{"shape": [10], "dtype": "bf16"}]


def test_region_without_arrays_and_objects_with_size_and_itemsize(fake_nvtx):
    sized = types.SimpleNamespace(size=6, itemsize=8, shape=(2, 3), dtype="float64")
    with memtraffic.ops() as records, memtraffic.region("io", inputs=[sized], write_bytes=8e6):
        pass
    (record,) = records
    assert (record["min_read_bytes"], record["min_write_bytes"]) == (48, 8_000_000)
    assert (record["shape"], record["dtype"]) == ([2, 3], "fp64")


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"read_bytes": -1}, "region 'r': read_bytes must be a whole number >= 0, not -1"),
    ({"write_bytes": "8MB"}, "region 'r': write_bytes must be a whole number >= 0, not '8MB'"),
    ({"read_bytes": 1.5}, "region 'r': read_bytes must be a whole number >= 0, not 1.5"),
    ({"read_bytes": float("nan")}, "region 'r': read_bytes must be a whole number >= 0, not nan"),
    ({"read_bytes": True}, "region 'r': read_bytes must be a whole number >= 0, not True"),
    ({"flops": -5}, "region 'r': flops must be a whole number >= 0, not -5"),
    ({"inputs": [3]}, "region 'r': input #0 (int) has no .nbytes nor .size and .itemsize: pass arrays, "
                      "or read_bytes=/write_bytes="),
])
def test_bad_bytes_are_one_usage_error_before_the_block_runs(kwargs, message, fake_nvtx):
    ran = []
    with pytest.raises(UsageError) as err, memtraffic.region("r", **kwargs):
        ran.append(True)
    assert str(err.value) == message and not ran and fake_nvtx == []


@pytest.mark.parametrize("name", ["", "a|b", None])
def test_bad_region_name(name):
    with pytest.raises(UsageError, match="give a non-empty string without '|'"), memtraffic.region(name):
        pass


def test_without_an_nvtx_library_one_warning_and_the_record_is_kept(monkeypatch):
    monkeypatch.setitem(sys.modules, "nvtx", None)  # import fails
    monkeypatch.setitem(sys.modules, "cupy", None)
    monkeypatch.setattr(regions, "_searched", False)
    assert not torch.cuda.is_available()
    with memtraffic.ops() as records, pytest.warns(UserWarning, match="no NVTX library found") as caught:
        with memtraffic.region("a", read_bytes=1):
            pass
        with memtraffic.region("b", read_bytes=2):
            pass
    assert len(caught) == 1 and [r["op"] for r in records] == ["a", "b"]


def test_region_runs_without_torch(tmp_path):
    trace = tmp_path / "trace.jsonl"
    code = ("import sys, warnings, numpy as np, memtraffic\nwarnings.simplefilter('ignore')\n"
            "x = np.ones(1000, np.float32)\n"
            "with memtraffic.region('cpu_step', inputs=[x], outputs=[x]):\n    x *= 2\n"
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"MEMTRAFFIC_TRACE": str(trace), "PATH": "/usr/bin:/bin"})
    assert out.stdout.strip() == "False"
    (record,) = [json.loads(line) for line in trace.read_text().splitlines()]
    assert (record["op"], record["min_read_bytes"], record["min_write_bytes"]) == ("cpu_step", 4000, 4000)
