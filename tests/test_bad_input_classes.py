"""Classes of bad input (issue 44), each over what a user can damage, on copies of real committed runs:
special files where a file or folder is expected, numbers out of range from the command line and from a
run folder, a cut report beside a whole one, GPU commands on a machine without a GPU, merge and cache
edge cases, a failing gate. Each ends in one line with the right exit code (2 for usage errors), within
20 s a command (a SIGALRM guard: a FIFO opened by mistake fails the test instead of hanging it), with no
traceback or 'internal error', and writes nothing where it should not.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import socket
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from report_bytes import report_bytes
from typer.testing import CliRunner, Result

from memtraffic.cli import app
from memtraffic.collect import timing_only
from memtraffic.host import cache as host_cache
from memtraffic.vocab.errors import GpuNotFoundError, UsageError
from memtraffic.vocab.files import path_kind
from memtraffic.vocab.ops import parse_shape
from memtraffic.vocab.units import LIMIT, OP_BYTES_LIMIT, parse_size

REPO = Path(__file__).resolve().parent.parent
SEED = REPO / "reports" / "h100" / "seed_1048576x2_fp32"
REPORT = SEED / "profile.ncu-rep"
DAMAGED = "the run folder is damaged (restore the file, or measure again)"
SLOW = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("MEMTRAFFIC_CACHE", str(tmp_path / "cache"))


def _invoke(args: list) -> Result:
    """`memtraffic ARGS` in this process, stopped after 20 s (a FIFO opened by mistake would block)."""
    def stop(signum, frame):
        raise TimeoutError("no answer within 20 s: something blocks (a FIFO opened?)")
    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(20)
    try:
        return CliRunner().invoke(app, [str(a) for a in args])
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _run(args: list, code: int) -> str:
    """The one stderr line of `memtraffic ARGS`, which must exit with `code`."""
    res = _invoke(args)
    assert res.exit_code == code, (res.exit_code, res.output, res.exception)
    assert "internal error" not in res.output and "Traceback" not in res.output, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    return lines[0]


# --- special files -----------------------------------------------------------------------------------------

KINDS = {
    "fifo": "a FIFO (named pipe)",
    "folder": "a folder",
    "socket": "a socket",
    "device": "a character device",
    "loop": "a symbolic link loop",
    "dangling": "a dangling symbolic link (to nowhere)",
}


def _make(path: Path, kind: str) -> None:
    """Put a `kind` (KINDS) at path, where nothing is."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "socket":
        with socket.socket(socket.AF_UNIX) as s:
            s.bind(str(path))
    elif kind == "device":
        path.symlink_to("/dev/null")
    elif kind == "loop":
        path.symlink_to(path.name)
    elif kind == "dangling":
        path.symlink_to("nowhere")


def _short_tmp() -> Path:
    """A folder with a short path (a socket's path must fit 108 bytes)."""
    return Path(tempfile.mkdtemp(prefix="mt44-", dir="/tmp"))


@pytest.mark.parametrize("kind", list(KINDS))
def test_path_kind_names_what_is_there_without_opening_it(kind):
    root = _short_tmp()
    try:
        _make(root / "x", kind)
        assert path_kind(root / "x") == ("folder" if kind == "folder" else KINDS[kind])
        assert (path_kind(root / "none"), path_kind(root), path_kind(REPORT)) == ("missing", "folder", "file")
    finally:
        shutil.rmtree(root)


@SLOW
@given(kind=st.sampled_from(list(KINDS)), name=st.sampled_from(["plan.json", "run.json", "profile.ncu-rep"]),
       command=st.sampled_from(["analyze", "lines", "report", "merge", "roofline"]))
def test_a_run_file_that_is_no_file_is_named(kind, name, command):
    """plan.json, run.json or the report of a run is a FIFO, folder, socket, device, link loop or dangling
    link: one line naming it and what it is, exit 1; never 'no plan' nor 'missing (listed in run.json)'."""
    root = _short_tmp()
    try:
        run = root / "run"
        shutil.copytree(SEED, run)
        (run / name).unlink()
        _make(run / name, kind)
        out = root / "out"
        args = [command, run] + (["--out", out] if command in ("report", "merge", "roofline") else [])
        line = _run(args, 1)
        assert line == f"error: {run / name} is {KINDS[kind]}, not a file: {DAMAGED}"
        assert not out.exists()
    finally:
        shutil.rmtree(root)


@SLOW
@given(kind=st.sampled_from(list(KINDS)))
def test_a_report_found_by_its_name_that_is_no_file_is_named(kind):
    """A folder without run.json: its *.ncu-rep entries are its reports; one that is no file is named, not
    called missing."""
    root = _short_tmp()
    try:
        shutil.copy2(REPORT, root / "a.ncu-rep")
        _make(root / "b.ncu-rep", kind)
        line = _run(["analyze", root], 1)
        assert line == (f"error: {root / 'b.ncu-rep'} is {KINDS[kind]}, not a file: give a .ncu-rep report, "
                        "or move it out of the run")
    finally:
        shutil.rmtree(root)


