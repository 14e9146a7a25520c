"""collect: the ncu argv, finding and vetting ncu, metric validation, run folders, restarts after crashes."""

from __future__ import annotations

import json
import os
import sys
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
import pytest
import torch
from stand_ins import RUNNER_PASS_THROUGH, VERSION_2025, fake_ncu
from typer.testing import CliRunner

from memtraffic.api import run_measure
from memtraffic.cli import app
from memtraffic.collect import measure as collect
from memtraffic.collect import planning as plan_mod
from memtraffic.ncu import command as ncu_mod
from memtraffic.ncu import session as session_mod
from memtraffic.ncu.command import NcuRun
from memtraffic.runfolder import folder as rundir
from memtraffic.vocab.errors import NcuError, UsageError

# profile_plan and profile_gpus get an ncu session; 'ncu' and metric 'm' keep the argv short
SESSION = session_mod.NcuSession(Path("ncu"), (2025, 3, 1), "Fake GPU", ncu_mod.MetricSpec(["m"], []))


def test_ncu_command_is_exact():
    argv = ncu_mod.build_ncu_command(
        "/opt/ncu", ["gpu__time_duration.sum", "dram__bytes_read.sum"], "/r/profile.ncu-rep",
        ["/usr/bin/python3", "-m", "memtraffic.collect.runner", "/r/plan.json"],
    )
    assert argv == [
        "/opt/ncu",
        "--metrics", "gpu__time_duration.sum,dram__bytes_read.sum",
        "--nvtx", "--nvtx-include", "regex:^mt\\|.*/",
        "--cache-control", "all",
        "--clock-control", "none",
        "--import-sass", "no",
        "--target-processes", "application-only",
        "--export", "/r/profile.ncu-rep",
        "/usr/bin/python3", "-m", "memtraffic.collect.runner", "/r/plan.json",
    ]


def test_ncu_command_with_source_adds_source_counters_source_text_and_sass():
    argv = ncu_mod.build_ncu_command("ncu", ["m"], "r", ["app"], source=True)
    assert argv == [
        "ncu",
        "--metrics", "m",
        "--nvtx", "--nvtx-include", "regex:^mt\\|.*/",
        "--cache-control", "all",
        "--clock-control", "none",
        "--import-sass", "yes",
        "--target-processes", "application-only",
        "--section", "SourceCounters", "--import-source", "yes",
        "--export", "r",
        "app",
    ]


def test_ncu_command_options_and_bad_values():
    argv = ncu_mod.build_ncu_command("ncu", ["m"], "r", ["app"], cache_control="none", clock_control="base")
    assert argv[argv.index("--cache-control") + 1] == "none"
    assert argv[argv.index("--clock-control") + 1] == "base"
    with pytest.raises(UsageError, match="--clock-control 'fast'"):
        ncu_mod.build_ncu_command("ncu", ["m"], "r", ["app"], clock_control="fast")


def test_find_ncu_search_order(tmp_path):
    path_ncu = fake_ncu(tmp_path / "bin" / "ncu", VERSION_2025)
    cuda_ncu = fake_ncu(tmp_path / "cuda" / "bin" / "ncu", VERSION_2025)
    opt = tmp_path / "opt"
    for version in ("2023.1.0", "2025.3.1", "2024.10.2"):
        fake_ncu(opt / version / "ncu", VERSION_2025)
    override = fake_ncu(tmp_path / "mine" / "ncu", VERSION_2025)
    kw = {"cuda_bin": tmp_path / "cuda" / "bin", "opt_root": opt}

    assert ncu_mod.find_ncu({"PATH": str(path_ncu.parent), "MEMTRAFFIC_NCU": str(override)}, **kw) == override
    assert ncu_mod.find_ncu({"PATH": str(path_ncu.parent)}, **kw) == path_ncu
    assert ncu_mod.find_ncu({"PATH": ""}, **kw) == cuda_ncu
    cuda_ncu.unlink()
    assert ncu_mod.find_ncu({"PATH": ""}, **kw) == opt / "2025.3.1" / "ncu"  # newest, not lexically last


def test_find_ncu_not_found_says_what_to_do(tmp_path):
    with pytest.raises(NcuError, match="not found.*MEMTRAFFIC_NCU"):
        ncu_mod.find_ncu({"PATH": ""}, cuda_bin=tmp_path / "none", opt_root=tmp_path / "none")
    with pytest.raises(NcuError, match="MEMTRAFFIC_NCU=.* is not an executable"):
        ncu_mod.find_ncu({"MEMTRAFFIC_NCU": str(tmp_path / "missing")})


