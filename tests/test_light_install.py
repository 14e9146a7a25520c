"""The base install (no torch, no triton): what it runs, and the one line a command that needs more says.

pyproject's base dependencies leave torch and triton to the `measure` extra; a subprocess with both
blocked (tests/no_torch.py) stands for that install.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from no_torch import cli_without_torch

from memtraffic.core.files import read_toml

REPO = Path(__file__).resolve().parent.parent
MEASURE_LINE = ("needs torch and triton, the measuring side, which the base install leaves out: "
                "pip install 'memtraffic[measure]' (in a clone: .venv/bin/pip install -e '.[measure]')")


def test_torch_and_triton_are_an_extra_not_the_base():
    project = read_toml(REPO / "pyproject.toml", "project file")["project"]
    base = {d.split(">")[0].split("=")[0].strip() for d in project["dependencies"]}
    assert base == {"numpy", "pandas", "plotly", "typer", "ncu-report"}
    assert {d.split(">")[0] for d in project["optional-dependencies"]["measure"]} == {"torch", "triton"}
    assert any(d.startswith("kaleido") for d in project["optional-dependencies"]["png"])


@pytest.mark.parametrize("args", [
    ("measure", "softmax_naive"),
    ("bench", "softmax_naive"),
    ("ceilings",),
    ("list", "--count", "softmax_naive"),
], ids=lambda a: a[0] + ("_count" if "--count" in a else ""))
def test_a_command_that_needs_torch_says_so_in_one_line(args):
    proc = cli_without_torch(*args)
    assert proc.returncode == 1
    assert proc.stderr == f"error: memtraffic {args[0]} {MEASURE_LINE}\n"
    assert proc.stdout == ""


@pytest.mark.parametrize("shape,dtype", [("1048576x2", "fp32"), ("4096x4096", "bf16"),
                                         ("512x256x128", "fp16")])
def test_list_without_torch_gives_every_shipped_variant_with_its_ops_minimum(shape, dtype):
    """The same variants, ops, descriptions and minimum bytes/FLOPs as `list` with the models imported;
    the predicted bytes are left empty (null in JSON), and stderr says why in one line."""
    from memtraffic.core.ops import parse_shape, torch_dtype
    from memtraffic.measure.variants import describe, load_variants

    proc = cli_without_torch("list", "--shape", shape, "--dtype", dtype, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == (f"warning: predicting bytes (each variant's model) {MEASURE_LINE}; listed: the "
                           "minimum each variant's op must move\n")
    got = json.loads(proc.stdout)
    full = [describe(v, parse_shape(shape), torch_dtype(dtype)) for v in load_variants().values()]
    assert [(r["name"], r["op"], r["description"]) for r in got] == [
        (r["name"], r["op"], r["description"]) for r in full]
    compared = 0
    for light, r in zip(got, full, strict=True):
        if r["supported"]:  # the model's own check may refuse more; a shape of the wrong rank both refuse
            assert {k: light[k] for k in ("min_read_bytes", "min_write_bytes", "flops", "intensity")} == {
                k: r[k] for k in ("min_read_bytes", "min_write_bytes", "flops", "intensity")}
            assert light["pred_read_bytes"] is None and light["pred_write_bytes"] is None
            compared += 1
        elif not light["supported"]:
            assert light["reason"] == r["reason"]
    assert compared >= 4


def test_list_table_without_torch_marks_the_predicted_columns_empty():
    proc = cli_without_torch("list", "--shape", "1048576x2")
    assert proc.returncode == 0, proc.stderr
    row = next(line for line in proc.stdout.splitlines() if line.startswith("softmax_naive "))
    assert row.split() == ["softmax_naive", "softmax", "1048576x2", "fp32", "8.39", "MB", "8.39", "MB",
                           "-", "-", "-", "1.05e+07", "0.625"]


def test_the_api_names_the_extra_for_a_measuring_name():
    code = ("import sys\nfor n in ('torch', 'triton'): sys.modules[n] = None\nimport memtraffic\n"
            "memtraffic.analyze\ntry:\n    memtraffic.ops\nexcept ImportError as err:\n    print(err)\n")
    import subprocess

    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"memtraffic.ops {MEASURE_LINE}\n"
