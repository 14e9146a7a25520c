"""profile: any program under ncu. Exact argv, the program's trace as the plan, and every bad input."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from stand_ins import PASS_THROUGH, RANGE_REPORTING, REGION_PROGRAM, VERSION_2025, fake_ncu  # noqa: F401
from typer.testing import CliRunner

from memtraffic.api import run_profile
from memtraffic.cli import app
from memtraffic.collect import profile as prof
from memtraffic.ncu import command as ncu_mod
from memtraffic.runfolder.paths import portable
from memtraffic.runfolder.timings import KERNEL_TIMES_FILE, NCU_TIME, NO_KERNEL_TIME, TIMER_PASS
from memtraffic.runfolder.trace import read_trace
from memtraffic.vocab.errors import NcuError, UsageError


def test_profile_argv_is_exact():
    argv = ncu_mod.build_ncu_command(
        "/opt/ncu", ["gpu__time_duration.sum"], "/r/profile.ncu-rep", ["/usr/bin/trtexec", "--onnx=m.onnx"],
        nvtx_include=["step/", "regex:^mt\\|op"], target_processes="all", kernel_name="softmax",
        launch_skip=3, launch_count=10, profile_from_start=False, source=True)
    assert argv == [
        "/opt/ncu", "--metrics", "gpu__time_duration.sum", "--nvtx",
        "--nvtx-include", "step/", "--nvtx-include", "regex:^mt\\|op",
        "--cache-control", "all", "--clock-control", "none", "--import-sass", "yes",
        "--target-processes", "all",
        "--section", "SourceCounters", "--import-source", "yes",
        "--kernel-name", "regex:softmax", "--launch-skip", "3", "--launch-count", "10",
        "--profile-from-start", "off",
        "--export", "/r/profile.ncu-rep", "/usr/bin/trtexec", "--onnx=m.onnx",
    ]


def test_profile_argv_without_filters_profiles_every_kernel():
    argv = ncu_mod.build_ncu_command("ncu", ["m"], "r", ["app"], nvtx_include=(), target_processes="all")
    assert argv == ["ncu", "--metrics", "m", "--nvtx", "--cache-control", "all", "--clock-control", "none",
                    "--import-sass", "no", "--target-processes", "all", "--export", "r", "app"]
    kept = ncu_mod.build_ncu_command("ncu", ["m"], "r", ["app"], kernel_name="demangled:foo")
    assert kept[kept.index("--kernel-name") + 1] == "demangled:foo"


@pytest.mark.parametrize(("kw", "message"), [
    ({"launch_skip": -1}, "--launch-skip -1"),
    ({"launch_count": 0}, "--launch-count 0"),
    ({"target_processes": "some"}, "unknown --target-processes 'some'"),
])
def test_bad_ncu_options(kw, message):
    with pytest.raises(UsageError, match=message):
        ncu_mod.build_ncu_command("ncu", ["m"], "r", ["app"], **kw)


def test_resolve_program(tmp_path):
    assert Path(prof.resolve_program(["sh", "-c", "true"])).name == "sh"
    with pytest.raises(UsageError, match="give the program to profile after --"):
        prof.resolve_program([])
    with pytest.raises(UsageError, match="command not found: no-such-program-xyz"):
        prof.resolve_program(["no-such-program-xyz"])
    script = tmp_path / "run.sh"
    script.write_text("echo hi\n")
    with pytest.raises(UsageError, match="is not executable"):
        prof.resolve_program([str(script)])


def test_read_trace_skips_a_cut_line(tmp_path):
    trace = tmp_path / "trace.jsonl"
    lines = [json.dumps({"range": "mt|op|0|aten.mm.default", "min_read_bytes": 8}),
             json.dumps({"range": "mt|region|step|1"}), '{"range": "mt|op|2|aten.ad']
    trace.write_text("\n".join(lines))
    assert [c["range"] for c in read_trace(trace)] == ["mt|op|0|aten.mm.default", "mt|region|step|1"]
    assert read_trace(tmp_path / "missing.jsonl") == []


@pytest.mark.parametrize(("args", "message"), [
    (["profile"], "error: give the program to profile after --"),
    (["profile", "--", "no-such-program-xyz"], "error: command not found: no-such-program-xyz"),
    (["profile", "--profile-from-start", "maybe", "--", "true"],
     "error: unknown --profile-from-start 'maybe'"),
])
def test_cli_bad_input_is_one_line_and_exit_2(args, message):
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert result.stderr.startswith(message) and result.stderr.count("\n") == 1


def test_metric_names_are_cached_per_ncu_and_gpu(tmp_path, monkeypatch):
    calls = tmp_path / "calls"
    ncu = fake_ncu(tmp_path / "ncu", f"open({str(calls)!r}, 'a').write('x')\n"
                   "print('dram__bytes_read  Counter  byte  # of bytes read from DRAM')")
    monkeypatch.setenv("MEMTRAFFIC_CACHE", str(tmp_path / "cache"))
    key = ncu_mod.metrics_cache_key(ncu, (2025, 3, 1, 0), "NVIDIA H100 80GB HBM3")
    ncu_mod.query_metric_names.cache_clear()
    assert ncu_mod.query_metric_names(ncu, key) == {"dram__bytes_read"}
    ncu_mod.query_metric_names.cache_clear()
    assert ncu_mod.query_metric_names(ncu, key) == {"dram__bytes_read"}
    assert calls.read_text() == "x"  # the second process-level call read the cache file
    assert list((tmp_path / "cache" / "ncu-metrics").iterdir())


def test_no_gpu_is_one_line(tmp_path, monkeypatch):
    ncu = fake_ncu(tmp_path / "ncu", VERSION_2025)
    monkeypatch.setenv("MEMTRAFFIC_NCU", str(ncu))
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi here
    result = CliRunner().invoke(app, ["profile", "--", sys.executable, "-c", "pass"])
    assert result.exit_code == 1
    assert result.stderr.startswith("error: no NVIDIA GPU is visible") and result.stderr.count("\n") == 1


# --- the whole stage on a CPU, with a stand-in ncu that runs the program and profiles nothing ---------------





def test_a_program_that_fails_before_any_kernel_keeps_its_run_and_exit_code(tmp_path, stand_in):
    out = tmp_path / "run"
    lines: list[str] = []
    with pytest.raises(prof.ProgramFailed, match="the program exited with code 3 before ncu profiled any "
                       "kernel") as err:
        run_profile(prof.ProfileOptions(command=[sys.executable, str(stand_in), "3"], out=out), lines.append)
    assert err.value.exit_code == 3
    run = json.loads((out / "run.json").read_text())
    assert run["returncode"] == 3 and run["kernels_profiled"] == 0 and run["environment"]["gpu"] == "Fake GPU"
    # a Python program runs through the launcher, which ranges its Triton launches (--triton, the default)
    # run.json records paths relative, programs by name (memtraffic.runfolder.paths)
    want = [sys.executable, str(prof.LAUNCHER), "--trace-from=none", "--triton", str(stand_in), "3"]
    assert run["attempts"][0]["argv"][-6:] == portable(want, out, Path.cwd())
    assert run["triton"] is True
    # the region the program recorded before failing is the plan
    (config,) = json.loads((out / "plan.json").read_text())["configs"]
    assert config["kind"] == "region" and config["op"] == "step" and config["min_read_bytes"] == 64 * 32 * 4
    assert "program ran" in lines


def test_a_program_that_launches_no_kernel_is_one_clear_error(tmp_path, stand_in):
    result = CliRunner().invoke(app, ["profile", "--out", str(tmp_path / "run"), "--",
                                      sys.executable, str(stand_in), "0"])
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines()[-1].startswith(
        "error: ncu profiled no kernel: the program launched no CUDA kernel (does it use the GPU?)")
    assert (tmp_path / "run" / "run.json").is_file()  # nothing is lost: the run folder says what happened


def test_torch_ops_on_a_program_without_torch_says_so(tmp_path, stand_in):
    lines: list[str] = []
    with pytest.raises(Exception, match="ncu profiled no kernel"):
        run_profile(prof.ProfileOptions(command=[sys.executable, str(stand_in), "0"], torch_ops=True,
                                        out=tmp_path / "run"), lines.append)
    assert any(line.startswith("warning: --torch-ops traced nothing: the program never imported torch")
               for line in lines)


def test_the_run_folder_is_never_overwritten(tmp_path, stand_in):
    out = tmp_path / "run"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(UsageError, match="already exists and is not empty"):
        run_profile(prof.ProfileOptions(command=[sys.executable, str(stand_in), "0"], out=out))
    assert (out / "keep.txt").read_text() == "mine"


# --- on the GPU machine -------------------------------------------------------------------------------------

TORCH_PROGRAM = """
import sys, torch
x = torch.randn(512, 256, device="cuda")
y = torch.softmax(x, dim=-1)
z = (y * 2).sum()
torch.cuda.synchronize()
sys.exit(int(sys.argv[1]))
"""


@pytest.mark.ncu
def test_profile_torch_ops_end_to_end_on_gpu(tmp_path):
    """Every kernel lands in its op's range and inherits the op's minimum; a failing program keeps it all."""
    try:
        ncu_mod.find_ncu()
    except Exception as err:  # noqa: BLE001 - no ncu: nothing to test here
        pytest.skip(str(err))
    program = tmp_path / "prog.py"
    program.write_text(TORCH_PROGRAM)
    result = run_profile(prof.ProfileOptions(command=[sys.executable, str(program), "5"], torch_ops=True,
                                             out=tmp_path / "run"))
    assert result.returncode == 5  # the program failed at its end: its kernels are still analyzed
    rows = {r["op"]: r for r in result.table.to_dict("records")}
    assert rows["aten._softmax.default"]["min_read_bytes"] == 512 * 256 * 4
    assert rows["aten._softmax.default"]["min_write_bytes"] == 512 * 256 * 4
    assert rows["aten._softmax.default"]["n_kernels"] == 1
    assert rows["aten._softmax.default"]["l1_ld_bytes"] >= 512 * 256 * 4
    assert {"aten.mul.Tensor", "aten.sum.default"} <= set(rows)
    assert (tmp_path / "run" / "profile.kernels.json.gz").is_file()  # kept once ncu finished


GPU_WINDOW_PROGRAM = """
import torch
x = torch.randn(4096, 1024, device="cuda")
for step in range(3):  # the first step warms up; ncu and the op tracer see the last two
    if step == 1:
        torch.cuda.profiler.start()
    y = torch.softmax(x, dim=-1)
    z = (y * 2).sum()
