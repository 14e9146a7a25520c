"""Distinct-launch runs: the ncu argv that skips repeats, and the repeats reusing their first call's counters
in analysis (table, per-op summary, diff), on the committed H100 train-step report; the premise check."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest

from memtraffic.analysis import reuse
from memtraffic.analysis.analyze import analyze_reports, row_label
from memtraffic.analysis.diff import _base_key, compare, load_side
from memtraffic.api import run_profile
from memtraffic.collect import profile as prof
from memtraffic.ncu import command as ncu_mod
from memtraffic.runfolder.load import load_run
from memtraffic.vocab import launches

TRAIN_STEP = "reports/h100/profile_train_step"  # every launch measured (H100, 2026-11)


def test_distinct_argv_excludes_the_repeat_ranges():
    argv = ncu_mod.build_ncu_command("ncu", ["m"], "r", ["python", "t.py"], nvtx_include=(),
                                     nvtx_exclude=[launches.NVTX_EXCLUDE], target_processes="all",
                                     profile_from_start=False)
    assert argv == ["ncu", "--metrics", "m", "--nvtx", "--nvtx-exclude", "regex:mt\\|rep\\|.*/",
                    "--cache-control", "all", "--clock-control", "none", "--import-sass", "no",
                    "--target-processes", "all", "--profile-from-start", "off", "--export", "r",
                    "python", "t.py"]


REPEATING = """
import sys
from pathlib import Path
import torch
w = torch.ones(8, 8)
for _ in range(3):
    (torch.ones(4, 8) @ w).relu()
