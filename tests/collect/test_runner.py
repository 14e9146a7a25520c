"""runner: correctness checks, failures recorded without stopping, resumption, NVTX skipped without CUDA."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from memtraffic.collect import runner
from memtraffic.collect.planning import build_plan
from memtraffic.runfolder.folder import read_status

REPO = Path(__file__).resolve().parents[2]


# A user's variant file, loaded by the same loader as the suite: one variant writes zeros, one raises.
USER_FILE = """
import torch
from memtraffic.vocab.ops import OPS
from memtraffic.vocab.variant import Variant

def _same(shape, dtype, params):
    return OPS["softmax"].minimum(shape, dtype)

def _boom(x):
    raise ValueError("kernel exploded")

VARIANTS = {
    "t_wrong": Variant(name="t_wrong", op="softmax", description="writes zeros", run=torch.zeros_like,
                       predicted=_same),
    "t_boom": Variant(name="t_boom", op="softmax", description="raises", run=_boom, predicted=_same),
}
"""


@pytest.fixture
def user_file(tmp_path):
    path = tmp_path / "my_variants.py"
    path.write_text(USER_FILE)
    return path


def test_records_ok_and_failed_and_goes_on(tmp_path, user_file, monkeypatch, capsys):
    def no_nvtx(*args):
        raise AssertionError("NVTX must not be called without CUDA")

    monkeypatch.setattr(torch.cuda.nvtx, "range_push", no_nvtx)
    plan = build_plan(["t_wrong", "t_boom", "torch_softmax"], ["4x8"], ["fp32"], [],
                      variant_files=[user_file])
    assert plan["variant_files"] == [str(user_file.resolve())]
    status = tmp_path / "status.jsonl"
    assert runner.run_plan(plan, status, device=torch.device("cpu")) == 0
    final = read_status(status)
    assert [final[i]["status"] for i in range(3)] == ["failed", "failed", "ok"]
    assert final[0]["error"].startswith("CheckFailed: wrong result: max abs error")
    assert final[1]["error"] == "ValueError: kernel exploded"
    assert final[2]["range"] == "mt|torch_softmax|4x8|fp32" and final[2]["max_err"] < 1e-6
    # where the config's seconds went: the four phases in order, together no more than the whole
    phases = final[2]["phases"]
    assert list(phases) == ["inputs", "warmup", "check", "measured"]
    assert all(v >= 0 for v in phases.values()) and sum(phases.values()) <= final[2]["seconds"] + 4e-4
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("[1/3] t_wrong 4x8 fp32: FAILED CheckFailed")
    assert err[2].startswith("[3/3] torch_softmax 4x8 fp32: ok") and "mt|torch_softmax|4x8|fp32" in err[2]


def test_skips_configs_already_recorded(tmp_path, capsys):
    plan = build_plan(["torch_softmax", "torch_manual"], ["4x8"], ["fp32"], [])
    status = tmp_path / "status.jsonl"
    # config 0 crashed a previous process: it has a start record and must not be run again
    status.write_text(json.dumps({"id": 0, "range": plan["configs"][0]["range"], "status": "start"}) + "\n")
    assert runner.run_plan(plan, status, device=torch.device("cpu")) == 0
    final = read_status(status)
    assert final[0]["status"] == "start" and final[1]["status"] == "ok"
    assert "[1/2]" not in capsys.readouterr().err


def test_with_claims_it_runs_only_the_configs_it_claims_first(tmp_path, capsys):
    """measure --gpus: configs another GPU's runner claimed are left to it; the others are claimed for
    this GPU (a claim file holding its index) and run; the progress lines count the whole plan."""
    plan = build_plan(["torch_softmax", "torch_manual"], ["4x8", "8x8"], ["fp32"], [])
    claims = tmp_path / "claims"
    claims.mkdir()
    (claims / "1").write_text("0")  # GPU 0 took config 1
    status = tmp_path / "status-gpu1.jsonl"
    assert runner.run_plan(plan, status, device=torch.device("cpu"), claims=(claims, 1)) == 0
    assert sorted(read_status(status)) == [0, 2, 3]
    assert {p.name: p.read_text() for p in claims.iterdir()} == {"0": "1", "1": "0", "2": "1", "3": "1"}
    err = capsys.readouterr().err
    assert "[1/4] torch_softmax 4x8 fp32: ok" in err and "[2/4]" not in err and "[4/4]" in err
    assert runner.run_plan(plan, status, device=torch.device("cpu"), claims=(claims, 1)) == 0  # all taken
    assert "[" not in capsys.readouterr().err


@pytest.mark.parametrize(("out", "match"), [
    (torch.full((2, 3), float("nan")), "max abs error nan"),
    (torch.zeros(3, 2), "output shape"),
    ("text", "not a tensor"),
])
def test_check_output_failures(out, match):
    with pytest.raises(runner.CheckFailed, match=match):
        runner.check_output(out, torch.ones(2, 3, dtype=torch.float64), "fp32")


def test_check_output_tolerance_scales_with_the_reference():
    ref = torch.full((4,), 1e-4, dtype=torch.float64)
    assert runner.check_output(ref.float() * (1 + 1e-5), ref, "fp32") < 1e-8
    with pytest.raises(runner.CheckFailed):  # all zeros is 100% off, even though tiny in absolute terms
        runner.check_output(torch.zeros(4), ref, "fp32")


@pytest.mark.slow
def test_runner_process_standalone_on_cpu(tmp_path):
    """`python -m memtraffic.collect.runner PLAN` without ncu: a torch and a Triton (interpreted) variant."""
    plan = build_plan(["torch_softmax", "gelu_triton"], ["4x8"], ["fp32"], [])
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    env = {"PATH": "/usr/bin:/bin", "TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": "",
           "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "memtraffic.collect.runner", str(tmp_path / "plan.json")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    final = read_status(tmp_path / "status.jsonl")
    assert [final[i]["status"] for i in range(2)] == ["ok", "ok"]
    assert "mt|gelu_triton|4x8|fp32" in proc.stderr


def test_a_claim_still_being_written_names_no_gpu(tmp_path):
    from memtraffic.runfolder.folder import claim, read_claims

    assert claim(tmp_path / "claims", 3, 2) and not claim(tmp_path / "claims", 3, 0)
    (tmp_path / "claims" / "4").write_text("")  # created, its GPU index not yet written
    (tmp_path / "claims" / "notes.txt").write_text("1")  # not a claim
    assert read_claims(tmp_path / "claims") == {3: 2, 4: None}
    assert read_claims(tmp_path / "none") == {}
