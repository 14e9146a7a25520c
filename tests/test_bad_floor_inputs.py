"""Classes of damaged input to the floor and its neighbours (issue 51), each over copies of committed runs:
an interrupted, cut or report-less run, a junk trace, roofs that are no roofs (cache, --roofs-file), a damaged
results.json with its reports gone, a plan claiming more than any GPU holds, a gate limit of NaN, a bytes
run merged with a traffic run, a saved table whose names are numbers, a trace record without its minimum,
and options that cannot go together. None ends in exit 0 with a number from the damage, none in an
internal error: one line naming the file and field (or both flags), and the exit code.
"""

from __future__ import annotations

import json
import math
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner, Result

from memtraffic.cli import app
from memtraffic.collect import timing_only
from memtraffic.host import roofs_cache
from memtraffic.runfolder.records import TRACE_KEYS, trace_records
from memtraffic.runfolder.trace import read_trace
from memtraffic.vocab.errors import GpuNotFoundError
from memtraffic.vocab.units import LIMIT, OP_BYTES_LIMIT

REPO = Path(__file__).resolve().parent.parent
H100 = REPO / "reports" / "h100"
SEED = H100 / "seed_1048576x2_fp32"  # measure: three softmax variants
BLOCK = H100 / "floor_eager_block"  # profile: a traced transformer block, tensor identities in its trace
TIMED = H100 / "timing_only_layernorm_mlp_adamw"
COMMITTED = REPO / "reports" / "roofs" / "NVIDIA_H100_80GB_HBM3.json"
DAMAGED = "the run folder is damaged (restore the file, or measure again)"
SLOW = settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("MEMTRAFFIC_CACHE", str(tmp_path / "cache"))
    roofs_cache._SET_ASIDE.clear()


def _invoke(args: list) -> Result:
    return CliRunner().invoke(app, [str(a) for a in args])


def _error(args: list, code: int) -> str:
    """The last stderr line of `memtraffic ARGS` (the error; warnings before it), which must exit `code`
    with nothing on stdout."""
    res = _invoke(args)
    assert res.exit_code == code, (res.exit_code, res.output, res.exception)
    assert "internal error" not in res.output and "Traceback" not in res.output, res.output
    assert res.stdout == "", res.stdout
    line = res.stderr.strip().splitlines()[-1]
    assert line.startswith("error: "), res.stderr
    return line


def _copy(run: Path, root: Path) -> Path:
    shutil.copytree(run, root / "run")
    return root / "run"


# --- interrupted, cut, report-less runs; a junk trace -------------------------------------------------------


def _interrupted(run: Path, data: st.DataObject) -> str:
    (run / "plan.json").unlink()  # profile killed before it saved its plan: rebuilt from the trace
    return "traced op calls and regions reached"


def _junk_trace(run: Path, data: st.DataObject) -> str:
    (run / "plan.json").unlink()
    (run / "trace.jsonl").write_text(data.draw(st.text(max_size=40), label="trace"))
    return "its plan or trace lists no config"


def _cut_trace(run: Path, data: st.DataObject) -> str:
    (run / "plan.json").unlink()
    text = (run / "trace.jsonl").read_text()
    (run / "trace.jsonl").write_text(text[:data.draw(st.integers(0, len(text) - 1), label="cut")])
    return "incomplete: "


def _configs_missing(run: Path, data: st.DataObject) -> str:
    """The plan lists configs the report does not hold (a run cut after its first config)."""
    plan = json.loads((run / "plan.json").read_text())
    extra = data.draw(st.integers(1, 3), label="extra")
    for i in range(extra):
        rng = f"mt|softmax_naive|1048576x2|fp32|num_warps={8 << i}"
        plan["configs"].append({**plan["configs"][0], "id": 3 + i, "range": rng,
                                "explicit_params": {"num_warps": 8 << i}})
    (run / "plan.json").write_text(json.dumps(plan))
    return f"is incomplete: 3 of {3 + extra} configs measured ("


def _no_reports(run: Path, data: st.DataObject) -> str:
    for report in run.glob("*.ncu-rep"):
        report.unlink()
    if data.draw(st.booleans(), label="results.json too"):
        (run / "results.json").unlink()
    return "is incomplete: 0 of 3 configs measured"


DAMAGES: dict[str, tuple[Path, Callable[[Path, st.DataObject], str]]] = {
    "interrupted profile": (BLOCK, _interrupted), "junk trace": (BLOCK, _junk_trace),
    "cut trace": (BLOCK, _cut_trace), "configs missing": (SEED, _configs_missing),
    "no reports": (SEED, _no_reports),
}


