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

from memtraffic.vocab.files import read_toml

REPO = Path(__file__).resolve().parent.parent
MEASURE_LINE = ("needs torch and triton, the measuring side, which the base install leaves out: "
                "pip install 'memtraffic[measure]' (in a clone: .venv/bin/pip install -e '.[measure]')")
PREDICTED_LINE = ("warning: predicted bytes need the [measure] extra (torch, triton): pip install "
                  "'memtraffic[measure]'\n")


def test_torch_and_triton_are_an_extra_not_the_base():
    project = read_toml(REPO / "pyproject.toml", "project file")["project"]
    base = {d.split(">")[0].split("=")[0].strip() for d in project["dependencies"]}
    assert base == {"numpy", "pandas", "plotly", "typer", "ncu-report"}
    assert {d.split(">")[0] for d in project["optional-dependencies"]["measure"]} == {"torch", "triton"}
    assert any(d.startswith("kaleido") for d in project["optional-dependencies"]["png"])


@pytest.mark.parametrize("args", [
    ("measure", "softmax_naive"),
    ("bench", "softmax_naive"),
    ("roofs",),
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
    from memtraffic.collect.variants import list_row, load_variants
    from memtraffic.vocab.ops import parse_shape, torch_dtype

    proc = cli_without_torch("list", "--shape", shape, "--dtype", dtype, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == PREDICTED_LINE
    got = json.loads(proc.stdout)
    full = [list_row(v, parse_shape(shape), torch_dtype(dtype)) for v in load_variants().values()]
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


def test_list_table_without_torch_leaves_the_predicted_columns_out_and_says_why_once():
    proc = cli_without_torch("list", "--shape", "1048576x2", "--wide")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0].split() == ["variant", "op", "shape", "dtype", "min", "read", "min",
                                                   "write", "FLOPs", "FLOP/B"]
    row = next(line for line in proc.stdout.splitlines() if line.startswith("softmax_naive "))
    assert row.split() == ["softmax_naive", "softmax", "1048576x2", "fp32", "8.39", "MB", "8.39", "MB",
                           "1.05e+07", "0.625"]
    assert proc.stderr == PREDICTED_LINE and len(PREDICTED_LINE.rstrip()) <= 100
    assert "memtraffic[measure]" not in proc.stdout


def test_the_api_names_the_extra_for_a_measuring_name():
    code = ("import sys\nfor n in ('torch', 'triton'): sys.modules[n] = None\nimport memtraffic\n"
            "memtraffic.analyze\ntry:\n    memtraffic.ops\nexcept ImportError as err:\n    print(err)\n")
    import subprocess

    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"memtraffic.ops {MEASURE_LINE}\n"


@pytest.mark.slow
def test_the_readmes_first_command_runs_the_main_job_without_torch_in_under_600_mb(tmp_path):
    """The README's first command, verbatim, in a copy of the clone: a fresh virtual environment of the base
    install (from the package index), then the main job. Slow (a minute on 2 cores); skipped offline."""
    import re
    import shutil
    import subprocess

    readme = (REPO / "README.md").read_text()
    first = next(line for line in readme.split("```bash", 1)[1].split("```", 1)[0].splitlines()
                 if line and not line.startswith("#"))
    clone = tmp_path / "clone"
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for name in ("memtraffic", "kernels"):
        shutil.copytree(REPO / name, clone / name, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, clone / name)
    run = "reports/h100/seed_1048576x2_fp32"
    shutil.copytree(REPO / run, clone / run)
    env = {"PATH": "/usr/bin:/bin", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "HOME": str(tmp_path)}
    proc = subprocess.run(["bash", "-c", first], cwd=clone, capture_output=True, text=True, timeout=900,
                          env=env)
    if proc.returncode and re.search(r"(?i)could not find a version|connection|network|resolve", proc.stderr):
        pytest.skip(f"no package index reachable: {proc.stderr.strip().splitlines()[-1]}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "softmax_naive 1048576x2 fp32 num_warps=4" in proc.stdout
    site = next((clone / ".venv" / "lib").glob("python3*/site-packages"))
    assert not [p.name for p in site.iterdir() if p.name.split("-")[0] in ("torch", "triton")]
    size = sum(p.stat().st_size for p in (clone / ".venv").rglob("*") if p.is_file() and not p.is_symlink())
    assert size < 600e6, f"the base install takes {size / 1e6:.0f} MB"


def _python_without_torch(tmp_path: Path) -> Path:
    """A `python` on PATH whose site-packages are off (-S): a Python without torch, as a base install's."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    python = bin_dir / "python"
    python.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
    python.chmod(0o755)
    return bin_dir


@pytest.mark.parametrize("args", [("ops",), ("profile", "--torch-ops")], ids=["ops", "profile"])
def test_tracing_a_program_whose_python_has_no_torch_says_so_before_starting_it(args, tmp_path, monkeypatch):
    """`memtraffic ops -- python examples/torch_model.py` in a base install: one line naming the [measure]
    extra, exit 1, no traceback of the program (it never starts), said before ncu or a GPU is looked for."""
    import os

    bin_dir = _python_without_torch(tmp_path)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    started = tmp_path / "started"
    program = tmp_path / "program.py"
    program.write_text(f"open({str(started)!r}, 'w')\nimport torch\n")
    proc = cli_without_torch(*args, "--", "python", str(program))
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr == (f"error: memtraffic {' '.join(args)} traces PyTorch programs, and the program's "
                           f"Python ({bin_dir / 'python'}) has no torch: pip install 'memtraffic[measure]' "
                           "(in a clone: .venv/bin/pip install -e '.[measure]')\n")
    assert proc.stdout == "" and not started.exists()
