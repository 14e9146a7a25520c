"""memtraffic merge: committed runs combined into one run that analysis reads with the rows of both."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memtraffic.analysis.analyze import analyze_path
from memtraffic.analysis.merge import merge_runs
from memtraffic.cli import app
from memtraffic.vocab.errors import UsageError

REPORTS = Path(__file__).resolve().parents[2] / "reports" / "h100"
SEED, SUITE = REPORTS / "seed_1048576x2_fp32", REPORTS / "suite_1048576x2_fp32"
COUNTERS = ["l1_ld_bytes", "l1_st_bytes", "l2_rd_bytes", "l2_wr_bytes", "dram_rd_bytes", "time_ns"]


def _invoke(args):
    return CliRunner().invoke(app, [str(a) for a in args])


def _rows(run: Path) -> dict[str, dict]:
    return {r["range"]: r for r in analyze_path(run).to_dict("records")}


def test_merged_run_has_the_rows_of_both(tmp_path):
    out, run = merge_runs([SEED, SUITE], tmp_path / "merged", echo=lambda s: None)
    seed, suite, merged = _rows(SEED), _rows(SUITE), _rows(out)
    assert len(merged) == len(seed) + len(suite) == 15
    for rng, row in seed.items():  # the first measurement keeps its range
        assert [merged[rng][c] for c in COUNTERS] == [row[c] for c in COUNTERS]
    for rng, row in suite.items():  # torch_softmax is in both runs: the second is its own row
        key = rng + "|#2" if rng in seed else rng
        assert [merged[key][c] for c in COUNTERS] == [row[c] for c in COUNTERS]
        assert merged[key]["variant"] == row["variant"] and merged[key]["min_bytes"] == row["min_bytes"]
    assert "mt|torch_softmax|1048576x2|fp32|#2" in merged

    plan = json.loads((out / "plan.json").read_text())
    assert [c["id"] for c in plan["configs"]] == list(range(15))
    assert [c["part"] for c in plan["configs"]] == [1] * 3 + [2] * 12
    assert run["reports"] == ["part1-profile.ncu-rep", "part2-profile.ncu-rep"]
    assert (out / "part1-profile.ncu-rep").read_bytes() == (SEED / "profile.ncu-rep").read_bytes()
    seed_run = json.loads((SEED / "run.json").read_text())
    assert run["attempts"][0]["argv"] == seed_run["attempts"][0]["argv"] and run["attempts"][0]["part"] == 1
    assert [p["source"] for p in run["parts"]] == [str(SEED), str(SUITE)]
    assert run["rerun"] == [] and run["notes"] == []
    assert len((out / "status.jsonl").read_text().splitlines()) == 15
    assert json.loads((out / "results.json").read_text())[0]["range"] == plan["configs"][0]["range"]


def test_merging_a_merged_run_keeps_each_measurement_apart(tmp_path):
    first, _ = merge_runs([SEED, SUITE], tmp_path / "a", echo=lambda s: None)
    out, _ = merge_runs([first, SEED], tmp_path / "b", echo=lambda s: None)
    merged, seed = _rows(out), _rows(SEED)
    assert len(merged) == 18
    softmax = "mt|torch_softmax|1048576x2|fp32"
    assert [merged[softmax + s]["l1_ld_bytes"] for s in ("", "|#2", "|#3")] == \
        [seed[softmax]["l1_ld_bytes"], _rows(SUITE)[softmax]["l1_ld_bytes"], seed[softmax]["l1_ld_bytes"]]
    assert all(merged[r + "|#2"]["n_kernels"] == seed[r]["n_kernels"] for r in seed if r != softmax)


def test_cli_merge_and_analyze(tmp_path):
    res = _invoke(["merge", SEED, SUITE, "--out", tmp_path / "m", "--format", "json"])
    assert res.exit_code == 0, res.output
    assert "merged 15 configs of 2 runs" in res.output
    res = _invoke(["analyze", tmp_path / "m", "--format", "json"])
    assert res.exit_code == 0 and len(json.loads(res.output)) == 15


def _one_error_line(res, code: int = 2) -> str:
    assert res.exit_code == code, res.output
    (line,) = res.output.strip().splitlines()
    assert line.startswith("error: ")
    return line


def test_merge_never_overwrites(tmp_path):
    out = tmp_path / "m"
    merge_runs([SEED], out, echo=lambda s: None)
    before = sorted(p.name for p in out.iterdir())
    line = _one_error_line(_invoke(["merge", SEED, SUITE, "--out", out]))
    assert "already exists and is not empty" in line
    assert sorted(p.name for p in out.iterdir()) == before
    assert "is one of the runs" in _one_error_line(_invoke(["merge", SEED, SUITE, "--out", SEED]))


def test_merge_refuses_a_folder_that_is_not_a_run(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "file.txt").write_text("x")
    for bad in (tmp_path / "empty", tmp_path / "file.txt", tmp_path / "missing"):
        line = _one_error_line(_invoke(["merge", SEED, bad, "--out", tmp_path / "m"]))
        assert f"{bad} is not a run folder" in line
    assert not (tmp_path / "m").exists()
    assert "given twice" in _one_error_line(_invoke(["merge", SEED, SEED, "--out", tmp_path / "m"]))


def _copy_with(tmp_path: Path, name: str, **environment) -> Path:
    """A copy of the seed run whose run.json says it ran elsewhere (the report is the committed one)."""
    copy = tmp_path / name
    shutil.copytree(SEED, copy)
    run = json.loads((copy / "run.json").read_text())
    run["environment"].update(environment)
    (copy / "run.json").write_text(json.dumps(run))
    return copy


@pytest.mark.parametrize(("change", "what"), [({"gpu": "NVIDIA H200"}, "GPUs"),
                                              ({"ncu_version": "2024.3.0.0"}, "ncu versions")])
def test_merge_refuses_mixed_devices_unless_allowed(tmp_path, change, what):
    other = _copy_with(tmp_path, "other", **change)
    line = _one_error_line(_invoke(["merge", SUITE, other, "--out", tmp_path / "m"]))
    assert f"measured on different {what}" in line and "--allow-mixed" in line
    assert list(change.values())[0] in line
    notes: list[str] = []
    out, run = merge_runs([SUITE, other], tmp_path / "m2", allow_mixed=True, echo=notes.append)
    assert run["notes"][0].startswith(f"mixed {list(change)[0]}: ")
    assert any(n.startswith("note: mixed") for n in notes)
    assert len(_rows(out)) == 15


def test_merge_notes_missing_shards(tmp_path):
    runs = []
    for i in (1, 3):
        copy = _copy_with(tmp_path, f"shard{i}")
        run = json.loads((copy / "run.json").read_text())
        run["shard"] = {"index": i, "count": 3, "plan_configs": 6, "plan_digest": "abc"}
        (copy / "run.json").write_text(json.dumps(run))
        runs.append(copy)
    _, run = merge_runs(runs, tmp_path / "m", echo=lambda s: None)
    assert "shards of 3: missing 2" in run["notes"]


def test_merge_with_no_runs_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="give the run folders to merge"):
        merge_runs([], tmp_path / "m")
