"""The CLI's one error path (memtraffic/cli/exits.py): any input ends in a few plain lines and an exit code.

Usage errors: two lines, exit 2, before any GPU or ncu is looked for; package and file-system errors: one
line; Ctrl-C: 'interrupted', 130; a bug: 'internal error: ...', exit 1 (MEMTRAFFIC_TRACEBACK=1 shows the
traceback). Property tests feed the inputs a user types (sizes, regexes, TOML files, flag values) through
the real CLI and accept only those outcomes. Writes and their disks: tests/runfolder/test_writes.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memtraffic.cli import app
from memtraffic.cli.exits import Cli

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SEED = REPO / "reports" / "h100" / "seed_1048576x2_fp32"
BOX = "╭│╰─"  # rich's panels: never around an error
FEW = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(autouse=True)
def _own_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("MEMTRAFFIC_CACHE", str(tmp_path_factory.mktemp("cache")))
    monkeypatch.delenv("MEMTRAFFIC_TRACEBACK", raising=False)


def _run(args: list[str], **kw):
    return CliRunner().invoke(app, [str(a) for a in args], **kw)


def _clean(res, codes=(0, 1, 2)) -> list[str]:
    """The outcome every input must have: an expected exit code, no traceback, no box, at most two lines of
    error on stderr (each 'error: ...', its 'Try ...' line, or a warning). Returns the error lines."""
    assert res.exit_code in codes, (res.exit_code, res.output)
    assert "Traceback" not in res.output and "internal error" not in res.output, res.output
    assert not any(c in res.stderr for c in BOX), res.stderr
    errors = [line for line in res.stderr.splitlines() if not line.startswith(("warning: ", "note: "))]
    if res.exit_code:
        assert 1 <= len(errors) <= 2 and errors[0].startswith("error: "), res.stderr
        assert len(errors) == 1 or errors[1].startswith("Try 'memtraffic"), res.stderr
    return errors


# --- usage errors: two plain lines, exit 2 ------------------------------------------------------------------


@pytest.mark.parametrize(("args", "first", "where"), [
    (["analyze"], "error: missing argument 'run'", "memtraffic analyze"),  # the usage line's RUN
    (["analyze", str(SEED), "--colour"], "error: no such option: --colour", "memtraffic analyze"),
    (["lines", str(SEED), "--top", "x"], "error: invalid value for '--top': ", "memtraffic lines"),
    (["bench", "--budget", "lots"], "error: invalid value for '--budget': ", "memtraffic bench"),
    (["analyze", str(SEED), "--min-bytes"], "error: option '--min-bytes' requires an argument",
     "memtraffic analyze"),
    (["nope"], "error: no such command 'nope'", "memtraffic"),
])
def test_a_usage_error_is_two_plain_lines(args, first, where):
    """click's own words (their case and the parser's wording of a bad number vary with typer's version)."""
    res = _run(args)
    assert res.exit_code == 2, res.output
    lines = res.stderr.splitlines()
    assert len(lines) == 2 and lines[1] == f"Try '{where} --help' for help.", res.stderr
    if first.endswith(": "):
        assert lines[0].startswith(first) and "\n" not in lines[0], lines
    else:
        assert lines[0].lower() == first, lines
    assert res.stdout == ""


def test_measure_answers_about_its_flags_before_looking_for_ncu(monkeypatch):
    monkeypatch.setenv("MEMTRAFFIC_NCU", "/nonexistent/ncu")  # were ncu looked for first, this would answer
    for args, line in [
        (["measure", "--gpus", "junk"], "error: bad --gpus 'junk': write all, or GPU indices like 0,1"),
        (["measure", "softmax_tiled", "--gpus", "1,x"], "error: bad --gpus '1,x': write all, or GPU indices "
                                                           "like 0,1"),
        (["measure", "softmax_tiled", "--out", str(SEED)],
         f"error: {SEED} already exists and is not empty: memtraffic never overwrites a run; choose a new "
         "--out folder"),
    ]:
        res = _run(args)
        assert (res.exit_code, res.stderr) == (2, line + "\n"), res.output


@pytest.mark.parametrize("budget", ["-1", "0", "nan", "inf"])
def test_bench_answers_about_budget_before_looking_for_a_gpu(budget):
    res = _run(["bench", "--budget", budget])
    assert res.exit_code == 2, res.output
    shown = {"-1": "-1.0", "0": "0.0"}.get(budget, budget)
    assert res.stderr == (f"error: --budget {shown}: give the seconds of timed repetitions per config, more "
                          "than 0 (e.g. 0.3)\n")


