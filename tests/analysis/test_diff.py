"""`memtraffic diff` on the committed H100 runs: matched rows carry each side's analyze numbers exactly, a
run against itself shows no change, time changes inside the noise band are not called changes, and bad
input gets one line and a non-zero exit. Also `measure --baseline` (the chaining in cli.py) and
`report --baseline`."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from memtraffic.analysis.analyze import analyze_path, to_records
from memtraffic.analysis.diff import MEASURES, diff, pct, relative
from memtraffic.cli import app
from memtraffic.vocab.errors import UsageError

H100 = Path(__file__).resolve().parents[2] / "reports" / "h100"
SEED = H100 / "seed_1048576x2_fp32"
SUITE = H100 / "suite_1048576x2_fp32"
SOURCE = H100 / "source_seed_1048576x2_fp32"


def _same(x, y) -> bool:
    return (isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y)) or x == y


def test_shared_configs_carry_each_sides_analyze_numbers():
    d = diff(SEED, SUITE)
    seed = {r["range"]: r for r in analyze_path(SEED).to_dict("records")}
    suite = {r["range"]: r for r in analyze_path(SUITE).to_dict("records")}
    both = [r for r in d.rows if r["status"] == "both"]
    # Matched on variant, op, shape, dtype and every parameter value: the seed's softmax_naive set
    # num_warps=4 by hand, the suite's has it by default. The seed's BLOCK_M=128 is not the suite's auto
    # BLOCK_M, but each run has one softmax_tiled 1048576x2 fp32 config: the two are paired, and the
    # verdict names the parameter that differs (the README's "did my change help?" example).
    assert {(r["range_a"], r["range_b"]) for r in both} == {
        ("mt|softmax_naive|1048576x2|fp32|num_warps=4", "mt|softmax_naive|1048576x2|fp32"),
        ("mt|softmax_tiled|1048576x2|fp32|BLOCK_M=128", "mt|softmax_tiled|1048576x2|fp32"),
        ("mt|torch_softmax|1048576x2|fp32", "mt|torch_softmax|1048576x2|fp32")}
    tiled = next(r for r in both if "tiled" in r["range_a"])
    assert tiled["verdict"] == ("parameters differ: BLOCK_M 128 -> auto (launched 8192x128 -> 1024x128); "
                                "bytes within 1%; time -13%")
    for row in both:
        for m in MEASURES["range"]:
            a, b = float(seed[row["range_a"]][m]), float(suite[row["range_b"]][m])
            assert _same(row[f"{m}_a"], a) and _same(row[f"{m}_b"], b), m
            assert _same(row[f"{m}_change"], b - a)
    assert [r["range_a"] for r in d.rows if r["status"] == "only_in_a"] == []
    only_b = [r["range_b"] for r in d.rows if r["status"] == "only_in_b"]
    assert only_b == [r for r in suite if r not in {row["range_b"] for row in both}]
    assert len(only_b) == 9
    # L1 counters are exact: the same kernel moved the same bytes in both runs.
    naive = next(r for r in both if "naive" in r["range_a"])
    assert naive["l1_ld_bytes_change"] == naive["l1_st_bytes_change"] == 0
    assert naive["time_noise"] is True and naive["verdict"].startswith("no change: bytes within 1%")


@pytest.mark.parametrize(("run", "group_by", "n"), [
    (SEED, "range", 3), (SUITE, "kernel", 24), (H100 / "profile_torch_model", "op", 8),
    (H100 / "profile_cupy_region", "range", 8), (SOURCE, "line", 8)])
def test_a_run_against_itself_shows_no_change(run, group_by, n):
    d = diff(run, run, group_by=group_by)
    assert len(d.rows) == n and all(r["status"] == "both" for r in d.rows)
    for row in d.rows:
        assert all(row[f"{m}_change"] == 0 or math.isnan(row[f"{m}_change"]) for m in MEASURES[group_by])
        assert row["verdict"].startswith("no change: same bytes"), row["verdict"]
        assert row.get("time_noise", True) is True


def test_profile_runs_match_op_calls_and_regions_by_name_and_call_order():
    rows = diff(H100 / "profile_cupy_region", H100 / "profile_cupy_region").rows
    assert [r["match"] for r in rows[:3]] == ["region softmax_elementwise #0 8192x1024 fp32",
                                             "region softmax_rawkernel #1 8192x1024 fp32", "init_curand"]


def _table(tmp_path: Path, name: str, rows: list[dict]) -> Path:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(rows))
    return path


@pytest.fixture(scope="module")
def source_rows() -> list[dict]:
    """The source_seed run's rows, as `analyze --format json` saves them."""
    return to_records(analyze_path(SOURCE))


