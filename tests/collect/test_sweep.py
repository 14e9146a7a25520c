"""Sweeps: TOML grids, `list --count`, shards, the GPU split, and `measure --gpus` run by a fake ncu."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
import torch
from config_fixture import variant_config
from stand_ins import RUNNER_PASS_THROUGH as PASS_THROUGH
from stand_ins import fake_ncu
from typer.testing import CliRunner

from memtraffic.api import run_measure
from memtraffic.cli import app
from memtraffic.collect import measure as collect
from memtraffic.collect import sweep
from memtraffic.collect.planning import build_plan
from memtraffic.ncu import command as ncu_mod
from memtraffic.ncu import session as session_mod
from memtraffic.ncu.command import NcuRun
from memtraffic.runfolder import folder as rundir
from memtraffic.vocab.errors import GpuNotFoundError, NcuError, UsageError

# profile_plan and profile_gpus get an ncu session; 'ncu' and metric 'm' keep the argv short
SESSION = session_mod.NcuSession(Path("ncu"), (2025, 3, 1), "Fake GPU", ncu_mod.MetricSpec(["m"], []))


def _invoke(args, env=None):
    return CliRunner().invoke(app, args, env=env)


def _one_error_line(res, code: int) -> str:
    assert res.exit_code == code, res.output
    (line,) = res.output.strip().splitlines()
    assert line.startswith("error: ")
    return line


GRID = (["softmax_naive", "softmax_tiled", "torch_softmax"], ["8x8", "16x32", "64x4"], ["fp32", "bf16"],
        ["num_warps=1,2"])


# --- grids --------------------------------------------------------------------------------------------------


def test_sweep_file_gives_the_plan_of_the_same_options(tmp_path):
    (tmp_path / "grid.toml").write_text(
        'variants = ["softmax_naive", "torch_softmax"]\nshapes = ["8x8", "16x32"]\n'
        'dtypes = ["fp32", "bf16"]\n[params]\nnum_warps = [1, 2]\n')
    from_file = sweep.plan_from_grids(sweep.read_sweep(tmp_path / "grid.toml"))
    from_options = build_plan(["softmax_naive", "torch_softmax"], ["8x8", "16x32"], ["fp32", "bf16"],
                              ["num_warps=1,2"])
    assert [c["range"] for c in from_file["configs"]] == [c["range"] for c in from_options["configs"]]
    assert len(from_file["configs"]) == 2 * 2 * 2 + 2 * 2  # torch_softmax takes no num_warps


def test_sweep_file_grid_tables_add_their_own_configs(tmp_path):
    (tmp_path / "grid.toml").write_text(
        'shapes = ["8x8"]\n'
        '[[grid]]\nvariants = ["softmax_naive"]\nparams = { num_warps = [1, 2] }\n'
        '[[grid]]\nvariants = ["softmax_tiled"]\ndtypes = ["bf16"]\nparams = { BLOCK_M = [1, 4] }\n')
    plan = sweep.plan_from_grids(sweep.read_sweep(tmp_path / "grid.toml"))
    assert [c["range"] for c in plan["configs"]] == [
        "mt|softmax_naive|8x8|fp32|num_warps=1", "mt|softmax_naive|8x8|fp32|num_warps=2",
        "mt|softmax_tiled|8x8|bf16|BLOCK_M=1", "mt|softmax_tiled|8x8|bf16|BLOCK_M=4"]
    assert [c["id"] for c in plan["configs"]] == [0, 1, 2, 3]


def test_readme_grid_example_counts_its_top_level_and_its_grid_table(tmp_path):
    """docs/sweeps.md's grid.toml: the top level names variants, so it is a grid; [[grid]] adds one more."""
    import re

    readme = (Path(__file__).resolve().parents[2] / "docs" / "sweeps.md").read_text()
    (tmp_path / "grid.toml").write_text(re.search(r"```toml\n# grid.toml\n(.*?)```", readme, re.S).group(1))
    res = CliRunner().invoke(app, ["list", "--count", "--sweep", str(tmp_path / "grid.toml")])
    assert res.exit_code == 0, res.output
    # per variant: 2 shapes x 2 dtypes x 2 num_warps values (the top level's [4, 8], the table's [1, 2])
    assert res.stdout.splitlines() == ["softmax_tiled       8 configs", "softmax_online      8 configs",
                                       "softmax_naive       8 configs", "24 configs in all"]


