"""`memtraffic floor` on the committed H100 runs: time against the floor per op type, the reason of each
recoverable time, the fused minimum beside the eager one and the DRAM bytes measured.

The floor runs (reports/h100/floor_{eager,compiled}_block: a transformer block's forward and backward,
made by scripts/gpu_floor.sh) carry tensor identities in their traces; older runs do not, and say so.
"""

from __future__ import annotations

import gzip
import html
import json
import math
import re
import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

import memtraffic
from memtraffic.analysis.floor import KINDS, floor_run, fused_minimum, row_floor, summary_lines
from memtraffic.cli import app
from memtraffic.runfolder.timings import (
    KERNEL_TIMES_FILE,
    NCU_TIME,
    NO_KERNEL_TIME,
    TIMER_PASS,
    write_timings,
)

REPORTS = Path(__file__).resolve().parents[2] / "reports" / "h100"
EAGER, COMPILED = REPORTS / "floor_eager_block", REPORTS / "floor_compiled_block"
SEED = REPORTS / "seed_1048576x2_fp32"
GELU = {way: REPORTS / f"floor_gelu_{way}" for way in ("eager", "triton", "compiled")}
RANGE = REPORTS / "range_replay_adam" / "range"
ROOFS_H100 = REPORTS.parent / "roofs" / "NVIDIA_H100_80GB_HBM3.json"
runner = CliRunner()


