"""Terminal output fits the terminal (100 columns where unknown) by default, with the same cells and words
as --wide (one line each).

Every committed run folder, through the commands that print tables of it: each line of the default
output is at most WIDTH characters, and the words of the two outputs are the same multiset (only the dash
lines under the headers differ, and a word longer than a line is split). text_table's layouts and fit's
wrapping are checked as properties over random tables and texts.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from memtraffic.cli import app
from memtraffic.views.tables import WIDTH, fit, text_table

REPO = Path(__file__).resolve().parents[2]
H100 = REPO / "reports" / "h100"
RUNS = sorted(p.parent for p in H100.rglob("results.json"))
SOURCE_RUNS = sorted({p.parent for p in H100.rglob("*.ncu-rep") if p.parent.name.startswith("source_")})


def _words(text: str) -> Counter:
    return Counter(w for w in text.split() if set(w) != {"-"})


def _chars(text: str) -> Counter:
    """The characters of the text but for spaces and dash lines: equal when only the layout differs."""
    return Counter("".join(w for w in text.split() if set(w) != {"-"}))


def _both(*args: str) -> tuple[str, str]:
    narrow = CliRunner().invoke(app, list(args))
    wide = CliRunner().invoke(app, [*args, "--wide"])
    assert narrow.exit_code == 0 and wide.exit_code == 0, (narrow.output, wide.output)
    return narrow.stdout, wide.stdout


def _fits_and_says_the_same(narrow: str, wide: str) -> None:
    too_long = [line for line in narrow.splitlines() if len(line) > WIDTH]
    assert not too_long, too_long
    assert _chars(narrow) == _chars(wide)


def test_the_committed_runs_are_found():
    assert len(RUNS) >= 8 and SOURCE_RUNS


@pytest.mark.parametrize("run", RUNS, ids=lambda p: p.name)
def test_analyze_fits_120_columns_with_the_same_cells(run):
    narrow, wide = _both("analyze", str(run))
    _fits_and_says_the_same(narrow, wide)
    assert max(map(len, wide.splitlines())) > WIDTH  # these runs' tables are wider than that


@pytest.mark.parametrize("run", ["profile_torch_model", "profile_train_step"])
def test_analyze_per_op_fits(run):
    _fits_and_says_the_same(*_both("analyze", str(H100 / run), "--group-by", "op"))


@pytest.mark.parametrize("run", SOURCE_RUNS, ids=lambda p: p.name)
def test_lines_fit(run):
    narrow, wide = _both("lines", str(run))
    assert not [line for line in narrow.splitlines() if len(line) > WIDTH]
    assert _chars(narrow) == _chars(wide) or "..." in narrow  # source lines may be cut


def test_diff_and_list_fit():
    _fits_and_says_the_same(*_both("diff", str(H100 / "seed_1048576x2_fp32"),
                                   str(H100 / "suite_1048576x2_fp32")))
    _fits_and_says_the_same(*_both("list", "--shape", "4096x4096"))


def test_json_is_never_shortened():
    out = CliRunner().invoke(app, ["analyze", str(H100 / "seed_1048576x2_fp32"), "--format", "json"])
    assert out.exit_code == 0
    assert max(map(len, out.stdout.splitlines())) > WIDTH  # the diagnoses whole, on one line


cell = st.text(alphabet="ab1. /", min_size=0, max_size=30)


@settings(max_examples=60, deadline=None)
@given(headers=st.lists(st.text(alphabet="ab ", min_size=1, max_size=14), min_size=2, max_size=9),
       data=st.data(), width=st.integers(40, 140))
def test_text_table_keeps_every_cell_and_fits_when_it_can(headers, data, width):
    rows = data.draw(st.lists(st.lists(cell, min_size=len(headers), max_size=len(headers)), max_size=6))
    wide, narrow = text_table(headers, rows), text_table(headers, rows, width)
    assert _chars(narrow) == _chars(wide)  # the same cells (a last layout joins numbers to their units)
    stacked_rest = text_table(["", *headers[1:]], [["", *r[1:]] for r in rows])
    if max(map(len, stacked_rest.splitlines())) <= width and all(len(r[0]) <= width for r in rows):
        assert max(map(len, narrow.splitlines())) <= width  # the stacked layout fits, so one layout does


@given(st.text(alphabet="abc \n", max_size=400), st.integers(20, 120))
def test_fit_wraps_prose_within_the_width_without_losing_a_character(text, width):
    out = fit(text, width)
    assert _chars(out) == _chars(text)
    assert all(len(line) <= width for line in out.splitlines())
    if all(len(w) <= width - 8 for w in text.split()) and all(len(x) - len(x.lstrip()) < 4 for x in
                                                               text.splitlines()):
        assert _words(out) == _words(text)  # words that fit a line are never split


def _blocks(text: str) -> list[str]:
    """The output's blocks (split at blank lines), without the floor summary that tops a per-op table."""
    blocks = text.split("\n\n")
    return blocks[1:] if blocks[0].startswith("floor:") else blocks


def _under_table(text: str) -> list[str]:
    """The lines after the table (legend, findings): from the table's blank line on."""
    return "\n\n".join(_blocks(text)[1:]).splitlines()


def test_a_finding_on_many_rows_is_said_once_with_its_count():
    out = CliRunner().invoke(app, ["analyze", str(H100 / "suite_4096x4096")]).stdout
    finding = "DRAM writes below the minimum: the output was still in L2 when the kernel ended"
    assert out.count(finding) == 1
    rows = json.loads(CliRunner().invoke(app, ["analyze", str(H100 / "suite_4096x4096"), "--format",
                                               "json"]).stdout)
    found = sum(f["rule"] == "dram_writes_below_minimum" for r in rows for f in r["findings"])
    assert f"  {found} rows: {finding}" in out.splitlines() and found >= 3  # the JSON keeps every row's


@pytest.mark.parametrize("args", [("analyze", "seed_1048576x2_fp32"), ("analyze", "suite_4096x4096"),
                                  ("analyze", "profile_torch_model", "--group-by", "op"),
                                  ("analyze", "profile_sampled_mlp12", "--group-by", "op")])
def test_every_table_has_its_legend_and_short_lines_under_it(args):
    out = CliRunner().invoke(app, [args[0], str(H100 / args[1]), *args[2:]]).stdout
    under = _under_table(out)
    assert "eff: minimum / bytes moved at that level (1.00: at the minimum; 0.25: 4x the minimum)" in under
    assert any(line.startswith("minimum: ") for line in under)
    if "--group-by" in args:
        assert any(line.startswith("excess: ") for line in under)
        assert any(line.startswith("reused: ") for line in under) == ("reused" in _blocks(out)[0])
    else:
        assert any(line.startswith("sector ld/st: ") for line in under)
    assert not [line for line in under if len(line) > 100]
    assert "range\n" not in out  # the names' header is not alone on a line


def test_the_seed_run_has_no_line_over_120_characters():
    out = CliRunner().invoke(app, ["analyze", str(H100 / "seed_1048576x2_fp32")]).stdout
    assert max(map(len, out.splitlines())) <= 120