@pytest.mark.parametrize(("text", "message"), [
    ("variants = [", "is not valid TOML"),
    ('variant = ["softmax_naive"]', "unknown key variant in the top level"),
    ("params = 3", "'params' must be a table"),
    ("all = 1", "'all' must be true or false"),
])
def test_bad_sweep_file_is_one_clear_line(tmp_path, text, message):
    (tmp_path / "grid.toml").write_text(text + "\n")
    line = _one_error_line(_invoke(["list", "--count", "--sweep", str(tmp_path / "grid.toml")]), 2)
    assert message in line


def test_list_count_shows_the_size_of_a_grid():
    variants, shapes, dtypes, params = GRID
    args = ["list", "--count", *variants, *[f"--shape={s}" for s in shapes],
            *[f"--dtype={d}" for d in dtypes], *[f"--param={p}" for p in params]]
    res = _invoke(args)
    assert res.exit_code == 0, res.output
    lines = res.output.strip().splitlines()
    assert lines[-1] == "30 configs in all"  # (2 + 2) x 3 shapes x 2 dtypes with num_warps, + 3 x 2
    assert lines[0].split() == ["softmax_naive", "12", "configs"]
    res = _invoke(["list", "--shape", "8x8", "--shape", "16x16"])
    assert "go with --count" in _one_error_line(res, 2)


# --- the split and the shards -------------------------------------------------------------------------------


def _grid_plan(shapes=None) -> dict:
    variants, grid_shapes, dtypes, params = GRID
    return build_plan(variants, shapes or grid_shapes, dtypes, params)


def test_balanced_split_puts_the_costliest_config_first_in_the_least_loaded_part():
    gb = sweep.REPLAY_BYTES_PER_S / sweep.ASSUMED_PASSES  # bytes that cost one second per config
    configs = [{"id": i, "range": f"r{i}", "pred_read_bytes": b * gb, "pred_write_bytes": 0}
               for i, b in enumerate([1, 8, 3, 3, 2, 1])]
    parts = sweep.balanced_split(configs, 2)
    # Costs 1.5 8.5 3.5 3.5 2.5 1.5 s: 8.5 -> A, 3.5 -> B, 3.5 -> B, 2.5 -> B (7 < 8.5), 1.5 -> A, 1.5 -> B.
    assert [[c["id"] for c in p] for p in parts] == [[0, 1], [2, 3, 4, 5]]  # each in the plan's order
    loads = [sum(sweep.predicted_cost(c) for c in p) for p in parts]
    assert loads == pytest.approx([10.0, 11.0])
    assert [[c["id"] for c in p] for p in sweep.balanced_split(configs, 3)] == [[1], [2, 4], [0, 3, 5]]


def test_balanced_split_of_equal_configs_is_even():
    parts = sweep.balanced_split(_grid_plan()["configs"], 4)
    assert sorted(len(p) for p in parts) == [7, 7, 8, 8]


@pytest.mark.parametrize("count", [1, 2, 3, 7, 30])
def test_shards_cover_every_config_once_and_are_deterministic(count):
    plan = _grid_plan()
    shards = [sweep.shard_plan(plan, i, count) for i in range(1, count + 1)]
    ranges = [c["range"] for s in shards for c in s["configs"]]
    assert sorted(ranges) == sorted(c["range"] for c in plan["configs"])  # each exactly once
    assert all(s["configs"] for s in shards)
    again = [sweep.shard_plan(_grid_plan(), i, count) for i in range(1, count + 1)]
    assert [s["configs"] for s in again] == [s["configs"] for s in shards]
    # The same grid written in another order gives the same shards (by range).
    reordered = _grid_plan(shapes=list(reversed(GRID[1])))
    other = [sorted(c["range"] for c in sweep.shard_plan(reordered, i, count)["configs"])
             for i in range(1, count + 1)]
    assert other == [sorted(c["range"] for c in s["configs"]) for s in shards]
    assert {s["shard"]["plan_digest"] for s in shards} == {sweep.plan_digest(reordered)}


