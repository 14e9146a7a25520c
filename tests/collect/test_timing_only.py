"""Timing-only runs: the fallback decision and its exact lines, kernel times joined to ranges from a Chrome
trace, the program timed on a CPU, and the reading side on a timing-only run folder."""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path

import pytest
import torch
from config_fixture import traced_config
from hypothesis import given, settings
from hypothesis import strategies as st

from memtraffic.analysis.analyze import analyze_path, row_label
from memtraffic.api import run_profile
from memtraffic.collect import fallback
from memtraffic.collect import profile as prof
from memtraffic.collect import timing_only as timing_mod
from memtraffic.collect.fallback import fallback_reason
from memtraffic.ncu import command as ncu_mod
from memtraffic.ncu import session as session_mod
from memtraffic.runfolder.paths import portable
from memtraffic.runfolder.timings import TIMINGS_FILE, join_trace, read_timings, write_timings
from memtraffic.vocab.errors import NcuError, ReportError, UsageError

TIMING_ONLY = ("running timing-only: kernel times from torch.profiler joined to the same minimums, shown as "
               "bandwidth at the minimum; no per-level bytes")
PERM_LINE = (f"counters are not permitted on this GPU (ncu: ERR_NVGPUCTRPERM): {TIMING_ONLY}. To read "
             "them: run as root or load the driver with NVreg_RestrictProfilingToAdminUsers=0")
MISSING_LINE = ("ncu is missing (not on PATH, in the CUDA toolkit or /opt/nvidia/nsight-compute): "
                f"{TIMING_ONLY}. To count bytes: install Nsight Compute or set MEMTRAFFIC_NCU=/path/to/ncu")


def _missing_ncu(tmp_path: Path) -> NcuError:
    with pytest.raises(NcuError) as err:
        ncu_mod.find_ncu(env={"PATH": str(tmp_path)}, cuda_bin=tmp_path / "cuda", opt_root=tmp_path / "opt")
    return err.value


def test_the_fallback_decision_and_its_exact_lines(tmp_path):
    assert fallback_reason(NcuError(ncu_mod.PERM_MESSAGE)) == PERM_LINE
    assert fallback_reason(_missing_ncu(tmp_path)) == MISSING_LINE
    # other ncu errors stay errors: a bad MEMTRAFFIC_NCU, an ncu too old
    bad = "MEMTRAFFIC_NCU=/x is not an executable file: point it at the ncu binary"
    assert fallback_reason(NcuError(bad)) is None
    assert fallback_reason(NcuError("ncu 2022.1 at /x is too old")) is None


def _event(cat, name, ts, dur, tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": 7, "tid": tid, "ts": ts, "dur": dur, "args": args}


TRACE = [
    _event("user_annotation", "mt|region|step|0", 0, 100),
    _event("user_annotation", "mt|op|1|aten.mm.default", 10, 20),
    _event("cuda_runtime", "cudaLaunchKernel", 12, 3, correlation=11),
    _event("cpu_op", "mt|triton|2|triton_poi_fused_add_0", 40, 5),  # our mirror's _RecordFunctionFast
    _event("cpu_op", "aten::add", 40, 1),  # not ours: ignored
    _event("cuda_driver", "cuLaunchKernelEx", 41, 2, correlation=12),
    _event("cuda_runtime", "cudaLaunchKernel", 50, 2, correlation=13),  # in the region only
    _event("cuda_runtime", "cudaLaunchKernel", 150, 2, correlation=14),  # outside every range
    _event("user_annotation", "ProfilerStep#1", 0, 500),  # not ours: ignored
    _event("user_annotation", "mt|op|9|aten.add.Tensor", 40, 5, tid=2),  # another thread's range
    _event("kernel", "sm90_gemm", 200, 12.345, correlation=11, stream=7),
    _event("kernel", "triton_poi_fused_add_0", 220, 1.5, correlation=12, stream=7),
    _event("kernel", "vectorized_elementwise", 230, 2, correlation=13, stream=7),
    _event("kernel", "memset", 240, 1, correlation=14, stream=7),
    _event("kernel", "lost", 250, 1, correlation=99, stream=7),  # its launch is not in the trace
    _event("cpu_op", "mt|triton|5|triton_red_fused_sum_1", 300, 5, **{"External id": 42}),
    _event("kernel", "triton_red_fused_sum_1", 400, 3, correlation=98, stream=7, **{"External id": 42}),
]


def test_kernels_join_the_innermost_range_their_launch_ran_in():
    got = [(k["range"], k["kernel"], k["time_ns"]) for k in join_trace(TRACE)]
    assert got == [("mt|op|1|aten.mm.default", "sm90_gemm", 12345),
                   ("mt|triton|2|triton_poi_fused_add_0", "triton_poi_fused_add_0", 1500),
                   ("mt|region|step|0", "vectorized_elementwise", 2000),
                   ("", "memset", 1000), ("", "lost", 1000),
                   ("mt|triton|5|triton_red_fused_sum_1", "triton_red_fused_sum_1", 3000)]
    assert join_trace(TRACE)[0]["nvtx"] == ["mt|region|step|0", "mt|op|1|aten.mm.default"]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.booleans(), max_size=12), st.integers(0, 13))
