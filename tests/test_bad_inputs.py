"""Bad inputs end in one line on stderr and a non-zero exit; nothing is overwritten without --force.

(Merges of unreadable or truncated reports: tests/runfolder/test_load.py; sweep files:
tests/collect/test_sweep.py.)
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from config_fixture import variant_config
from typer.testing import CliRunner

from memtraffic import __version__
from memtraffic.cli import app

REPO = Path(__file__).resolve().parent.parent
SEED = REPO / "reports" / "h100" / "seed_1048576x2_fp32"

BROKEN_MODEL = '''
from memtraffic.collect.variants import Variant


def _run(x):
    return x.clone()


def _predicted(shape, dtype, params):
    raise ValueError("my model is broken")


VARIANTS = {"broken_model": Variant(name="broken_model", op="softmax", description="a copy", run=_run,
                                    predicted=_predicted)}
'''

# appended to BROKEN_MODEL: a model that returns nothing, and a good variant
MORE_VARIANTS = """
from memtraffic.vocab.ops import OPS

VARIANTS["no_model"] = Variant(name="no_model", op="softmax", description="a copy", run=_run,
                               predicted=lambda shape, dtype, params: None)
VARIANTS["good"] = Variant(name="good", op="softmax", description="a copy", run=_run,
                           predicted=lambda shape, dtype, params: OPS["softmax"].minimum(shape, dtype))