torch.cuda.synchronize()
torch.cuda.profiler.stop()
"""


@pytest.mark.ncu
def test_range_replay_on_gpu_times_each_range_by_its_kernels(tmp_path):
    """--replay range in a profiler window: the bytes of ncu's range replay, the times of the kernel timer
    (a run without ncu), each range near its kernel replay time, never ncu's ~200 us range duration."""
    try:
        ncu_mod.find_ncu()
    except Exception as err:  # noqa: BLE001 - no ncu: nothing to test here
        pytest.skip(str(err))
    program = tmp_path / "window.py"
    program.write_text(GPU_WINDOW_PROGRAM)
    tables, runs = {}, {}
    for name, replay, time_from in (("kernel", "kernel", "ncu"), ("range", "range", "program"),
                                    ("own", "kernel", "program")):
        result = run_profile(prof.ProfileOptions(command=[sys.executable, str(program)], torch_ops=True,
                                                 profile_from_start=False, replay=replay, distinct=0,
                                                 time_from=time_from, out=tmp_path / name))
        runs[name] = json.loads((tmp_path / name / "run.json").read_text())
        assert runs[name]["replay"]["mode"] == replay
        tables[name] = result.table.set_index("range")
    assert "timing_pass" not in runs["kernel"] and runs["kernel"]["time_source"] == NCU_TIME
    for name in ("range", "own"):
        assert runs[name]["time_source"] == TIMER_PASS and runs[name]["timing_pass"]["returncode"] == 0
        assert set(tables[name]["time_source"]) == {TIMER_PASS}, name
    kernel = tables["kernel"]
    assert set(kernel["time_source"]) == {NCU_TIME}
    for name in ("range", "own"):
        assert sorted(tables[name].index) == sorted(kernel.index)
        for rng in kernel.index:
            theirs = tables[name].loc[rng]
            assert theirs["l1_ld_bytes"] == pytest.approx(kernel.loc[rng, "l1_ld_bytes"], rel=0.01)
            assert 0 < theirs["time_ns"] < max(3 * kernel.loc[rng, "time_ns"], 20_000), (name, rng)