@SLOW
@given(damage=st.sampled_from(sorted(DAMAGES)), fmt=st.sampled_from(["table", "json"]), data=st.data())
def test_floor_of_a_run_with_gaps_is_incomplete_and_exits_1(damage, fmt, data, tmp_path_factory):
    """floor on an interrupted or cut run, a junk trace, a folder without reports: each gap warned, then
    'incomplete: N of M ...', exit 1 and no number on stdout, as analyze refuses the same run."""
    run, damage_it = DAMAGES[damage]
    copy = _copy(run, tmp_path_factory.mktemp("run"))
    said = damage_it(copy, data)
    line = _error(["floor", copy, "--format", fmt], 1)
    assert line.startswith(f"error: {copy} is incomplete: ") and said in line, line
    assert line.endswith("gaps named above): its floor would be a part's; measure what is missing again, or "
                         "pass --partial for the floor of what is there") or line.endswith(
        "gap named above): its floor would be a part's; measure what is missing again, or pass --partial for "
        "the floor of what is there")


def test_exact_lines_of_an_interrupted_profile_and_a_report_less_run(tmp_path):
    copy = _copy(BLOCK, tmp_path)
    (copy / "plan.json").unlink()
    assert _error(["floor", copy], 1) == (
        f"error: {copy} is incomplete: 93 of 95 traced op calls and regions reached (2 gaps named above): "
        "its floor would be a part's; measure what is missing again, or pass --partial for the floor of what "
        "is there")
    res = _invoke(["floor", copy, "--partial"])  # what is there, each gap a warning
    assert res.exit_code == 0 and res.stdout.startswith("floor: GPU time "), res.output
    assert "warning: the report ends at mt|op|92|aten.native_layer_norm_backward.default" in res.stderr
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("plan.json", "run.json"):
        shutil.copy2(SEED / name, bare / name)
    assert _error(["floor", bare, "--partial"], 1) == (
        f"error: {bare}: no kernel launch with a time in its reports: there is no time to set against a "
        "floor (profile or measure the program again)")  # never an empty table and 'no measured roofs'


# --- roofs that are no roofs -------------------------------------------------------------------------------

ROOF_KEYS = ["dram_Bps", "l2_Bps", "fp32_flops", "bf16_tc_flops", "launch_s", "dram_latency_s"]
NOT_ROOFS = [math.nan, math.inf, -math.inf, -3e12, -1, 0, "fast", None, True, [1]]


def _entry() -> dict:
    return json.loads(COMMITTED.read_text())