def test_verdict_names_what_changed_and_the_worst_line(tmp_path, source_rows):
    """Real numbers of the one-row-per-program softmax (A) and of the tiled one (B), saved as tables in
    which the tiled row stands for the same config: the fix the README's story is about."""
    naive, tiled = source_rows[0], source_rows[1]
    after = {**tiled, "range": naive["range"], "variant": naive["variant"], "params": naive["params"]}
    res = CliRunner().invoke(app, ["diff", str(_table(tmp_path, "before", [naive])),
                                   str(_table(tmp_path, "after", [after])), "--wide"])
    assert res.exit_code == 0, res.output
    verdict = next(ln for ln in res.output.splitlines() if ln.startswith("  => "))
    assert verdict.startswith("  => L1 loads -94%, L1 stores -75%: loads and stores sector waste gone (used "
                              "8 of every 32 bytes); loads request 4x -> 1x the minimum: redundant requests "
                              "gone; worst line in A: softmax_rows.py:38; time -99%")
    change = next(ln for ln in res.output.splitlines() if ln.startswith("  change"))
    assert change.split()[1:5] == ["-99%", "-94%", "-75%", "-73%"]


def test_time_within_the_noise_band_is_not_a_change(tmp_path, source_rows):
    tiled = source_rows[1]
    a = _table(tmp_path, "a", [{**tiled, "time_ns": 10000}])
    b = _table(tmp_path, "b", [{**tiled, "time_ns": 10300}])
    (row,) = diff(a, b).rows
    assert row["time_noise"] is True and row["time_band"] == 0.05
    assert row["verdict"] == "no change: same bytes, time +3.0%~"
    (row,) = diff(a, b, time_tolerance=0.01).rows
    assert row["time_noise"] is False and row["verdict"] == "same bytes; time +3.0%"
    # A run that measured the config twice (merge keeps both as RANGE and RANGE|#2) carries its spread.
    again = _table(tmp_path, "again", [{**tiled, "time_ns": 10000},
                                       {**tiled, "range": tiled["range"] + "|#2", "time_ns": 12000}])
    (row,) = diff(again, b, time_tolerance=0.01).rows
    assert row["time_runs_a"] == 2 and row["time_spread_a"] == pytest.approx(2000 / 11000)
    assert row["time_noise"] is True and row["time_ns_a"] == 10000  # the first measurement's values


def test_cli_diff_table_json_and_csv():
    res = CliRunner().invoke(app, ["diff", str(SEED), str(SUITE)])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines[0].startswith("NVIDIA H100 80GB HBM3; A = seed_1048576x2_fp32, B = suite_1048576x2_fp32")
    assert not any(line.startswith("only in A") for line in lines)
    res = CliRunner().invoke(app, ["diff", str(SEED), str(SUITE), "--format", "json"])
    out = json.loads(res.output)
    assert out["fusion"] == []  # no traced program: no groups to match
    records = out["rows"]
    assert [r["status"] for r in records] == ["both"] * 3 + ["only_in_b"] * 9
    tiled = next(r for r in records if r["match"] == "softmax_tiled 1048576x2 fp32 BLOCK_M=128")
    assert (tiled["status"], tiled["range_b"]) == ("both", "mt|softmax_tiled|1048576x2|fp32")
    assert tiled["l1_ld_bytes_a"] == tiled["l1_ld_bytes_b"] == 8_388_608  # both at the minimum
    res = CliRunner().invoke(app, ["diff", str(SEED), str(SUITE), "--format", "csv"])
    assert res.output.splitlines()[0].startswith("match,status,range_a,range_b,time_ns_a,time_ns_b")
    assert len(res.output.splitlines()) == 13


