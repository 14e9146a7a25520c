"""Launches that are not the program's work: the kinds (analysis.outside) on the committed timing-only run
of a compiled step, the one line the readable tables say instead of a row each, what JSON and CSV keep,
and small timings.json runs written here (only such launches; none; a run that traced no ops)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pandas as pd
import pytest
from config_fixture import traced_config
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from memtraffic.analysis.analyze import analyze_path
from memtraffic.analysis.floor import floor_run
from memtraffic.analysis.outside import AUTOTUNING, FLUSH, OTHER, left_out_line, outside_kinds
from memtraffic.cli import app
from memtraffic.runfolder.timings import TIMINGS_FILE, write_timings
from memtraffic.views.tables import LEGEND, NOTE_WIDTH, results_table

REPO = Path(__file__).resolve().parents[2]
TIMED = REPO / "reports" / "h100" / "timing_only_layernorm_mlp_adamw"
# The committed run's line: counts and time computed by analysis.outside from its timings.json.
LINE = "1901 launches outside the program's ops left out (27.31 ms): 474 autotuning, 1074 flushes, 353 other"
INT_FILL = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<int>, "
            "std::array<char*, 1ul> >(int, at::native::FillFunctor<int>, std::array<char*, 1ul>)")
runner = CliRunner()


@pytest.fixture(scope="module")
def timed() -> pd.DataFrame:
    return analyze_path(TIMED)


@pytest.fixture(scope="module")
def launches() -> list[dict]:
    return json.loads((TIMED / TIMINGS_FILE).read_text())["kernels"]


def test_the_committed_run_leaves_out_its_autotuning_and_compile_launches(timed, launches):
    outside = [k for k in launches if not k["range"]]
    assert len(launches) == 1972 and len(outside) == 1901
    by_kind = timed.loc[timed["outside_program"], "outside_kind"].value_counts().to_dict()
    assert by_kind == {FLUSH: 1074, AUTOTUNING: 474, OTHER: 353}
    assert (timed.loc[timed["outside_program"], "range"] == "").all()
    kept = timed[~timed["outside_program"]]
    assert len(kept) == 71 and kept["range"].str.startswith("mt|").all()
    assert timed.loc[timed["outside_program"], "time_ns"].sum() == sum(k["time_ns"] for k in outside)
    assert left_out_line(timed) == LINE


def test_each_autotuning_stretch_is_one_kernel_and_its_flushes_right_before_its_first_launch(launches):
    """What the rule rests on (analysis.outside's doc), read from the committed timings.json."""
    stretches: list[list[dict]] = [[]]
    follows: list[dict] = []
    for k in launches:
        if k["range"]:
            if stretches[-1]:
                follows.append(k)
                stretches.append([])
        else:
            stretches[-1].append(k)
    tuned = [(s, after) for s, after in zip(stretches, follows, strict=False)
             if any("FillFunctor<int>" in k["kernel"] for k in s)]
    assert [len(s) for s, _ in tuned] == [624, 624, 300]
    for stretch, after in tuned:
        assert {k["kernel"] for k in stretch} == {INT_FILL, after["kernel"]}
        assert after["range"].startswith("mt|triton|")


def test_analyze_shows_the_short_table_and_the_line_once(timed):
    result = runner.invoke(app, ["analyze", str(TIMED)])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert out.count(LINE) == 1 and "FillFunctor" not in out and "(outside any op or region)" not in out
    under = out[out.index(LINE):].splitlines()
    assert all(len(line) <= NOTE_WIDTH for line in under)
    assert LEGEND["left out"] in under and LEGEND["autotuning"] in under and LEGEND["n"] in under
    assert len(out.splitlines()) < 300  # 71 rows, not 1972


def test_the_docs_show_the_line_analyze_says():
    assert f"\n      {LINE}\n" in (REPO / "docs" / "compiled-and-timing.md").read_text()


def test_json_and_csv_keep_every_launch(tmp_path):
    rows = json.loads(runner.invoke(app, ["analyze", str(TIMED), "--format", "json"]).stdout)
    assert len(rows) == 1972 and sum(r["outside_program"] for r in rows) == 1901
    assert {r["outside_kind"] for r in rows if not r["outside_program"]} == {""}
    table = list(csv.DictReader(io.StringIO(runner.invoke(app, ["analyze", str(TIMED), "-f", "csv"]).stdout)))
    assert len(table) == 1972 and sum(r["outside_program"] == "True" for r in table) == 1901


@pytest.mark.slow
def test_the_per_op_summary_and_the_floor_leave_them_out(timed):
    result = runner.invoke(app, ["analyze", str(TIMED), "--group-by", "op", "--wide"])
    assert result.exit_code == 0, result.output
    assert result.stdout.count(LINE) == 2  # the floor's summary above, the per-op table below
    assert "not the program's ops" not in result.stdout and "(outside any op or region)" not in result.stdout
    ops = json.loads(runner.invoke(app, ["analyze", str(TIMED), "--group-by", "op", "-f", "json"]).stdout)
    left = {r["outside_kind"]: r["n_kernels"] for r in ops if r["outside_program"]}
    assert left == {AUTOTUNING: 474, FLUSH: 1074, OTHER: 353} and sum(r["n_kernels"] for r in ops) == 1972
    floor = floor_run(TIMED)
    kept = timed.loc[~timed["outside_program"], "time_ns"].sum()
    assert floor.gpu_time_s == pytest.approx(kept * 1e-9) and floor.left_out == LINE


def _run(folder: Path, kernels: list[tuple[str, str]], torch_ops: bool = True) -> Path:
    """A timing-only run folder: (range, kernel) launches of 1 us each, a plan with their ranges."""
    folder.mkdir()
    write_timings(folder / TIMINGS_FILE, [
        {"launch": i, "range": rng, "nvtx": [rng] if rng else [], "kernel": name, "time_ns": 1000,
         "stream": 7} for i, (rng, name) in enumerate(kernels)], "Test GPU")
    configs = [traced_config(i, range=rng, kind=rng.split("|")[1], seq=i, op=rng.split("|")[3], shape=[64],
                             min_read_bytes=256, min_write_bytes=256, model_flops=None)
               for i, rng in enumerate(dict.fromkeys(r for r, _ in kernels if r))]
    (folder / "plan.json").write_text(json.dumps({"version": 1, "kind": "profile", "configs": configs}))
    (folder / "run.json").write_text(json.dumps({"kind": "profile", "timing_only": True,
                                                 "torch_ops": torch_ops, "reports": [TIMINGS_FILE],
                                                 "returncode": 0}))
    return folder


@pytest.mark.parametrize("group_by", ["range", "kernel", "op"])
def test_a_run_with_only_launches_outside_says_so(tmp_path, group_by):
    folder = _run(tmp_path / "run", [("", "memset"), ("", "cast_kernel"), ("", "memset")])
    result = runner.invoke(app, ["analyze", str(folder), "--group-by", group_by])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("(no launch of the program's ops)\n\n")
    assert "3 launches outside the program's ops left out (3.0 us)\n" in result.stdout
    assert LEGEND["left out"] in result.stdout and LEGEND["autotuning"] not in result.stdout
    floor = runner.invoke(app, ["floor", str(folder)])  # no roofs for this GPU: no floor, never one of 0
    assert floor.exit_code == 1 and "no floor: no measured roofs for Test GPU" in floor.stderr


def test_a_run_with_none_says_nothing(tmp_path):
    folder = _run(tmp_path / "run", [("mt|op|0|aten.add.Tensor", "add"), ("mt|op|1|aten.mul.Tensor", "mul")])
    table = analyze_path(folder)
    assert not table["outside_program"].any() and left_out_line(table) is None
    out = runner.invoke(app, ["analyze", str(folder)]).stdout
    assert "left out" not in out and LEGEND["n"] in out


def test_without_traced_ops_only_autotuning_is_left_out(tmp_path):
    """No --torch-ops: the program's own eager kernels run outside every range too, and stay rows."""
    add = "triton_poi_add_0"
    kernels = [("", "memset"), ("", INT_FILL), ("", add), ("", INT_FILL), ("", add),
               (f"mt|triton|0|{add}", add), ("", "eager_copy")]
    table = analyze_path(_run(tmp_path / "run", kernels, torch_ops=False))
    left = table[table["outside_program"]]
    assert sorted(left["outside_kind"]) == [AUTOTUNING, AUTOTUNING, FLUSH, FLUSH]
    assert sorted(table.loc[~table["outside_program"] & (table["range"] == ""), "kernels"].sum()) == [
        "eager_copy", "memset"]
    assert left_out_line(table) == ("4 launches outside the program's ops left out (4.0 us): 2 autotuning, "
                                     "2 flushes")
    shown = results_table(table)
    assert "memset" in shown and "eager_copy" in shown and "FillFunctor" not in shown


def test_ncu_spells_the_fill_with_its_template_arguments():
    """An ncu report's kernel is the short name; kernel_full holds the arguments the rule reads."""
    ncu_fill = ("void at::native::vectorized_elementwise_kernel<(int)4, at::native::FillFunctor<int>, "
                "std::array<char *, (unsigned long)1>>(int, T2, T3)")
    kernels = pd.DataFrame({
        "report": "profile.ncu-rep", "launch": [0, 1, 2, 3],
        "range": ["", "", "mt|triton|4|triton_red_sum_0", "CCCL:cub::DeviceReduce::Reduce"],
        "kernel": ["vectorized_elementwise_kernel", "triton_red_sum_0", "triton_red_sum_0", "DeviceReduce"],
        "kernel_full": [ncu_fill, "triton_red_sum_0", "triton_red_sum_0", "void DeviceReduceKernel<int>()"]})
    assert outside_kinds(kernels, traced=True) == [FLUSH, AUTOTUNING, "", OTHER]
    assert outside_kinds(kernels, traced=False) == [FLUSH, AUTOTUNING, "", ""]


NAMES = ["triton_k_0", "triton_k_1", INT_FILL, "eager"]
RANGES = ["", "", "", "mt|triton|1|triton_k_0", "mt|op|2|aten.add.Tensor", "user range"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(RANGES), st.sampled_from(NAMES)), max_size=30), st.booleans())
def test_kinds_follow_the_rule_for_any_launch_sequence(launches, traced):
    kernels = pd.DataFrame({"report": "r", "launch": range(len(launches)), "range": [r for r, _ in launches],
                            "kernel": [k for _, k in launches]})
    kinds = outside_kinds(kernels, traced)
    for (rng, name), kind in zip(launches, kinds, strict=True):
        if rng.startswith("mt|"):
            assert kind == ""  # the program's work: in one of its ranges
        elif kind in (AUTOTUNING, FLUSH):
            assert (kind == FLUSH) == (name == INT_FILL)
        else:
            assert kind == (OTHER if traced else "")
    table = kernels.assign(outside_kind=kinds, outside_program=[k != "" for k in kinds], n_kernels=1,
                           time_ns=1000.0)
    line = left_out_line(table)
    assert (line is None) == (not any(kinds))
    if line:
        assert line.startswith(f"{sum(k != '' for k in kinds)} launches outside the program's ops left out")


def test_profiles_summary_and_the_html_report_leave_them_out_too(timed):
    import html

    from memtraffic.views.html_report import build_report
    from memtraffic.views.tables import op_calls_table

    shown = op_calls_table(timed)  # what `profile --torch-ops` prints
    assert shown.count(LINE) == 1 and "FillFunctor" not in shown
    assert "calls with the most excess, of 71 " in shown
    page = html.unescape(build_report(TIMED))
    assert f"{LINE}: {LEGEND['left out']}." in page and "71 rows in all" in page
    assert "not the program's ops" not in page and "at::native::FillFunctor" not in page