"""


@pytest.mark.slow
@pytest.mark.parametrize(("args", "excluded", "repeats"), [({}, True, 4), ({"distinct": 0}, False, 0),
                                                             ({"distinct": 2}, True, 2)])
def test_profile_passes_the_setting_to_ncu_and_the_program(tmp_path, stand_in, args, excluded, repeats):  # noqa: F811
    program = tmp_path / "rep.py"
    program.write_text(REPEATING)
    out = tmp_path / "run"
    with pytest.raises(Exception, match="ncu profiled no kernel"):  # the stand-in profiles nothing
        opts = prof.ProfileOptions(command=[sys.executable, str(program)], torch_ops=True, out=out, **args)
        run_profile(opts)
    run = json.loads((out / "run.json").read_text())
    argv = run["attempts"][0]["argv"]
    assert ("--nvtx-exclude" in argv) == excluded and run["distinct"] == args.get("distinct", 1)
    assert run["value_calls"] == 4
    configs = json.loads((out / "plan.json").read_text())["configs"]
    mm_relu = [c for c in configs if c["op"] in ("aten.mm.default", "aten.relu.default")]
    assert sum(bool(c.get("repeat")) for c in mm_relu) == repeats


@pytest.mark.parametrize(("option", "said"), [
    ("--distinct", "error: --distinct -1: give how many calls of each signature to measure"),
    ("--value-calls", "error: --value-calls -1: give how many calls of each value-dependent signature to "
                      "measure (>= 1), or 0 for every call")])
def test_bad_distinct_is_one_line(tmp_path, stand_in, option, said):  # noqa: F811
    from typer.testing import CliRunner

    from memtraffic.cli import app

    args = ["profile", option, "-1", "--", sys.executable, str(stand_in), "0"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert result.stderr.startswith(said) and result.stderr.count("\n") == 1


def test_the_program_gets_both_counts(tmp_path):
    env = prof.program_env(tmp_path, False, base={}, distinct=1, value_calls=4)
    assert (env[launches.DISTINCT_ENV], env[launches.VALUE_CALLS_ENV]) == ("1", "4")


def _as_distinct(plan: dict, op: str, shape: list[int]) -> tuple[dict, list[str], str]:
    """The plan as a distinct run would have it: the calls of `op` on `shape` after the first are repeats
    reusing it (their ranges renamed mt|rep|..., so the report's kernels of those calls match nothing)."""
    plan = copy.deepcopy(plan)
    calls = [c for c in plan["configs"] if c["op"] == op and c["shape"] == shape]
    first = calls[0]["range"]
    for c in calls[1:]:
        c.update(range=launches.repeat_range(c["range"]), repeat=True, reuses=first)
    return plan, [c["range"] for c in calls[1:]], first


def test_repeats_reuse_their_first_calls_counters_on_a_real_report():
    run = load_run(TRAIN_STEP)
    plan, repeat_ranges, first = _as_distinct(run.plan, "aten.add.Tensor", [4, 128, 256])
    table, kernels = analyze_reports(run.reports, plan, run_name=run.name)
    rows = table.set_index("range")
    measured = rows.loc[first]
    assert len(repeat_ranges) == 7
    for rng in repeat_ranges:
        row = rows.loc[rng]
        assert row["reuses"] == first
        for column in ("l1_ld_bytes", "dram_rd_bytes", "time_ns", "n_kernels", "min_read_bytes"):
            assert row[column] == measured[column]
        assert row_label(row.to_dict() | {"range": rng}).endswith(" (reused)")
    assert measured["reuses"] == ""
    counts = reuse.reuse_counts(kernels, plan)
    n_measured = len(kernels) - 7
    assert counts == reuse.ReuseCounts(n_measured, 7, 7, 0)
    assert counts.line() == (f"measured {n_measured} of {n_measured + 7} kernel launches; 7 repeats reuse "
                             "their first call's counters (7 repeated calls)")
    assert reuse.table_reuse_line(table) == counts.line()  # what reports say, from the table alone
    assert reuse.table_reuse_line(analyze_reports(run.reports, run.plan, run_name=run.name)[0]) is None
    per_op, _ = analyze_reports(run.reports, plan, run_name=run.name, group_by="op")
    add = per_op.set_index("op").loc["aten.add.Tensor"]
    assert (add["calls"], add["reused"]) == (8, 7)


def test_repeats_with_nothing_to_reuse_copy_nothing_and_the_unmeasured_are_named():
    run = load_run(TRAIN_STEP)
    plan, _, first = _as_distinct(run.plan, "aten.add.Tensor", [4, 128, 256])
    calls = [c for c in plan["configs"] if c.get("reuses") == first]
    for c in calls[:4]:  # a first call that launched no kernel (as a view's): nothing to copy
        c["reuses"] = "mt|op|999999|aten.view.default"
    for c in calls[4:]:  # a signature first seen inside a skipped range: never measured
        c["reuses"] = None
    table, kernels = analyze_reports(run.reports, plan, run_name=run.name)
    assert not table["reuses"].astype(bool).any()
    counts = reuse.reuse_counts(kernels, plan)
    assert (counts.reused_kernels, counts.reused_calls, counts.unmeasured_calls) == (0, 0, 3)
    assert counts.line().endswith("; 3 repeated calls ran inside a skipped range with no measured call of "
                                  "their own signature: not counted")
    assert reuse.reuse_counts(kernels, run.plan) is None  # an every-launch run: no line


def test_diff_by_op_of_every_launch_and_distinct_matches_op_by_op(tmp_path):
    run = load_run(TRAIN_STEP)
    plan, _, _ = _as_distinct(run.plan, "aten.add.Tensor", [4, 128, 256])
    distinct = tmp_path / "distinct"
    distinct.mkdir()
    for name in ("profile.ncu-rep", "profile.kernels.json.gz", "run.json"):
        (distinct / name).write_bytes((run.folder / name).read_bytes())
    (distinct / "plan.json").write_text(json.dumps(plan))
    d = compare(load_side(TRAIN_STEP, "op"), load_side(distinct, "op"), "op")
    add = next(r for r in d.rows if r["match"] == "aten.add.Tensor")
    assert add["status"] == "both" and (add["reused_a"], add["reused_b"]) == (0, 7)
    assert add["l1_ld_bytes_rel"] == 0 and add["dram_rd_bytes_rel"] == 0
    from memtraffic.views.html_report import build_report

    page = build_report(distinct)
    assert "7 repeats reuse their first call&#x27;s counters (7 repeated calls); rows marked (reused)" in page
    # by range, a repeat is keyed as the same call measured
    assert _base_key({"range": "mt|rep|op|3|aten.add"}) == _base_key({"range": "mt|op|3|aten.add"})


def _script(name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, f"scripts/{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_launches_summary_compares_a_pair_op_by_op(tmp_path):
    run = load_run(TRAIN_STEP)
    plan, _, _ = _as_distinct(run.plan, "aten.add.Tensor", [4, 128, 256])
    for name, their_plan in (("profile_full_ts", run.plan), ("profile_sampled_ts", plan)):
        (tmp_path / name).mkdir()
        for f in ("profile.ncu-rep", "profile.kernels.json.gz", "run.json"):
            (tmp_path / name / f).write_bytes((run.folder / f).read_bytes())
        (tmp_path / name / "plan.json").write_text(json.dumps(their_plan))
    summary = _script("launches_summary").summarize(tmp_path)
    p = summary["pairs"]["ts"]
    assert p["time_ratio"] == 1.0 and p["ops_compared"] > 10
    # the only op type off: the repeats' own kernels, still in this copied every-launch report, now match
    # no plan range (a real distinct report has none)
    assert p["ops_off"] == [{"op": "(outside any op or region)", "why": "only_in_b"}]
    assert p["full"]["kernels_profiled"] == run.meta["kernels_profiled"] and summary["other_runs"] == []


def test_premise_check_groups_calls_by_signature_on_a_real_report():
    run = load_run(TRAIN_STEP)
    plan = copy.deepcopy(run.plan)
    for c in plan["configs"]:  # the committed run predates signatures: key by op, inputs and shape
        c["signature"] = launches.signature_digest((c["op"], json.dumps(c["inputs"]), tuple(c["shape"])))
    table, _ = analyze_reports(run.reports, plan, run_name=run.name)
    groups = reuse.signature_groups(table, plan)
    add = groups[(groups["op"] == "aten.add.Tensor") & (groups["shape"] == "4x128x256")].iloc[0]
    calls = table[(table["op"] == "aten.add.Tensor") & (table["shape"] == "4x128x256")]
    assert add["calls"] == len(calls) == 8
    expected = (calls["dram_rd_bytes"].max() - calls["dram_rd_bytes"].min()) / calls["dram_rd_bytes"].max()
    assert add["dram_rd_bytes_spread"] == pytest.approx(expected)
    assert list(groups["calls"]) and (groups["calls"] >= 2).all()
    flagged = groups[groups["differs"] != ""]
    for r in flagged.to_dict("records"):
        l1 = max(r["l1_ld_bytes_spread"], r["l1_st_bytes_spread"])
        assert l1 > 0.01 or r["dram_rd_bytes_spread"] > 0.03


def test_varied_compares_only_the_measured_calls_of_a_signature():
    run = load_run(TRAIN_STEP)
    plan = copy.deepcopy(run.plan)
    for c in plan["configs"]:
        c["signature"] = launches.signature_digest((c["op"], json.dumps(c["inputs"]), tuple(c["shape"])))
    table, _ = analyze_reports(run.reports, plan, run_name=run.name)
    assert reuse.varied(table, plan) == []  # this step's calls of one signature agree (premise check)
    adds = table.index[(table["op"] == "aten.add.Tensor") & (table["shape"] == "4x128x256")]
    table.loc[adds[1], "l1_ld_bytes"] *= 1.05  # one call reads 5% more at L1
    found = reuse.varied(table, plan)
    assert len(found) == 1 and found[0]["calls"] == 8 and found[0]["differs"] == "l1_ld_bytes"
    assert found[0]["l1_ld_bytes_spread"] == pytest.approx(0.05 / 1.05)
    assert reuse.varied_line(found) == (
        "aten.add.Tensor moved 4.8% different L1 load bytes across its 8 measured calls; repeats reuse the "
        "first: --value-calls 0 or --every-launch measures every call.")
    # Only measured calls are compared: with that call a repeat (reused row), nothing differs.
    table.loc[adds[1], "reuses"] = table.loc[adds[0], "range"]
    assert reuse.varied(table, plan) == [] and reuse.varied_line([]) is None


def test_a_repeat_ncu_measured_after_all_keeps_its_own_counters():
    run = load_run(TRAIN_STEP)
    plan, _, first = _as_distinct(run.plan, "aten.add.Tensor", [4, 128, 256])
    for c in plan["configs"]:  # the repeats keep their measured range names: the report has their kernels
        c["range"] = launches.measured_range(c["range"])
    table, kernels = analyze_reports(run.reports, plan, run_name=run.name)
    assert not table["reuses"].astype(bool).any() and len(kernels) == len(run.kernels())


NESTED = """
import torch
import memtraffic
x = torch.ones(256, 256, device="cuda")
with memtraffic.region("outer"):
    for _ in range(3):
        y = x * 2
torch.cuda.synchronize()
"""


@pytest.mark.ncu
def test_ncu_skips_repeats_inside_a_measured_region(tmp_path):
    """On the GPU: the exclude filter skips a repeat's kernel also when a measured range encloses it."""
    try:
        ncu_mod.find_ncu()
    except Exception as err:  # noqa: BLE001 - no ncu: nothing to test here
        pytest.skip(str(err))
    program = tmp_path / "nested.py"
    program.write_text(NESTED)
    lines: list[str] = []
    result = run_profile(prof.ProfileOptions(command=[sys.executable, str(program)], torch_ops=True,
                                             out=tmp_path / "run"), lines.append)
    muls = result.table[result.table["op"] == "aten.mul.Tensor"]
    assert list(muls["reuses"].astype(bool)) == [False, True, True]
    assert muls["l1_ld_bytes"].nunique() == 1 and muls["l1_ld_bytes"].iloc[0] >= 256 * 256 * 4
    kernels = load_run(tmp_path / "run").kernels()
    assert not any(launches.is_repeat(r) for r in kernels["range"])  # ncu profiled no repeat
    assert any(line.startswith("measured ") and "2 repeats reuse" in line for line in lines)


def test_check_repeats_script_exit_codes_and_summary(tmp_path, capsys, monkeypatch):
    script = _script("check_repeats")
    run = load_run(TRAIN_STEP)
    folder = tmp_path / "full"
    folder.mkdir()
    for f in ("profile.ncu-rep", "profile.kernels.json.gz", "run.json"):
        (folder / f).write_bytes((run.folder / f).read_bytes())
    (folder / "plan.json").write_text(json.dumps(run.plan))  # no signatures: profiled before they existed
    monkeypatch.setattr(sys, "argv", ["check_repeats.py", str(folder)])
    assert script.main() == 2
    assert "trace has no call signatures" in capsys.readouterr().err
    plan = copy.deepcopy(run.plan)
    for c in plan["configs"]:
        c["signature"] = launches.signature_digest((c["op"], json.dumps(c["inputs"]), tuple(c["shape"])))
    (folder / "plan.json").write_text(json.dumps(plan))
    out = tmp_path / "groups.json"
    monkeypatch.setattr(sys, "argv", ["check_repeats.py", str(folder), "--json", str(out)])
    code = script.main()
    groups = json.loads(out.read_text())
    differ = [g for g in groups if g["differs"]]
    assert code == (1 if differ else 0)
    first = capsys.readouterr().out.splitlines()[0]
    calls = sum(g["calls"] for g in groups)
    assert first == (f"{len(groups)} signatures ran more than once ({calls} calls); "
                     f"{len(differ)} differ (L1 beyond 1%, or DRAM reads beyond 3% and 4 KiB)")


MLP64 = Path("reports/h100/launches_mlp64")  # the 64-layer MLP, every launch and distinct (H100)


def test_committed_mlp_pair_distinct_run_skips_repeats_and_agrees_op_by_op():
    full = json.loads((MLP64 / "full_run.json").read_text())
    sampled = json.loads((MLP64 / "sampled_run.json").read_text())
    assert (full["distinct"], sampled["distinct"]) == (0, 1)
    assert "--nvtx-exclude" not in full["attempts"][0]["argv"]
    excluded = sampled["attempts"][0]["argv"]
    assert excluded[excluded.index("--nvtx-exclude") + 1] == launches.NVTX_EXCLUDE
    assert sampled["kernels_profiled"] * 10 < full["kernels_profiled"]
    assert sampled["wall_time_s"] <= full["wall_time_s"] / 10  # issue 33: the 64-layer MLP in 1/10 the time
    summary = json.loads((MLP64 / "summary.json").read_text())["pairs"]["mlp64"]
    assert summary["ops_off"] == [] and summary["ops_compared"] > 10
    assert summary["time_ratio"] == round(sampled["wall_time_s"] / full["wall_time_s"], 4)
    groups = json.loads((MLP64 / "premise.json").read_text())
    assert groups and not any(g["differs"] for g in groups)
    assert max(g["l1_ld_bytes_spread"] for g in groups) <= reuse.L1_TOLERANCE


def test_committed_gpt2_and_train_step_pairs_agree_op_by_op():
    """H100: a 12-layer GPT-2 step (bytes set) and examples/train_step.py (traffic set), every launch and
    distinct: no op type off the bar; GPT-2's distinct run within 1/5 once the program has started."""
    summary = _script("launches_summary")
    gpt2 = json.loads((Path("reports/h100/launches_gpt2") / "summary.json").read_text())["pairs"]["gpt2"]
    assert gpt2["ops_off"] == [] and gpt2["ops_compared"] > 20
    assert gpt2["sampled"]["kernels_profiled"] * 5 < gpt2["full"]["kernels_profiled"]
    assert gpt2["time_ratio_after_first_kernel"] <= 0.2
    train = summary.pair(Path("reports/h100/profile_full_train_step"),
                         Path("reports/h100/profile_sampled_train_step"))
    assert train["ops_off"] == [] and train["ops_compared"] > 20
    table, _ = analyze_reports(load_run("reports/h100/profile_sampled_train_step").reports,
                               load_run("reports/h100/profile_sampled_train_step").plan)
    assert table["reuses"].astype(bool).any()
    for folder in ("reports/h100/launches_gpt2", "reports/h100/profile_full_train_step"):
        groups = json.loads((Path(folder) / "premise.json").read_text())
        assert groups and not any(g["differs"] for g in groups)


def test_committed_deep_pairs_meet_a_fifth_whole():
    """H100: the 12-layer MLP over two steps (traffic set, committed analyzable) and a 12-layer GPT-2
    over four steps (bytes set, summaries): the distinct run within 1/5 of the every-launch run's time, the
    program's start-up included, and no op type off the bar."""
    summary = _script("launches_summary")
    full, sampled = Path("reports/h100/profile_full_mlp12"), Path("reports/h100/profile_sampled_mlp12")
    mlp = summary.pair(full, sampled)
    assert mlp["ops_off"] == [] and mlp["ops_compared"] > 10
    assert mlp["time_ratio"] <= 0.2
    runs = [json.loads((f / "run.json").read_text()) for f in (full, sampled)]
    assert [r["distinct"] for r in runs] == [0, 1] and all(r["first_kernel_s"] > 0 for r in runs)
    assert runs[0]["metric_set"] == "traffic" and "--layers 12" in " ".join(runs[0]["program"])
    groups = json.loads((full / "premise.json").read_text())
    assert groups and not any(g["differs"] for g in groups)
    table, _ = analyze_reports(load_run(sampled).reports, load_run(sampled).plan)
    assert table["reuses"].astype(bool).sum() > table["reuses"].size / 2  # most launches reused

    gpt2 = Path("reports/h100/launches_gpt2_4steps")
    pair = json.loads((gpt2 / "summary.json").read_text())["pairs"]["gpt2"]
    full_run = json.loads((gpt2 / "full_run.json").read_text())
    assert "--steps 4" in " ".join(full_run["program"]) and full_run["distinct"] == 0
    assert pair["full"]["wall_time_s"] == full_run["wall_time_s"]
    assert pair["ops_off"] == [] and pair["ops_compared"] > 20 and pair["time_ratio"] <= 0.2
    assert not any(g["differs"] for g in json.loads((gpt2 / "premise.json").read_text()))


def test_committed_metric_costs_order_the_sets():
    costs = Path("reports/h100/metric_costs")
    runs = {s: json.loads((costs / f"{s}_run.json").read_text()) for s in ("bytes", "traffic")}
    assert runs["bytes"]["passes"] < runs["traffic"]["passes"]
    assert runs["bytes"]["kernels_profiled"] == runs["traffic"]["kernels_profiled"] > 0
    assert runs["bytes"]["wall_time_s"] < runs["traffic"]["wall_time_s"]