def test_ncu_version_new_enough_and_too_old(tmp_path):
    new = fake_ncu(tmp_path / "new" / "ncu", VERSION_2025)
    assert ncu_mod.ncu_version(new) == (2025, 3, 1, 0)
    old = fake_ncu(tmp_path / "old" / "ncu", 'print("Version 2022.4.1.0 (build 3)")')
    with pytest.raises(NcuError, match="2022.4.1.0 .* too old: memtraffic needs Nsight Compute >= 2023.1"):
        ncu_mod.ncu_version(old)
    mute = fake_ncu(tmp_path / "mute" / "ncu", 'print("hello")')
    with pytest.raises(NcuError, match="printed no version"):
        ncu_mod.ncu_version(mute)


def test_counter_permission_error_is_mapped(tmp_path):
    ncu = fake_ncu(tmp_path / "ncu", (
        'print("==PROF== Connected to process 123")\n'
        'print("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU '
        'Performance Counters on the target device 0.")\n'
        "sys.exit(1)"
    ))
    with pytest.raises(NcuError) as err:
        ncu_mod.run_ncu([str(ncu)], tmp_path / "ncu.log", echo=lambda line: None)
    assert "ERR_NVGPUCTRPERM" in str(err.value)
    assert "NVreg_RestrictProfilingToAdminUsers=0" in str(err.value) and "root" in str(err.value)
    assert "\n" not in str(err.value)


def test_run_ncu_filters_prof_lines_and_counts_passes(tmp_path):
    ncu = fake_ncu(tmp_path / "ncu", (
        'print("==PROF== Profiling \\"softmax\\" - 0: 0%....50%....100% - 5 passes")\n'
        'print("[1/1] torch_softmax 8x8 fp32: ok", file=sys.stderr)\n'
        'print("==WARNING== something worth seeing")'
    ))
    shown: list[str] = []
    result = ncu_mod.run_ncu([str(ncu)], tmp_path / "ncu.log", echo=shown.append)
    assert result.returncode == 0 and result.passes == 5
    assert shown == ["[1/1] torch_softmax 8x8 fp32: ok", "==WARNING== something worth seeing"]
    assert "5 passes" in (tmp_path / "ncu.log").read_text()  # the log keeps everything


QUERY = """Device NVIDIA H100 80GB HBM3 (GH100)
---------------------------- --------------- --------------- ------------------------------
Metric Name                  Metric Type     Metric Unit     Metric Description
---------------------------- --------------- --------------- ------------------------------
dram__bytes_read             Counter         byte            # of bytes read from DRAM, a long
                                                             description about sm__wrapped
gpu__time_duration           Counter         ns              duration
FBSP.TriageCompute.dramc__throughput  Throughput  %          DRAMC Throughput
"""


def test_parse_query_metrics():
    names = ncu_mod.parse_query_metrics(QUERY)
    assert names == {"dram__bytes_read", "gpu__time_duration", "dramc__throughput"}


def test_metric_validation_lists_every_invalid_name():
    available = ncu_mod.parse_query_metrics(QUERY)
    names = ncu_mod.resolve_metrics("dram_rd_bytes,gpu__time_duration.max", available)
    assert names == ["gpu__time_duration.sum", "dram__bytes_read.sum", "gpu__time_duration.max"]
    with pytest.raises(UsageError) as err:
        ncu_mod.resolve_metrics("dram_rd_bytes,bogus,nope__x.sum,traffic", available)
    msg = str(err.value)
    # Raw names the GPU lacks are refused; the traffic set's aliases this fake GPU lacks are notes instead.
    assert msg.startswith("unknown metrics: bogus, nope__x.sum. ")
    spec = ncu_mod.resolve_metric_spec("traffic", available)
    assert spec.names == ["gpu__time_duration.sum", "dram__bytes_read.sum"]
    assert spec.notes[0].startswith("L1 load bytes: ncu offers none of "
                                    "l1tex__t_bytes_pipe_lsu_mem_global_op_ld")


def test_metric_sets_resolve_without_ncu():
    names = ncu_mod.resolve_metrics("traffic")
    assert names[0] == "gpu__time_duration.sum" and "dram__bytes_write.sum" in names
    assert len(names) == len(set(names))


def test_bytes_set_is_the_levels_bytes_without_request_counters():
    names = ncu_mod.resolve_metrics("bytes")
    assert names == ["gpu__time_duration.sum", "l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum",
                     "l1tex__t_bytes_pipe_lsu_mem_global_op_st.sum", "lts__t_sectors_srcunit_tex_op_read.sum",
                     "lts__t_sectors_srcunit_tex_op_write.sum", "dram__bytes_read.sum",
                     "dram__bytes_write.sum"]
    assert set(names) < set(ncu_mod.resolve_metrics("traffic"))