def _floor_numbers(run: Path) -> dict:
    res = _invoke(["floor", run, "--format", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


@SLOW
@given(key=st.sampled_from(ROOF_KEYS), value=st.sampled_from(NOT_ROOFS))
def test_a_cache_entry_that_is_no_roofs_is_set_aside_for_the_committed_roofs(key, value, tmp_path):
    """NaN, infinite, negative, zero or non-numeric roofs in the user cache: one warning naming the file,
    device and field; the floor is the one the committed roofs give, never negative."""
    roofs_cache._SET_ASIDE.clear()
    entry = _entry()
    entry["measured"][key] = value
    cache = Path(tmp_path / "cache")
    cache.mkdir(exist_ok=True)
    (cache / "roofs.json").write_text(json.dumps({entry["device"]: entry}))
    res = _invoke(["floor", SEED, "--format", "json"])
    assert res.exit_code == 0, res.output
    warning = res.stderr.strip().splitlines()
    assert len(warning) == 1 and warning[0] == (
        f"warning: {cache / 'roofs.json'}: NVIDIA H100 80GB HBM3: measured.{key} is {value!r}, expected a "
        "number above 0: this cache entry is set aside (the committed roofs stand in, where there are any); "
        "re-measure with 'memtraffic roofs --refresh' on that GPU")
    got = json.loads(res.stdout)
    (cache / "roofs.json").unlink()
    assert got["floor_s"] == _floor_numbers(SEED)["floor_s"] > 0
    assert all(r["floor_s"] >= 0 and r["recoverable_s"] >= 0 for r in got["by_op"])


@pytest.mark.parametrize("key", ["dram_Bps", "l2_Bps", "fp32_flops"])
def test_a_roof_above_twice_the_theoretical_peak_is_no_measurement(key, tmp_path):
    entry = _entry()
    peak = entry["ncu_theoretical"][key]
    entry["measured"][key] = 2.5 * peak
    bad = tmp_path / "roofs.json"
    bad.write_text(json.dumps(entry))
    assert _error(["report", SEED, "--roofs-file", bad, "--out", tmp_path / "r.html"], 1) == (
        f"error: {bad}: NVIDIA H100 80GB HBM3: measured.{key} is {2.5 * peak:.4g}, 2.5x ncu's theoretical "
        f"peak {peak:.4g}: no kernel goes past the peak: re-measure with 'memtraffic roofs --refresh' on "
        "that GPU")
    assert not (tmp_path / "r.html").exists()


@SLOW
@given(key=st.sampled_from(ROOF_KEYS), value=st.sampled_from(NOT_ROOFS))
def test_a_roofs_file_with_a_roof_that_is_no_roof_is_refused(key, value, tmp_path):
    """report --roofs-file with a string, NaN or negative roof: one line naming the file and the field."""
    entry = _entry()
    entry["measured"][key] = value
    bad = tmp_path / "roofs.json"
    bad.write_text(json.dumps(entry))
    assert _error(["report", SEED, "--roofs-file", bad, "--out", tmp_path / "r.html"], 1) == (
        f"error: {bad}: NVIDIA H100 80GB HBM3: measured.{key} is {value!r}, expected a number above 0: "
        "re-measure with 'memtraffic roofs --refresh' on that GPU")


# --- a damaged results.json, its reports gone ---------------------------------------------------------------

RESULT_FIELDS = ["time_ns", "l1_ld_bytes", "dram_rd_bytes", "min_read_bytes", "n_kernels", "eff_l2",
                 "model_flops"]
NOT_COUNTS = [-5000, -1e12, 10**300, "fast", math.nan, math.inf, True, [3]]


def _damaged_results(root: Path, config: int, field: str, value: object) -> Path:
    run = _copy(SEED, root)
    for report in run.glob("*.ncu-rep"):
        report.unlink()
    rows = json.loads((run / "results.json").read_text())
    rows[config][field] = value
    (run / "results.json").write_text(json.dumps(rows))
    return run


@SLOW
@given(config=st.integers(0, 2), field=st.sampled_from(RESULT_FIELDS), value=st.sampled_from(NOT_COUNTS))
def test_a_damaged_results_table_is_refused_naming_its_row_and_field(config, field, value, tmp_path_factory):
    """report (reports gone: the table comes from results.json) and diff of the saved table: one line naming
    results.json, the row and the field; never a page with -5000 ns or a 300-digit byte count."""
    root = tmp_path_factory.mktemp("run")
    run = _damaged_results(root, config, field, value)
    rng = json.loads((SEED / "results.json").read_text())[config]["range"]
    shown = f"{float(value):.3g}" if isinstance(value, int) and len(repr(value)) > 24 else repr(value)
    named = f"error: {run / 'results.json'}: row {config} ({rng!r}) {field} is {shown}, expected "
    line = _error(["report", run, "--out", root / "r.html"], 1)
    assert line.startswith(named) and line.endswith(DAMAGED), line
    assert not (root / "r.html").exists()
    line = _error(["diff", run / "results.json", SEED], 2)
    assert line.startswith(named), line


@pytest.mark.parametrize("value", [7, 1.5, True, [], {}])
def test_a_saved_table_whose_range_is_no_string_is_a_usage_error(value, tmp_path):
    table = tmp_path / "saved.json"
    rows = json.loads((SEED / "results.json").read_text())
    rows[1]["range"] = value
    table.write_text(json.dumps(rows))
    assert _error(["diff", table, SEED], 2) == (
        f"error: {table}: row 1 ('softmax') range is {value!r}, expected a string: give a run folder, a "
        ".ncu-rep, or the output of `memtraffic analyze --format json`")


# --- plans past what a GPU holds; gate limits of NaN -----------------------------------------------------


@SLOW
@given(value=st.integers(OP_BYTES_LIMIT + 1, LIMIT - 1), where=st.sampled_from(["min_read_bytes", "reads"]))
def test_a_plan_claiming_more_than_any_gpu_holds_is_refused(value, where, tmp_path_factory):
    """A minimum or traced read of more than 1 TB (a 1 PB read put the fused minimum above the eager one):
    one line naming plan.json and the field, for floor and check alike."""
    run = _copy(BLOCK, tmp_path_factory.mktemp("run"))
    plan = json.loads((run / "plan.json").read_text())
    at = next(i for i, c in enumerate(plan["configs"]) if c.get("reads"))
    if where == "reads":
        plan["configs"][at]["reads"][0][1] = value
        field = f"configs[{at}].reads[0][1]"
    else:
        plan["configs"][at]["min_read_bytes"] = value
        field = f"configs[{at}].min_read_bytes"
    (run / "plan.json").write_text(json.dumps(plan))
    line = (f"error: {run / 'plan.json'}: {field} is {value}, expected bytes from 0 to 1.00 TB (more than "
            f"any GPU holds): {DAMAGED}")
    assert _error(["floor", run], 1) == line
    expect = run.parent / "expect.toml"
    expect.write_text('[floor]\nmax_over_fused = 100\n')
    assert _error(["check", run, "--expect", expect], 1) == line


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "0", "-1", '"25"'])
def test_a_floor_limit_that_is_no_ratio_is_a_usage_error(value, tmp_path):
    expect = tmp_path / "expect.toml"
    expect.write_text(f"[floor]\nmax_over_fused = {value}\n")
    shown = {"nan": "nan", "inf": "inf", "-inf": "-inf", "0": "0", "-1": "-1", '"25"': "'25'"}[value]
    assert _error(["check", BLOCK, "--expect", expect], 2) == (
        f"error: {expect} [floor] max_over_fused = {shown}: give a ratio such as 25 (measured DRAM bytes "
        "over the fused minimum)")