def test_a_saved_table_diffs_like_its_run(tmp_path):
    saved = tmp_path / "before.json"
    saved.write_text(CliRunner().invoke(app, ["analyze", str(SEED), "--format", "json"]).output)
    from_json, from_run = diff(saved, SUITE).rows, diff(SEED, SUITE).rows
    assert [r["verdict"] for r in from_json] == [r["verdict"] for r in from_run]
    assert [r["l1_ld_bytes_a"] for r in from_json][:2] == [r["l1_ld_bytes_a"] for r in from_run][:2]


def _other_gpu(tmp_path: Path) -> Path:
    copy = tmp_path / "other_gpu"
    shutil.copytree(SEED, copy)
    run = json.loads((copy / "run.json").read_text())
    run["environment"]["gpu"] = "NVIDIA H200"
    (copy / "run.json").write_text(json.dumps(run))
    return copy


def _one_line_error(res, code: int, *needles: str) -> None:
    assert res.exit_code == code, res.output
    assert res.output.count("\n") == 1 and res.output.startswith("error: "), res.output
    for needle in needles:
        assert needle in res.output


def test_runs_of_different_gpus_are_refused_unless_allowed(tmp_path):
    other = _other_gpu(tmp_path)
    res = CliRunner().invoke(app, ["diff", str(SEED), str(other)])
    _one_line_error(res, 2, "different GPUs", "NVIDIA H200", "--allow-mixed")
    res = CliRunner().invoke(app, ["diff", str(SEED), str(other), "--allow-mixed"])
    assert res.exit_code == 0 and "note: different GPUs" in res.output


@pytest.mark.parametrize(("args", "needle"), [
    (["--group-by", "warp"], "unknown --group-by 'warp'"),
    (["--time-tolerance", "lots"], "--time-tolerance 'lots'"),
    (["--format", "xml"], "unknown format 'xml'"),
])
def test_bad_options_are_one_line(args, needle):
    _one_line_error(CliRunner().invoke(app, ["diff", str(SEED), str(SEED), *args]), 2, needle)


def test_bad_sides_are_one_line(tmp_path):
    _one_line_error(CliRunner().invoke(app, ["diff", str(SEED), str(tmp_path / "nope")]), 2, "no such")
    junk = tmp_path / "junk.json"
    junk.write_text("{not json")
    _one_line_error(CliRunner().invoke(app, ["diff", str(junk), str(SEED)]), 2, "junk.json is not valid JSON")
    saved = _table(tmp_path, "saved", to_records(analyze_path(SEED)))
    _one_line_error(CliRunner().invoke(app, ["diff", str(saved), str(SEED), "--group-by", "kernel"]), 2,
                    "--group-by kernel needs the reports")
    with pytest.raises(UsageError, match="no per-line counters|needs the reports"):
        diff(saved, SEED, group_by="line")


def test_measure_with_a_baseline_prints_the_diff_after_the_run(monkeypatch):
    """cli.py chains measure and diff: the run (here the committed suite run, standing in for a new one)
    is diffed against its baseline right after its own table."""
    import memtraffic.api

    calls = []

    def fake_measure(opts, echo):
        calls.append(opts)
        return SimpleNamespace(table=analyze_path(SUITE), run={"configs": []}, run_dir=SUITE)

    monkeypatch.setattr(memtraffic.api, "run_measure", fake_measure)  # measure, then analyze
    res = CliRunner().invoke(app, ["measure", "softmax_naive", "--baseline", str(SEED)])
    assert res.exit_code == 0, res.output
    assert f"diff against {SEED}:" in res.output
    assert "softmax_tiled 1048576x2 fp32 BLOCK_M=128" in res.output and "only in B" in res.output
    res = CliRunner().invoke(app, ["measure", "softmax_naive", "--baseline", "no/such/run"])
    _one_line_error(res, 2, "--baseline no/such/run: no such run folder")
    assert len(calls) == 1  # refused before measuring


def test_profile_with_a_baseline_prints_the_diff_after_the_run(monkeypatch):
    import memtraffic.api

    run = H100 / "profile_cupy_region"
    monkeypatch.setattr(memtraffic.api, "run_profile", lambda opts, echo: SimpleNamespace(
        table=analyze_path(run), run_dir=run, returncode=0))
    res = CliRunner().invoke(app, ["profile", "--baseline", str(run), "--format", "json", "--", "python",
                                   "x.py"])
    assert res.exit_code == 0, res.output
    # json on stdout stays one document: the diff table goes to stderr
    assert f"diff against {run}:" in res.stderr and "no change: same bytes" in res.stderr
    assert f"diff against {run}:" not in res.stdout and len(json.loads(res.stdout)) == 8


