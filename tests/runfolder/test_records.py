"""The run folder's schema (memtraffic.runfolder.records): every committed run folder conforms and loads; any
damage to plan.json, run.json or a kernel table ends in one line naming the file and the field, or in a
run that still reads (a field no reader needs), never in a traceback.
"""

from __future__ import annotations

import copy
import gzip
import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from config_fixture import traced_config, variant_config
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from memtraffic.analysis.analyze import analyze_path, gaps
from memtraffic.cli import app
from memtraffic.ncu.kernel_table import table_path
from memtraffic.runfolder.load import load_run
from memtraffic.runfolder.records import (
    Config,
    Plan,
    RunRecord,
    needs_rerun,
    plan_from_trace,
    problem,
    read_plan,
    read_run,
    rerun_list,
)
from memtraffic.vocab.errors import ReportError

REPO = Path(__file__).resolve().parents[2]
SEED = REPO / "reports" / "h100" / "seed_1048576x2_fp32"
FOLDERS = sorted({p.parent for name in ("plan.json", "run.json") for p in (REPO / "reports").rglob(name)})
# Committed folders whose reports were not committed (their run.json lists them): read, and said lacking.
WITHOUT_REPORTS = {"source_cost_all", "gpus_lock_probe", "pair_probe", "bytes_vs_traffic"}


def _label(folder: Path) -> str:
    return str(folder.relative_to(REPO / "reports"))


@pytest.fixture(autouse=True)
def _own_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("MEMTRAFFIC_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


@pytest.mark.parametrize("folder", FOLDERS, ids=_label)
def test_every_committed_run_folder_conforms_and_loads(folder):
    assert problem(json.loads((folder / "plan.json").read_text()), Plan) is None \
        if (folder / "plan.json").is_file() else True
    assert problem(json.loads((folder / "run.json").read_text()), RunRecord) is None
    run = load_run(folder)
    assert run.meta == read_run(folder) and run.plan == read_plan(folder)
    if not run.reports or not all(r.is_file() for r in run.reports):
        assert set(Path(_label(folder)).parts) & WITHOUT_REPORTS, "a committed run lost its report"
        return
    table = analyze_path(folder)
    assert gaps(table) == [] and set(table["status"]) == {"ok"}
    configs = (run.plan or {}).get("configs", [])
    planned = [c["range"] for c in configs if c.get("kind", "variant") == "variant"]
    assert set(planned) <= set(table["range"])


def test_a_run_whose_reports_were_not_committed_names_them():
    folder = REPO / "reports" / "h100" / "source_cost_all" / "source"
    table = analyze_path(folder)
    found = gaps(table)
    assert found[0] == (f"{folder / 'profile.ncu-rep'}: a report of this run is missing (listed in "
                        "run.json): the configs it held are missing")
    planned = [c["range"] for c in json.loads((folder / "plan.json").read_text())["configs"]]
    assert found[1:] == [f"{r}: missing: planned, no kernel in the reports" for r in planned]
    assert list(table["range"]) == planned and set(table["status"]) == {"missing"}
    res = CliRunner().invoke(app, ["analyze", str(folder)])
    assert res.exit_code == 1
    assert res.stderr.splitlines()[-1] == (f"error: {folder} is incomplete ({len(found)} gaps named above): "
                                           "measure what is missing again (`memtraffic measure --rerun RUN` "
                                           "measures a run's missing configs), or pass --partial to accept "
                                           "partial results")
    assert CliRunner().invoke(app, ["analyze", str(folder), "--partial"]).exit_code == 0


def test_the_one_rerun_test():
    assert needs_rerun({"status": "failed"}) and needs_rerun({"status": "ok", "profiled": False})
    assert not needs_rerun({"status": "ok", "profiled": True}) and not needs_rerun({"status": "ok"})
    outcomes = json.loads((SEED / "run.json").read_text())["configs"]
    assert rerun_list(outcomes) == []
    outcomes[1]["status"] = "not run"
    assert rerun_list(outcomes) == ["mt|softmax_tiled|1048576x2|fp32|BLOCK_M=128"]


def test_a_profile_plan_is_its_trace():
    folder = REPO / "reports" / "h100" / "profile_torch_model"
    records = [json.loads(line) for line in (folder / "trace.jsonl").read_text().splitlines()]
    committed = json.loads((folder / "plan.json").read_text())
    rebuilt = plan_from_trace(records, committed["program"], committed["metrics"])
    assert rebuilt == committed  # what profile writes, reading rebuilds


# --- damage, field by field ---------------------------------------------------------------------------------

WRONG = [1, -3, 2.5, "x", "", True, None, [], [1], {}, {"a": 1}, [{"range": 5}]]


def _paths(value: Any, at: tuple = ()) -> Iterator[tuple]:
    """Every path into a JSON value (keys and list indexes), the value itself first."""
    yield at
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*at, k))
    elif isinstance(value, list):
        for i, v in enumerate(value[:3]):  # a few items of each list: their siblings have the same shape
            yield from _paths(v, (*at, i))