# --- a bytes run merged with a traffic run ------------------------------------------------------------------


def test_a_bytes_run_merged_with_a_traffic_run_invents_no_sector_efficiency(tmp_path):
    """The bytes set requests no per-instruction bytes: its rows keep no sector efficiency after a merge,
    never 'loads use 0 of every 32 bytes per sector'."""
    bytes_run, traffic_run = H100 / "cluster_8192x32768_bf16", H100 / "lesson03_softmax_pairs_1048576x2_fp32"
    res = _invoke(["merge", bytes_run, traffic_run, "--out", tmp_path / "merged", "--allow-mixed",
                   "--format", "json"])
    assert res.exit_code == 0, res.output
    res = _invoke(["analyze", tmp_path / "merged", "--format", "json"])
    rows = {r["variant"]: r for r in json.loads(res.stdout)}
    assert rows["softmax_cluster"]["sector_eff_ld"] is None and rows["softmax_split"]["sector_eff_ld"] is None
    assert rows["softmax_pairs"]["sector_eff_ld"] == 0.5  # the traffic run's rows keep theirs
    assert not any("use 0 of every" in (r["diagnosis"] or "") for r in rows.values())


# --- the trace ----------------------------------------------------------------------------------------------


@given(missing=st.sampled_from(TRACE_KEYS))
def test_a_trace_record_without_a_key_readers_index_is_left_out_with_why(missing):
    records = read_trace(BLOCK / "trace.jsonl")[:3]
    broken = {k: v for k, v in records[1].items() if k != missing}
    good, skipped = trace_records([records[0], broken, records[2]])
    assert good == [records[0], records[2]]
    assert skipped == [{"range": str(broken.get("range")), "reason": f"trace record: {missing} is missing"}]


def test_ops_leaves_out_a_trace_line_without_its_minimum_and_says_so(tmp_path):
    record = {"range": "mt|region|r|0", "kind": "region", "seq": 0, "pid": 1, "op": "r", "variant": "",
              "shape": [4], "dtype": "fp32", "params": {}, "min_read_bytes": 16, "min_write_bytes": 16,
              "pred_read_bytes": None, "pred_write_bytes": None, "model_flops": None}
    broken = {k: v for k, v in record.items() if k != "min_read_bytes"} | {"seq": 1, "range": "mt|region|s|1"}
    program = tmp_path / "writes_trace.py"
    program.write_text("import json, os\nwith open(os.environ['MEMTRAFFIC_TRACE'], 'a') as f:\n"
                       f"    f.write(json.dumps({record!r}) + '\\n' + json.dumps({broken!r}) + '\\n')\n")
    res = _invoke(["ops", "--", sys.executable, program])
    assert res.exit_code == 0, res.output
    assert res.stderr.strip().splitlines() == [
        "warning: 1 trace record left out (first: mt|region|s|1: trace record: min_read_bytes is missing)"]
    assert "[region] r" in res.stdout and "internal error" not in res.output