def test_bench_csv_is_a_line_per_row(monkeypatch):
    from memtraffic.probes import bench

    rows = [{"variant": "softmax_tiled", "shape": "8x8", "dtype": "fp32", "status": "ok", "time_ns": 2000.0,
             "copy_runs_ns": [1.0, 2.0]},
            {"variant": "softmax_naive", "shape": "8x8", "dtype": "fp32", "status": "failed",
             "error": "boom"}]
    monkeypatch.setattr(bench, "run_bench", lambda *a, **k: {"environment": {}, "date": "d", "rows": rows})
    res = _run(["bench", "softmax_tiled", "softmax_naive", "--format", "csv"])
    assert res.exit_code == 0, res.output
    assert res.stdout.splitlines() == [
        "variant,shape,dtype,status,time_ns,copy_runs_ns,error",
        'softmax_tiled,8x8,fp32,ok,2000.0,"[1.0, 2.0]",',
        "softmax_naive,8x8,fp32,failed,,,boom",
    ]


def test_every_help_text_shows_its_brackets():
    """rich markup eats '[params]' unless escaped: every bracket a help text holds is shown by --help."""
    from typer.main import get_command

    group = get_command(app)
    assert isinstance(group, Cli)
    for name, command in group.commands.items():
        texts = [command.help or ""] + [getattr(p, "help", None) or "" for p in command.params]
        shown = " ".join(_run([name, "--help"], terminal_width=400).stdout.split())
        for text in texts:
            for token in re.findall(r"\\?\[[^\]\s]*\]+", text):
                assert token.replace("\\", "") in shown, (name, token)


# --- package errors, bugs, Ctrl-C ---------------------------------------------------------------------------


def test_a_bug_is_one_line_and_the_traceback_is_on_request(monkeypatch):
    from memtraffic import api as analyze  # the command's work

    def broken(*args, **kwargs):
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(analyze, "analyze_path", broken)
    res = _run(["analyze", SEED])
    assert (res.exit_code, res.stderr) == (1, "internal error: RuntimeError: boom (set "
                                              "MEMTRAFFIC_TRACEBACK=1 for the traceback, and report it)\n")
    res = _run(["analyze", SEED], env={"MEMTRAFFIC_TRACEBACK": "1"})
    assert res.exit_code == 1
    assert res.stderr.startswith("Traceback (most recent call last):")
    assert res.stderr.rstrip().endswith("RuntimeError: boom\nsecond line")


def test_ctrl_c_is_interrupted_130(monkeypatch):
    from memtraffic import api as analyze  # the command's work

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(analyze, "analyze_path", stopped)
    res = _run(["analyze", SEED])
    assert (res.exit_code, res.stderr) == (130, "interrupted\n")


def test_a_deleted_working_folder_is_one_line(tmp_path, monkeypatch):
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    for args in (["analyze", SEED], ["report", SEED], ["list"]):
        res = _run(args)
        assert (res.exit_code, res.stderr) == (1, "error: the current folder no longer exists (deleted?): "
                                                  "cd into an existing folder and run again\n"), args


def test_a_program_that_cannot_run_is_one_line(tmp_path):
    script = tmp_path / "script.sh"
    script.write_text("echo hi\n")
    for args, line in [
        (["profile", "--", str(script)],
         f"error: {script} is not executable: chmod +x it, or run it through its interpreter"),
        (["profile", "--", str(tmp_path / "none")],
         f"error: command not found: {tmp_path / 'none'} (check the name, or give its full path)"),
        (["ops", "--", str(tmp_path / "none")], f"error: command not found: '{tmp_path / 'none'}' is not on "
                                                 "PATH or not an executable file"),
    ]:
        res = _run(args)
        assert (res.exit_code, res.stderr) == (2, line + "\n"), res.output


# --- property tests: what a user types ----------------------------------------------------------------------

SIZE_TEXT = st.one_of(
    st.text(max_size=12),
    st.from_regex(r"\A\s?[0-9]{0,12}\.?[0-9]{0,3}\s?([kKmMgGtT]i?)?[bB]?[a-zA-Z:=x]{0,2}\Z"),
    st.builds(lambda n, unit: "9" * n + unit, st.integers(min_value=1, max_value=400),  # up to overflow
              st.sampled_from(["", "MiB", "kB", "TB", "MiBx", ":1"])),
)