def _mutate(doc: Any, path: tuple, how: str, new: Any) -> Any:
    """A copy of doc with the value at path replaced (by `new`), deleted, or nested one level deeper."""
    doc = copy.deepcopy(doc)
    if not path:
        return new if how == "replace" else [doc] if how == "nest" else {}
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    last = path[-1]
    if how == "delete":
        del parent[last]
    elif how == "nest":
        parent[last] = {"value": parent[last]} if isinstance(parent[last], list) else [parent[last]]
    else:
        parent[last] = new
    return doc


def _expected_field(path: tuple) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")


SEED_DOCS = {name: json.loads((SEED / name).read_text()) for name in ("plan.json", "run.json")}
SEED_PATHS = {name: list(_paths(doc)) for name, doc in SEED_DOCS.items()}


@st.composite
def damage(draw):
    name = draw(st.sampled_from(sorted(SEED_DOCS)))
    path = draw(st.sampled_from(SEED_PATHS[name]))
    how = draw(st.sampled_from(["replace", "delete", "nest"]))
    new = draw(st.sampled_from(WRONG))
    if how == "delete" and not path:
        how = "replace"
    return name, path, how, new


def _copy(folder: Path, into: Path) -> Path:
    run = into / folder.name
    shutil.copytree(folder, run, ignore=shutil.ignore_patterns("results.*"))
    return run


def _assert_one_error_or_a_reading(res, run: Path) -> None:
    """Exit 0 with a table, or a non-zero exit whose stderr is warnings then one error line."""
    text = res.output + (res.stderr or "")
    assert "Traceback" not in text and res.exception is None or isinstance(res.exception, SystemExit), text
    if res.exit_code == 0:
        return
    lines = res.stderr.strip().splitlines()
    assert lines and lines[-1].startswith("error: "), res.stderr
    assert all(line.startswith("warning: ") for line in lines[:-1]), res.stderr


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(damage())
def test_damage_to_plan_or_run_json_is_one_line_naming_file_and_field(case):
    name, path, how, new = case
    damaged = _mutate(SEED_DOCS[name], path, how, new)
    with tempfile.TemporaryDirectory() as tmp:
        run = _copy(SEED, Path(tmp))
        (run / name).write_text(json.dumps(damaged))
        res = CliRunner().invoke(app, ["analyze", str(run), "--format", "json"])
        _assert_one_error_or_a_reading(res, run)
        schema = Plan if name == "plan.json" else RunRecord
        found = problem(damaged, schema)
        if found is not None:  # the schema refuses it: exactly one line, naming the file and the field
            damaged_line = "the run folder is damaged (restore the file, or measure again)"
            assert res.exit_code == 1
            assert res.stderr.strip() == f"error: {run / name}: {found}: {damaged_line}"
            # The seed's files conform: the field named is the one damaged, or one inside it.
            field = "" if found.startswith("holds ") else found.split(" is ")[0]
            assert field.startswith(_expected_field(path)), (found, path)


