"""runfolder.builder: one run folder's plan.json and run.json, written through the schema once a phase, and
run.json's per-config lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from config_fixture import variant_config

from memtraffic.runfolder.builder import RunBuilder, outcomes
from memtraffic.runfolder.records import read_plan, read_run
from memtraffic.vocab.errors import UsageError

CONFIG = variant_config(0, range="mt|v|4x8|fp32", variant="v", shape=[4, 8])


def test_each_save_adds_its_fields_and_writes_run_json_in_their_order(tmp_path):
    record = RunBuilder(tmp_path, {"started": "2026-11-28T00:00:00Z"})
    record.save(wall_time_s=1.5, configs=[])
    record.save(rerun=[], timings={"analysis_s": 0.25})
    assert list(json.loads((tmp_path / "run.json").read_text())) == ["started", "wall_time_s", "configs",
                                                                     "rerun", "timings"]
    assert read_run(tmp_path) == record.run


def test_a_field_of_the_wrong_kind_is_refused_and_nothing_is_written(tmp_path):
    record = RunBuilder(tmp_path)
    with pytest.raises(UsageError, match=r"cannot write .*run\.json: wall_time_s is a string, expected a "
                                         "number"):
        record.save(wall_time_s="soon")  # type: ignore[typeddict-item]
    assert not (tmp_path / "run.json").exists()


def test_a_later_pass_plan_is_its_own_file_and_the_run_keeps_its_plan(tmp_path):
    record = RunBuilder(tmp_path)
    own = record.save_plan({"configs": [CONFIG], "skipped": []})
    record.save_plan({"configs": [], "skipped": []}, stem="-second")
    assert record.plan is own and read_plan(tmp_path) == own
    assert json.loads((tmp_path / "plan-second.json").read_text())["configs"] == []


def test_outcomes_say_whether_ncu_profiled_each_config_once_the_reports_are_read():
    plan = {"configs": [CONFIG, {**CONFIG, "id": 1, "range": "mt|v|8x8|fp32", "gpu": 1}]}
    status = {0: {"status": "ok", "max_err": 0.0}, 1: {"status": "ok"}}
    before = outcomes(plan, status, launches=None)
    assert [(c["status"], c["profiled"], "kernels" in c) for c in before] == [("ok", None, False)] * 2
    after = outcomes(plan, status, {"mt|v|4x8|fp32": 2})
    assert [(c["profiled"], c["kernels"], c["error"]) for c in after] == [
        (True, 2, None), (False, 0, "no kernel was profiled inside its NVTX range")]
    assert after[1]["gpu"] == 1 and outcomes(plan, {}, None)[0]["status"] == "not run"
    with pytest.raises(TypeError, match="plan is not built"):
        RunBuilder(Path(".")).outcomes(status, None)
