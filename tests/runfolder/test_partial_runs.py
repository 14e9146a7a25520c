"""Planned against found: a run that lacks what its plan lists is never shown as whole.

Committed reports are cut, never made up: a .ncu-rep is a 4-byte magic then frames of a 4-byte
little-endian length and a protobuf message; cutting at the end of a frame gives a report that ncu_report
reads with its first k launches (a launch boundary), cutting inside a frame one whose last launch is
damaged (or nothing at all). Every reader names what is missing, marks it in the `status` column, and
exits non-zero unless --partial; `check` never passes such a run.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import shutil
import struct
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from report_bytes import report_bytes
from typer.testing import CliRunner

from memtraffic.cli import app
from memtraffic.ncu.kernel_table import table_path
from memtraffic.ncu.report import read_rows
from memtraffic.vocab.errors import ReportError

REPO = Path(__file__).resolve().parents[2]
H100 = REPO / "reports" / "h100"
SEED = H100 / "seed_1048576x2_fp32"
SUITE = H100 / "suite_1048576x2_fp32"
MISSING = ": missing: planned, no kernel in the reports"


@pytest.fixture(autouse=True)
def _own_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("MEMTRAFFIC_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


def frame_ends(data: bytes) -> list[int]:
    """The byte offsets where the report's frames end (the last is the file's length)."""
    ends, at = [], 4
    while at < len(data):
        at += 4 + struct.unpack_from("<I", data, at)[0]
        ends.append(at)
    assert at == len(data), "not a chain of length-prefixed frames"
    return ends


def committed_ranges(report: Path) -> list[str]:
    """The range of each launch of a committed report, in launch order, from its committed table."""
    doc = json.loads(gzip.decompress(table_path(report).read_bytes()))
    return doc["columns"]["range"]


_CUTS: dict[Path, list[tuple[int, int]]] = {}


def launch_boundaries(report: Path) -> list[tuple[int, int]]:
    """(offset, k): each frame end at which the cut report reads as the first k launches of the whole,
    none damaged (computed once per session)."""
    if report not in _CUTS:
        data = report_bytes(report)
        whole = committed_ranges(report)
        found = []
        with tempfile.TemporaryDirectory() as tmp:
            cut = Path(tmp) / "cut.ncu-rep"
            for end in frame_ends(data):
                cut.write_bytes(data[:end])
                rows, damaged, _ = read_rows(cut)
                if rows and not damaged:
                    assert [r["range"] for r in rows] == whole[:len(rows)]  # a cut keeps a prefix
                    found.append((end, len(rows)))
        _CUTS[report] = found
    return _CUTS[report]


def cut_copy(run: Path, into: Path, end: int | None) -> Path:
    """A copy of a run folder (no tables, no results) whose report is cut at byte `end`."""
    copy = into / run.name
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns("*.json.gz", "results.*"))
    if end is not None:
        data = report_bytes(run / "profile.ncu-rep")
        (copy / "profile.ncu-rep").write_bytes(data[:end])
    return copy


def planned(run: Path) -> list[str]:
    return [c["range"] for c in json.loads((run / "plan.json").read_text())["configs"]]


def named_missing(stderr: str) -> list[str]:
    return [line.removeprefix("warning: ").removesuffix(MISSING) for line in stderr.splitlines()
            if line.endswith(MISSING)]


@pytest.mark.slow
@pytest.mark.parametrize("run", [SEED, SUITE], ids=lambda p: p.name)
def test_a_report_cut_at_any_launch_boundary_names_exactly_its_missing_configs(run, tmp_path):
    boundaries = launch_boundaries(run / "profile.ncu-rep")
    whole = committed_ranges(run / "profile.ncu-rep")
    assert {k for _, k in boundaries} == set(range(1, len(whole) + 1))  # every launch count is reached
    for i, (end, k) in enumerate(boundaries):
        copy = cut_copy(run, tmp_path / str(i), end)
        kept = set(whole[:k])
        missing = [r for r in planned(run) if r not in kept]
        res = CliRunner().invoke(app, ["analyze", str(copy), "--format", "json"])
        assert named_missing(res.stderr) == missing, (end, k)
        if not missing:
            assert res.exit_code == 0 and res.stderr == ""
            continue
        assert res.exit_code == 1
        assert res.stderr.splitlines()[-1].startswith(f"error: {copy} is incomplete (")
        rows = json.loads(res.stdout)  # the table is printed whole, marked
        assert [r["range"] for r in rows] == planned(run)
        last = whole[k - 1]  # the config the report ends in or right after
        assert {r["range"]: r["status"] for r in rows} == {
            r: "missing" if r in missing else "partial" if r == last else "ok" for r in planned(run)}
        assert all(r["l1_ld_bytes"] is None and r["min_bytes"] for r in rows if r["status"] == "missing")
        accepted = CliRunner().invoke(app, ["analyze", str(copy), "--format", "json", "--partial"])
        assert accepted.exit_code == 0 and json.loads(accepted.stdout) == rows
        assert named_missing(accepted.stderr) == missing


SEED_BYTES = report_bytes(SEED / "profile.ncu-rep")


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(0, len(SEED_BYTES) - 1))
def test_a_report_cut_at_any_byte_is_named_partial_never_whole(end):
    with tempfile.TemporaryDirectory() as tmp:
        copy = cut_copy(SEED, Path(tmp), end)
        res = CliRunner().invoke(app, ["analyze", str(copy), "--format", "json", "--partial"])
        assert "Traceback" not in res.output + res.stderr and res.exception is None or \
            isinstance(res.exception, SystemExit)
        if res.exit_code:  # nothing readable at all (empty, or not a report yet): one line
            assert res.exit_code == 1 and len(res.stderr.strip().splitlines()) == 1, res.stderr
            assert res.stderr.startswith("error: ")
            return
        rows = json.loads(res.stdout)
        statuses = {r["range"]: r["status"] for r in rows}
        assert list(statuses) == planned(SEED) and set(statuses.values()) != {"ok"}
        assert named_missing(res.stderr) == [r for r, s in statuses.items() if s == "missing"]
        strict = CliRunner().invoke(app, ["analyze", str(copy)])
        assert strict.exit_code == 1 and strict.stderr.splitlines()[-1].startswith("error: ")


def test_every_reader_refuses_a_cut_run_unless_partial(tmp_path):
    end, k = launch_boundaries(SEED / "profile.ncu-rep")[0]
    assert k == 1
    cut = cut_copy(SEED, tmp_path, end)
    lost = planned(SEED)[1:]
    for args in (["diff", str(SEED), str(cut)], ["report", str(cut), "--out", str(tmp_path / "r.html")],
                 ["roofline", str(cut), "--out", str(tmp_path / "f.html")]):
        res = CliRunner().invoke(app, args)
        assert res.exit_code == 1, (args, res.output)
        assert named_missing(res.stderr) == lost and res.stderr.splitlines()[-1].startswith("error: ")
        assert not (tmp_path / "r.html").exists() and not (tmp_path / "f.html").exists()
    res = CliRunner().invoke(app, ["diff", str(SEED), str(cut), "--partial", "--format", "json"])
    assert res.exit_code == 0
    verdicts = {r["range_a"]: r["verdict"] for r in json.loads(res.stdout)["rows"]}
    assert all(verdicts[r].startswith("B missing (analyze: planned, not measured whole)") for r in lost)
    res = CliRunner().invoke(app, ["report", str(cut), "--out", str(tmp_path / "r.html"), "--partial"])
    page = (tmp_path / "r.html").read_text()
    assert res.exit_code == 0 and "torch_softmax 1048576x2 fp32 [missing]" in page
    assert f"<li>incomplete run {cut.name}: mt|torch_softmax|1048576x2|fp32{MISSING}</li>" in page


def test_recorded_launch_counts_tell_a_whole_config_from_a_cut_one(tmp_path):
    """measure records each config's launch count in run.json: a config whose report ends right after it is
    then 'ok' when all its launches are there and 'partial' when some are not, not merely suspect."""
    end = next(end for end, k in launch_boundaries(SEED / "profile.ncu-rep") if k == 1)
    cut = cut_copy(SEED, tmp_path, end)
    meta = json.loads((cut / "run.json").read_text())
    for config, kernels in zip(meta["configs"], (1, 1, 1), strict=True):
        config["kernels"] = kernels
    (cut / "run.json").write_text(json.dumps(meta))
    statuses = lambda: [r["status"] for r in json.loads(CliRunner().invoke(  # noqa: E731
        app, ["analyze", str(cut), "--format", "json", "--partial"]).stdout)]
    assert statuses() == ["ok", "missing", "missing"]
    meta["configs"][0]["kernels"] = 2  # had it launched two kernels, the report would lack one
    (cut / "run.json").write_text(json.dumps(meta))
    assert statuses() == ["partial", "missing", "missing"]
    res = CliRunner().invoke(app, ["analyze", str(cut)])
    assert (f"warning: {planned(SEED)[0]}: partial: 1 of its 2 kernel launches are in the reports"
            in res.stderr.splitlines())


def test_measure_rerun_of_a_cut_run_plans_its_missing_configs(tmp_path):
    from memtraffic.collect.measure import rerun_plan

    end = next(end for end, k in launch_boundaries(SEED / "profile.ncu-rep") if k == 1)
    cut = cut_copy(SEED, tmp_path, end)
    again = rerun_plan(cut)  # run.json lists nothing to rerun: every config finished when measured
    assert [c["range"] for c in again["configs"]] == planned(SEED)[1:]
    assert [c["id"] for c in again["configs"]] == [0, 1]


def test_check_never_passes_a_run_with_missing_planned_rows(tmp_path):
    end = next(end for end, k in launch_boundaries(SEED / "profile.ncu-rep") if k == 2)
    cut = cut_copy(SEED, tmp_path, end)
    expect = tmp_path / "e.toml"
    expect.write_text('[[expect]]\nmatch = "naive"\nmax_time = "1s"\n')  # holds for the config that is there
    assert CliRunner().invoke(app, ["check", str(SEED), "--expect", str(expect)]).exit_code == 0
    res = CliRunner().invoke(app, ["check", str(cut), "--expect", str(expect), "--format", "json"])
    assert res.exit_code == 1
    failed = [c["message"] for c in json.loads(res.stdout)["checks"] if not c["ok"]]
    report = cut / "profile.ncu-rep"
    assert failed == [f"incomplete run {cut}: {planned(SEED)[2]}{MISSING}",
                      f"incomplete run {cut}: {planned(SEED)[1]}: partial: its report ({report}) ends in or "
                      "right after it, so some of its kernel launches may be missing"]


def test_a_missing_shard_names_exactly_its_configs(tmp_path):
    run = REPO / "reports" / "h200x2" / "softmax_sweep_80"
    copy = tmp_path / run.name
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns("profile-gpu1.*", "results.*"))
    res = CliRunner().invoke(app, ["analyze", str(copy), "--format", "json"])
    assert res.exit_code == 1
    configs = json.loads((run / "plan.json").read_text())["configs"]
    on_gpu1 = [c["range"] for c in configs if c["gpu"] == 1]
    assert res.stderr.splitlines()[0] == (f"warning: {copy / 'profile-gpu1.ncu-rep'}: a report of this run "
                                          "is missing (listed in run.json): the configs it held are missing")
    assert named_missing(res.stderr) == on_gpu1
    statuses = {r["range"]: r["status"] for r in json.loads(res.stdout)}
    assert statuses == {c["range"]: "missing" if c["gpu"] == 1 else "ok" for c in configs}


# --- an interrupted profile --torch-ops ---------------------------------------------------------------------


def interrupted(run: Path, into: Path, end: int | None) -> Path:
    """What `profile --torch-ops` leaves when the program is killed under ncu: the report (cut at `end`)
    and trace.jsonl, no plan.json, no run.json."""
    copy = cut_copy(run, into, end)
    for name in ("plan.json", "run.json"):
        (copy / name).unlink()
    return copy


@pytest.mark.parametrize("name", ["profile_torch_model", "profile_train_step"])
def test_an_interrupted_profile_shows_its_ops_minimums_and_says_so(name, tmp_path):
    run = H100 / name
    copy = interrupted(run, tmp_path, None)
    records = [json.loads(line) for line in (run / "trace.jsonl").read_text().splitlines()]
    minimum = {r["range"]: r["min_read_bytes"] + r["min_write_bytes"] for r in records}
    res = CliRunner().invoke(app, ["analyze", str(copy), "--format", "json"])
    assert res.exit_code == 1
    meta = json.loads((run / "run.json").read_text())
    options = " --profile-from-start off" if meta.get("traced_from") == "profiler window" else ""
    note, *cut, error = res.stderr.splitlines()
    assert note == (f"warning: {copy}: the run was interrupted (profile was killed before it saved "
                    f"plan.json): the plan is rebuilt from trace.jsonl ({len(records)} op calls "
                    "and regions) and the report holds what ncu profiled before; profile the program again "
                    f"to complete it: `memtraffic profile --torch-ops{options} --out NEW_FOLDER -- "
                    f"python3 {meta['program'][-1]}`")
    # The report is whole here, but nothing says so: op calls traced after its last kernel are counted.
    assert len(cut) == (name == "profile_train_step")
    assert error.startswith(f"error: {copy} is incomplete ({1 + len(cut)} gap")
    rows = json.loads(res.stdout)
    committed = json.loads((run / "results.json").read_text())  # what the finished run showed
    assert [r["range"] for r in rows] == [r["range"] for r in committed]
    assert all(r["min_bytes"] == minimum[r["range"]] for r in rows if r["range"] in minimum)
    assert sum(r["min_bytes"] is not None for r in rows) == sum(r["min_bytes"] is not None for r in committed)
    assert CliRunner().invoke(app, ["analyze", str(copy), "--partial"]).exit_code == 0


def test_an_interrupted_profile_cut_mid_program_names_where_it_ends(tmp_path):
    run = H100 / "profile_torch_model"
    boundaries = launch_boundaries(run / "profile.ncu-rep")
    end, k = boundaries[len(boundaries) // 2]
    copy = interrupted(run, tmp_path, end)
    res = CliRunner().invoke(app, ["analyze", str(copy), "--format", "json", "--partial"])
    assert res.exit_code == 0
    configs = json.loads((run / "plan.json").read_text())["configs"]
    last = committed_ranges(run / "profile.ncu-rep")[k - 1]
    after = len(configs) - [c["range"] for c in configs].index(last) - 1
    assert res.stderr.splitlines()[1] == (f"warning: the report ends at {last}: the {after} op calls or "
                                          "regions traced after it have no kernel in the report (any of them "
                                          "that launches kernels was not profiled)")
    rows = json.loads(res.stdout)
    assert [r["status"] for r in rows] == ["ok"] * (len(rows) - 1) + ["partial"]
    assert rows[-1]["range"] == last


def test_an_interrupted_profile_with_its_early_run_json_gives_its_own_command(tmp_path):
    """profile writes run.json before the program starts: a killed run then has it, without plan.json."""
    run = H100 / "profile_train_step"
    copy = cut_copy(run, tmp_path, None)
    (copy / "plan.json").unlink()
    meta = json.loads((run / "run.json").read_text())
    early = {k: meta[k] for k in ("kind", "started", "command", "program", "environment", "torch_ops",
                                  "traced_from")}
    (copy / "run.json").write_text(json.dumps(early))
    res = CliRunner().invoke(app, ["analyze", str(copy), "--partial", "--format", "json"])
    assert res.exit_code == 0
    assert res.stderr.splitlines()[0].endswith(
        "profile the program again to complete it: `memtraffic profile --torch-ops --profile-from-start off "
        "--out NEW_FOLDER -- python3 examples/train_step.py`")
    assert meta["traced_from"] == "profiler window"
    assert meta["program"] == ["python3", "examples/train_step.py"]


def test_a_two_gpu_sweep_with_one_report_cut_names_that_gpus_lost_configs(tmp_path):
    run = REPO / "reports" / "h200x2" / "softmax_sweep_80"
    report = run / "profile-gpu1.ncu-rep"
    whole = committed_ranges(report)
    end, k = next((end, k) for end, k in launch_boundaries(report) if k >= len(whole) // 2)
    copy = tmp_path / run.name
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns("*.json.gz", "results.*"))
    (copy / report.name).write_bytes(report_bytes(report)[:end])
    res = CliRunner().invoke(app, ["analyze", str(copy), "--format", "json"])
    assert res.exit_code == 1
    configs = json.loads((run / "plan.json").read_text())["configs"]
    lost = [c["range"] for c in configs if c["gpu"] == 1 and c["range"] not in set(whole[:k])]
    assert lost and named_missing(res.stderr) == lost
    statuses = {r["range"]: r["status"] for r in json.loads(res.stdout)}
    assert [r for r, s in statuses.items() if s != "ok"] == [whole[k - 1], *lost]  # plan order
    assert all(statuses[c["range"]] == "ok" for c in configs if c["gpu"] == 0)


def test_a_killed_measure_is_said_interrupted_and_its_rerun_plans_what_is_missing(tmp_path):
    """measure writes plan.json first and run.json last: killed between, the folder has a plan, a status
    file and a report cut short."""
    from memtraffic.collect.measure import rerun_plan

    end = next(end for end, k in launch_boundaries(SEED / "profile.ncu-rep") if k == 1)
    cut = cut_copy(SEED, tmp_path, end)
    (cut / "run.json").unlink()
    res = CliRunner().invoke(app, ["analyze", str(cut)])
    assert res.exit_code == 1
    assert res.stderr.splitlines()[0] == (
        f"warning: {cut}: the run was interrupted (measure was killed before it saved run.json): the configs "
        f"its reports lack are named below; `memtraffic measure --rerun {cut}` measures them")
    assert named_missing(res.stderr) == planned(SEED)[1:]
    assert [c["range"] for c in rerun_plan(cut)["configs"]] == planned(SEED)[1:]


def test_an_interrupted_profile_of_regions_is_given_back_without_torch_ops(tmp_path):
    run = H100 / "profile_cupy_region"
    copy = interrupted(run, tmp_path, None)
    res = CliRunner().invoke(app, ["analyze", str(copy), "--partial"])
    assert res.exit_code == 0
    program = json.loads((run / "run.json").read_text())["program"]
    assert res.stderr.splitlines()[0].endswith(
        "profile the program again to complete it: `memtraffic profile --out NEW_FOLDER -- "
        f"python3 {program[-1]}`")


def test_ncu_reports_native_log_on_a_cut_report_is_kept_off_stderr(tmp_path, capfd):
    """ncu_report's C++ parser logs "Can't parse message ... missing required fields" (after an absl
    preamble) to the process's stderr for some cuts; the damage is said in one line instead."""
    cut = tmp_path / "cut.ncu-rep"
    for end in range(42_640, 60_394, 97):  # cuts through the seed report's second launch
        cut.write_bytes(SEED_BYTES[:end])
        with contextlib.suppress(ReportError):  # a cut the module cannot open at all
            read_rows(cut)
    assert capfd.readouterr().err == ""