def test_a_damaged_config_names_its_field():
    plan = copy.deepcopy(SEED_DOCS["plan.json"])
    plan["configs"][2]["shape"] = [1048576, "2"]
    assert problem(plan, Plan) == "configs[2].shape[1] is a string, expected an integer"
    del plan["configs"][1]["range"]
    assert problem(plan, Plan) == "configs[1].range is missing"
    assert problem(variant_config(min_read_bytes=True), Config) == (
        "min_read_bytes is true/false, expected an integer or a number or null")
    assert problem(traced_config(kind="kernel"), Config) == (
        "kind is 'kernel', expected 'op' or 'region' or 'triton' or none")
    # No kind: a variant's config, which needs what a traced one does not have.
    assert problem({k: v for k, v in traced_config().items() if k != "kind"}, Config) == (
        "explicit_params is missing")
    assert problem({**variant_config(), "kind": "op"}, Config) == "seq is missing"


def _table(report: Path) -> dict[str, Any]:
    return json.loads(gzip.decompress(table_path(report).read_bytes()))


SEED_TABLE = _table(SEED / "profile.ncu-rep")
# The fields of a table that identify it (format, hash, version) make a changed table stale, not damaged.
TABLE_PATHS = [p for p in _paths(SEED_TABLE)
               if p and p[0] in ("rows", "damaged", "columns", "lines", "launches") and not (len(p) > 2 and
                                                                                            p[0] == "lines")]


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(TABLE_PATHS), st.sampled_from(["replace", "delete", "nest"]), st.sampled_from(WRONG))
def test_damage_to_a_kernel_table_is_one_line_naming_it(path, how, new):
    damaged = _mutate(SEED_TABLE, path, how, new)
    with tempfile.TemporaryDirectory() as tmp:
        run = _copy(SEED, Path(tmp))
        table = table_path(run / "profile.ncu-rep")
        table.write_bytes(gzip.compress(json.dumps(damaged).encode()))
        res = CliRunner().invoke(app, ["analyze", str(run), "--format", "json"])
        _assert_one_error_or_a_reading(res, run)  # a renamed range: its config named missing, exit 1


def test_a_kernel_table_without_the_requested_bytes_reads_without_a_sector_finding(tmp_path):
    """Found by the class above: a table that lost req_ld_bytes has sector efficiency 0, which is no
    finding (it was 'use 0 of every 32 bytes' and a division by zero)."""
    damaged = _mutate(SEED_TABLE, ("columns", "req_ld_bytes"), "delete", 1)
    run = _copy(SEED, tmp_path)
    table_path(run / "profile.ncu-rep").write_bytes(gzip.compress(json.dumps(damaged).encode()))
    res = CliRunner().invoke(app, ["analyze", str(run), "--format", "json"])
    assert res.exit_code == 0, res.output
    findings = [f for row in json.loads(res.stdout) for f in row.get("findings") or []]
    waste = [f["evidence"] for f in findings if f["rule"] == "sector_waste"]
    assert waste and all(e["sector_eff"] > 0 and e["what"] != "loads" for e in waste)  # stores' stays


@pytest.mark.parametrize(("path", "how", "field"), [
    (("columns", "kernel"), "delete", "columns.kernel is missing"),
    (("columns", "time"), "nest", "columns.time does not hold one value per row (3 rows)"),
    (("rows",), "replace", "rows is not a count"),
    (("damaged",), "replace", "damaged is not a list"),
])
def test_a_damaged_kernel_table_names_the_field(tmp_path, path, how, field):
    run = _copy(SEED, tmp_path)
    table = table_path(run / "profile.ncu-rep")
    table.write_bytes(gzip.compress(json.dumps(_mutate(SEED_TABLE, path, how, "x")).encode()))
    with pytest.raises(ReportError) as err:
        analyze_path(run)
    assert str(err.value) == f"{table}: {field}: the table is damaged; delete it and the report is read again"
    columns = _mutate(SEED_TABLE, ("columns", "range"), "replace", ["a", "b"])  # rows of unequal length
    table.write_bytes(gzip.compress(json.dumps(columns).encode()))
    with pytest.raises(ReportError, match=r"columns.range does not hold one value per row \(3 rows\)"):
        analyze_path(run)


