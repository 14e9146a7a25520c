"""bench: table layout, ratios, refusal to overwrite, the CPU-machine error. Timing is gpu-marked."""

import json

import pytest
import torch
from typer.testing import CliRunner

from memtraffic.cli import app
from memtraffic.probes import bench
from memtraffic.views.tables import bench_table
from memtraffic.vocab.errors import UsageError

ENV = {"gpu": "TestGPU", "torch": "t", "triton": "tr"}


def _result():
    rows = [
        {
            "variant": "softmax_tiled",
            "shape": "8x8",
            "dtype": "fp32",
            "status": "ok",
            "time_ns": 2000.0,
            "bw_Bps": 512 / 2e-6,
            "frac_of_copy": 0.5,
            "speedup_vs_torch_softmax": 1.5,
        },
        {"variant": "softmax_naive", "shape": "8x8", "dtype": "fp32", "status": "failed", "error": "boom"},
    ]
    return {"environment": ENV, "date": "2026-01-01", "command": "x", "rows": rows}


def test_table_shows_numbers_and_failures():
    text = bench_table(_result())
    assert text.splitlines()[0] == "TestGPU, torch t, triton tr, 2026-01-01"
    tiled = next(line for line in text.splitlines() if line.startswith("softmax_tiled"))
    assert "2.0 us" in tiled and "256.00 MB/s" in tiled and "50%" in tiled and "1.50x" in tiled
    naive = next(line for line in text.splitlines() if line.startswith("softmax_naive"))
    assert "failed" in naive


def test_write_result_refuses_to_overwrite(tmp_path):
    out = bench.write_result(_result(), tmp_path / "b", "table")
    assert json.loads((out / "results.json").read_text())["rows"][0]["time_ns"] == 2000.0
    with pytest.raises(UsageError, match="already exists"):
        bench.write_result(_result(), tmp_path / "b", "table")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-machine message")
def test_cli_without_gpu_says_so():
    res = CliRunner().invoke(app, ["bench", "torch_softmax"])
    assert res.exit_code == 1
    assert (
        res.output.strip()
        == "error: no CUDA GPU is visible: bench needs one; `memtraffic analyze` reads existing runs on any "
        "machine"
    )


def test_cli_unknown_variant_suggests():
    res = CliRunner().invoke(app, ["bench", "torch_softmx"])
    assert res.exit_code == 2
    assert "unknown variant 'torch_softmx': did you mean torch_softmax" in res.output


def test_copy_baseline_is_the_median_of_five_copies(monkeypatch):
    # one fast copy must not set the ratio (it did when the faster of two was kept), nor one slow one
    copies = iter([40.0, 44.0, 43.0, 90.0, 43.5, 1.0, 1.0])
    made = []
    monkeypatch.setattr(bench, "require_gpu", lambda needs: "TestGPU")
    monkeypatch.setattr(bench, "environment", lambda gpu: ENV)
    monkeypatch.setattr(bench, "copy_time", lambda n, b: made.append(n) or bench.Timing(next(copies), 5))
    monkeypatch.setattr(bench, "bench_config", lambda name, shape, dtype, params, budget, cat: {
        "variant": name, "shape": "x", "dtype": "fp32", "status": "ok", "time_ns": 43.0})
    rows = bench.run_bench(["softmax_tiled", "softmax_naive"], [(64, 64), (32, 128)], [torch.float32])["rows"]
    assert made == [64 * 64 * 8] * bench.COPY_RUNS  # same bytes for both shapes: one set of copies
    assert [r["copy_runs_ns"] for r in rows] == [[40.0, 44.0, 43.0, 90.0, 43.5]] * 4
    assert all(r["copy_ns"] == 43.5 and r["frac_of_copy"] == 43.5 / 43.0 for r in rows)


@pytest.mark.gpu
def test_bench_copy_and_softmax_on_gpu():
    result = bench.run_bench(["torch_softmax"], [(4096, 4096)], [torch.float32], budget_s=0.05)
    (row,) = result["rows"]
    assert row["status"] == "ok" and row["time_ns"] > 0
    # softmax moves the same minimum bytes as the copy; it cannot beat the copy by much
    assert 0.1 < row["frac_of_copy"] < 1.2