@FEW
@given(size=SIZE_TEXT)
def test_any_size_string_is_a_minimum_or_one_line(size):
    errors = _clean(_run(["analyze", SEED, "--min-bytes", size, "--format", "json"]))
    assert not errors or errors[0].startswith(("error: malformed", "error: size", "error: --min-bytes")), \
        errors


REGEX_TEXT = st.one_of(
    st.text(alphabet="()[]{}*+?|\\^$.a1,:-", max_size=20),
    st.integers(min_value=0, max_value=2**70).map(lambda n: f"a{{{n}}}"),
    st.integers(min_value=1, max_value=3000).map(lambda n: "(" * n + ")" * n),
)


@FEW
@given(pattern=REGEX_TEXT)
def test_any_regex_is_a_rule_or_one_line(pattern):
    _clean(_run(["analyze", SEED, "--min-bytes", f"{pattern}=8MiB", "--format", "json"]))


@FEW
@given(pattern=REGEX_TEXT)
def test_any_check_match_is_a_check_or_one_line(tmp_path, pattern):
    expect = tmp_path / "e.toml"
    expect.write_text(f"[[expect]]\nmatch = {json.dumps(pattern)}\nmax_time = \"1s\"\n")
    _clean(_run(["check", SEED, "--expect", expect]))


TOML_BYTES = st.one_of(
    st.binary(max_size=64),
    st.text(alphabet="[]=\"'{},.\n abc1", max_size=40).map(str.encode),
    st.integers(min_value=1, max_value=5000).map(lambda n: b"x = " + b"[" * n + b"]" * n),
)


@FEW
@given(data=TOML_BYTES)
def test_any_expectation_file_is_a_check_or_one_line(tmp_path, data):
    expect = tmp_path / "e.toml"
    expect.write_bytes(data)
    _clean(_run(["check", SEED, "--expect", expect]))


@FEW
@given(data=TOML_BYTES)
def test_any_sweep_file_is_a_count_or_one_line(tmp_path, data):
    sweep = tmp_path / "s.toml"
    sweep.write_bytes(data)
    _clean(_run(["list", "--count", "--sweep", sweep]))


FLAG_VALUE = st.one_of(st.text(max_size=8), st.integers(min_value=-2**70, max_value=2**70).map(str),
                       st.sampled_from(["nan", "inf", "-inf", "1e999", "0x10", "", " ", "1_0"]))


@FEW
@given(option=st.sampled_from([("lines", "--top"), ("analyze", "--group-by"), ("analyze", "--format"),
                               ("diff", "--time-tolerance"), ("diff", "--group-by")]), value=FLAG_VALUE)
def test_any_flag_value_is_accepted_or_one_line(option, value):
    command, flag = option
    runs = [SEED, SEED] if command == "diff" else [SEED]
    _clean(_run([command, *runs, flag, value]))


@FEW
@given(option=st.sampled_from(["--shape", "--dtype", "--param"]), value=FLAG_VALUE)
def test_any_grid_value_is_a_count_or_one_line(option, value):
    _clean(_run(["list", "--count", "softmax_tiled", option, value]))


@FEW
@given(option=st.sampled_from([
    ("measure", "softmax_tiled", "--metrics"), ("measure", "softmax_tiled", "--gpus"),
    ("measure", "softmax_tiled", "--shard"), ("measure", "softmax_tiled", "--clock-control"),
    ("measure", "softmax_tiled", "--cache-control"), ("profile", "--launch-count"),
    ("profile", "--launch-skip"),
    ("profile", "--target-processes"), ("profile", "--metrics"), ("profile", "--profile-from-start"),
    ("bench", "--budget"), ("bench", "--dtype"), ("bench", "--shape")]), value=FLAG_VALUE)
def test_any_measuring_flag_is_refused_before_ncu_or_reaches_it(monkeypatch, option, value):
    """Flags first, then the machine: a bad value is a usage error (2); a good one gets as far as looking
    for ncu (here: not there) or a GPU (none here), never further and never a traceback."""
    monkeypatch.setenv("MEMTRAFFIC_NCU", "/nonexistent/ncu")
    *command, flag = option
    tail = ["--", "true"] if command[0] == "profile" else []
    res = _run([*command, flag, value, *tail])
    errors = _clean(res, codes=(1, 2))
    if res.exit_code == 1:
        assert errors[0] in (
            "error: MEMTRAFFIC_NCU=/nonexistent/ncu is not an executable file: point it at the ncu binary",
            "error: no CUDA GPU is visible: bench needs one; `memtraffic analyze` reads existing runs on any "
            "machine"), errors