@pytest.mark.parametrize(("command", "expected"), [
    (["python3", "train.py", "--steps", "2"], ["python3", "LAUNCH", "train.py", "--steps", "2"]),
    (["/usr/bin/python3.12", "-u", "-X", "dev", "-m", "pkg.main", "a"],
     ["/usr/bin/python3.12", "-u", "-X", "dev", "LAUNCH", "-m", "pkg.main", "a"]),
    (["python", "-c", "print(1)"], ["python", "LAUNCH", "-c", "print(1)"]),
    (["python"], None),  # interactive
    (["python", "-"], None),  # a program on stdin
    (["torchrun", "train.py"], None),  # not an interpreter: sitecustomize's route
])
def test_python_commands_run_through_the_launcher(command, expected):
    got = prof.with_launcher(command)
    launch = str(prof.LAUNCHER)
    assert got == (None if expected is None else [launch if a == "LAUNCH" else a for a in expected])


TORCH_CPU_PROGRAM = """
import sys
import torch
x = torch.ones(8, 4)
y = torch.softmax(x, dim=-1)
print("argv", sys.argv[1:], "path0", sys.path[0] == __file__.rsplit("/", 1)[0])
sys.exit(int(sys.argv[1]))
"""


@pytest.mark.slow
def test_profile_torch_ops_traces_through_the_launcher(tmp_path, stand_in):
    """On a CPU with the stand-in ncu: the launcher traces the ops, keeps argv, sys.path[0], exit code."""
    program = tmp_path / "torch_prog.py"
    program.write_text(TORCH_CPU_PROGRAM)
    lines: list[str] = []
    out = tmp_path / "run"
    with pytest.raises(prof.ProgramFailed) as err:  # no kernel profiled on a CPU, and the program exits 4
        opts = prof.ProfileOptions(command=[sys.executable, str(program), "4"], torch_ops=True, out=out)
        run_profile(opts, lines.append)
    assert err.value.exit_code == 4
    assert "argv ['4'] path0 True" in lines
    configs = json.loads((out / "plan.json").read_text())["configs"]
    softmax = next(c for c in configs if c["op"] == "aten._softmax.default")
    assert softmax["range"].startswith("mt|op|") and softmax["min_read_bytes"] == 8 * 4 * 4
    run = json.loads((out / "run.json").read_text())
    want = [str(prof.LAUNCHER), "--triton", str(program), "4"]
    assert run["attempts"][0]["argv"][-4:] == portable(want, out, Path.cwd())
    # the start-up split: every span stamped on this path but the first kernel's (none was profiled)
    assert set(run["startup"]) == {"memtraffic_s", "to_program_s", "imports_s", "tracer_s"}
    assert all(0 <= v < 120 for v in run["startup"].values()), run["startup"]
    assert not (out / prof.STARTUP_FILE).exists()