@pytest.mark.parametrize("text", ["3/2", "0/2", "2", "a/b", "1/0", "-1/2"])
def test_bad_shard_is_one_clear_line(text):
    with pytest.raises(UsageError, match="write I/N with 1 <= I <= N"):
        sweep.parse_shard(text)
    line = _one_error_line(_invoke(["measure", "torch_softmax", "--shard", text]), 2)
    assert f"bad --shard {text!r}" in line


def test_more_shards_than_configs_is_an_error():
    with pytest.raises(UsageError, match="the plan has only 30 configs; use at most 30 shards"):
        sweep.shard_plan(_grid_plan(), 31, 31)


def test_parse_gpus_checks_the_indices():
    assert sweep.parse_gpus("all", 2) == [0, 1]
    assert sweep.parse_gpus("1, 0,1", 2) == [1, 0]
    with pytest.raises(UsageError, match="there is no GPU 2; this machine shows 2 .0-1"):
        sweep.parse_gpus("0,2", 2)
    with pytest.raises(UsageError, match="write all, or GPU indices"):
        sweep.parse_gpus("first", 2)
    with pytest.raises(GpuNotFoundError, match="no CUDA GPU is visible"):
        sweep.parse_gpus("0", 0)
    assert sweep.visible_id(1, None) == "1"
    assert sweep.visible_id(1, "2,3") == "3"  # Slurm narrowed the GPUs: ours is the second of them


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-machine message")
def test_cli_gpus_on_a_machine_without_gpu(tmp_path):
    ncu = fake_ncu(tmp_path / "ncu", PASS_THROUGH)
    res = _invoke(["measure", "torch_softmax", "--gpus", "3"], env={"MEMTRAFFIC_NCU": str(ncu)})
    assert _one_error_line(res, 1).startswith("error: no CUDA GPU is visible")