"""


def _one_line(args: list[str], code: int) -> str:
    res = CliRunner().invoke(app, args)
    assert res.exit_code == code, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    return lines[0]


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMTRAFFIC_CACHE", str(tmp_path / "cache"))


def test_version():
    res = CliRunner().invoke(app, ["--version"])
    assert (res.exit_code, res.stdout) == (0, f"memtraffic {__version__}\n")


@pytest.mark.parametrize("value", ["0", "0:0", "0MiB", "softmax=0"])
def test_a_zero_minimum_is_refused(value):
    line = _one_line(["analyze", str(SEED), "--min-bytes", value], 2)
    shown = value.split("=")[-1]
    assert line == (f"error: --min-bytes '{shown}' is no minimum: give the bytes the operation must move "
                    "(more than 0), e.g. 8MiB or 8MiB:8MiB")


def test_a_variant_model_that_raises_is_left_out_of_the_list(tmp_path):
    variants = tmp_path / "mine.py"
    variants.write_text(BROKEN_MODEL + MORE_VARIANTS)
    res = CliRunner().invoke(app, ["list", "--variants", str(variants), "--format", "json"])
    assert res.exit_code == 0, res.output
    assert res.stderr == (
        "warning: variant broken_model: its predicted((1048576, 2), torch.float32, {}) raised ValueError: "
        f"my model is broken at {variants}:10: left out\n"
        "warning: variant no_model: its predicted((1048576, 2), torch.float32, {}) returned None, not a "
        "Traffic: left out\n")
    names = [r["name"] for r in json.loads(res.stdout)]
    assert "good" in names and "softmax_tiled" in names
    assert "broken_model" not in names and "no_model" not in names


def test_a_variant_model_that_raises_is_skipped_by_the_plan(tmp_path):
    variants = tmp_path / "mine.py"
    variants.write_text(BROKEN_MODEL)
    line = _one_line(["list", "--count", "broken_model", "--variants", str(variants)], 2)
    assert line == ("error: nothing to measure: variant broken_model: its predicted((1048576, 2), "
                    f"torch.float32, {{}}) raised ValueError: my model is broken at {variants}:10")
    res = CliRunner().invoke(app, ["list", "--count", "broken_model", "softmax_tiled", "--variants",
                                   str(variants), "--format", "json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout) == [{"variant": "softmax_tiled", "configs": 1, "skipped": 0},
                                      {"variant": "broken_model", "configs": 0, "skipped": 1}]


def test_a_variant_file_that_calls_sys_exit_is_one_line(tmp_path):
    variants = tmp_path / "exits.py"
    variants.write_text("import sys\nsys.exit(3)\n")
    line = _one_line(["list", "--variants", str(variants)], 2)
    assert line == (f"error: --variants {variants} called sys.exit(3) while being imported: a variant file "
                    "only defines VARIANTS")


@pytest.mark.parametrize(("text", "what"), [
    ("not json", "Expecting value, line 1"), ("", "Expecting value, line 1"),
    ("{", "Expecting property name enclosed in double quotes, line 1")])
def test_a_roofs_file_that_is_not_json(tmp_path, text, what):
    roofs = tmp_path / "c.json"
    roofs.write_text(text)
    out = tmp_path / "roof.html"
    line = _one_line(["roofline", str(SEED), "--roofs-file", str(roofs), "--out", str(out)], 1)
    assert line == (f"error: {roofs} is not valid JSON ({what}): give --roofs-file a file written by "
                    "'memtraffic roofs --format json' (or one of reports/roofs/)")
    assert not out.exists()


@pytest.mark.parametrize("command", ["report", "roofline"])
def test_an_existing_output_is_replaced_only_with_force(tmp_path, command):
    out = tmp_path / "page.html"
    out.write_text("mine")
    line = _one_line([command, str(SEED), "--out", str(out)], 2)
    assert line == (f"error: {out} already exists: memtraffic does not overwrite it; give another --out, or "
                    "pass --force to replace it")
    assert out.read_text() == "mine"
    res = CliRunner().invoke(app, [command, str(SEED), "--out", str(out), "--force"])
    assert res.exit_code == 0, res.output
    assert out.read_text().startswith("<!DOCTYPE html>")


def test_outputs_default_to_the_current_folder(tmp_path, monkeypatch):
    run = tmp_path / "run"
    shutil.copytree(SEED, run)
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    before = sorted(p.name for p in run.iterdir())
    for command, name in (("report", "report-run.html"), ("roofline", "roofline-run.html")):
        res = CliRunner().invoke(app, [command, str(run)])
        assert res.exit_code == 0, res.output
        assert res.stdout == f"wrote {name}\n" and (here / name).is_file()
    assert sorted(p.name for p in run.iterdir()) == before
    line = _one_line(["report", str(run)], 2)  # the default exists now
    assert line.startswith("error: report-run.html already exists")


def test_a_folder_as_an_output_file(tmp_path):
    line = _one_line(["roofline", str(SEED), "--png", str(tmp_path)], 2)
    assert line == f"error: --png {tmp_path} is a folder: give a file name, e.g. --png {tmp_path}/figure.png"
    line = _one_line(["report", str(SEED), "--out", str(tmp_path)], 2)
    assert line == f"error: --out {tmp_path} is a folder: give a file name, e.g. --out {tmp_path}/page.html"


def test_a_folder_as_a_variant_file(tmp_path):
    line = _one_line(["list", "--variants", str(tmp_path)], 2)
    assert line == (f"error: --variants {tmp_path} is a folder, not a file: give the Python file that "
                    "defines VARIANTS")


@pytest.mark.parametrize(("name", "text", "message"), [
    ("plan.json", '{"configs": 5}', "configs is an integer, expected a list"),
    ("plan.json", "[1]", "holds a list, expected an object"),
    ("plan.json", json.dumps({"configs": [variant_config(params=3)]}),
     "configs[0].params is an integer, expected an object"),
    ("run.json", '{"reports": 3}', "reports is an integer, expected a list"),
    ("run.json", '{"attempts": [1]}', "attempts[0] is an integer, expected an object"),
])
@pytest.mark.parametrize("command", ["analyze", "lines", "report", "merge"])
def test_a_damaged_run_folder(tmp_path, name, text, message, command):
    run = tmp_path / "run"
    shutil.copytree(SEED, run)
    (run / name).write_text(text)
    args = [command, str(run)] + (["--out", str(tmp_path / "out")] if command in ("report", "merge") else [])
    line = _one_line(args, 1)
    damaged = "the run folder is damaged (restore the file, or measure again)"
    assert line == f"error: {run / name}: {message}: {damaged}"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("args", "code", "message"), [
    (["analyze", "nope"], 1, "nope: no such file or folder"),
    (["analyze", str(SEED), "--group-by", "foo"], 2,
     "unknown --group-by 'foo': use one of range, kernel, op"),
    (["analyze", str(SEED), "--min-bytes", "-5"], 2,
     "malformed size '-5': write bytes as 8388608, 8.39MB or 8MiB"),
    (["lines", str(SEED), "--top", "-3"], 2, "--top -3: give a positive number of lines per kernel"),
    (["report", "nope"], 1, "run folder nope does not exist: give the folder 'memtraffic measure' wrote"),
    (["merge", "nope", "--out", "m"], 2, "nope is not a run folder (no such folder): give folders written by "
                                        "`memtraffic measure`"),
    (["measure", "--rerun", "nope"], 2, "--rerun nope: not a run folder (no such folder)"),
])
def test_more_bad_inputs(args, code, message):
    assert _one_line(args, code) == f"error: {message}"


def test_empty_and_junk_reports(tmp_path):
    empty, junk = tmp_path / "empty.ncu-rep", tmp_path / "junk.ncu-rep"
    empty.touch()
    junk.write_text("junk\n")
    for command in ("analyze", "lines"):
        assert _one_line([command, str(empty)], 1) == (f"error: {empty} is empty (0 bytes): not an Nsight "
                                                      "Compute report")
    assert _one_line(["analyze", str(junk)], 1).startswith(f"error: {junk} holds no profiled kernel")
    folder = tmp_path / "x.ncu-rep"  # a folder named like a report
    folder.mkdir()
    assert _one_line(["analyze", str(folder)], 1) == f"error: {folder}: no .ncu-rep file in this folder"


def test_a_merge_into_a_file(tmp_path):
    out = tmp_path / "f"
    out.write_text("x")
    line = _one_line(["merge", str(SEED), "--out", str(out)], 2)
    assert line == (f"error: {out} already exists and is not empty: memtraffic never overwrites a run; "
                    "choose a new --out folder")
    assert out.read_text() == "x"