WINDOW_PROGRAM = """
import types
import torch
import torch.cuda.profiler as profiler
# no CUDA here: the real start/stop (which the tracer wraps) call a stand-in cudart
profiler.cudart = lambda: types.SimpleNamespace(cudaProfilerStart=lambda: 0, cudaProfilerStop=lambda: 0)
profiler.check_error = lambda code: None
torch.ones(5).sum()          # warm-up, outside the profiled window
torch.cuda.profiler.start()
torch.ones(7).sum()
torch.cuda.profiler.stop()
"""


@pytest.mark.parametrize(("from_start", "first_forward", "mode"), [
    (True, False, "start"), (True, True, "first forward"), (False, False, "profiler window"),
    (False, True, "profiler window"),
])
def test_trace_mode_follows_the_profiled_window(from_start, first_forward, mode):
    opts = prof.ProfileOptions(command=["python"], torch_ops=True, profile_from_start=from_start,
                               from_first_forward=first_forward)
    assert prof.TRACE_FROM[prof.trace_mode(opts)] == mode


@pytest.mark.slow
def test_profile_from_start_off_plans_only_the_calls_in_the_window(tmp_path, stand_in):
    program = tmp_path / "window.py"
    program.write_text(WINDOW_PROGRAM)
    out = tmp_path / "run"
    with pytest.raises(NcuError):  # the stand-in profiles no kernel
        prof.profile(prof.ProfileOptions(command=[sys.executable, str(program)], torch_ops=True, out=out,
                                         profile_from_start=False), lambda line: None)
    configs = json.loads((out / "plan.json").read_text())["configs"]
    assert [c["op"] for c in configs] == ["aten.ones.default", "aten.sum.default"]
    assert configs[0]["shape"] == [7]
    assert json.loads((out / "run.json").read_text())["traced_from"] == "profiler window"