# --- options that cannot go together; messages that name the cause ----------------------------------------


def _no_gpu():
    raise GpuNotFoundError("no NVIDIA GPU is visible (nvidia-smi found none)")


RANGE = "range replay measures each op, region or Triton launch range as one unit"
TIMING = "a timing-only run times the kernels without ncu"


@pytest.mark.parametrize(("flags", "line"), [
    (["--replay", "range", "--kernel-name", "softmax"],
     f"error: --replay range and --kernel-name do not go together: {RANGE}, not single kernels (--replay "
     "kernel picks them by name); drop one of them"),
    (["--replay", "range", "--source"],
     f"error: --replay range and --source do not go together: {RANGE}, and ncu takes per-line counters under "
     "kernel replay only; drop one of them"),
    (["--replay", "range", "--launch-count", "5"],
     f"error: --replay range and --launch-count do not go together: {RANGE}, not kernel launches (--replay "
     "kernel counts them); drop one of them"),
    (["--timing-only", "--source"],
     f"error: --timing-only and --source do not go together: {TIMING}, so it has no per-line counters; drop "
     "one of them"),
    (["--timing-only", "--replay", "range"],
     f"error: --timing-only and --replay range do not go together: {TIMING}, so nothing is replayed; drop "
     "one of them"),
    (["--timing-only", "--time-from", "ncu"],
     f"error: --timing-only and --time-from ncu do not go together: {TIMING}, so it has no time of ncu's; "
     "drop one of them"),
    (["--replay", "range", "--time-from", "ncu"],
     "error: --replay range and --time-from ncu do not go together: ncu's range replay gives a range only "
     "its duration, ncu's own work included, never its kernels' time; drop one of them"),
    (["--time-from", "events"], "error: unknown --time-from 'events': use one of program, ncu"),
])
def test_options_that_cannot_go_together_exit_2_before_the_gpu(flags, line, tmp_path, monkeypatch):
    monkeypatch.setattr(timing_only, "gpu_name", _no_gpu)  # a GPU looked at first would say 'no GPU'
    monkeypatch.chdir(tmp_path)
    assert _error(["profile", *flags, "--", "python", "-c", "pass"], 2) == line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"] or not any(tmp_path.iterdir())


def test_measure_timing_only_with_source_exits_2_before_the_gpu(tmp_path, monkeypatch):
    monkeypatch.setattr(timing_only, "gpu_name", _no_gpu)
    monkeypatch.chdir(tmp_path)
    assert _error(["measure", "softmax_tiled", "--timing-only", "--source"], 2) == (
        f"error: --timing-only and --source do not go together: {TIMING}, so it has no per-line counters; "
        "drop one of them")


def test_lines_on_a_timing_only_run_says_it_has_no_counters():
    assert _error(["lines", TIMED], 1) == (
        f"error: {TIMED} is a timing-only run (kernel times, no counters): per-line counters need ncu: "
        "capture it with `memtraffic measure --source`, or plain `ncu --section SourceCounters "
        "--import-source yes -o REPORT your-program`")


@pytest.mark.parametrize("command", [["floor"], ["lines"], ["check", "--expect", "FLOOR"]])
def test_a_saved_table_where_a_run_is_read_is_named_as_one(command, tmp_path):
    """check's [floor], floor and lines read a run's reports: a results.json there is said to be a saved
    table, never 'holds no profiled kernel: is it an Nsight Compute report?'."""
    expect = tmp_path / "expect.toml"
    expect.write_text('[floor]\nmax_recoverable = "1s"\n')
    table = SEED / "results.json"
    args = [expect if a == "FLOOR" else a for a in command]
    assert _error([args[0], table, *args[1:]], 1) == (
        f"error: {table} is a saved table, not a run: give its run folder or a .ncu-rep (only `diff` and the "
        "[[expect]] limits of `check` read a saved table)")



def test_ops_from_first_forward_without_a_module_names_the_cause(tmp_path):
    """A program that runs aten ops but no nn.Module forward: never 'ran no aten op'."""
    program = [sys.executable, "-c", "import torch; torch.ones(2) + 1"]
    line = _error(["ops", "--from-first-forward", "--", *program], 1)
    assert line == (f"error: `{' '.join(program[:2])} 'import torch; torch.ones(2) + 1'` ran no nn.Module "
                    "forward, so --from-first-forward traced nothing: drop --from-first-forward to trace the "
                    "whole program")