def test_report_with_a_baseline_shows_its_table_once_and_the_bars_side_by_side(tmp_path):
    from memtraffic.views.html_report import build_report

    page = build_report(SUITE, baseline=SEED)
    assert "<h2>Compared with the baseline seed_1048576x2_fp32</h2>" in page
    assert "<h3>baseline: seed_1048576x2_fp32</h3>" in page
    assert "this run: suite_1048576x2_fp32</h3>" not in page  # the run's table is the page's own, once
    assert page.count("<h2>Measured traffic vs minimum</h2>") == 1
    assert page.count("class='pair'") == 1  # the two traffic charts
    assert "no change: bytes within 1%" in page
    assert page.count("Plotly.newPlot") == 4  # roofline, traffic, and the two traffic charts side by side
    res = CliRunner().invoke(app, ["report", str(SUITE), "--baseline", str(_other_gpu(tmp_path)),
                                   "--out", str(tmp_path / "r.html")])
    _one_line_error(res, 2, "different GPUs")


@pytest.mark.parametrize("folder", ["strided", "coalesced"])
@pytest.mark.parametrize(("shape", "dtype"), [("7x33", "fp32"), ("5x100", "bf16"), ("1x1", "fp16")])
def test_the_before_and_after_example_kernels_run_checked_against_float64(tmp_path, folder, shape, dtype):
    """The pair scripts/make_diff_pair.sh measures: the same variant name and parameters in both files
    (so diff matches them), each checked by the runner against the op's float64 reference."""
    import torch

    from memtraffic.collect import runner
    from memtraffic.collect.planning import build_plan
    from memtraffic.runfolder.folder import read_status

    path = Path(__file__).resolve().parents[2] / "examples" / folder / "my_gelu.py"
    plan = build_plan(["my_gelu"], [shape], [dtype], [], variant_files=[path])
    assert [c["params"] for c in plan["configs"]] == [{"BLOCK": 1024, "num_warps": 4}]
    status = tmp_path / "status.jsonl"
    assert runner.run_plan(plan, status, device=torch.device("cpu")) == 0
    (record,) = read_status(status).values()
    assert record["status"] == "ok", record


def test_the_example_pair_differs_in_one_line():
    examples = Path(__file__).resolve().parents[2] / "examples"
    before = (examples / "strided" / "my_gelu.py").read_text().splitlines()
    after = (examples / "coalesced" / "my_gelu.py").read_text().splitlines()
    assert len(before) == len(after)  # line for line, so `diff --group-by line` matches the kernel's lines
    start = before.index("@triton.jit")
    end = next(i for i, line in enumerate(before) if line.startswith("def my_gelu("))
    changed = [i for i in range(start, end) if before[i] != after[i]]
    assert [after[i].split("#")[0].strip() for i in changed] == ["offs = i"]



@pytest.mark.parametrize("args", [
    ["diff", str(SEED), str(SUITE), "--format", "json"],
    ["check", str(SEED), "--expect", "examples/traffic.toml"],
])
def test_diff_and_check_are_reading_side_no_torch(args):
    from no_torch import cli_without_torch

    proc = cli_without_torch(*args)
    assert proc.returncode == 0, proc.stderr
    if args[0] == "diff":
        assert json.loads(proc.stdout) == json.loads(CliRunner().invoke(app, args).output)


PAIR = (H100 / "diff_gelu_strided_4096x4096", H100 / "diff_gelu_coalesced_4096x4096")


@pytest.mark.skipif(not all((p / "run.json").is_file() for p in PAIR),
                    reason="the before/after pair (scripts/make_diff_pair.sh) is not committed")