@SLOW
@given(kind=st.sampled_from(list(KINDS)),
       where=st.sampled_from(["expect", "sweep", "variants", "variants-count", "report-arg"]))
def test_a_command_line_file_that_is_no_file_is_a_usage_error(kind, where):
    """A gate TOML, a sweep TOML or a variant file that is a FIFO (it used to block forever), a folder, a
    socket...: one line, exit 2 (a command-line value); nothing is created."""
    root = _short_tmp()
    try:
        path = root / "given"
        _make(path, kind)
        shown = KINDS[kind]
        args, code, line = {
            "expect": (["check", SEED, "--expect", path], 2,
                       f"error: {path} is {shown}, not a file: give the expectation file as a TOML file"),
            "sweep": (["measure", "--sweep", path, "--out", root / "out"], 2,
                      f"error: {path} is {shown}, not a file: see `memtraffic measure --help`"),
            "variants": (["list", "--variants", path], 2,
                         f"error: --variants {path} is {shown}, not a file: give the Python file that "
                         "defines VARIANTS"),
            "variants-count": (["list", "--count", "x", "--variants", path], 2,
                               f"error: --variants {path} is {shown}, not a file: give the Python file that "
                               "defines VARIANTS"),
            "report-arg": (["analyze", path], 1,
                           f"error: {path} is {shown}: give a run folder or a .ncu-rep report"),
        }[where]
        if where == "report-arg" and kind == "folder":
            return  # a folder is what analyze takes
        assert _run(args, code) == line
        assert sorted(p.name for p in root.iterdir()) == ["given"]
    finally:
        shutil.rmtree(root)


@SLOW
@given(kind=st.sampled_from(list(KINDS)))
def test_a_log_that_is_no_file_stops_a_merge_before_it_writes(kind):
    """merge copies each run's ncu*.log: a FIFO there would block the copy; it is named instead."""
    root = _short_tmp()
    try:
        run = root / "run"
        shutil.copytree(SEED, run)
        (run / "ncu.log").unlink()
        _make(run / "ncu.log", kind)
        out = root / "out"
        line = _run(["merge", run, "--out", out], 1)
        assert line == (f"error: {run / 'ncu.log'} is {KINDS[kind]}, not a file: the run folder is damaged "
                        "(restore the file, or leave the run out)")
        assert sorted(p.name for p in root.iterdir()) == ["run"]
    finally:
        shutil.rmtree(root)


@pytest.mark.parametrize("kind", ["fifo", "folder", "loop"])
def test_a_roofs_file_that_is_no_file_is_a_usage_error(kind, tmp_path):
    given = tmp_path / "c.json"
    _make(given, kind)
    out = tmp_path / "roof.html"
    line = _run(["roofline", SEED, "--roofs-file", given, "--out", out], 2)
    shown = "a folder" if kind == "folder" else KINDS[kind]
    assert line == (f"error: --roofs-file {given} is {shown}, not a file: give a file written by 'memtraffic "
                    "roofs --format json'")
    assert not out.exists()


# --- numbers -----------------------------------------------------------------------------------------------

SUFFIXES = ["", "b", "B", "k", "kb", "KiB", "MB", "MiB", "gb", "GiB", "t", "TiB", "i", "ib", "q", "e3", "x"]


@settings(max_examples=400, deadline=None)
@given(number=st.one_of(st.integers(-10, 10**25).map(str), st.floats(allow_nan=True).map(repr),
                        st.sampled_from(["nan", "inf", "-0", "1e400", ".5", "5.", "", " "])),
       suffix=st.sampled_from(SUFFIXES))
def test_a_size_is_a_size_or_one_usage_error(number, suffix):
    """Any text: a whole number of bytes in [0, 2**63), or a UsageError (no KeyError for '8i')."""
    try:
        value = parse_size(number + suffix)
    except UsageError as err:
        assert str(err).startswith(("malformed size", "size ")), err
        return
    assert isinstance(value, int) and 0 <= value < LIMIT


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(-5, 2**70), min_size=1, max_size=4))
def test_a_shape_is_positive_and_fits_64_bits_or_one_usage_error(extents):
    text = "x".join(map(str, extents))
    try:
        shape = parse_shape(text)
    except UsageError as err:
        assert str(err).startswith(("malformed shape", "shape ")), err
        assert len(extents) < 2 or min(extents) <= 0 or math.prod(extents) * 8 >= LIMIT
        return
    assert all(s > 0 for s in shape) and math.prod(shape) * 8 < LIMIT