def test_run_folder_is_never_reused(tmp_path):
    now = datetime(2026, 11, 22, 12, 0, 0, tzinfo=timezone.utc)
    a = rundir.new_run_dir(["softmax_tiled", "torch_softmax"], root=tmp_path, now=now)
    b = rundir.new_run_dir(["softmax_tiled", "torch_softmax"], root=tmp_path, now=now)
    assert a.name == "20261122T120000Z_softmax_tiled+1" and b.name == a.name + "-2"
    (a / "x").write_text("x")
    with pytest.raises(UsageError, match="already exists and is not empty"):
        rundir.new_run_dir(["v"], out=a)
    assert (a / "x").read_text() == "x"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert rundir.new_run_dir(["v"], out=empty) == empty


def test_plan_crosses_shapes_dtypes_and_params():
    plan = plan_mod.build_plan(["torch_softmax", "gelu_triton"], ["8x16"], ["fp32", "bf16"],
                              ["BLOCK=512,1024"])
    ranges = [c["range"] for c in plan["configs"]]
    assert ranges == [
        "mt|torch_softmax|8x16|fp32", "mt|torch_softmax|8x16|bf16",
        "mt|gelu_triton|8x16|fp32|BLOCK=512", "mt|gelu_triton|8x16|fp32|BLOCK=1024",
        "mt|gelu_triton|8x16|bf16|BLOCK=512", "mt|gelu_triton|8x16|bf16|BLOCK=1024",
    ]
    c = plan["configs"][0]
    assert (c["min_read_bytes"], c["min_write_bytes"]) == (8 * 16 * 4, 8 * 16 * 4)
    assert c["model_flops"] == 5 * 8 * 16
    with pytest.raises(UsageError, match="no selected variant takes parameter FOO"):
        plan_mod.build_plan(["torch_softmax"], ["8x16"], [], ["FOO=1"])
    with pytest.raises(UsageError, match="MxNxK shape; none of 8x16"):
        plan_mod.build_plan(["matmul_torch"], ["8x16"], [], [])


def _plan(n: int) -> dict:
    configs = [{"id": i, "range": f"mt|v{i}|8x8|fp32", "variant": f"v{i}"} for i in range(n)]
    return {"configs": configs, "skipped": [], "status_file": "status.jsonl"}


def test_crashed_runner_gets_a_fresh_ncu_for_the_rest(tmp_path):
    """Attempt 1: config 0 ok, config 1 kills the process. Attempt 2 must do config 2 only."""
    plan = _plan(3)
    status = tmp_path / "status.jsonl"
    calls: list[list[str]] = []

    def fake_run(argv, log_path, echo=None, verbose=False):
        calls.append(argv)
        done = rundir.read_status(status)
        for c in plan["configs"]:
            if c["id"] in done:
                continue
            rundir.append_status(status, {"id": c["id"], "range": c["range"], "status": "start"})
            if c["id"] == 1:
                return NcuRun(returncode=139, passes=5, interrupted=False, no_kernels=False, tail=[])
            rundir.append_status(status, {"id": c["id"], "range": c["range"], "status": "ok"})
        return NcuRun(returncode=0, passes=5, interrupted=False, no_kernels=False, tail=[])

    opts = collect.MeasureOptions(variants=[])
    out = collect.profile_plan(plan, tmp_path, SESSION, opts, echo=lambda s: None,
                               ncu_runner=fake_run)
    final = rundir.read_status(status)
    assert [final[i]["status"] for i in range(3)] == ["ok", "failed", "ok"]
    assert "runner process died" in final[1]["error"] and "139" in final[1]["error"]
    assert len(calls) == 2 and len(out["attempts"]) == 2
    assert calls[0][calls[0].index("--export") + 1] == str(tmp_path / "profile.ncu-rep")
    assert calls[1][calls[1].index("--export") + 1] == str(tmp_path / "profile-2.ncu-rep")
    assert not out["interrupted"]


def test_no_progress_is_an_error_not_a_loop(tmp_path):
    def fake_run(argv, log_path, echo=None, verbose=False):
        return NcuRun(returncode=1, passes=None, interrupted=False, no_kernels=False,
                      tail=["==ERROR== unrecognised option '--import-sass'"])

    opts = collect.MeasureOptions(variants=[])
    with pytest.raises(NcuError, match="before profiling anything: ==ERROR== unrecognised option"):
        collect.profile_plan(_plan(2), tmp_path, SESSION, opts, ncu_runner=fake_run)