def test_the_committed_pair_tells_its_story():
    """The strided and the coalesced GELU kernel, measured by scripts/make_diff_pair.sh on the H100: each
    config matched, the fix cuts the L1 bytes and the verdict says why, and the kernel's lines match."""
    rows = diff(*PAIR).rows
    assert [r["status"] for r in rows] == ["both", "both"]
    for r in rows:
        assert r["l1_ld_bytes_b"] < r["l1_ld_bytes_a"] and r["l1_st_bytes_b"] < r["l1_st_bytes_a"]
        assert "sector waste gone" in r["verdict"] and "worst line in A: my_gelu.py:" in r["verdict"]
    lines = diff(*PAIR, group_by="line").rows
    assert lines and all(r["status"] == "both" and "my_gelu.py:" in r["match"] for r in lines)


def test_configs_spelled_differently_pair_by_what_they_launched(tmp_path):
    """Each side holds two softmax_tiled 1048576x2 fp32 configs, so pairing by 'one left on each side'
    cannot decide: the one whose BLOCK_M=1024 is written out pairs with the auto one, which launched the
    same grid (1024 blocks of 128 threads), and BLOCK_M=128 with BLOCK_M=128. The rows are the committed
    runs' own (analyze --format json); only the first's parameters are written as a user would."""
    seed = json.loads(CliRunner().invoke(app, ["analyze", str(SEED), "--format", "json"]).stdout)
    suite = json.loads(CliRunner().invoke(app, ["analyze", str(SUITE), "--format", "json"]).stdout)
    tiled_128 = next(r for r in seed if r["variant"] == "softmax_tiled")
    tiled_auto = next(r for r in suite if r["variant"] == "softmax_tiled")
    assert (tiled_128["launch_dims"], tiled_auto["launch_dims"]) == (["8192x128"], ["1024x128"])
    spelled = {**tiled_auto, "range": "mt|softmax_tiled|1048576x2|fp32|BLOCK_M=1024",
               "params": {"BLOCK_M": 1024, "num_warps": None}}
    (tmp_path / "a.json").write_text(json.dumps([spelled, tiled_128]))
    (tmp_path / "b.json").write_text(json.dumps([tiled_auto, tiled_128]))
    rows = diff(tmp_path / "a.json", tmp_path / "b.json").rows
    assert {(r["range_a"], r["range_b"]) for r in rows} == {
        ("mt|softmax_tiled|1048576x2|fp32|BLOCK_M=1024", "mt|softmax_tiled|1048576x2|fp32"),
        ("mt|softmax_tiled|1048576x2|fp32|BLOCK_M=128", "mt|softmax_tiled|1048576x2|fp32|BLOCK_M=128")}
    spelled_row = next(r for r in rows if r["range_a"].endswith("1024"))
    assert spelled_row["verdict"].startswith(
        "parameters differ: BLOCK_M 1024 -> auto (the same launch: 1024x128); no change: same bytes")


def test_a_diff_of_two_runs_shows_both_floors_and_the_change_of_the_recoverable_time():
    from memtraffic.analysis.floor import floor_run

    eager, compiled = H100 / "floor_eager_block", H100 / "floor_compiled_block"
    result = CliRunner().invoke(app, ["diff", str(eager), str(compiled), "--group-by", "op"])
    assert result.exit_code == 0, result.output
    a, b = floor_run(eager), floor_run(compiled)
    lines = result.output.splitlines()
    at = lines.index("floor (memtraffic floor):")
    assert lines[at + 1].startswith("  A: GPU time ") and lines[at + 2].startswith("  B: GPU time ")
    assert lines[at + 3] == f"  recoverable time B vs A: {pct(relative(a.recoverable_s, b.recoverable_s))}"
    assert diff(eager, compiled, "op").floors[1].fused_min_bytes == b.fused_min_bytes


def test_why_dram_writes_vary_is_said_once_not_on_every_row():
    """The seed run against its --source rerun: every row's DRAM writes changed (what L2 still held), each
    verdict names its change, and why they vary is said once, in the header."""
    res = CliRunner().invoke(app, ["diff", str(H100 / "seed_1048576x2_fp32"),
                                   str(H100 / "source_seed_1048576x2_fp32"), "--wide"])
    assert res.exit_code == 0, res.output
    verdicts = [line for line in res.stdout.splitlines() if line.startswith("  => ")]
    assert len(verdicts) == 3 and all("DRAM writes " in v for v in verdicts)
    assert res.stdout.count("L2 write-back, varies run to run") == 1
    assert "DRAM writes: L2 write-back, varies run to run" in res.stdout.splitlines()[0]