SEES_RUN_JSON = """
import json, os, pathlib
run = json.loads((pathlib.Path(os.environ["MEMTRAFFIC_TRACE"]).parent / "run.json").read_text())
print("run.json while running:", run["program"], "finished" in run)
"""


def test_run_json_is_there_while_the_program_runs(tmp_path, stand_in):
    """A program killed under ncu leaves run.json (with the program) for reading to rebuild the run."""
    program = tmp_path / "sees.py"
    program.write_text(SEES_RUN_JSON)
    lines: list[str] = []
    with pytest.raises(NcuError):  # the stand-in profiles no kernel
        run_profile(prof.ProfileOptions(command=[sys.executable, str(program)], out=tmp_path / "run"),
                    lines.append)
    recorded = portable([sys.executable, str(program)], tmp_path / "run", Path.cwd())
    assert f"run.json while running: {recorded} False" in lines


# --- range replay (issue 41) ----------------------------------------------------------------------------


def test_range_replay_argv_is_exact():
    argv = ncu_mod.build_ncu_command("ncu", ["m"], "r", ["app"], nvtx_include=[ncu_mod.RANGE_INCLUDE],
                                     target_processes="all", replay_mode="range")
    assert argv == ["ncu", "--metrics", "m", "--nvtx", "--replay-mode", "range",
                    "--nvtx-include", r"regex:^mt\|(op|region|triton)\|.*/",
                    "--cache-control", "all", "--clock-control", "none", "--import-sass", "no",
                    "--target-processes", "all", "--export", "r", "app"]
    with pytest.raises(UsageError, match="unknown replay mode 'app'"):
        ncu_mod.build_ncu_command("ncu", ["m"], "r", ["app"], replay_mode="app")


BYTES = ["gpu__time_duration.sum", "dram__bytes_read.sum"]
SASS = [*BYTES, "smsp__sass_data_bytes_mem_global_op_ld.sum", "smsp__sass_data_bytes_mem_global_op_st.sum"]


RANGE_WHY = ("asked for (--replay range); each range's time from its kernels, timed in a pass of the program "
             "without ncu")


@pytest.mark.parametrize(("options", "names", "mode", "why"), [
    # auto never takes range replay: a range's duration is ncu's, not its kernels' time (issue 51)
    ({"torch_ops": True, "profile_from_start": False}, BYTES, "kernel", prof.AUTO_WHY),
    ({"torch_ops": True}, BYTES, "kernel", prof.AUTO_WHY),
    ({"torch_ops": True, "profile_from_start": False}, SASS, "kernel", prof.AUTO_WHY),
    ({"profile_from_start": False}, BYTES, "kernel", prof.AUTO_WHY),
    ({"torch_ops": True, "replay": "range"}, BYTES, "range", RANGE_WHY),
    ({"torch_ops": True, "profile_from_start": False, "replay": "range"}, BYTES, "range", RANGE_WHY),
    ({"torch_ops": True, "replay": "range"}, SASS, "kernel",
     "ncu's range replay refuses the SASS counters (smsp__sass_data_bytes_mem_global_op_ld.sum and 1 more) "
     "of --metrics bytes"),
    ({"replay": "range", "profile_from_start": False}, BYTES, "kernel",
     "ncu's range replay refuses --profile-from-start off; with --torch-ops the op tracer follows the "
     "program's profiler window instead"),
    ({"torch_ops": True, "profile_from_start": False, "replay": "kernel"}, BYTES, "kernel",
     "asked for (--replay kernel)"),
])
def test_choose_replay_says_which_and_why(options, names, mode, why):
    replay = prof.choose_replay(prof.ProfileOptions(command=["python", "x.py"], **options), names)
    assert replay == {"mode": mode, "why": why}


