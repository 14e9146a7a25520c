"""`memtraffic check RUN --expect FILE` and `memtraffic.testing.assert_traffic` on the committed seed run.

The limits below are written for this test around the seed run's counters (softmax 1048576x2 fp32:
the tiled kernel moves the 8 MiB minimum each way, the one-row-per-program one 16x the loads), so each
check is meant to hold or to fail.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memtraffic.cli import app
from memtraffic.testing import assert_traffic
from memtraffic.vocab.errors import UsageError

H100 = Path(__file__).resolve().parents[2] / "reports" / "h100"
SEED = H100 / "seed_1048576x2_fp32"
SUITE = H100 / "suite_1048576x2_fp32"

HOLDS = """
[[expect]]
match = "softmax_tiled"
max_bytes = { l1_ld = "8.4MB", l1_st = "8.4MB", dram_rd = "8.5MB" }
min_efficiency = { l1_ld = 0.99, l1_st = 0.99 }
max_time = "20us"

[[expect]]
match = "softmax_warp_forward"        # a kernel name: torch_softmax's row
by = "kernel"
max_bytes = { l1 = "34MB" }
"""

FAILS = """
[[expect]]
match = "softmax_naive"
max_bytes = { l1_ld = "9MB", dram_rd = "9MB" }
min_efficiency = { l1_ld = 0.9 }
max_time = 1000000                    # ns

