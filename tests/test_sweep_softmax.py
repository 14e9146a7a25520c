"""scripts/sweep_softmax.py: the plan stays small and valid, and the whole pipeline (inputs, checks,
timing, summary, table, JSON) runs end to end on CPU with tiny shapes and a stubbed clock, so that the
one GPU call that runs it for real does not fail on a bug."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch

from memtraffic.kernels import VARIANTS
from memtraffic.probes import bench

pytestmark = [pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning"),
              pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning"),
              pytest.mark.filterwarnings("ignore:divide by zero encountered:RuntimeWarning")]

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "sweep_softmax.py"


@pytest.fixture()
def sweep():
    spec = importlib.util.spec_from_file_location("sweep_softmax", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["sweep_softmax"] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("sweep_softmax", None)


def test_every_planned_config_passes_check_and_the_grid_stays_small(sweep):
    counts: dict[str, int] = {}
    for _, shape, dtype, first, grid in sweep.plan(132, set(sweep.FAMILY_OF.values())):
        for name, params in first + grid:
            variant = VARIANTS[name]
            reason = variant.check(shape, dtype, {**variant.params, **(params or {})})
            # a CUDA C++ variant says here only that this machine cannot build it
            ok = reason is None or (variant.needs_cuda and "needs a CUDA GPU" in reason)
            assert ok, (name, params, reason)
            counts[name] = counts.get(name, 0) + 1
    for family in sweep.FAMILY_OF:
        # 86 configs (no torch.compile) took 17 s on the H100 (reports/bench/2026-11-23-h100-r3/sweeps/
        # sweep1.txt), 106 of the split and cluster families 16 s: 80 a family keeps the sweep one short
        # GPU call
        assert 0 < counts[family] <= 80, (family, counts[family])
    # the shapes, both dtypes, and the row-softmax baselines on every row shape
    assert counts["torch_softmax"] == counts["torch_compiled"] == len(sweep.ROW_SHAPES) * 2
    assert sweep.plan(132, {"tiled"}, frozenset({"torch_compiled"}))[0][3] == [("torch_softmax", None),
                                                                               ("softmax_tiled", None)]


def test_shapes_keeps_only_the_named_shapes_and_refuses_unknown_ones(sweep, capsys):
    work = sweep.plan(132, {"tiled", "split"}, shapes=frozenset({"1048576x2", "16384x131072"}))
    assert {(op, s) for op, s, *_ in work} == {("softmax", (1048576, 2)), ("softmax", (16384, 131072))}
    assert len(work) == 4  # two dtypes each
    assert sweep.main(["--dry-run", "--shapes", "16384x131072"]) == 0
    assert "softmax_split" in capsys.readouterr().out
    with pytest.raises(SystemExit) as err:
        sweep.main(["--dry-run", "--shapes", "1048576x2,100x7"])
    assert err.value.code == 2 and "--shapes: 100x7 not in the sweep" in capsys.readouterr().err


def test_dry_run_needs_no_gpu(sweep, capsys):
    assert sweep.main(["--dry-run"]) == 0
    assert "softmax_online" in capsys.readouterr().out


def test_the_pipeline_end_to_end_on_cpu(sweep, monkeypatch, tmp_path, capsys, device):
    if device != "cpu":
        pytest.skip("the CPU rehearsal; the GPU runs the real sweep")
    monkeypatch.setattr(sweep, "DEVICE", "cpu")
    monkeypatch.setattr(sweep, "DTYPES", (torch.float32,))
    monkeypatch.setattr(sweep, "ROW_SHAPES", [(64, 2), (2, 32768)])
    monkeypatch.setattr(sweep, "COL_SHAPES", [(64, 32)])
    monkeypatch.setattr(sweep, "MATMUL_SOFTMAX_SHAPES", [(32, 16, 16)])
    # every config "takes" 1 us and the copy 0.5 us; the tiled auto config 0.4 us, so it is the best
    clock = {"calls": 0}

    def fake_time(fn, budget_s=0.5, max_reps=200, min_reps=5):
        clock["calls"] += 1
        fn()
        return bench.Timing(1000.0, 5)

    monkeypatch.setattr(bench, "time_cuda", fake_time)
    monkeypatch.setattr(bench, "copy_time", lambda nbytes, budget_s: bench.Timing(500.0, 5))
    out = tmp_path / "sweep.json"
    # the interpreter runs one program at a time: split rows (programs waiting for each other) need a GPU
    assert sweep.main([str(out), "--skip", "torch_compiled,softmax_split"]) == 0
    result = json.loads(out.read_text())
    assert result["finished"]
    rows = result["rows"]
    assert clock["calls"] == sum(r["status"] == "ok" for r in rows) > 0
    failed = [r for r in rows if r["status"] == "failed"]
    assert not failed, failed  # every config computed softmax right on the checked rows
    assert {e["family"] for e in result["summary"]} == {"tiled", "online", "column", "fused"}
    for e in result["summary"]:
        assert e["best_frac_of_copy"] == 0.5
    text = capsys.readouterr().out
    assert "best params" in text and "0 failed" in text


def test_a_time_budget_skips_configs_but_keeps_the_json(sweep, monkeypatch, tmp_path, device):
    if device != "cpu":
        pytest.skip("the CPU rehearsal")
    monkeypatch.setattr(sweep, "DEVICE", "cpu")
    monkeypatch.setattr(sweep, "DTYPES", (torch.float32,))
    monkeypatch.setattr(sweep, "ROW_SHAPES", [(64, 2)])
    monkeypatch.setattr(bench, "copy_time", lambda nbytes, budget_s: bench.Timing(500.0, 5))
    out = tmp_path / "sweep.json"
    assert sweep.main([str(out), "--budget", "0", "--families", "tiled", "--skip", "torch_compiled"]) == 0
    result = json.loads(out.read_text())
    assert result["rows"] and all(r["status"] == "skipped" for r in result["rows"])