def test_auto_says_why_it_never_takes_range_replay():
    assert prof.AUTO_WHY == (
        "auto takes kernel replay: ncu's range replay times a range by its duration, ncu's own work included "
        "(about 200 us for an op whose kernels take 1-2 us); --replay range measures each op range's bytes "
        "as one unit and times its kernels in a second pass without ncu")


def test_an_unknown_replay_is_a_usage_error():
    with pytest.raises(UsageError, match="unknown --replay 'fast': use one of auto, kernel, range"):
        prof.choose_replay(prof.ProfileOptions(command=["x"], replay="fast"), BYTES)


@pytest.mark.parametrize(("tail", "refused"), [
    # ncu 2025.3.1's lines on an H100 (scripts/gpu_range_replay_reports.sh, scripts/gpu_speed.sh, 2026-11-26)
    (["==ERROR== An error was reported by the driver:",
      "==ERROR== Unsupported API during capture (cuKernelSetAttribute)",
      "==ERROR== Skipping invalid capture range (RecordStatusUnsupportedApi).",
      "==ERROR== The application returned an error code (9)."], "cuKernelSetAttribute"),
    (["==ERROR== Unsupported API during capture (cuInit)"], "cuInit"),
    (["==ERROR== Metric smsp__sass_data_bytes_mem_global_op_ld.sum is not supported in range replay."],
     "smsp__sass_data_bytes_mem_global_op_ld.sum"),
    (["==ERROR== Skipping invalid capture range (RecordStatusEmpty).", "program ran"], None),
])
def test_range_refusal_reads_what_ncu_refused(tail, refused):
    assert prof.range_refusal(tail) == refused


# Refuses range replay as ncu did for GPT-2's first attention kernel: the program ends with code 9.
REFUSES_RANGES = PASS_THROUGH.replace("app = argv", """if "--replay-mode" in argv:
    print("==ERROR== An error was reported by the driver:")
    print("==ERROR== Unsupported API during capture (cuKernelSetAttribute)")
    print("==ERROR== The application returned an error code (9).")
    sys.exit(9)
app = argv""", 1)


def test_a_program_range_replay_fails_is_profiled_again_kernel_by_kernel(tmp_path, stand_in, monkeypatch):
    monkeypatch.setenv("MEMTRAFFIC_NCU", str(fake_ncu(tmp_path / "ncu-refuses", REFUSES_RANGES)))
    out = tmp_path / "run"
    lines: list[str] = []
    with pytest.raises(NcuError, match="ncu profiled no kernel"):
        run_profile(prof.ProfileOptions(command=[sys.executable, str(stand_in), "0"], out=out, replay="range",
                                        metrics="bytes"), lines.append)
    run = json.loads((out / "run.json").read_text())
    assert run["replay"]["mode"] == "kernel"
    assert "ncu refused cuKernelSetAttribute inside a measured range" in run["replay"]["why"]
    first, second = run["attempts"]
    assert first["returncode"] == 9 and "--replay-mode" in first["argv"]
    assert second["returncode"] == 0 and "--replay-mode" not in second["argv"]
    assert any("refused cuKernelSetAttribute" in line and "again with kernel replay" in line
               for line in lines)
    # the second run's trace alone: the region recorded once
    assert len(json.loads((out / "plan.json").read_text())["configs"]) == 1