[[expect]]
match = "tiled|torch"
max_time = "5us"
"""


def _file(tmp_path: Path, text: str, name: str = "expect.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _check(*args: str):
    return CliRunner().invoke(app, ["check", *args])


def test_expectations_that_hold_exit_0(tmp_path):
    res = _check(str(SEED), "--expect", str(_file(tmp_path, HOLDS)))
    assert res.exit_code == 0, res.output
    where = f"{tmp_path / 'expect.toml'} [[expect]]"
    assert res.output.splitlines() == [  # what was checked, row by row, as the file names the limits
        "ok softmax_tiled 1048576x2 fp32 BLOCK_M=128: max_bytes l1_ld, l1_st, dram_rd; min_efficiency l1_ld, "
        f"l1_st; max_time ({where} #1)",
        f"ok torch_softmax 1048576x2 fp32 [softmax_warp_forward]: max_bytes l1 ({where} #2)",
        "all 7 checks hold (2 rows)"]


def test_failed_expectations_exit_1_with_a_line_each(tmp_path):
    res = _check(str(SEED), "--expect", str(_file(tmp_path, FAILS)))
    assert res.exit_code == 1, res.output
    lines = res.stdout.splitlines()
    assert lines[-1] == "4 of 6 checks failed (3 rows)"
    # and one summary line on stderr, for a CI log that keeps only stderr
    assert res.stderr == f"error: {SEED} fails {tmp_path / 'expect.toml'}: 4 of 6 checks failed (3 rows)\n"
    where = f"{tmp_path / 'expect.toml'} [[expect]]"
    assert lines[:-1] == [
        f"FAIL softmax_naive 1048576x2 fp32 num_warps=4: l1_ld bytes 134.22 MB, limit 9.00 MB "
        f"({where} #1, match 'softmax_naive')",
        f"FAIL softmax_naive 1048576x2 fp32 num_warps=4: l1_ld efficiency 0.06, at least 0.9 expected "
        f"({where} #1, match 'softmax_naive')",
        "FAIL softmax_tiled 1048576x2 fp32 BLOCK_M=128: time 7.6 us, limit 5.0 us "
        f"({where} #2, match 'tiled|torch')",
        "FAIL torch_softmax 1048576x2 fp32: time 10.1 us, limit 5.0 us "
        f"({where} #2, match 'tiled|torch')",
    ]


def test_json_output_for_ci(tmp_path):
    res = _check(str(SEED), "--expect", str(_file(tmp_path, FAILS)), "--format", "json")
    assert res.exit_code == 1
    out = json.loads(res.stdout)
    assert (out["ok"], out["passed"], out["failed"]) == (False, 2, 4)
    first = out["checks"][0]
    assert {k: first[k] for k in ("check", "value", "limit", "ok")} == {
        "check": "max_bytes.l1_ld", "value": 134_217_728, "limit": 9e6, "ok": False}
    assert {c["check"] for c in out["checks"] if c["ok"]} == {"max_bytes.dram_rd", "max_time"}


def test_no_worse_than_a_baseline(tmp_path):
    """Against the suite run: the shared configs hold within 5%; the seed's BLOCK_M=128 config is matched
    to the suite's one tiled softmax of that shape (its auto block, as `diff` pairs them), whose time it
    does not hold."""
    text = f'baseline = "{SUITE}"\n[[expect]]\nmatch = "."\nno_worse_than = "5%"\n'
    res = _check(str(SEED), "--expect", str(_file(tmp_path, text)))
    assert res.exit_code == 1, res.output
    lines = res.stdout.splitlines()
    assert lines[-1] == "1 of 18 checks failed (3 rows)"
    assert lines[0].startswith("FAIL softmax_tiled 1048576x2 fp32 BLOCK_M=128: time 7.6 us vs 6.7 us in "
                               f"{SUITE} (+14%, at most +5% allowed)")
    # With no allowance the same run fails on ncu's timing noise alone (1%); its bytes hold.
    strict = '[[expect]]\nmatch = "torch"\nno_worse_than = 0.0\n'
    res = _check(str(SEED), "--expect", str(_file(tmp_path, strict, "strict.toml")), "--baseline", str(SUITE))
    assert res.exit_code == 1
    assert res.stdout.splitlines()[0].startswith(
        f"FAIL torch_softmax 1048576x2 fp32: time 10.1 us vs 10.0 us in {SUITE} (+1.0%, at most +0% allowed)")
    assert res.stdout.splitlines()[1] == "1 of 6 checks failed (1 row)"


def _one_line_error(res, *needles: str) -> None:
    assert res.exit_code == 2, res.output
    assert res.output.count("\n") == 1 and res.output.startswith("error: "), res.output
    for needle in needles:
        assert needle in res.output


@pytest.mark.parametrize(("text", "needles"), [
    ("[[expect]\nmatch = 'x'\n", ["is not valid TOML", "line 1"]),
    ("[[expect]]\nmatch = 'tiled'\nmax_byte = { l1_ld = 1 }\n", ["[[expect]] #1", "unknown key 'max_byte'"]),
    ("[[expect]]\nmatch = 'tiled'\nmax_bytes = { l3 = 1 }\n", ["max_bytes.l3: unknown level"]),
    ("[[expect]]\nmatch = 'tiled'\nmax_bytes = { l1_ld = 'lots' }\n", ["max_bytes.l1_ld = 'lots'"]),
    ("[[expect]]\nmatch = 'tiled'\nmax_time = 'soon'\n", ["max_time = 'soon'"]),
    ("[[expect]]\nmatch = 'tiled'\n", ["no limit given"]),
    ("[[expect]]\nmax_time = '1ms'\n", ["'match' (a regex over row names) is required"]),
    ("[[expect]]\nmatch = '('\nmax_time = '1ms'\n", ["is not a regular expression"]),
    ("[[expect]]\nmatch = 'tiled'\nby = 'warp'\nmax_time = '1ms'\n", ["by = 'warp'"]),
    ("limits = 1\n", ["unknown top-level key 'limits'"]),
    ("[[expect]]\nmatch = 'tiled'\nno_worse_than = '5%'\n", ["no_worse_than needs a baseline"]),
    ("[[expect]]\nmatch = 'layernorm'\nmax_time = '1ms'\n",
     ["match 'layernorm' matches no row", "softmax_naive 1048576x2 fp32 num_warps=4"]),
])
def test_malformed_expectations_and_regexes_matching_nothing_are_one_line(tmp_path, text, needles):
    _one_line_error(_check(str(SEED), "--expect", str(_file(tmp_path, text))), *needles)


def test_missing_expectation_file_is_one_line(tmp_path):
    _one_line_error(_check(str(SEED), "--expect", str(tmp_path / "none.toml")), "cannot read")


def test_assert_traffic_passes_and_fails_with_the_failed_lines(tmp_path):
    assert_traffic(SEED, match="softmax_tiled", max_bytes={"l1_ld": "8.4MB"}, min_efficiency={"l1_ld": 0.99})
    assert_traffic(SEED, _file(tmp_path, HOLDS))
    with pytest.raises(AssertionError) as err:
        assert_traffic(SEED, match="naive", max_bytes={"l1_ld": "9MB", "l1_st": "9MB"}, max_time="1ms")
    assert str(err.value).splitlines() == [
        f"2 of 3 traffic checks failed for {SEED}:",
        "FAIL softmax_naive 1048576x2 fp32 num_warps=4: l1_ld bytes 134.22 MB, limit 9.00 MB "
        "(assert_traffic, match 'naive')",
        "FAIL softmax_naive 1048576x2 fp32 num_warps=4: l1_st bytes 33.55 MB, limit 9.00 MB "
        "(assert_traffic, match 'naive')",
    ]
    with pytest.raises(UsageError, match="matches no row"):
        assert_traffic(SEED, match="layernorm", max_time="1ms")


def test_the_readme_quotes_the_example_file_and_its_snippet_runs(monkeypatch):
    """docs/comparing-runs.md shows examples/traffic.toml whole, and its assert_traffic test passes on the
    committed seed run (from the repository root, where its paths point)."""
    import re

    root = Path(__file__).resolve().parents[2]
    readme = (root / "docs" / "comparing-runs.md").read_text()
    example = root / "examples" / "traffic.toml"
    assert example.read_text() in re.findall(r"```toml\n(.*?)```", readme, flags=re.S)
    res = _check(str(SEED), "--expect", str(example))
    assert res.exit_code == 0 and res.output.splitlines()[-1] == "all 12 checks hold (2 rows)", res.output
    assert [line.split(":")[0] for line in res.output.splitlines()[:-1]] == [
        "ok softmax_tiled 1048576x2 fp32 BLOCK_M=128",
        "ok torch_softmax 1048576x2 fp32 [softmax_warp_forward]"]
    (snippet,) = [b for b in re.findall(r"```python\n(.*?)```", readme, flags=re.S) if "assert_traffic" in b]
    monkeypatch.chdir(root)
    scope: dict = {}
    exec(snippet, scope)
    scope["test_tiled_softmax_moves_the_minimum"]()


# --- [floor]: the whole run against its floor (memtraffic.analysis.floor) ------------------------------

EAGER_BLOCK, COMPILED_BLOCK = H100 / "floor_eager_block", H100 / "floor_compiled_block"


def test_floor_limits_gate_the_compiled_block_and_fail_the_eager_one(tmp_path):
    from memtraffic.analysis.floor import floor_run

    eager, compiled = floor_run(EAGER_BLOCK), floor_run(COMPILED_BLOCK)
    between = (eager.recoverable_s + compiled.recoverable_s) / 2 * 1e9  # ns
    ratio = (eager.dram_bytes / eager.fused_min_bytes + compiled.dram_bytes / compiled.fused_min_bytes) / 2
    expect = _file(tmp_path, f"[floor]\nmax_recoverable = {between:.0f}\nmax_over_fused = {ratio:.3f}\n")
    ok = CliRunner().invoke(app, ["check", str(COMPILED_BLOCK), "--expect", str(expect), "--format", "json"])
    assert ok.exit_code == 0, ok.output
    checks = {r["check"]: r for r in json.loads(ok.output)["checks"]}
    assert set(checks) == {"floor.max_recoverable", "floor.max_over_fused"}
    assert checks["floor.max_recoverable"]["value"] == pytest.approx(compiled.recoverable_s * 1e9)
    assert checks["floor.max_over_fused"]["match"] is None and checks["floor.max_over_fused"]["ok"]
    failed = CliRunner().invoke(app, ["check", str(EAGER_BLOCK), "--expect", str(expect)])
    assert failed.exit_code == 1
    assert "recoverable time" in failed.output and "the fused minimum" in failed.output


def test_a_fused_limit_fails_on_a_run_without_a_fused_minimum(tmp_path):
    expect = _file(tmp_path, "[floor]\nmax_over_fused = 1000\n")
    result = CliRunner().invoke(app, ["check", str(H100 / "profile_train_step"), "--expect", str(expect)])
    assert result.exit_code == 1 and "fused minimum not known" in result.output


@pytest.mark.parametrize(("text", "said"), [
    ("[floor]\nmax_recoverable = \"soon\"\n", "max_recoverable"),
    ("[floor]\nmax_over_fused = 0\n", "max_over_fused"),
    ("[floor]\nmax_time = \"1us\"\n", "unknown key 'max_time'"),
    ("floor = 3\n", "must be a table"),
])
def test_a_bad_floor_table_is_a_usage_error(tmp_path, text, said):
    result = CliRunner().invoke(app, ["check", str(EAGER_BLOCK), "--expect", str(_file(tmp_path, text))])
    assert result.exit_code == 2 and said in result.output
