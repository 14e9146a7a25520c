"""The examples the docs show: the variant file runs like a shipped variant, docs/your-code.md quotes it
whole, and the torch example traces under `memtraffic ops` on a CPU."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from memtraffic.collect import runner
from memtraffic.collect.planning import build_plan
from memtraffic.runfolder.folder import read_status

REPO = Path(__file__).resolve().parent.parent
VARIANT_FILE = REPO / "examples" / "my_variants.py"


def test_the_docs_quote_the_variant_file_whole():
    readme = (REPO / "docs" / "your-code.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, flags=re.S)
    assert VARIANT_FILE.read_text() in blocks


@pytest.mark.parametrize(("shape", "dtype"), [("7x33", "fp32"), ("5x1000", "bf16"), ("1x1", "fp16")])
def test_the_variant_file_runs_checked_against_float64(tmp_path, shape, dtype):
    """The runner's own check (float64 reference, odd shapes) on the user's kernel, in the interpreter."""
    plan = build_plan(["my_row_softmax"], [shape], [dtype], [], variant_files=[VARIANT_FILE])
    status = tmp_path / "status.jsonl"
    assert runner.run_plan(plan, status, device=torch.device("cpu")) == 0
    (record,) = read_status(status).values()
    assert record["status"] == "ok", record


@pytest.mark.slow
def test_the_torch_example_under_memtraffic_ops():
    proc = subprocess.run([sys.executable, "-m", "memtraffic.cli", "ops", "--format", "json", "--",
                           sys.executable, "examples/torch_model.py", "--device", "cpu", "--rows", "8",
                           "--width", "16"], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr
    ops = [r["op"] for r in json.loads(proc.stdout)]
    for op in ("aten.addmm.default", "aten.native_layer_norm.default", "aten.gelu.default",
               "aten._softmax.default", "aten.sum.dim_IntList", "aten.clone.default", "aten.relu_.default"):
        assert op in ops
    relu = next(r for r in json.loads(proc.stdout) if r["op"] == "aten.relu_.default")
    assert relu["min_read_bytes"] == relu["min_write_bytes"] == 8 * 16 * 4  # in place: read and written once


@pytest.mark.slow
def test_the_training_step_example_under_memtraffic_ops():
    """CPU, small sizes: the op classes with their own rules are all there, and the traffic adds up."""
    proc = subprocess.run([sys.executable, "-m", "memtraffic.cli", "ops", "--from-first-forward", "--format",
                           "json", "--", sys.executable, "examples/train_step.py", "--device", "cpu", "--seq",
                           "16", "--width", "32", "--vocab", "100"], capture_output=True, text=True, cwd=REPO,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    ops = [r["op"] for r in rows]
    for op in ("aten.embedding.default", "aten.nll_loss_forward.default", "aten.nll_loss_backward.default"):
        assert ops.count(op) == 2, op  # the warm-up step and the measured one
    assert ops.count("aten.native_layer_norm_backward.default") == 2 * 5  # 2 per block and the last
    assert "aten.addcdiv_.default" in ops  # AdamW
    assert "aten.uniform_.default" not in ops  # initialisation left out
    nll = next(r for r in rows if r["op"] == "aten.nll_loss_forward.default")
    assert nll["min_read_bytes"] == 4 * 16 * (4 + 8) and nll["min_note"] == ""  # CPU targets: exact