@pytest.mark.parametrize("python", [True, False], ids=["python", "shell script"])
def test_range_replay_times_the_kernels_in_a_pass_without_ncu(tmp_path, stand_in, monkeypatch, python):
    """--replay range: the program runs again, without ncu, its kernels timed into kernel_times.json (the
    stand-in GPU is a CPU: the timer finds no CUDA kernel, so the range keeps no time, never ncu's range
    duration); a program the timer cannot run in (not Python) gets no pass and a warning."""
    monkeypatch.setenv("MEMTRAFFIC_NCU", str(fake_ncu(tmp_path / "ncu-ranges", RANGE_REPORTING)))
    stand_in.write_text("import torch\n" + REGION_PROGRAM)  # the kernel timer starts with torch
    command = [sys.executable, str(stand_in), "0"]
    if not python:
        script = tmp_path / "prog.sh"
        script.write_text(f"#!/bin/sh\nexec {sys.executable} {stand_in} 0\n")
        script.chmod(0o755)
        command = [str(script)]
    out = tmp_path / "run"
    lines: list[str] = []
    result = run_profile(prof.ProfileOptions(command=command, out=out, replay="range"), lines.append)
    run = json.loads((out / "run.json").read_text())
    assert run["replay"] == {"mode": "range", "why": RANGE_WHY}
    times = out / KERNEL_TIMES_FILE
    if python:
        # run.json records paths relative (kernel times to the run folder: memtraffic.runfolder.paths)
        assert run["timing_pass"]["argv"] == portable(
            [sys.executable, str(prof.LAUNCHER), "--trace-from=none", "--triton"], out, Path.cwd()) + [
            f"--timings={KERNEL_TIMES_FILE}", *portable([str(stand_in), "0"], out, Path.cwd())]
        assert run["timing_pass"]["returncode"] == 0 and run["timing_pass"]["kernels"] == 0
        assert run["time_source"] == TIMER_PASS and times.is_file()
        assert ("timing each range's kernels: the program again, without ncu (range replay's time is ncu's)"
                in lines)
    else:
        assert run["timing_pass"] is None and run["time_source"] == NO_KERNEL_TIME and not times.exists()
        assert ("warning: no kernel times of the program's own: the kernel timer runs inside a Python "
                "program, and prog.sh is not one (its ranges have ncu's range duration only; profile with "
                "--replay kernel for each kernel's time)") in lines
    assert not (out / prof.TIMING_PASS_DIR).exists()  # the pass's own trace set aside
    assert len(result.plan["configs"]) == 1  # the ncu run's trace alone
    assert result.table["time_ns"].isna().all() and set(result.table["time_source"]) == {NO_KERNEL_TIME}
    assert result.table["l1_ld_bytes"].tolist() == [8192.0]  # the bytes stay range replay's


@pytest.mark.parametrize(("options", "why"), [
    ({}, None),
    ({"time_from": "ncu"}, "asked for (--time-from ncu)"),
    ({"launch_count": 10}, "--launch-count leaves ncu a part of each range's kernels, which a pass of the "
     "whole program cannot join"),
    ({"kernel_name": "softmax", "launch_skip": 2}, "--kernel-name leaves ncu a part of each range's "
     "kernels, which a pass of the whole program cannot join"),
])
def test_a_kernel_replayed_profile_times_its_kernels_in_a_pass_unless_told_or_filtered(options, why):
    assert prof.pass_left_out(prof.ProfileOptions(command=["app"], **options)) == why


def test_a_kernel_replayed_profile_says_its_times_are_ncus(tmp_path, stand_in):
    with pytest.raises(NcuError, match="ncu profiled no kernel"):
        run_profile(prof.ProfileOptions(command=[sys.executable, str(stand_in), "0"], out=tmp_path / "run"))
    assert json.loads((tmp_path / "run" / "run.json").read_text())["time_source"] == NCU_TIME


def test_a_profile_is_a_first_look_by_default():
    """One replay pass a kernel (the bytes set) unless --metrics says otherwise."""
    assert prof.ProfileOptions(command=["app"]).metrics == prof.FIRST_LOOK == "bytes"
    assert all(not m.startswith("smsp__sass_") for m in ncu_mod.resolve_metrics(prof.FIRST_LOOK))


def test_ops_choose_the_op_ranges_ncu_measures():
    """--ops aten.mm takes every overload of aten.mm, aten.add.Tensor that overload only; repeats and
    other ops' ranges do not match."""
    pattern = prof.ops_include(["aten.mm", "aten.add.Tensor", "aten.mm"])
    assert pattern == r"regex:^mt\|op\|\d+\|(aten\.add\.Tensor|aten\.mm\.\w+)/"
    ranges = re.compile(pattern.removeprefix("regex:").removesuffix("/"))
    assert ranges.fullmatch("mt|op|12|aten.mm.default") and ranges.fullmatch("mt|op|3|aten.add.Tensor")
    for other in ("mt|op|12|aten.mmx.default", "mt|op|3|aten.add.Scalar", "mt|rep|op|12|aten.mm.default",
                  "mt|region|aten.mm.default|1"):
        assert not ranges.fullmatch(other), other