@pytest.mark.parametrize(("args", "line"), [
    (["list", "--shape", "99999999999x99999999999"],
     "error: shape '99999999999x99999999999' is too large: the product of its extents times 8 bytes "
     "reaches 2**63"),
    (["analyze", SEED, "--min-bytes", "8i"],
     "error: malformed size '8i': write bytes as 8388608, 8.39MB or 8MiB"),
    (["analyze", SEED, "--min-bytes", "9223372036854775808"],
     "error: size '9223372036854775808' is too large (2**63 bytes or more): write bytes as 8388608, 8.39MB "
     "or 8MiB"),
    (["profile", "--every-launch", "--distinct", "3", "--", "python", "-c", "pass"],
     "error: --every-launch measures every launch, --distinct 3 the first 3 calls of each signature: give "
     "one of them"),
])
def test_numbers_and_flags_on_the_command_line_are_usage_errors(args, line, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert _run(args, 2) == line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"] or not any(tmp_path.iterdir())


BAD_NUMBERS = [-1, -(2**40), 2**63, 2**64, math.nan, math.inf, -math.inf, -0.5]


@SLOW
@given(field=st.sampled_from(["shape", "min_read_bytes", "min_write_bytes", "pred_read_bytes",
                              "model_flops"]),
       value=st.sampled_from(BAD_NUMBERS), config=st.integers(0, 2))
def test_a_plan_number_out_of_range_is_named(field, value, config):
    """A plan.json number out of range (a negative dimension, negative or NaN bytes, FLOPs past 2**63): one
    line naming the file and field, exit 1, never a negative efficiency."""
    root = _short_tmp()
    try:
        run = root / "run"
        shutil.copytree(SEED, run)
        plan = json.loads((run / "plan.json").read_text())
        cfg = plan["configs"][config]
        if field == "shape":
            if isinstance(value, float):
                value = -7  # a float dimension is a type error, said elsewhere
            cfg["shape"][0] = value
            where = "shape[0]"
        else:
            cfg[field] = value
            where = field
        (run / "plan.json").write_text(json.dumps(plan))  # NaN and Infinity as Python's json writes them
        line = _run(["analyze", run], 1)
        named = f"error: {run / 'plan.json'}: configs[{config}].{where} is {value!r}, expected "
        assert line.startswith(named)
        assert line.endswith(f"from 0 to below 2**63: {DAMAGED}")
    finally:
        shutil.rmtree(root)


@SLOW
@given(value=st.integers(0, OP_BYTES_LIMIT), field=st.sampled_from(["min_read_bytes", "min_write_bytes"]))
def test_any_plan_minimum_in_range_gives_no_negative_or_nan_efficiency(value, field):
    root = _short_tmp()
    try:
        run = root / "run"
        shutil.copytree(SEED, run)
        plan = json.loads((run / "plan.json").read_text())
        for cfg in plan["configs"]:
            cfg[field] = value
        (run / "plan.json").write_text(json.dumps(plan))
        res = _invoke(["analyze", str(run), "--format", "json"])
        assert res.exit_code == 0, res.output
        for row in json.loads(res.stdout):
            for key, eff in row.items():
                if key.startswith("eff_"):
                    assert eff is None or (math.isfinite(eff) and eff >= 0), (key, eff)
    finally:
        shutil.rmtree(root)


@SLOW
@given(limit=st.sampled_from(["max_bytes = { l1_ld = nan }", "max_bytes = { dram = inf }",
                              "min_efficiency = { l1_ld = nan }", "min_efficiency = { dram = inf }",
                              "min_efficiency = { l2 = -0.5 }", "max_time = nan", "max_time = inf",
                              "max_time = \"1e999us\"", "max_time = -1", "no_worse_than = nan",
                              "no_worse_than = inf", "max_bytes = { l1 = 1e19 }"]))
def test_a_gate_limit_that_is_no_number_is_a_usage_error(limit):
    """A NaN, infinite or negative limit in a gate can hold for no value, or fail for none: refused."""
    root = _short_tmp()
    try:
        expect = root / "expect.toml"
        expect.write_text(f'[[expect]]\nmatch = "."\n{limit}\n')
        line = _run(["check", SEED, "--expect", expect], 2)
        assert line.startswith(f"error: {expect} [[expect]] #1 ") or line.startswith("error: no_worse_than")
    finally:
        shutil.rmtree(root)


# --- a cut report beside a whole one -----------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(cut=st.integers(0, len(report_bytes(REPORT)) - 1))
def test_a_cut_report_beside_a_whole_one_is_named(cut):
    """A folder of one whole report and one cut anywhere: never a silent pass; the cut one is named."""
    root = _short_tmp()
    try:
        shutil.copy2(REPORT, root / "a.ncu-rep")
        (root / "b.ncu-rep").write_bytes(report_bytes(REPORT)[:cut])
        res = _invoke(["analyze", str(root)])
        assert res.exit_code == 1, res.output
        assert "internal error" not in res.output and "Traceback" not in res.output
        assert str(root / "b.ncu-rep") in res.stderr
    finally:
        shutil.rmtree(root)


# --- GPU commands without a GPU ----------------------------------------------------------------------------


def _no_gpu():
    raise GpuNotFoundError("no NVIDIA GPU is visible (nvidia-smi found none)")


@pytest.mark.parametrize("args", [
    ["measure", "softmax_tiled", "--timing-only"],
    ["measure", "softmax_tiled", "--timing-only", "--out", "mine"],
    ["profile", "--timing-only", "--", "python", "-c", "import torch"],
    ["profile", "--timing-only", "--out", "mine", "--", "python", "-c", "import torch"],
])
def test_timing_only_without_a_gpu_says_so_before_it_creates_anything(args, tmp_path, monkeypatch):
    """No GPU: one line, exit 1, and no reports/runs/ or --out folder made (no run in Triton's interpreter,
    no 'recorded 0 ops')."""
    monkeypatch.setattr(timing_only, "gpu_name", _no_gpu)
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    line = _run(args, 1)
    assert line.startswith("error: no NVIDIA GPU is visible (nvidia-smi found none): timing-only runs time "
                           "CUDA kernels, so they need one")
    assert not any(here.iterdir())


@pytest.mark.parametrize(("args", "line"), [
    (["profile", "--timing-only", "--distinct", "-3", "--", "python", "-c", "pass"],
     "error: --distinct -3: give how many calls of each signature to measure (>= 1), or --every-launch"),
    (["profile", "--timing-only", "--launch-count", "0", "--", "python", "-c", "pass"],
     "error: --launch-count 0: give how many kernel launches to profile (>= 1)"),
    (["measure", "softmax_tiled", "--timing-only", "--shard", "3/2"],
     "error: bad --shard '3/2': write I/N with 1 <= I <= N, e.g. --shard 2/4 (with Slurm: --shard "
     "$SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT)"),
])
def test_flags_are_checked_before_the_gpu(args, line, tmp_path, monkeypatch):
    monkeypatch.setattr(timing_only, "gpu_name", _no_gpu)
    monkeypatch.chdir(tmp_path)
    assert _run(args, 2) == line


# --- merge, cache, gate ------------------------------------------------------------------------------------


@pytest.mark.parametrize("sub", ["sub", "a/b", "."])
def test_merge_into_a_folder_inside_an_input_is_refused(sub, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(SEED, run)
    before = sorted(p.relative_to(run) for p in run.rglob("*"))
    out = run / sub
    line = _run(["merge", run, "--out", out], 2)
    assert line in (f"error: --out {out} is inside the run {run}: merge into a new folder outside the runs",
                    f"error: --out {out} is one of the runs: merge into a new folder")
    assert sorted(p.relative_to(run) for p in run.rglob("*")) == before


def test_an_unusable_cache_is_skipped_with_one_warning(tmp_path, monkeypatch):
    """The cache folder is a file (so nothing can be made in it): the reports are read all the same, and
    said once, not once per report."""
    cache = tmp_path / "not-a-folder"
    cache.write_text("x")
    monkeypatch.setenv("MEMTRAFFIC_CACHE", str(cache))
    monkeypatch.setattr(host_cache, "_cache_said", False)
    lone = tmp_path / "lone"
    lone.mkdir()
    for name in ("a.ncu-rep", "b.ncu-rep"):  # no kernel table beside them: the cache is wanted twice
        shutil.copy2(REPORT, lone / name)
    res = _invoke(["analyze", str(lone)])
    assert res.exit_code == 0, res.output
    warned = [line for line in res.stderr.splitlines() if "cache folder" in line]
    assert len(warned) == 1, warned
    assert warned[0].startswith(f"warning: the cache folder {cache} cannot be used (")
    assert warned[0].endswith("): what it would keep is read again each time; set MEMTRAFFIC_CACHE to a "
                              "folder you can write")
    assert cache.read_text() == "x"


def test_a_failing_gate_says_so_on_stderr_too(tmp_path):
    expect = tmp_path / "expect.toml"
    expect.write_text('[[expect]]\nmatch = "."\nmax_time = "1ns"\n')
    res = _invoke(["check", str(SEED), "--expect", str(expect)])
    assert res.exit_code == 1
    assert res.stdout.splitlines()[-1] == "3 of 3 checks failed (3 rows)"
    assert res.stderr == f"error: {SEED} fails {expect}: 3 of 3 checks failed (3 rows)\n"