def test_cli_gpu_index_that_does_not_exist(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMTRAFFIC_NCU", str(fake_ncu(tmp_path / "ncu", PASS_THROUGH)))
    monkeypatch.setattr(collect, "cuda_device_names", lambda: ["Fake GPU", "Fake GPU"])
    line = _one_error_line(_invoke(["measure", "torch_softmax", "--gpus", "0,5"]), 2)
    assert "there is no GPU 5" in line
    monkeypatch.setattr(collect, "cuda_device_names", lambda: ["Fake A", "Fake B"])
    line = _one_error_line(_invoke(["measure", "torch_softmax", "--gpus", "all"]), 2)
    assert "the GPUs differ (Fake A, Fake B)" in line


# --- measure --gpus, on the CPU with a fake ncu -------------------------------------------------------------

# Like PASS_THROUGH (runs the runner, profiles nothing), but notes the GPU its process was given, and
# fails before running anything on the GPU named by FAIL_GPU.
PER_GPU = PASS_THROUGH.replace("app = argv", """gpu = os.environ.get("CUDA_VISIBLE_DEVICES")
export = argv[argv.index("--export") + 1]
with open(export + ".env", "w") as f:
    f.write(gpu)
if gpu == os.environ.get("FAIL_GPU"):
    print("==ERROR== the device is unavailable")
    sys.exit(1)
app = argv""")


def _fake_measure(tmp_path, monkeypatch, gpus=("Fake GPU", "Fake GPU")):
    monkeypatch.setenv("MEMTRAFFIC_NCU", str(fake_ncu(tmp_path / "ncu", PER_GPU)))
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setattr(collect, "cuda_device_names", lambda: list(gpus))
    monkeypatch.setattr(session_mod, "query_metric_names", lambda ncu, key=None: ncu_mod.parse_query_metrics(
        "\n".join(ncu_mod.base_name(n) for n in ncu_mod.resolve_metrics("traffic"))))


@pytest.mark.slow
def test_measure_gpus_runs_one_ncu_per_gpu_into_one_run(tmp_path, monkeypatch):
    _fake_measure(tmp_path, monkeypatch)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,6")  # e.g. given by Slurm: GPU 0 is device 4
    out = tmp_path / "run"
    lines: list[str] = []
    opts = collect.MeasureOptions(variants=["torch_softmax", "softmax_naive"], shapes=["4x8", "8x8"], out=out,
                                  gpus="all")
    with pytest.raises(NcuError, match="no kernel inside the NVTX ranges"):  # the fake profiles nothing
        run_measure(opts, echo=lines.append)
    plan = json.loads((out / "plan.json").read_text())
    run = json.loads((out / "run.json").read_text())
    # which GPU takes which config is a race; each config runs once, and plan.json says where
    on = {g: [c["id"] for c in plan["configs"] if c["gpu"] == g] for g in (0, 1)}
    assert sorted(on[0] + on[1]) == [0, 1, 2, 3]
    assert [g["configs"] for g in run["gpus"]] == [on[0], on[1]]
    assert plan["status_files"] == {"0": "status-gpu0.jsonl", "1": "status-gpu1.jsonl"}
    assert not (out / "claims").exists()  # plan.json keeps what the claims said
    for g, visible in ((0, "4"), (1, "6")):
        (attempt,) = [a for a in run["attempts"] if a["gpu"] == g]
        argv = attempt["argv"]
        assert argv[argv.index("--export") + 1] == f"profile-gpu{g}.ncu-rep"  # relative to the run folder
        # the runners start while the plan is built, then claim configs in the one claims folder
        status = f"status-gpu{g}.jsonl"
        assert argv[-7:] == ["--claims", "claims", "--gpu", str(g), "--status", status, "--wait-for-plan"]
        assert attempt["cuda_visible_devices"] == visible
        assert (out / f"profile-gpu{g}.ncu-rep.env").read_text() == visible
        status = rundir.read_status(out / f"status-gpu{g}.jsonl")
        assert sorted(status) == on[g] and all(r["status"] == "ok" for r in status.values())
        assert all(any(line.startswith(f"[gpu{g}] [{k + 1}/4] ") for line in lines) for k in on[g])
    assert [c["gpu"] for c in run["configs"]] == [c["gpu"] for c in plan["configs"]]
    assert all(c["status"] == "ok" for c in run["configs"])


@pytest.mark.slow
def test_a_plan_that_fails_while_the_gpus_start_stops_every_runner_and_keeps_nothing(tmp_path, monkeypatch):
    """With --gpus too the runners start while the plan is built: its one-line error, no run folder."""
    _fake_measure(tmp_path, monkeypatch)
    out = tmp_path / "run"
    opts = collect.MeasureOptions(variants=["torch_softmax"], shapes=["4x8"], params=["BLOCK_M=4"], out=out,
                                  gpus="all")
    with pytest.raises(UsageError, match="no selected variant takes parameter BLOCK_M"):
        run_measure(opts, echo=lambda line: None)
    assert not out.exists()


@pytest.mark.slow
def test_a_failing_gpu_leaves_every_config_to_the_others(tmp_path, monkeypatch):
    """GPU 1's ncu fails before running anything: GPU 0 takes every config, run.json records GPU 1's error."""
    _fake_measure(tmp_path, monkeypatch)
    monkeypatch.setenv("FAIL_GPU", "1")
    out = tmp_path / "run"
    lines: list[str] = []
    opts = collect.MeasureOptions(variants=["torch_softmax", "softmax_naive"], shapes=["4x8", "8x8"], out=out,
                                  gpus="0,1")
    with pytest.raises(NcuError, match="no kernel inside the NVTX ranges"):  # the fake profiles nothing
        run_measure(opts, echo=lines.append)
    run = json.loads((out / "run.json").read_text())
    g0, g1 = run["gpus"]
    assert g0["error"] is None and "the device is unavailable" in g1["error"] and g1["configs"] == []
    assert [(c["gpu"], c["status"]) for c in run["configs"]] == [(0, "ok")] * 4
    assert sorted(run["rerun"]) == sorted(c["range"] for c in run["configs"])  # no kernel profiled anywhere
    assert any(line.startswith("[gpu1] FAILED: ncu exited with code 1") for line in lines)

    again = collect.rerun_plan(out)
    assert sorted(c["range"] for c in again["configs"]) == sorted(run["rerun"])
    assert all("gpu" not in c for c in again["configs"])


def _claiming_runner(plan, run_dir, seconds=None, crash=None, exit_code=0, barrier=None):
    """A stand-in for ncu over `runner.py --claims`: each GPU's process takes the next config nobody has
    claimed, as the runner does; GPU g spends seconds[g] on each, the first process of GPU `crash` dies
    on the first config it takes, and each returns `exit_code`. Records (gpu, report name) per call."""
    import threading
    import time

    calls: list[tuple[int, str]] = []
    lock = threading.Lock()

    def fake_run(argv, log_path, echo=None, verbose=False, env=None, on_start=None):
        gpu = int(argv[argv.index("--gpu") + 1])
        claims, status = (Path(argv[argv.index(flag) + 1]) for flag in ("--claims", "--status"))
        assert claims == run_dir / "claims"
        with lock:
            calls.append((gpu, Path(argv[argv.index("--export") + 1]).name))
        first = len([c for c in calls if c[0] == gpu]) == 1
        if barrier is not None and first:
            barrier.wait()  # both GPUs' first processes start together
        done = rundir.read_status(status)
        for c in plan["configs"]:
            if c["id"] in done or not rundir.claim(claims, c["id"], gpu):
                continue
            rundir.append_status(status, {"id": c["id"], "range": c["range"], "status": "start"})
            if gpu == crash and first:
                return NcuRun(returncode=139, passes=1, interrupted=False, no_kernels=False, tail=[])
            time.sleep((seconds or {}).get(gpu, 0.0))
            rundir.append_status(status, {"id": c["id"], "range": c["range"], "status": "ok"})
            if exit_code:
                break
        return NcuRun(returncode=exit_code, passes=1, interrupted=False, no_kernels=False, tail=[])
    return fake_run, calls


def _plan(n: int) -> dict:
    return {"configs": [variant_config(i) for i in range(n)],
            "skipped": []}


def test_the_gpus_share_the_plan_and_the_faster_one_takes_more(tmp_path):
    """GPU 0 takes 50 ms a config, GPU 1 none: GPU 1 runs most configs; each runs once, and plan.json
    and run.json's GPU entries say which GPU ran it."""
    import threading

    plan = _plan(8)
    fake_run, _ = _claiming_runner(plan, tmp_path, seconds={0: 0.05}, barrier=threading.Barrier(2))
    slots = [collect.GpuSlot(0, "0"), collect.GpuSlot(1, "1")]
    out = collect.profile_gpus(plan, tmp_path, SESSION, collect.MeasureOptions(variants=[]), slots,
                               echo=lambda s: None, ncu_runner=fake_run)
    s0, s1 = (rundir.read_status(tmp_path / f"status-gpu{g}.jsonl") for g in (0, 1))
    assert sorted([*s0, *s1]) == list(range(8)) and len(s1) > len(s0) >= 1
    assert [g["configs"] for g in out["gpus"]] == [sorted(s0), sorted(s1)]
    written = json.loads((tmp_path / "plan.json").read_text())
    assert {c["id"]: c["gpu"] for c in written["configs"]} == {**dict.fromkeys(s0, 0), **dict.fromkeys(s1, 1)}
    assert not (tmp_path / "claims").exists()


def test_a_crashed_runner_restarts_on_its_own_gpu_and_the_gpus_still_share_the_rest(tmp_path):
    import threading

    plan = _plan(6)
    fake_run, calls = _claiming_runner(plan, tmp_path, seconds={0: 0.05}, crash=1,
                                       barrier=threading.Barrier(2))
    slots = [collect.GpuSlot(0, "0"), collect.GpuSlot(1, "1")]
    out = collect.profile_gpus(plan, tmp_path, SESSION, collect.MeasureOptions(variants=[]), slots,
                               echo=lambda s: None, ncu_runner=fake_run)
    s0, s1 = (rundir.read_status(tmp_path / f"status-gpu{g}.jsonl") for g in (0, 1))
    assert sorted([*s0, *s1]) == list(range(6))
    (crashed,) = [i for i, r in s1.items() if r["status"] == "failed"]
    assert "the runner process died while running it" in s1[crashed]["error"]
    assert all(r["status"] == "ok" for i, r in [*s0.items(), *s1.items()] if i != crashed)
    assert sorted(calls) == [(0, "profile-gpu0.ncu-rep"), (1, "profile-gpu1-2.ncu-rep"),
                             (1, "profile-gpu1.ncu-rep")]  # GPU 1's runner restarted, GPU 0's never
    assert [len(g["attempts"]) for g in out["gpus"]] == [1, 2] and not out["interrupted"]


def test_interrupt_on_one_gpu_stops_the_restarts_and_keeps_what_finished(tmp_path):
    """Each runner finishes one config and exits as after Ctrl-C: no restart, the configs nobody took
    have no GPU (measure records them as not run)."""
    import threading

    plan = _plan(4)
    fake_run, calls = _claiming_runner(plan, tmp_path, seconds={0: 0.05, 1: 0.05}, exit_code=130,
                                       barrier=threading.Barrier(2))
    slots = [collect.GpuSlot(0, "0"), collect.GpuSlot(1, "1")]
    out = collect.profile_gpus(plan, tmp_path, SESSION, collect.MeasureOptions(variants=[]), slots,
                               echo=lambda s: None, ncu_runner=fake_run)
    assert out["interrupted"] and out["reports"] == [] and len(calls) == 2
    for g in (0, 1):
        status = rundir.read_status(tmp_path / f"status-gpu{g}.jsonl")
        assert [r["status"] for r in status.values()] == ["ok"]
    assert sum("gpu" not in c for c in plan["configs"]) == 2


@pytest.mark.slow
def test_shards_measured_apart_merge_back_into_the_whole_plan(tmp_path, monkeypatch):
    """Three shards, each measured (fake ncu) into its own folder, merged: every config once."""
    from memtraffic.analysis.merge import merge_runs

    _fake_measure(tmp_path, monkeypatch)
    variants, shapes = ["torch_softmax", "softmax_naive"], ["4x8", "8x8", "8x4"]
    whole = build_plan(variants, shapes, [], [])
    for i in (1, 2, 3):
        opts = collect.MeasureOptions(variants=variants, shapes=shapes, out=tmp_path / f"s{i}",
                                      shard=f"{i}/3", gpus="all")
        with pytest.raises(NcuError, match="no kernel inside"):  # the fake ncu profiles nothing
            run_measure(opts, echo=lambda s: None)
        run = json.loads((tmp_path / f"s{i}" / "run.json").read_text())
        assert run["shard"]["index"] == i and run["shard"]["plan_configs"] == 6
        assert len(run["configs"]) == 2
    notes: list[str] = []
    out, run = merge_runs([tmp_path / f"s{i}" for i in (1, 2, 3)], tmp_path / "all", echo=notes.append)
    assert sorted(c["range"] for c in run["configs"]) == sorted(c["range"] for c in whole["configs"])
    assert run["notes"] == [] and [p["shard"]["index"] for p in run["parts"]] == [1, 2, 3]
    _, partial = merge_runs([tmp_path / "s1", tmp_path / "s3"], tmp_path / "some", echo=notes.append)
    assert partial["notes"] == ["shards of 3: missing 2"]


def test_cli_configs_given_two_ways_and_rerun_of_a_complete_run(tmp_path):
    (tmp_path / "grid.toml").write_text('variants = ["torch_softmax"]\n')
    line = _one_error_line(_invoke(["measure", "torch_softmax", "--sweep", str(tmp_path / "grid.toml")]), 2)
    assert "give the configs one way" in line
    run = tmp_path / "run"
    shutil.copytree(H200X2 / "softmax_sweep_80", run)
    line = _one_error_line(_invoke(["measure", "--rerun", str(run)]), 2)
    assert "lists no config to rerun and its reports hold every config; every config finished" in line
    assert "not a run folder" in _one_error_line(_invoke(["measure", "--rerun", str(tmp_path)]), 2)


# --- on the GPU machine -------------------------------------------------------------------------------------


@pytest.mark.ncu
def test_measure_gpus_all_on_device(tmp_path):
    """Every visible GPU gets configs and a report of its own; the one run reads back as one table."""
    try:
        ncu_mod.find_ncu()
    except NcuError as err:
        pytest.skip(str(err))
    from memtraffic.analysis.analyze import analyze_path

    out = tmp_path / "run"
    result = run_measure(collect.MeasureOptions(
        variants=["softmax_tiled", "torch_softmax"], shapes=["4096x256", "1024x512"], dtypes=["fp32", "bf16"],
        out=out, gpus="all"))
    count = torch.cuda.device_count()
    assert [g["index"] for g in result.run["gpus"]] == list(range(count))
    assert all(c["status"] == "ok" and c["profiled"] for c in result.run["configs"])
    assert result.run["reports"] == [f"profile-gpu{g}.ncu-rep" for g in range(count)]
    table = analyze_path(out)
    assert sorted(table["range"]) == sorted(c["range"] for c in result.run["configs"])
    gpu_of = {c["range"]: c["gpu"] for c in result.run["configs"]}
    pairs = zip(table["range"], table["report"], strict=True)
    assert all(Path(r).name == f"profile-gpu{gpu_of[rng]}.ncu-rep" for rng, r in pairs)
    assert result.run["rerun"] == []


@pytest.mark.gpu
def test_gpu_index_beyond_this_machine(tmp_path):
    try:
        ncu_mod.find_ncu()
    except NcuError as err:
        pytest.skip(str(err))
    count = torch.cuda.device_count()
    line = _one_error_line(_invoke(["measure", "torch_softmax", "--gpus", f"0,{count}"]), 2)
    assert f"there is no GPU {count}; this machine shows {count}" in line


# --- the committed two-GPU reference run (scripts/measure_gpus.py on the 2 x H200 host) ------------------

H200X2 = Path(__file__).resolve().parents[2] / "reports" / "h200x2"


def _comparison() -> list[dict[str, str]]:
    with open(H200X2 / "gpus_vs_one_comparison.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_committed_two_gpu_run_reads_as_one_run():
    from memtraffic.analysis.analyze import analyze_path

    run_dir = H200X2 / "softmax_sweep_80"
    run = json.loads((run_dir / "run.json").read_text())
    table = analyze_path(run_dir)
    assert len(table) == len(run["configs"]) == 80 and run["rerun"] == []
    assert list(table["range"]) == [c["range"] for c in run["configs"]]  # plan order, not report order
    assert run["reports"] == ["profile-gpu0.ncu-rep", "profile-gpu1.ncu-rep"]
    gpu_of = {c["range"]: c["gpu"] for c in run["configs"]}
    assert {gpu_of[r] for r in table["range"]} == {0, 1}
    pairs = zip(table["range"], table["report"], strict=True)
    assert all(Path(r).name == f"profile-gpu{gpu_of[rng]}.ncu-rep" for rng, r in pairs)
    assert [a["cuda_visible_devices"] for a in run["attempts"]] == ["0", "1"]
    # The script's comparison was made from this very run (all-1): same counters per config.
    rows = {r["range"]: r for r in _comparison()}
    for r in table.to_dict("records"):
        assert float(rows[r["range"]]["l1_ld_bytes[all-1]"]) == r["l1_ld_bytes"]
        assert float(rows[r["range"]]["l2_rd_bytes[all-1]"]) == r["l2_rd_bytes"]


def test_committed_comparison_l1_counters_equal_per_config_in_every_run():
    rows = _comparison()
    summary = json.loads((H200X2 / "gpus_vs_one_summary.json").read_text())
    assert len(rows) == summary["configs"] == 80
    for counter in ("l1_ld_bytes", "l1_st_bytes", "l1_ld_sectors", "l1_st_sectors", "req_ld_bytes"):
        assert all(len({r[f"{counter}[{n}]"] for n in summary["runs"]}) == 1 for r in rows), counter
        assert summary["identical_in_every_run"][counter] == 80


def test_merging_runs_of_different_gpus_is_refused():
    res = _invoke(["merge", str(H200X2 / "softmax_sweep_80"),
                   str(Path(__file__).resolve().parents[2] / "reports" / "h100" / "seed_1048576x2_fp32"),
                   "--out", "/nonexistent/never-created"])
    line = _one_error_line(res, 2)
    assert "different GPUs" in line and "NVIDIA H200" in line and "NVIDIA H100 80GB HBM3" in line


@pytest.mark.parametrize(("visible", "names"), [
    (None, ["GPU A", "GPU B", "GPU C"]), ("2,0", ["GPU C", "GPU A"]), ("1,7,0", ["GPU B"]), ("", []),
    ("GPU-1234-uuid", None),  # only CUDA can say: torch is asked
])
def test_gpu_names_from_nvidia_smi_as_cuda_visible_devices_narrow_them(tmp_path, monkeypatch, visible, names):
    from memtraffic.host import gpu

    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\nprintf 'GPU A\\nGPU B\\nGPU C\\n'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert gpu.smi_names() == names


def test_measure_gpus_splits_each_gpus_wall_time_into_configs_and_fixed_cost():
    import importlib.util

    spec = importlib.util.spec_from_file_location("measure_gpus", "scripts/measure_gpus.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    run_dir = H200X2 / "softmax_sweep_80"
    info = json.loads((run_dir / "run.json").read_text())
    split = script.gpu_split(run_dir, info)
    assert [g["index"] for g in split] == [0, 1] and [g["configs"] for g in split] == [40, 40]
    for g, part in zip(info["gpus"], split, strict=True):
        seconds = [json.loads(line).get("seconds", 0) for line in
                   (run_dir / g["status_file"]).read_text().splitlines() if '"ok"' in line]
        assert part["configs_s"] == pytest.approx(sum(seconds), abs=1e-3)
        assert part["fixed_s"] == pytest.approx(g["wall_time_s"] - sum(seconds), abs=1e-3)
        assert part["fixed_s"] > 0


def test_measure_starts_ncu_before_importing_torch():
    """The parent process imports torch (seconds) only to build the plan, which overlaps ncu's start."""
    import subprocess
    import sys

    code = ("import sys, memtraffic.cli, memtraffic.api, memtraffic.collect.measure as m; "
            "m.precheck(m.MeasureOptions(variants=['softmax_naive'], shapes=['4x8'])); "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


TWO_GPU = sorted(p.parent.name for p in Path("reports/h100x2").glob("*/summary.json"))


def test_the_two_gpu_summaries_are_found():
    assert len(TWO_GPU) >= 6


@pytest.mark.parametrize("name", TWO_GPU)
def test_committed_two_gpu_summaries_are_consistent(name):
    summary = json.loads((Path("reports/h100x2") / name / "summary.json").read_text())
    configs = int(name.split("_")[3])  # gpus_vs_one_<configs>_<set>...
    assert summary["configs"] == configs and set(summary["configs_ok"].values()) == {configs}
    for pair, ratio in summary["ratio_all_over_one"].items():
        b, a = pair.split(" / ")
        # the ratio comes from unrounded times, wall_s is rounded to 10 ms
        assert ratio == pytest.approx(summary["wall_s"][b] / summary["wall_s"][a], abs=1.5e-3)
    for gpus in summary["per_gpu"].values():
        for g in gpus:
            assert g["fixed_s"] == pytest.approx(g["wall_time_s"] - g["configs_s"], abs=2e-3)
            if "to_ready_s" in g:  # the split of the fixed time, from the runner's and ncu's Unix times
                parts = g["to_python_s"] + g["to_ready_s"] + g["to_first_s"] + g["after_last_s"]
                assert parts <= g["fixed_s"] + 0.05 and g["to_ready_s"] > 0


def test_two_gpus_on_fast_configs_save_little_and_one_gpu_got_faster():
    """H100 x2, 2026-11-25 (docs/distinct-launches.md): with inputs drawn on the GPU one GPU takes under
    half of what it took with CPU inputs in the same session, less than two GPUs took then; two GPUs now
    save little, because fixed start-up and ncu's per-config work dominate; with an empty Triton cache
    (configs compiling) two GPUs still pay."""
    load = lambda n: json.loads((Path("reports/h100x2") / n / "summary.json").read_text())  # noqa: E731
    now, before, cold = load("gpus_vs_one_160_bytes_x3"), load("gpus_vs_one_160_bytes_x2_at_d1125db"), \
        load("gpus_vs_one_160_bytes_x1_cold")
    one_now = [v for k, v in now["wall_s"].items() if k.startswith("one")]
    one_before = [v for k, v in before["wall_s"].items() if k.startswith("one")]
    all_before = [v for k, v in before["wall_s"].items() if k.startswith("all")]
    assert max(one_now) < min(one_before) / 2 and max(one_now) < min(all_before)
    assert min(now["ratio_all_over_one"].values()) > 0.9
    assert max(cold["ratio_all_over_one"].values()) < 0.65
    status = [json.loads(line) for g in (0, 1)
              for line in (Path("reports/h100x2/gpus_vs_one_160_bytes_x3") / f"all-1_status-gpu{g}.jsonl")
              .read_text().splitlines()]
    measured = [r["phases"]["measured"] for r in status if r.get("status") == "ok"]
    one_gpu = now["per_gpu"]["one-1"][0]
    assert sum(measured) / len(measured) > one_gpu["configs_s"] / one_gpu["configs"]
    assert any(r.get("event") == "ready" for r in status)