@pytest.mark.parametrize("kw, message", [
    ({"ops": ["aten.mm"]}, "--ops names aten ops, which only --torch-ops traces: add --torch-ops"),
    ({"ops": ["aten.mm"], "torch_ops": True, "nvtx_include": ["step/"]},
     "--ops and --nvtx-include both choose which ranges ncu measures"),
    ({"ops": ["mm"], "torch_ops": True}, "--ops 'mm' is not an aten op name"),
])
def test_bad_ops_are_usage_errors(kw, message):
    with pytest.raises(UsageError, match=re.escape(message)):
        prof.check_options(prof.ProfileOptions(command=["app"], **kw))


def test_a_first_look_says_which_ops_the_full_set_would_explain(monkeypatch):
    """After a first look's table, one line names the op types above their minimum in L1 and the exact
    command that measures just them with the full set (the committed run, its full-set counters blanked)."""
    import math

    import memtraffic.api as api

    run = Path("reports/h100/floor_eager_block")
    first = api.analyze(run).assign(req_ld_bytes=math.nan, req_st_bytes=math.nan)
    result = prof.ProfileResult(run, {"returncode": 0}, {"configs": []}, run / "profile.ncu-rep", first)
    monkeypatch.setattr(api, "run_profile", lambda opts, echo: result)
    res = CliRunner().invoke(app, ["profile", "--torch-ops", "--profile-from-start", "off", "--", "python",
                                   "train.py", "--steps", "2"])
    assert res.exit_code == 0, res.output
    named = api.full_look_ops(first)
    line, command = res.stdout.splitlines()[-2:]
    assert line == (f"{len(named)} op type(s) moved more L1 bytes than the minimum; to see why (sectors, "
                    "bytes asked for), measure just them with the full set:")
    assert command == ("  memtraffic profile --torch-ops --metrics traffic --ops " + ",".join(named)
                       + " --profile-from-start off -- python train.py --steps 2")


@pytest.mark.parametrize(("kw", "ranges", "expected"), [
    ({}, False, []),  # no tracer: every kernel, as plain ncu
    ({"torch_ops": True}, False, [ncu_mod.RANGE_INCLUDE]),  # autotuning and untraced launches left out
    ({"torch_ops": True}, True, [ncu_mod.RANGE_INCLUDE]),
    ({"torch_ops": True, "nvtx_include": ["step/"]}, False, ["step/"]),  # the user's filter, not widened
    ({"nvtx_include": ["step/"]}, True, [ncu_mod.RANGE_INCLUDE, "step/"]),
    ({"torch_ops": True, "ops": ["aten.mm"]}, False, [r"regex:^mt\|op\|\d+\|(aten\.mm\.\w+)/"]),
])
def test_which_ranges_ncu_measures(kw, ranges, expected):
    assert prof.traced_ranges(prof.ProfileOptions(command=["app"], **kw), ranges) == expected


def test_the_startup_split_takes_each_span_whose_ends_were_stamped():
    events = {"program_start": 100.5, "torch_imported": 103.0, "tracer_ready": 103.25}
    assert prof.startup_split(events, 99.0, 100.0, 6.0) == {
        "memtraffic_s": 1.0, "to_program_s": 0.5, "imports_s": 2.5, "tracer_s": 0.25,
        "to_first_kernel_s": 2.75}
    # a program without torch stamps only its start; no kernel profiled: no first-kernel span
    assert prof.startup_split({"program_start": 100.5}, 99.0, 100.0, None) == {
        "memtraffic_s": 1.0, "to_program_s": 0.5}


def test_read_startup_keeps_each_events_first_time(tmp_path):
    """The program's own process stamps first; a child it starts later, a cut line or a stray value
    changes nothing."""
    from memtraffic.runfolder.trace import read_startup

    path = tmp_path / "startup.jsonl"
    path.write_text('{"program_start": 1.5}\n{"torch_imported": 2.0}\n{"program_start": 9.0}\n'
                    '{"tracer_ready": true}\n{"other": 3}\n[1]\n{"tracer_ready": 2.5}\n{"torch_imp')
    assert read_startup(path) == {"program_start": 1.5, "torch_imported": 2.0, "tracer_ready": 2.5}
    assert read_startup(tmp_path / "none.jsonl") == {}
