"""collect: the ncu argv, finding and vetting ncu, metric validation, run folders, restarts after crashes."""

from __future__ import annotations

import json
import os
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
                         (dict(metrics="no such"), "no such")):
        with pytest.raises(UsageError, match=message):
            collect.MeasureOptions(variants=["torch_softmax"], **bad)
