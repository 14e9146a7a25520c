"""profile: any program under ncu. Exact argv, the program's trace as the plan, and every bad input."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from test_collect import VERSION_2025, fake_ncu
from typer.testing import CliRunner

from memtraffic import ncu as ncu_mod
from memtraffic import profile as prof
from memtraffic.cli import app
from memtraffic.exceptions import UsageError


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


def test_read_trace_numbers_records_and_skips_a_cut_line(tmp_path):
    trace = tmp_path / "trace.jsonl"
    lines = [json.dumps({"range": "mt|op|0|aten.mm.default", "min_read_bytes": 8}),
             json.dumps({"range": "mt|region|step|1"}), '{"range": "mt|op|2|aten.ad']
    trace.write_text("\n".join(lines))
    configs = prof.read_trace(trace)
    assert [(c["id"], c["range"]) for c in configs] == [(0, "mt|op|0|aten.mm.default"),
                                                        (1, "mt|region|step|1")]
    assert prof.read_trace(tmp_path / "missing.jsonl") == []


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