def test_a_status_file_with_odd_ids_is_read_without_them(tmp_path):
    from memtraffic.runfolder.folder import read_status

    status = tmp_path / "status.jsonl"
    status.write_text('{"id": 0, "status": "ok"}\n{"id": "x"}\n{"id": [1]}\n{"id": true}\n{"id": 1, "st\n')
    assert read_status(status) == {0: {"id": 0, "status": "ok"}}


def test_a_trace_record_that_is_no_config_is_skipped_and_a_bad_write_is_one_line(tmp_path):
    from memtraffic.runfolder.records import write_plan
    from memtraffic.vocab.errors import UsageError

    records = [json.loads(line) for line in (REPO / "reports" / "h100" / "profile_torch_model" /
                                              "trace.jsonl").read_text().splitlines()][:3]
    records[1] = {**records[1], "shape": ["s0", 4]}  # a symbolic size, say
    plan = plan_from_trace(records, ["python", "x.py"])
    assert [c["id"] for c in plan["configs"]] == [0, 1]
    assert plan["skipped"] == [{"range": records[1]["range"],
                                "reason": "trace record: shape[0] is a string, expected an integer"}]
    with pytest.raises(UsageError) as err:
        write_plan(tmp_path, {"configs": [variant_config(pred_read_bytes="12")]})
    assert str(err.value) == (f"cannot write {tmp_path / 'plan.json'}: configs[0].pred_read_bytes is a "
                              "string, expected an integer or a number or null (a variant's model or the "
                              "program gave a value of the wrong kind)")
    assert not (tmp_path / "plan.json").exists()


@pytest.mark.parametrize("record", ["Plan", "VariantConfig", "TracedConfig", "TraceRecord", "RunRecord",
                                    "Attempt", "Outcome", "Skipped", "GpuRun", "Remeasured"])
def test_the_schema_is_the_typed_records(record):
    """The validator walks the TypedDicts: every field a record declares is checked, none only there."""
    from typing import get_type_hints

    from memtraffic.runfolder import records

    cls = getattr(records, record)
    traced = {k: v for k, v in traced_config().items() if k != "id"}
    base = {"Plan": {"configs": []}, "VariantConfig": variant_config(), "TracedConfig": traced_config(),
            "TraceRecord": traced, "Skipped": {"reason": "why"},
            "Outcome": {"id": 0, "range": "r", "status": "ok", "error": None, "profiled": True},
            "GpuRun": {"attempts": [], "reports": [], "interrupted": False, "error": None, "wall_time_s": 1.0,
                       "index": 0, "cuda_visible_devices": "0", "configs": [0], "predicted_cost_s": 1.0,
                       "status_file": "status-gpu0.jsonl"},
            "Remeasured": {"id": 0, "range": "r", "eff_l1_ld": 0.5, "eff_l1_st": None, "status": "ok",
                           "error": None, "taken": True}}.get(record, {})
    assert problem(base, cls) is None
    for key in get_type_hints(cls):
        wrong = next(v for v in ("x", 1.5, [1.5], {"k": 1.5}, True) if problem({**base, key: v}, cls))
        assert problem({**base, key: wrong}, cls).startswith(f"{key}"), (key, wrong)
    for key in cls.__required_keys__:
        assert problem({k: v for k, v in base.items() if k != key}, cls) == f"{key} is missing"