def test_interrupt_keeps_what_finished(tmp_path):
    plan = _plan(3)
    status = tmp_path / "status.jsonl"

    def fake_run(argv, log_path, echo=None, verbose=False):
        rundir.append_status(status, {"id": 0, "range": "r", "status": "ok"})
        return NcuRun(returncode=130, passes=5, interrupted=True, no_kernels=False, tail=[])

    opts = collect.MeasureOptions(variants=[])
    out = collect.profile_plan(plan, tmp_path, SESSION, opts, ncu_runner=fake_run)
    final = rundir.read_status(status)
    assert out["interrupted"] and final[0]["status"] == "ok"
    assert final[1]["status"] == final[2]["status"] == "not run"


# --- the CLI, up to where a GPU is needed ------------------------------------------------------------------


def _invoke(args, env=None):
    return CliRunner().invoke(app, args, env=env)


def test_cli_unknown_variant_is_a_usage_error():
    res = _invoke(["measure", "torch_softmx"])
    assert res.exit_code == 2
    (line,) = res.output.strip().splitlines()
    assert line.startswith("error: unknown variant 'torch_softmx': did you mean torch_softmax")


def test_cli_bad_metric_name_before_ncu():
    res = _invoke(["measure", "torch_softmax", "--metrics", "traffic,bogus,worse"])
    assert res.exit_code == 2
    assert res.output.startswith("error: unknown metrics: bogus, worse.")


def test_cli_ncu_missing(tmp_path):
    res = _invoke(["measure", "torch_softmax"], env={"MEMTRAFFIC_NCU": str(tmp_path / "nope")})
    assert res.exit_code == 1
    assert res.output.count("\n") == 1 and "MEMTRAFFIC_NCU" in res.output


def test_cli_ncu_too_old(tmp_path):
    old = fake_ncu(tmp_path / "ncu", 'print("Version 2021.1.0.0")')
    res = _invoke(["measure", "torch_softmax"], env={"MEMTRAFFIC_NCU": str(old)})
    assert res.exit_code == 1 and "too old" in res.output and res.output.count("\n") == 1


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-machine message")
def test_cli_no_gpu(tmp_path):
    ncu = fake_ncu(tmp_path / "ncu", VERSION_2025)
    res = _invoke(["measure", "torch_softmax"], env={"MEMTRAFFIC_NCU": str(ncu)})
    assert res.exit_code == 1
    assert res.output.startswith("error: no NVIDIA GPU is visible") and res.output.count("\n") == 1


def test_measure_on_cpu_with_pass_through_ncu(tmp_path, monkeypatch):
    _stand_in(tmp_path, monkeypatch)
    out = tmp_path / "run"
    lines: list[str] = []
    opts = collect.MeasureOptions(variants=["torch_softmax"], shapes=["4x8"], out=out)
    with pytest.raises(NcuError, match=r"no kernel inside the NVTX ranges mt\|torch_softmax\|4x8\|fp32"):
        run_measure(opts, echo=lines.append)
    run = json.loads((out / "run.json").read_text())
    assert run["configs"][0]["status"] == "ok" and run["configs"][0]["profiled"] is False
    assert run["environment"]["gpu"] == "Fake GPU" and run["environment"]["ncu_version"] == "2025.3.1.0"
    assert run["metric_names"][0] == "gpu__time_duration.sum"
    plan = json.loads((out / "plan.json").read_text())
    assert plan["configs"][0]["range"] == "mt|torch_softmax|4x8|fp32"
    assert any(line.startswith("[1/1] torch_softmax 4x8 fp32: ok") for line in lines)
    assert not any(line.startswith("==PROF==") for line in lines)
    assert os.path.exists(out / "ncu.log")


@pytest.mark.ncu
def test_measure_end_to_end_on_gpu(tmp_path):
    """On the GPU machine: one ncu process, NVTX-filtered, a multi-kernel range summed, small reports."""
    try:
        ncu_mod.find_ncu()
    except NcuError as err:
        pytest.skip(str(err))
    from memtraffic.analysis.analyze import to_records

    out = tmp_path / "run"
    result = run_measure(collect.MeasureOptions(variants=["torch_softmax", "torch_manual"],
                                                shapes=["65536x32"], out=out))
    assert [c["status"] for c in result.run["configs"]] == ["ok", "ok"]
    assert all(c["profiled"] for c in result.run["configs"])
    assert [c["kernels"] for c in result.run["configs"]] == [1, 5]  # readers then know a cut inside one
    rows = {r["variant"]: r for r in to_records(result.table)}
    assert rows["torch_softmax"]["n_kernels"] == 1 and rows["torch_manual"]["n_kernels"] == 5
    assert rows["torch_softmax"]["min_read_bytes"] == 65536 * 32 * 4
    assert rows["torch_softmax"]["l1_ld_bytes"] >= rows["torch_softmax"]["min_read_bytes"]
    assert result.run["passes"] >= 1 and len(result.run["attempts"]) == 1
    assert (out / "profile.ncu-rep").stat().st_size < 2_000_000  # --import-sass no keeps cubins out
    assert json.loads((out / "results.json").read_text())[0]["range"].startswith("mt|")
    # the report's kernel table, written once ncu finished: later readings never open the report
    from memtraffic.ncu.kernel_table import kernel_table
    from memtraffic.ncu.report import read_report

    assert (out / "profile.kernels.json.gz").is_file()
    report = out / "profile.ncu-rep"
    pd.testing.assert_frame_equal(kernel_table(report).kernels, read_report(report))