def test_the_stack_is_the_ranges_that_contain_the_launch(pushes, at):
    """Any nesting of ranges on one thread (push at each True, pop at each False, one time step apart;
    open ones close at the end): the launch's stack is the ranges that contain it, outermost first."""
    spans, open_ = [], []
    for t, push in enumerate(pushes):
        if push:
            open_.append(t)
        elif open_:
            spans.append((open_.pop(), t))
    spans += [(start, len(pushes)) for start in reversed(open_)]
    events = [_event("user_annotation", f"mt|region|r|{s}", s, e - s) for s, e in spans]
    events += [_event("cuda_runtime", "cudaLaunchKernel", at + 0.5, 0.1, correlation=1),
               _event("kernel", "k", 100, 1, correlation=1)]
    (k,) = join_trace(events)
    assert k["nvtx"] == [f"mt|region|r|{s}" for s, e in sorted(spans) if s <= at + 0.5 <= e]
    assert k["range"] == (k["nvtx"][-1] if k["nvtx"] else "")


TORCH_PROGRAM = """
import torch
import memtraffic
x = torch.ones(16, 8)
with memtraffic.region("step", inputs=[x], outputs=[x]):
    y = torch.softmax(x, dim=-1)
print("program ran")
"""


@pytest.mark.slow
@pytest.mark.parametrize("cause", ["missing", "perm"])
def test_profile_falls_back_to_timing_only(tmp_path, monkeypatch, cause):
    """No ncu, or counters refused: the program runs timed (a CPU: no kernel), the run folder as usual."""
    missing = _missing_ncu(tmp_path)
    monkeypatch.setattr(fallback, "gpu_name", lambda: "Fake GPU")  # a GPU without ncu: something to time
    monkeypatch.setattr(timing_mod, "gpu_name", lambda: "Fake GPU")
    if cause == "missing":
        def find():
            raise missing
        monkeypatch.setattr(session_mod, "find_ncu", find)
    else:
        monkeypatch.setattr(session_mod, "find_ncu", lambda: Path("/opt/ncu"))
        monkeypatch.setattr(session_mod, "ncu_version", lambda ncu: (2025, 3, 1))
        monkeypatch.setattr(prof, "gpu_name", lambda: "Fake GPU")

        def refuse(ncu, key=None):
            raise NcuError(ncu_mod.PERM_MESSAGE)
        monkeypatch.setattr(session_mod, "query_metric_names", refuse)
    program = tmp_path / "prog.py"
    program.write_text(TORCH_PROGRAM)
    out = tmp_path / "run"
    lines: list[str] = []
    result = run_profile(prof.ProfileOptions(command=[sys.executable, str(program)], out=out), lines.append)
    assert lines[0] == (MISSING_LINE if cause == "missing" else PERM_LINE)
    assert "program ran" not in lines  # the program's output goes to stderr, not through echo
    run = json.loads((out / "run.json").read_text())
    assert run["timing_only"] is True and run["reports"] == [TIMINGS_FILE] and run["returncode"] == 0
    assert run["timing_reason"] == lines[0]
    assert run["attempts"][0]["argv"][1:] == portable([str(prof.LAUNCHER), "--trace-from=none", "--triton",
                                                       f"--timings={out / TIMINGS_FILE}", str(program)], out,
                                                      Path.cwd())
    timings = read_timings(out / TIMINGS_FILE)
    assert timings["kernels"] == []  # the program's tensors are on the CPU
    assert timings["device"] == (torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu")
    (config,) = json.loads((out / "plan.json").read_text())["configs"]
    assert config["kind"] == "region" and config["min_read_bytes"] == 16 * 8 * 4
    assert len(result.table) == 0  # no kernel ran on the CPU


def test_timing_only_needs_a_python_program(tmp_path):
    opts = prof.ProfileOptions(command=["true"], timing_only=True, out=tmp_path / "r")
    with pytest.raises(UsageError, match="timing-only runs time kernels with torch.profiler inside the "
                       "program: give a Python program that uses PyTorch"):
        run_profile(opts, lambda x: None)


def _timing_run(folder: Path, device: str = "NVIDIA H100 80GB HBM3") -> Path:
    """A timing-only run folder as profile_timing leaves it (its kernels from the trace above)."""
    folder.mkdir()
    write_timings(folder / TIMINGS_FILE, join_trace(TRACE), device)
    configs = [
        traced_config(0, range="mt|op|1|aten.mm.default", seq=1, op="aten.mm.default", shape=[64, 64],
                      min_read_bytes=32768, min_write_bytes=16384, model_flops=524288),
        traced_config(1, range="mt|triton|2|triton_poi_fused_add_0", kind="triton", seq=2,
                      op="triton_poi_fused_add_0", shape=[64], min_read_bytes=512, min_write_bytes=256,
                      model_flops=None, params={"fused_aten": ["aten.add"]}),
        traced_config(2, range="mt|region|step|0", kind="region", seq=3, op="step", shape=[], dtype="",
                      min_read_bytes=None, min_write_bytes=None, model_flops=None),
    ]
    (folder / "plan.json").write_text(json.dumps({"version": 1, "kind": "profile", "configs": configs}))
    (folder / "run.json").write_text(json.dumps({"kind": "profile", "timing_only": True,
                                                 "reports": [TIMINGS_FILE], "returncode": 0}))
    return folder


def test_analyze_reads_a_timing_only_run(tmp_path):
    table = analyze_path(_timing_run(tmp_path / "run"))
    rows = {r["range"]: r for r in table.to_dict("records")}
    mm = rows["mt|op|1|aten.mm.default"]
    assert mm["time_ns"] == 12345 and mm["bw_min_Bps"] == pytest.approx(49152 / 12345e-9)
    assert all(math.isnan(mm[c]) for c in ("eff_l1_ld", "eff_l2", "eff_dram", "l2_rd_bytes", "dram_rd_bytes"))
    assert mm["timing_only"] and mm["copy_roof_Bps"] > 0  # the committed H100 roofs
    assert mm["frac_copy_roof"] == pytest.approx(mm["bw_min_Bps"] / mm["copy_roof_Bps"])
    assert mm["diagnosis"].startswith("timing only, no per-level bytes: ")
    assert mm["diagnosis"].endswith("of the copy roof") and "at the minimum" in mm["diagnosis"]
    triton = rows["mt|triton|2|triton_poi_fused_add_0"]
    assert triton["params"] == {"fused_aten": ["aten.add"]}
    assert triton["kernels"] == ["triton_poi_fused_add_0"]
    assert row_label(triton) == "triton_poi_fused_add_0 #2 64 fp32"
    assert rows["mt|region|step|0"]["diagnosis"].endswith("no minimum for this range")
    assert [f.rule for f in rows["mt|region|step|0"]["findings"]] == ["timing_only_no_minimum"]
    outside = [r["kernels"] for r in table.to_dict("records") if not r["range"]]
    assert outside == [["memset"], ["lost"]] and len(table) == 6


def test_an_unknown_gpu_has_no_roof_fraction(tmp_path):
    table = analyze_path(_timing_run(tmp_path / "run", device="Some GPU"))
    assert table["frac_copy_roof"].isna().all() and table["copy_roof_Bps"].isna().all()


@pytest.mark.parametrize("damage", [
    "{", '{"format": 1}', '{"format": 2, "kernels": []}',
    '{"format": 1, "kernels": [{"range": "", "kernel": "k", "time_ns": -1}]}',
    '{"format": 1, "kernels": [{"range": "", "kernel": "k", "time_ns": true}]}',
    '{"format": 1, "kernels": [{"kernel": "k", "time_ns": 5}]}',
])
def test_a_damaged_timings_file_is_named(tmp_path, damage):
    folder = _timing_run(tmp_path / "run")
    (folder / TIMINGS_FILE).write_text(damage)
    with pytest.raises(ReportError, match=f"{folder / TIMINGS_FILE}"):
        analyze_path(folder)


def test_check_gates_time_and_fails_levels_a_timing_only_run_has_not(tmp_path):
    from memtraffic.analysis.check import check, failures, load_expectations

    folder = _timing_run(tmp_path / "run")
    expect = tmp_path / "traffic.toml"
    expect.write_text('[[expect]]\nmatch = "triton_poi_fused_add_0"\nmax_time = "2us"\n'
                      'max_bytes = { dram = "1MB" }\n')
    results = check(folder, load_expectations(expect))
    by_check = {r["check"]: r for r in results}
    assert by_check["max_time"]["ok"] is True
    assert by_check["max_bytes.dram"]["ok"] is False  # never a false green on bytes nobody counted
    assert "not measured" in failures(results)[0]


def test_the_roofline_says_a_timing_only_run_has_no_levels(tmp_path):
    from memtraffic.views.roofline import roofline_points

    table = analyze_path(_timing_run(tmp_path / "run"))
    with pytest.raises(ReportError, match="a timing-only run has no per-level bytes to place on a roofline"):
        roofline_points(table)


@pytest.mark.slow
@pytest.mark.parametrize("asked", [True, False])
def test_measure_times_the_plan_without_ncu(tmp_path, monkeypatch, asked):
    """measure --timing-only, or measure without ncu: the runner runs the plan timed (a CPU: Triton in its
    interpreter, no CUDA kernel to time), the run folder says so."""
    from memtraffic.api import run_measure
    from memtraffic.collect import measure as measure_mod

    missing = _missing_ncu(tmp_path)
    monkeypatch.setattr(fallback, "gpu_name", lambda: "Fake GPU")
    monkeypatch.setattr(timing_mod, "gpu_name", lambda: "Fake GPU")  # the runner still runs on the CPU

    def find():
        raise missing
    monkeypatch.setattr(session_mod, "find_ncu", find)
    out = tmp_path / "run"
    lines: list[str] = []
    opts = measure_mod.MeasureOptions(variants=["softmax_tiled"], shapes=["7x33"], out=out, timing_only=asked)
    if torch.cuda.is_available():  # the runner's kernels are timed, each in its config's range
        result = run_measure(opts, lines.append)
        # only the config's range: the warm-up and reference kernels outside it are dropped
        assert list(result.table["range"]) == [result.plan["configs"][0]["range"]]
        assert list(result.table["n_kernels"]) == [1] and result.table["time_ns"].iloc[0] > 0
        assert result.table["diagnosis"].iloc[0].startswith("timing only")
    else:
        expected = re.escape("no kernel was timed inside the NVTX ranges mt|softmax_tiled|")
        with pytest.raises(NcuError, match=expected):
            run_measure(opts, lines.append)
    assert lines[0] == MISSING_LINE if not asked else lines[0].startswith("timing 1 configs without counters")
    run = json.loads((out / "run.json").read_text())
    assert run["timing_only"] is True and run["reports"] == [TIMINGS_FILE]
    assert [c["status"] for c in run["configs"]] == ["ok"]  # the runner checked it against its reference
    assert run["attempts"][0]["argv"][1:4] == portable([str(prof.LAUNCHER), "--trace-from=none",
                                                        f"--timings={out / TIMINGS_FILE}"], out, Path.cwd())
    assert (read_timings(out / TIMINGS_FILE)["kernels"] == []) is not torch.cuda.is_available()


def test_diff_of_timing_only_runs_claims_no_bytes(tmp_path):
    from memtraffic.analysis.diff import compare, load_side

    result = compare(load_side(_timing_run(tmp_path / "a")), load_side(_timing_run(tmp_path / "b")))
    verdicts = [r["verdict"] for r in result.rows]
    assert len(verdicts) == 6 and all(v == "no change: no bytes measured, time 0%~"
                                      for v in verdicts), verdicts


def test_above_the_copy_roof_says_the_data_was_in_l2():
    import pandas as pd

    from memtraffic.analysis.timing_only_table import copy_roof, mark
    from memtraffic.vocab.finding import Subject

    roof = copy_roof("NVIDIA H100 80GB HBM3")
    table = mark(pd.DataFrame({"device": ["NVIDIA H100 80GB HBM3"] * 2, "bw_min_Bps": [roof * 1.3, roof / 2],
                               "diagnosis": ["", ""]}), [Subject()] * 2)
    above, below = table["diagnosis"]
    assert above.endswith("1.30 of the copy roof: data came from L2")
    assert below.endswith("0.50 of the copy roof")


def test_kernels_outside_ranges_are_dropped_where_a_filter_asks(tmp_path):
    from memtraffic.runfolder.timings import keep_ranged

    folder = _timing_run(tmp_path / "run")
    assert keep_ranged(folder / TIMINGS_FILE) == 2  # memset and lost
    data = read_timings(folder / TIMINGS_FILE)
    assert [k["launch"] for k in data["kernels"]] == [0, 1, 2, 3] and data["dropped_outside_ranges"] == 2
    assert all(k["range"] for k in data["kernels"])


def test_without_ncu_and_without_a_gpu_there_is_nothing_to_time(tmp_path, monkeypatch):
    """No ncu on a machine without a GPU: the GPU's one line, not a timing-only run that times nothing."""
    from memtraffic.vocab.errors import GpuNotFoundError

    def no_gpu():
        raise GpuNotFoundError("no NVIDIA GPU is visible")
    monkeypatch.setattr(fallback, "gpu_name", no_gpu)
    with pytest.raises(GpuNotFoundError, match="no NVIDIA GPU is visible"):
        fallback.unavailable(_missing_ncu(tmp_path))
    assert isinstance(fallback.unavailable(NcuError(ncu_mod.PERM_MESSAGE)), fallback.CountersUnavailable)