def floor_json(run: Path) -> dict:
    result = runner.invoke(app, ["floor", str(run), "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


@pytest.mark.parametrize("run", [EAGER, COMPILED], ids=["eager", "compiled"])
def test_the_block_runs_meet_the_issue(run):
    f = floor_json(run)
    assert set(f) >= {"gpu_time_s", "floor_s", "by_op", "eager_min_bytes", "fused_min_bytes", "dram_bytes"}
    assert set(f["by_op"][0]) >= {"op", "time_s", "floor_s", "recoverable_s", "reason"}
    recoverable = sum(r["recoverable_s"] for r in f["by_op"])
    assert math.isclose(recoverable, f["gpu_time_s"] - f["floor_s"], rel_tol=0.01)
    for r in f["by_op"]:
        if r["time_s"] > 0.01 * f["gpu_time_s"] and r["recoverable_s"] > 0:
            assert r["reason"] and r["reason_kind"] in KINDS and r["reason_kind"] != "unknown", r
    assert f["fused_min_bytes"] <= f["eager_min_bytes"]
    assert f["gpu_time_s"] > f["floor_s"] > 0


def test_the_compiled_block_moves_at_least_its_fused_minimum_and_recovers_less_than_eager():
    eager, compiled = floor_json(EAGER), floor_json(COMPILED)
    assert compiled["dram_bytes"] >= compiled["fused_min_bytes"]
    assert compiled["gpu_time_s"] - compiled["floor_s"] < eager["gpu_time_s"] - eager["floor_s"]
    # the same program, the same region: inputs, parameters and gradients; only what fuses differs
    assert compiled["fused_min_bytes"] == pytest.approx(eager["fused_min_bytes"], rel=0.01)
    assert compiled["eager_min_bytes"] < eager["eager_min_bytes"]


def test_gelu_the_fused_minimum_is_one_read_and_one_write_whichever_way():
    mn = 4096 * 4096 * 4
    floors = {way: floor_run(run) for way, run in GELU.items()}
    assert {way: f.fused_min_bytes for way, f in floors.items()} == dict.fromkeys(GELU, 2 * mn)
    assert floors["eager"].eager_min_bytes == 18 * mn  # ten reads and eight writes of the tensor
    assert floors["eager"].dram_bytes > 6 * floors["triton"].dram_bytes  # each op a pass over memory


def test_runs_traced_before_identities_have_no_fused_minimum():
    f = memtraffic.floor(REPORTS / "profile_train_step")
    assert f.fused_min_bytes is None and "not known" in f.fused_note
    assert f.eager_min_bytes > 0 and f.dram_bytes > 0


# One committed run and op type (a measure run's config) per reason: the kind that holds most of its
# recoverable time.
REASONS = [
    ("spills_softmax_naive_2048x16384", "softmax_naive 2048x16384 fp32 num_warps=1", "spills"),
    ("compiled_layernorm_mlp_adamw", "triton_per_fused_sum_2", "launch"),
    ("floor_eager_block", "aten._scaled_dot_product_cudnn_attention_backward.default", "bytes"),
    ("floor_eager_block", "aten.mm.default", "compute"),
    ("profile_torch_model", "aten.sum.dim_IntList", "grid"),
    ("floor_eager_block", "aten.stack.default", "tail"),
    ("floor_compiled_block",
     "triton_red_fused_add_native_layer_norm_native_layer_norm_backward_view_6", "occupancy"),
    ("profile_torch_model", "aten.randn.default", "latency"),
    ("profile_cupy_region", "(outside any op or region)", "no minimum"),  # CuPy kernels beside regions
    ("timing_only_layernorm_mlp_adamw", "aten.randn.default", "timing only"),
]


@pytest.mark.parametrize(("run", "op", "kind"), REASONS, ids=[k for _, _, k in REASONS])
def test_each_reason_on_a_committed_run(run, op, kind):
    rows = {r.name: r for r in floor_run(REPORTS / run).by_op}
    assert rows[op].reason_kind == kind
    assert rows[op].recoverable_s > 0 and rows[op].reason


def test_a_floor_is_the_larger_of_the_copy_and_the_flops_at_their_roofs():
    roofs = {"dram_Bps": 3e12, "bf16_tc_flops": 7.5e14, "fp32_flops": 5e13}
    copy_bound = {"min_bytes": 3e6, "model_flops": 1e6, "dtype": "fp32"}
    flop_bound = {"min_bytes": 3e6, "model_flops": 1.5e9, "dtype": "bf16"}
    assert row_floor(copy_bound, roofs) == pytest.approx(1e-6)
    assert row_floor(flop_bound, roofs) == pytest.approx(2e-6)
    assert row_floor({"min_bytes": None}, roofs) is None


def test_the_table_has_a_summary_the_reasons_and_a_legend():
    result = runner.invoke(app, ["floor", str(EAGER)])
    assert result.exit_code == 0, result.output
    first = result.output.splitlines()[0]
    assert first.startswith("floor: GPU time ") and "recoverable" in first
    assert "minimum: eager " in result.output and ", fused " in result.output
    assert "recoverable = time - floor" in result.output  # the legend
    # a reason on three op types: said once, its numbers as ranges, each op type's own under it
    assert "  3 op types: compute-bound: the FLOPs take 44.2-88.5 us at the BF16 tensor cores roof" in \
        result.output and "    aten.mm.default: 88.5 us, 89%\n" in result.output


def test_a_bad_format_is_a_usage_error():
    result = runner.invoke(app, ["floor", str(EAGER), "--format", "csv"])
    assert result.exit_code == 2


JSON = st.recursive(st.none() | st.booleans() | st.integers(-5, 1 << 40) | st.floats() | st.text(max_size=3),
                    lambda inner: st.lists(inner, max_size=3), max_leaves=6)


@pytest.mark.slow
@given(st.lists(st.fixed_dictionaries({"reads": JSON, "writes": JSON, "min_read_bytes": st.integers(0, 99),
                                       "min_write_bytes": st.integers(0, 99)}), min_size=1, max_size=6))
def test_damaged_storage_pairs_are_left_out_never_fatal(records):
    fused = fused_minimum(records)
    assert fused is not None and fused.read_bytes >= 0 and fused.write_bytes >= 0
    assert fused.eager_bytes == sum(r["min_read_bytes"] + r["min_write_bytes"] for r in records)


# --- no roofs, no floor (issue 51) ----------------------------------------------------------------------


def on_gpu(run: Path, dest: Path, gpu: str) -> Path:
    """A copy of a committed run whose recorded GPU is `gpu` (its kernel table, results and run.json)."""
    shutil.copytree(run, dest)
    table = dest / "profile.kernels.json.gz"
    doc = json.loads(gzip.decompress(table.read_bytes()))
    doc["columns"]["device"] = [gpu] * len(doc["columns"]["device"])
    table.write_bytes(gzip.compress(json.dumps(doc).encode()))
    meta = json.loads((dest / "run.json").read_text())
    meta["environment"]["gpu"] = gpu
    (dest / "run.json").write_text(json.dumps(meta))
    for stale in ("results.json", "results.csv"):
        (dest / stale).unlink(missing_ok=True)
    return dest


@pytest.fixture
def h200(tmp_path, monkeypatch) -> Path:
    """floor_eager_block as if profiled on an H200 without measured roofs: only the H100's are known."""
    committed = tmp_path / "roofs"
    committed.mkdir()
    shutil.copy(ROOFS_H100, committed)
    monkeypatch.setattr("memtraffic.vocab.roofs.COMMITTED_DIR", committed)
    return on_gpu(EAGER, tmp_path / "h200_block", "NVIDIA H200")


NO_ROOFS = ("no floor: no measured roofs for NVIDIA H200 (`memtraffic roofs --refresh` on that GPU "
            "measures them)")


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_floor_on_a_gpu_without_roofs_is_no_floor_and_exit_1(h200, fmt):
    result = runner.invoke(app, ["floor", str(h200), "--format", fmt])
    assert result.exit_code == 1
    assert result.stderr == f"error: {h200}: {NO_ROOFS}\n" and result.stdout == ""
    f = floor_run(h200)
    assert f.no_floor == NO_ROOFS and math.isnan(f.floor_s) and math.isnan(f.recoverable_s)
    assert {r.reason_kind for r in f.by_op} == {"no roofs"} and f.gpu_time_s > 0
    # the summary profile, analyze and the HTML report print: the GPU time, no floor, nothing recoverable
    summary = " ".join(f.summary().split())
    assert summary.startswith("floor: GPU time 1.79 ms; " + NO_ROOFS)
    assert "recoverable" not in summary and "hold" not in summary and "0 ns" not in summary


def test_check_with_a_floor_table_fails_on_a_gpu_without_roofs(h200, tmp_path):
    expect = tmp_path / "floor.toml"
    expect.write_text('[floor]\nmax_recoverable = "300ms"\nmax_over_fused = 1000\n')
    result = runner.invoke(app, ["check", str(h200), "--expect", str(expect)])
    assert result.exit_code == 1, result.output
    assert f"FAIL run: {NO_ROOFS} ({expect} [floor])" in result.output
    assert "recoverable time" not in result.output


def test_diff_compares_no_recoverable_time_against_no_floor(h200, tmp_path):
    other = on_gpu(EAGER, tmp_path / "h200_again", "NVIDIA H200")
    result = runner.invoke(app, ["diff", str(h200), str(other), "--wide"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    start = lines.index("floor (memtraffic floor):")
    assert lines[start + 1: start + 4] == [
        f"  A: GPU time 1.79 ms; {NO_ROOFS}", f"  B: GPU time 1.79 ms; {NO_ROOFS}",
        "  recoverable times not compared: A and B have no floor"]
    assert "recoverable time B vs A" not in result.stdout and "floor 0 ns" not in result.stdout


def test_the_html_report_says_no_floor(h200):
    from memtraffic.runfolder.load import load_run
    from memtraffic.views.html_report import floor_section

    section = floor_section(memtraffic.analyze(h200), load_run(h200))[0]
    text = " ".join(html.unescape(re.sub("<[^>]+>", " ", section)).split())
    assert " ".join(NO_ROOFS.replace("`", " ").split()) in text and "lists every op type" not in text
    assert "<code>memtraffic roofs --refresh</code>" in section  # markup, not literal backticks


H200_FIRST = REPORTS.parent / "h200" / "first_profile_roofs"


def test_the_committed_runs_of_a_gpu_without_roofs_have_no_floor(tmp_path):
    """reports/h200/first_profile_roofs: profiled on an H200, whose roofs are not committed (its first profile
    measured them into that machine's cache): floor exits 1, check's [floor] fails, diff compares nothing."""
    first, bare = H200_FIRST / "first", H200_FIRST / "no_roofs"
    for run in (first, bare):
        result = runner.invoke(app, ["floor", str(run)])
        assert (result.exit_code, result.stderr) == (1, f"error: {run}: {NO_ROOFS}\n")
    said = (H200_FIRST / "floor_no_roofs.txt").read_text()  # on the H200, before its roofs were measured
    old = NO_ROOFS.replace("memtraffic roofs", "memtraffic ceilings")  # said before `roofs` had its name
    assert said == f"error: reports/h200/first_profile_roofs/no_roofs: {old}\n"
    expect = tmp_path / "floor.toml"
    expect.write_text('[floor]\nmax_recoverable = "300ms"\n')
    result = runner.invoke(app, ["check", str(bare), "--expect", str(expect)])
    assert result.exit_code == 1 and f"FAIL run: {NO_ROOFS} ({expect} [floor])" in result.output
    result = runner.invoke(app, ["diff", str(first), str(bare), "--wide"])
    assert result.exit_code == 0, result.output
    assert "  recoverable times not compared: A and B have no floor" in result.stdout.splitlines()
    assert "recoverable time B vs A" not in result.stdout


# --- where the time comes from: ncu's kernel replay, the kernel timer, never a range's duration ----------


def test_a_range_replayed_run_without_kernel_times_has_no_floor():
    """reports/h100/range_replay_adam/range: ncu's range replay, no pass that timed its kernels."""
    result = runner.invoke(app, ["floor", str(RANGE)])
    assert result.exit_code == 1
    assert result.stderr == (
        f"error: {RANGE}: no floor: the 16 ranges of this run have no kernel time: ncu's range replay gives "
        "a range only its duration, ncu's own (about 200 us for an op whose kernels take 1-2 us), and no "
        "pass without ncu timed their kernels; profile again with --replay kernel (the default) or "
        "--timing-only\n")
    table = memtraffic.analyze(RANGE)
    assert table["time_ns"].isna().all() and set(table["time_source"]) == {NO_KERNEL_TIME}
    assert set(memtraffic.analyze(RANGE.parent / "kernel")["time_source"]) == {NCU_TIME}


def test_range_rows_take_their_kernels_times_from_the_pass_without_ncu(tmp_path):
    """A kernel times file beside the range report (what `profile --replay range` writes): each range row
    gets the summed time of the kernels launched inside its range, nested ranges' included."""
    run = tmp_path / "range"
    shutil.copytree(RANGE, run)
    ranges = list(dict.fromkeys(memtraffic.analyze(RANGE)["range"]))
    kernels = [{"launch": i, "range": r, "nvtx": [r], "kernel": "k", "time_ns": 1000 + i, "stream": 7}
               for i, r in enumerate(ranges)]
    kernels.append({"launch": len(ranges), "range": "mt|triton|0|k", "nvtx": [ranges[0], "mt|triton|0|k"],
                    "kernel": "inner", "time_ns": 5, "stream": 7})  # a kernel in a range nested in the first
    kernels.append({"launch": len(ranges) + 1, "range": "", "nvtx": [], "kernel": "outside", "time_ns": 9,
                    "stream": 7})
    write_timings(run / KERNEL_TIMES_FILE, kernels, "NVIDIA H100 80GB HBM3")
    table = memtraffic.analyze(run)
    got = dict(zip(table["range"], table["time_ns"], strict=True))
    assert got == {r: 1000 + i + (5 if i == 0 else 0) for i, r in enumerate(ranges)}
    assert set(table["time_source"]) == {TIMER_PASS}
    # the bytes stay ncu's range replay's
    assert table["l1_ld_bytes"].tolist() == memtraffic.analyze(RANGE)["l1_ld_bytes"].tolist()
    f = floor_run(run)
    assert not f.no_floor and f.untimed == 0 and f.time_sources == [TIMER_PASS]
    assert f.gpu_time_s == pytest.approx(sum(got.values()) * 1e-9)


def test_range_rows_the_pass_did_not_time_are_left_out_and_said(tmp_path):
    run = tmp_path / "range"
    shutil.copytree(RANGE, run)
    first = memtraffic.analyze(RANGE)["range"].iloc[0]
    write_timings(run / KERNEL_TIMES_FILE, [{"launch": 0, "range": first, "nvtx": [first], "kernel": "k",
                                             "time_ns": 2000, "stream": 7}], "NVIDIA H100 80GB HBM3")
    f = floor_run(run)
    assert f.untimed == 15 and f.gpu_time_s == pytest.approx(2e-6) and not f.no_floor
    assert ("  15 ranges without their kernels' time left out of the time and the floor (range replay: ncu's "
            "range duration is not the kernels' time, and the pass without ncu did not time them)"
            ) in summary_lines(f, width=1000)


WINDOW = REPORTS / "floor_window" / "default"


def _pass_of(run: Path) -> list[dict]:
    """What the kernel timer writes for `run` (a kernel-replayed profile) in a pass without ncu: its
    measured launches in their ranges, then each repeat's kernels in its own `mt|rep|` range, every launch
    with its own time and the demangled name Kineto gives ('(anonymous namespace)' where ncu says
    '(unnamed)')."""
    table = json.loads(gzip.decompress((run / "profile.kernels.json.gz").read_bytes()))["columns"]
    launches = list(zip(table["range"], table["kernel_full"], strict=True))
    plan = json.loads((run / "plan.json").read_text())
    launches += [(c["range"], name) for c in plan["configs"] if c.get("repeat")
                 for rng, name in zip(table["range"], table["kernel_full"], strict=True)
                 if rng == c["reuses"]]
    return [{"launch": i, "range": rng, "nvtx": [rng], "time_ns": 1000 + i, "stream": 7,
             "kernel": name.replace("(unnamed)", "(anonymous namespace)")}
            for i, (rng, name) in enumerate(launches)]


def test_the_committed_default_profile_has_every_launchs_time_from_the_pass():
    """The H100 run made with the defaults: every row (repeats included) joined its kernels in the pass
    without ncu, ncu's short kernel names against the timer's demangled ones."""
    table = memtraffic.analyze(WINDOW)
    assert set(table["time_source"]) == {TIMER_PASS} and table["time_ns"].gt(0).all()
    assert json.loads((WINDOW / "run.json").read_text())["time_source"] == TIMER_PASS


def test_a_kernel_replayed_profile_takes_each_launchs_own_time_from_the_pass_without_ncu(tmp_path):
    """`profile` (--time-from program): every launch ncu measured, and every repeat its counters were copied
    onto, gets the time the pass without ncu gave that very launch; the bytes stay ncu's."""
    run = tmp_path / "default"
    shutil.copytree(WINDOW, run)
    timed = _pass_of(run)
    write_timings(run / KERNEL_TIMES_FILE, timed, "NVIDIA H100 80GB HBM3")
    table = memtraffic.analyze(run)
    want: dict[str, int] = {}
    for k in timed:
        want[k["range"]] = want.get(k["range"], 0) + k["time_ns"]
    assert dict(zip(table["range"], table["time_ns"], strict=True)) == want
    assert any(r.startswith("mt|rep|") for r in table["range"])  # repeats have times of their own
    assert set(table["time_source"]) == {TIMER_PASS}
    assert table["l1_ld_bytes"].tolist() == memtraffic.analyze(WINDOW)["l1_ld_bytes"].tolist()
    f = floor_run(run)
    assert f.time_sources == [TIMER_PASS] and f.gpu_time_s == pytest.approx(sum(want.values()) * 1e-9)


def test_a_range_the_pass_ran_differently_keeps_ncus_time_and_says_so(tmp_path):
    """One kernel fewer in one range, another kernel's name changed in a second: those two ranges keep ncu's
    time (NCU_TIME), every other range takes the pass's."""
    run = tmp_path / "default"
    shutil.copytree(WINDOW, run)
    timed = _pass_of(run)
    first, second = timed[0]["range"], next(k["range"] for k in timed if k["range"] != timed[0]["range"])
    timed = [k for k in timed if k is not next(t for t in timed if t["range"] == first)]
    for k in timed:
        if k["range"] == second:
            k["kernel"] = "some_other_kernel"
    write_timings(run / KERNEL_TIMES_FILE, timed, "NVIDIA H100 80GB HBM3")
    table = memtraffic.analyze(run).set_index("range")
    ncu_only = tmp_path / "ncu_only"
    shutil.copytree(WINDOW, ncu_only)
    (ncu_only / KERNEL_TIMES_FILE).unlink()
    ncu = memtraffic.analyze(ncu_only).set_index("range")
    assert set(ncu["time_source"]) == {NCU_TIME}
    for rng in (first, second):
        assert table.loc[rng, "time_source"] == NCU_TIME
        assert table.loc[rng, "time_ns"] == ncu.loc[rng, "time_ns"]
    others = table.drop(index=[first, second])
    assert set(others["time_source"]) == {TIMER_PASS}
    assert sorted(floor_run(run).time_sources) == sorted([NCU_TIME, TIMER_PASS])


def test_a_measure_run_has_a_row_per_config_in_the_terminal_the_json_and_the_html():
    """The seed run's three softmax variants are three rows, never one 'softmax' row (issue 51)."""
    names = ["softmax_naive 1048576x2 fp32 num_warps=4", "torch_softmax 1048576x2 fp32",
             "softmax_tiled 1048576x2 fp32 BLOCK_M=128"]
    f = floor_run(SEED)
    assert [r.name for r in f.by_op] == names and {r.op for r in f.by_op} == {"softmax"}
    result = runner.invoke(app, ["floor", str(SEED), "--format", "json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)["by_op"]
    assert [(r["variant"], r["shape"], r["dtype"], r["config"]) for r in rows] == [
        ("softmax_naive", "1048576x2", "fp32", names[0]), ("torch_softmax", "1048576x2", "fp32", names[1]),
        ("softmax_tiled", "1048576x2", "fp32", names[2])]
    assert rows[0]["params"] == {"num_warps": 4} and rows[0]["calls"] == 1
    assert json.loads(result.output)["eager_min_bytes"] is None  # alternatives: no program's minimum
    text = runner.invoke(app, ["floor", str(SEED)]).output
    top = f"  the top 3 configs hold 100% of it: {names[0]} 627.1 us (bytes)"
    assert text.splitlines()[1].startswith(top)
    assert [line.split("  ")[0] for line in text.splitlines() if line.startswith("softmax")] == [
        "softmax_naive 1048576x2 fp32 num_warps=4", "softmax_tiled 1048576x2 fp32 BLOCK_M=128"]
    assert "\nconfig " in text
    from memtraffic.runfolder.load import load_run
    from memtraffic.views.html_report import floor_section

    run = load_run(SEED)
    from memtraffic.analysis.analyze import analyze_run

    page = html.unescape(floor_section(analyze_run(run), run)[0]).replace("\xa0", " ")
    assert f"the top 3 configs hold 100% of it: {names[0]} 627.1 us (bytes)" in " ".join(page.split())