def _stand_in(tmp_path, monkeypatch):
    ncu = fake_ncu(tmp_path / "ncu", RUNNER_PASS_THROUGH)
    monkeypatch.setenv("MEMTRAFFIC_NCU", str(ncu))
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setattr(collect, "gpu_name", lambda: "Fake GPU")
    monkeypatch.setattr(session_mod, "query_metric_names", lambda ncu, key=None: ncu_mod.parse_query_metrics(
        "\n".join(ncu_mod.base_name(n) for n in ncu_mod.resolve_metrics("traffic"))))


def test_a_plan_that_fails_while_ncu_starts_stops_the_runner_and_keeps_nothing(tmp_path, monkeypatch):
    """The plan is built while ncu starts the runner; when it cannot be built, the waiting runner is told
    to stop, the user gets the plan's one-line error, and the half-made run folder is removed."""
    _stand_in(tmp_path, monkeypatch)
    out = tmp_path / "run"
    opts = collect.MeasureOptions(variants=["torch_softmax"], shapes=["4x8"], params=["BLOCK_M=4"], out=out)
    with pytest.raises(UsageError, match="no selected variant takes parameter BLOCK_M"):
        run_measure(opts, echo=lambda line: None)
    assert not out.exists()


@pytest.mark.parametrize(("opts", "message"), [
    ({"variants": ["softmax_tild"]}, "unknown variant 'softmax_tild': did you mean softmax_tiled"),
    ({"variants": ["torch_softmax"], "shapes": ["4x"]}, "malformed shape '4x'"),
    ({"variants": ["torch_softmax"], "dtypes": ["fp8"]}, "unsupported dtype 'fp8'"),
    ({"variants": []}, "name at least one variant"),
])
def test_bad_requests_are_refused_before_ncu_starts(tmp_path, monkeypatch, opts, message):
    calls = tmp_path / "calls"
    ncu = fake_ncu(tmp_path / "ncu", f"open({str(calls)!r}, 'a').write('x')")
    monkeypatch.setenv("MEMTRAFFIC_NCU", str(ncu))
    out = tmp_path / "run"
    with pytest.raises(UsageError, match=message):
        run_measure(collect.MeasureOptions(out=out, **opts), echo=lambda line: None)
    assert not calls.exists() and not out.exists()


def test_runner_waits_for_the_plan_and_stops_when_told(tmp_path):
    from memtraffic.collect import runner

    plan = tmp_path / "plan.json"
    plan.with_suffix(".abort").write_text("UsageError: no\n")
    assert runner.wait_for_plan(plan, timeout_s=5) is False
    plan.write_text("{}")
    assert runner.wait_for_plan(plan, timeout_s=5) is True


def test_options_are_parsed_once_when_made(tmp_path, monkeypatch):
    """--shard, --gpus, --metrics and --sweep become typed values when MeasureOptions is made (a bad one is
    the same one-line UsageError as before); the layers below use them without parsing the text again."""
    from memtraffic.collect import sweep

    (tmp_path / "grid.toml").write_text('variants = ["torch_softmax"]\nshapes = ["4x8", "8x8"]\n')
    reads = []
    real = sweep.read_sweep
    monkeypatch.setattr(collect, "read_sweep", lambda path: reads.append(path) or real(path))
    opts = collect.MeasureOptions(variants=[], sweep=tmp_path / "grid.toml", shard="2/2", gpus="1, 0,1",
                                  metrics="traffic,fadd")
    assert (opts.shard_part, opts.gpu_list) == ((2, 2), [1, 0])
    assert opts.metric_tokens[0] == "time" and opts.metric_tokens[-1] == "fadd"  # the set, then the alias
    assert collect.MeasureOptions(variants=[], gpus="all").gpu_list == "all"
    collect.precheck(opts)
    plan = collect.plan_for(opts)
    assert len(reads) == 1 and plan["shard"]["index"] == 2 and len(plan["configs"]) == 1
    for bad, message in ((dict(shard="3/2"), "bad --shard '3/2'"), (dict(gpus="first"), "bad --gpus 'first'"),
                         (dict(metrics="no such"), "no such"),
                         (dict(metrics="auto,flops"), "--metrics auto,flops: auto stands alone")):
        with pytest.raises(UsageError, match=message):
            collect.MeasureOptions(variants=["torch_softmax"], **bad)


# --- --metrics auto: a first look, then the full set again where it is needed -------------------------------

# Four configs of torch_softmax (minimum: each input byte read once, each output byte written once): 4x8 fp32
# and 8x8 bf16 at the minimum, 4x8 bf16 loading 4x its minimum (8 of every 32 bytes per sector used), 8x8
# fp32 storing 2x its minimum (each output byte written twice). The stand-in ncu reports these counters.
A, B, C, D = (f"mt|torch_softmax|{s}|{d}" for s, d in (("4x8", "fp32"), ("4x8", "bf16"), ("8x8", "fp32"),
                                                          ("8x8", "bf16")))


def _counters(ld: int, st: int, req_ld: int, req_st: int) -> dict[str, int]:
    return {"time": 1000, "l1_ld_bytes": ld, "l1_st_bytes": st, "l1_ld_sectors": ld // 32,
            "l1_st_sectors": st // 32, "l1_ld_requests": ld // 128, "l1_st_requests": st // 128,
            "req_ld_bytes": req_ld, "req_st_bytes": req_st, "l2_rd_sectors": ld // 32,
            "l2_wr_sectors": st // 32, "dram_rd_bytes": req_ld, "dram_wr_bytes": req_st}


COUNTERS = {A: _counters(128, 128, 128, 128), B: _counters(256, 64, 64, 64),
            C: _counters(256, 512, 256, 512), D: _counters(128, 128, 128, 128)}
GRID = {"variants": ["torch_softmax"], "shapes": ["4x8", "8x8"], "dtypes": ["fp32", "bf16"]}


def _reporting(tmp_path, monkeypatch, gpus=None):
    """The stand-in ncu that writes reports (stand_ins.REPORTING) with COUNTERS; its calls' argv read back."""
    from stand_ins import REPORTING

    monkeypatch.setenv("MEMTRAFFIC_NCU", str(fake_ncu(tmp_path / "ncu", REPORTING)))
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    (tmp_path / "counters.json").write_text(json.dumps(COUNTERS))
    monkeypatch.setenv("MT_COUNTERS", str(tmp_path / "counters.json"))
    monkeypatch.setenv("MT_CALLS", str(tmp_path / "calls.jsonl"))
    monkeypatch.setattr(collect, "gpu_name", lambda: "Fake GPU")
    if gpus:
        monkeypatch.setattr(collect, "cuda_device_names", lambda: list(gpus))
    monkeypatch.setattr(session_mod, "query_metric_names", lambda ncu, key=None: ncu_mod.parse_query_metrics(
        "\n".join(ncu_mod.base_name(n) for n in ncu_mod.resolve_metrics("traffic"))))

    def calls() -> list[list[str]]:
        path = tmp_path / "calls.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return calls


def _rows(run) -> dict[str, dict]:
    """The analyzed rows of a run folder by range, less what names the run (its folder and reports)."""
    from memtraffic.analysis.analyze import to_records
    from memtraffic.api import analyze

    def unnamed(finding: dict) -> dict:  # a finding's subject names its run too
        return {**finding, "subject": {**finding["subject"], "run": ""}}

    return {r["range"]: {k: [unnamed(f) for f in v] if k == "findings" else v for k, v in r.items()
                         if k not in ("run", "report")}
            for r in to_records(analyze(run))}


def _ncu_argv(tmp_path, names: str, out, report: str, plan: str, *rest: str) -> list[str]:
    return [str(tmp_path / "ncu"), "--metrics", ",".join(ncu_mod.resolve_metrics(names)),
            "--nvtx", "--nvtx-include", "regex:^mt\\|.*/", "--cache-control", "all",
            "--clock-control", "none", "--import-sass", "no", "--target-processes", "application-only",
            "--export", str(out / report),
            sys.executable, "-m", "memtraffic.collect.runner", str(out / plan), *rest]


@pytest.mark.slow
def test_auto_measures_again_with_the_full_set_only_the_configs_below_good_l1(tmp_path, monkeypatch):
    """The default: every config with the one-pass bytes set, then the two below 0.9 L1 load or store
    efficiency again with traffic; their rows are those of `--metrics traffic`, the others those of
    `--metrics bytes` (each one ncu process, as before), and `analyze` prints what measure printed."""
    calls = _reporting(tmp_path, monkeypatch)
    grid = ["torch_softmax", "--shape", "4x8", "--shape", "8x8", "--dtype", "fp32", "--dtype", "bf16"]
    out = tmp_path / "auto"
    measured = CliRunner().invoke(app, ["measure", *grid, "--out", str(out)])
    assert measured.exit_code == 0, measured.output
    first, second = calls()
    assert first == _ncu_argv(tmp_path, "bytes", out, "profile.ncu-rep", "plan.json", "--wait-for-plan")
    assert second == _ncu_argv(tmp_path, "traffic", out, "profile-second.ncu-rep", "plan-second.json")
    assert ("measuring 2 of 4 configs again with the traffic set (L1 load or store efficiency below 0.9 in "
            "the first look, not as the variant's model predicts: traffic tells why)") in measured.stderr
    analyzed = CliRunner().invoke(app, ["analyze", str(out)])
    assert analyzed.exit_code == 0 and analyzed.stdout == measured.stdout

    run = json.loads((out / "run.json").read_text())
    again = run["second_pass"]
    assert (run["metric_set"], again["first_look"], again["metric_set"]) == ("auto", "bytes", "traffic")
    assert run["metric_names"] == ncu_mod.resolve_metrics("bytes")
    assert again["metric_names"] == ncu_mod.resolve_metrics("traffic")
    assert [(c["range"], c["eff_l1_ld"], c["eff_l1_st"], c["status"], c["taken"]) for c in again["configs"]] \
        == [(B, 0.25, 1.0, "ok", True), (C, 1.0, 0.5, "ok", True)]
    (attempt,) = again["attempts"]
    assert attempt["argv"][attempt["argv"].index("--export") + 1] == "profile-second.ncu-rep"
    assert again["error"] is None and again["wall_time_s"] > 0 and run["passes"] == 6
    assert run["reports"] == ["profile.ncu-rep", "profile-second.ncu-rep"]
    plan = json.loads((out / "plan.json").read_text())
    assert {c["range"]: c.get("reports") for c in plan["configs"]} == {
        A: None, B: ["profile-second.ncu-rep"], C: ["profile-second.ncu-rep"], D: None}

    for metrics in ("traffic", "bytes"):  # one pass each, as before
        opts = collect.MeasureOptions(**GRID, metrics=metrics, out=tmp_path / metrics)
        run_measure(opts, echo=lambda s: None)
        assert len(calls()) == 2 + (1 if metrics == "traffic" else 2)
        assert "second_pass" not in json.loads((tmp_path / metrics / "run.json").read_text())
        assert not (tmp_path / metrics / "plan-second.json").exists()
    auto, traffic, bytes_ = _rows(out), _rows(tmp_path / "traffic"), _rows(tmp_path / "bytes")
    assert [auto[r] for r in (B, C)] == [traffic[r] for r in (B, C)]
    assert [auto[r] for r in (A, D)] == [bytes_[r] for r in (A, D)]
    assert "8 of every 32-byte sector" in auto[B]["diagnosis"] and "requested 2x" in auto[C]["diagnosis"]

    from memtraffic.analysis.merge import merge_runs  # a merge keeps which report holds which config

    merge_runs([out], tmp_path / "merged", echo=lambda s: None)
    assert _rows(tmp_path / "merged") == auto


def test_auto_with_nothing_left_to_explain_is_one_pass_analyzed_once(tmp_path, monkeypatch):
    """Every config at its minimum: the first look is the whole run (one ncu process, no second pass), and
    its analysis, made for the second-pass rule, is the run's own (the reports are read once)."""
    import memtraffic.api as api

    calls = _reporting(tmp_path, monkeypatch)
    (tmp_path / "counters.json").write_text(json.dumps({A: _counters(128, 128, 128, 128),
                                                        B: _counters(64, 64, 64, 64),
                                                        C: _counters(256, 256, 256, 256),
                                                        D: _counters(128, 128, 128, 128)}))
    analyzed = []
    real = api.analyze_reports
    monkeypatch.setattr(api, "analyze_reports", lambda *a, **k: analyzed.append(a[0]) or real(*a, **k))
    result = run_measure(collect.MeasureOptions(**GRID, out=tmp_path / "auto"), echo=lambda s: None)
    assert len(calls()) == 1 and analyzed == [[tmp_path / "auto" / "profile.ncu-rep"]]
    run = json.loads((tmp_path / "auto" / "run.json").read_text())
    assert "second_pass" not in run and not (tmp_path / "auto" / "plan-second.json").exists()
    assert [c["kernels"] for c in run["configs"]] == [1] * 4 and len(result.table) == 4
    assert run["configs"] == result.run["configs"]  # what was written is what the result holds


@pytest.mark.slow
@pytest.mark.parametrize("broken", ["fails", "cut"])
def test_a_second_pass_that_fails_keeps_the_first_looks_rows(tmp_path, monkeypatch, broken):
    """The second ncu fails before running anything, or its report lacks one config (cut short): those
    configs keep their first look's rows, run.json and one line say so, the run is not a failure."""
    calls = _reporting(tmp_path, monkeypatch)
    if broken == "fails":
        monkeypatch.setenv("MT_FAIL", "smsp__sass_data_bytes_mem_global_op_ld.sum")
    else:
        monkeypatch.setenv("MT_DROP", f"{C}@6")
    run_measure(collect.MeasureOptions(**GRID, metrics="bytes", out=tmp_path / "bytes"), echo=lambda s: None)
    lines: list[str] = []
    result = run_measure(collect.MeasureOptions(**GRID, out=tmp_path / "auto"), echo=lines.append)
    assert len(calls()) == 3 and not collect_failed(result)
    again = result.run["second_pass"]
    auto, bytes_ = _rows(tmp_path / "auto"), _rows(tmp_path / "bytes")
    if broken == "fails":
        assert again["error"].startswith("ncu exited with code 1 before profiling anything: ==ERROR== the "
                                         "stand-in refuses these metrics")
        assert [(c["status"], c["taken"]) for c in again["configs"]] == [("not run", False)] * 2
        assert auto == bytes_
        (line,) = [line for line in lines if "second pass" in line]
        assert line.startswith("the second pass failed (ncu exited with code 1") and line.endswith(
            "its 2 configs keep their first look's counters (bytes)")
    else:
        assert [(c["range"], c["status"], c["taken"]) for c in again["configs"]] == [(B, "ok", True),
                                                                                    (C, "ok", False)]
        assert auto[C] == bytes_[C] and auto[B]["passes"] == 6 and auto[B]["req_ld_bytes"] == 64
        assert (f"1 of the 2 configs measured again were not measured whole by the second pass and keep "
                f"their first look's counters (bytes): {C}") in lines
    assert [auto[r] for r in (A, D)] == [bytes_[r] for r in (A, D)]


def collect_failed(result) -> list:
    from memtraffic.api import failed_configs

    return failed_configs(result.run)


@pytest.mark.slow
def test_auto_on_two_gpus_shares_the_second_pass_between_them(tmp_path, monkeypatch):
    """--gpus all: the first look and the second pass each run one ncu process per GPU, which share the
    second pass's configs as they shared the first look's, with files of their own."""
    calls = _reporting(tmp_path, monkeypatch, gpus=("Fake GPU", "Fake GPU"))
    out = tmp_path / "auto"
    result = run_measure(collect.MeasureOptions(**GRID, out=out, gpus="all"), echo=lambda s: None)
    second = json.loads((out / "plan-second.json").read_text())
    assert second["status_files"] == {"0": "status-second-gpu0.jsonl", "1": "status-second-gpu1.jsonl"}
    assert sorted(c["range"] for c in second["configs"]) == [B, C]
    assert {c["gpu"] for c in second["configs"]} <= {0, 1}
    seconds = [argv for argv in calls() if str(out / "plan-second.json") in argv]
    assert sorted(argv[argv.index("--export") + 1] for argv in seconds) == [
        str(out / "profile-second-gpu0.ncu-rep"), str(out / "profile-second-gpu1.ncu-rep")]
    for argv in seconds:
        g = argv[argv.index("--gpu") + 1]
        assert argv[argv.index("--export") + 2:] == [sys.executable, "-m", "memtraffic.collect.runner",
                                                     str(out / "plan-second.json"), "--claims",
                                                     str(out / "claims-second"), "--gpu", g, "--status",
                                                     str(out / f"status-second-gpu{g}.jsonl")]
    again = result.run["second_pass"]
    assert [g["index"] for g in again["gpus"]] == [0, 1] and all(c["taken"] for c in again["configs"])
    rows = _rows(out)
    assert [rows[r]["passes"] for r in (A, B, C, D)] == [1, 6, 6, 1]
    assert len(calls()) == 4


def test_measure_help_says_the_default_and_the_rule_of_needs_full_set():
    from memtraffic.analysis.findings import GOOD

    text = " ".join(CliRunner().invoke(app, ["measure", "--help"], env={"COLUMNS": "200"},
                                       terminal_width=200).output.split())
    assert (f"--metrics SETS auto (the default): the one-pass bytes set for every config, then traffic again "
            f"for those below {GOOD} L1 load or store efficiency that their model does not predict.") in text
    assert collect.MeasureOptions(variants=[]).metrics == "auto"
