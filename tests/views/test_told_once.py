"""A rule found on several rows is said once (memtraffic.analysis.findings.told_once), in every view: its
numbers that differ as ranges, its advice once per output, no line wider than 100 columns."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memtraffic.analysis.findings import RULES, told_once
from memtraffic.cli import app
from memtraffic.views.tables import findings
from memtraffic.vocab.finding import Finding

H100 = Path(__file__).resolve().parents[2] / "reports" / "h100"


def _requests(what: str, x: float) -> Finding:
    return Finding("redundant_requests", level="L1 ld" if what == "input" else "L1 st",
                   evidence={"what": what, "requested_x": x})


def _grid(waves: float) -> Finding:
    return Finding("grid_short", evidence={"waves_n": waves, "grid_n": 10, "block_n": 128, "sms_n": 132})


def test_numbers_that_differ_are_a_range_and_each_rows_own_value_is_listed():
    rate = [Finding("caches_absorb", level="L1 ld", evidence={"rate_Bps": bps})
            for bps in (1.53e12, 1.49e12, 1.5e12)]
    own, told = told_once([[rate[0]], [rate[1]], [], [rate[2]]])
    assert own == [[], [], [], []] and len(told) == 1
    t = told[0]
    assert t.sentence == ("L1 and L2 absorb the extra loads before DRAM, but time pays (1.49-1.53 TB/s of "
                          "minimum bytes)")
    assert t.rows == (0, 1, 3) and t.varies == ("rate_Bps",)
    assert [(i, values) for i, values, _ in t.per_row()] == [(0, "1.53 TB/s"), (1, "1.49 TB/s"),
                                                             (3, "1.50 TB/s")]


def test_words_that_differ_are_joined_and_a_word_inside_another_is_said_by_it():
    rows = [[_requests("input", 5), _requests("output", 3)], [_requests("input", 2)]]
    own, (t,) = told_once(rows)
    assert own == [[], []]
    assert t.sentence.startswith("each input and output byte requested 2-5x: ")
    assert [values for _, values, _ in t.per_row()] == ["input 5x, output 3x", "input 2x"]
    waste = [Finding("sector_waste", level="L1", evidence={"what": "loads and stores", "used_n": 8}),
             Finding("sector_waste", level="L1 ld", evidence={"what": "loads", "used_n": 27})]
    _, (t,) = told_once([[waste[0]], [waste[1]]])
    assert t.sentence.startswith("loads and stores use 8-27 of every 32-byte sector: ")


def test_a_rule_on_one_row_stays_with_it_and_identical_findings_list_no_values():
    same = Finding("dram_writes_below_minimum", level="DRAM wr",
                   evidence={"dram_bytes": 1.0, "min_bytes": 2.0})
    own, (t,) = told_once([[same, _grid(0.5)], [same]])
    assert own == [[_grid(0.5)], []] and t.varies == () and t.per_row()[0][1] == ""


def test_a_sentence_too_long_for_its_room_falls_back_to_the_rules_group_sentence():
    _, (t,) = told_once([[_grid(0.1)], [_grid(0.5)]], room=20)
    assert t.sentence == RULES["grid_short"].group
    _, (t,) = told_once([[_grid(0.1)], [_grid(0.5)]])
    assert t.sentence == "too few threads to fill the GPU: the grid fills 0.1-0.5 of one wave"


def test_findings_notes_say_a_rule_once_then_each_rows_values_and_with_explain_each_rows_arithmetic():
    rows = [("a", [_grid(0.1)]), ("b", [_grid(0.5)]), ("c", [])]
    assert findings(rows) == [
        "  2 rows: too few threads to fill the GPU: the grid fills 0.1-0.5 of one wave",
        "    a: 0.1", "    b: 0.5"]
    explained = findings(rows, explain=True)
    assert [line for line in explained if line.startswith("      = 10 blocks")] and len(explained) == 5


# --- every view on committed runs at COLUMNS=100 ----------------------------------------------------------

OUTPUTS = [("analyze", "seed_1048576x2_fp32"), ("analyze", "source_seed_1048576x2_fp32"),
           ("analyze", "suite_4096x4096"), ("analyze", "passes_4096x4096"),
           ("analyze", "floor_eager_block"), ("analyze", "floor_compiled_block"),
           ("analyze", "floor_eager_block", "--group-by", "op"), ("floor", "floor_eager_block"),
           ("analyze", "floor_compiled_block", "--group-by", "op"), ("floor", "floor_compiled_block"),
           ("floor", "suite_4096x4096"), ("lines", "source_seed_1048576x2_fp32"),
           ("analyze", "plain_ncu_torch_softmax/profile.ncu-rep", "--min-bytes", "softmax=8MiB:8MiB"),
           ("diff", "floor_eager_block", "@floor_compiled_block"),
           ("diff", "diff_gelu_strided_4096x4096", "@diff_gelu_coalesced_4096x4096"),
           ("diff", "seed_1048576x2_fp32", "@source_seed_1048576x2_fp32")]  # @: a second run


def _paragraphs(text: str) -> list[str]:
    """The output's lines with each wrapped continuation (indented 4 more) joined to the line it wraps."""
    out: list[str] = []
    indents: list[int] = []
    for line in text.splitlines():
        indent = len(line) - len(line.lstrip())
        if out and line.strip() and indent == indents[-1] + 4:
            out[-1] += " " + line.strip()
        else:
            out.append(line)
            indents.append(indent)
    return out


def _clauses(text: str) -> list[str]:
    """The words of the output's sentences: each line cut at ': ', '; ' and ', ', less numbers, names (no
    space; a range's kernel list) and short words, which rows share by right."""
    pieces = [c.strip(" ().").removeprefix("kernels ") for line in _paragraphs(text)
              for c in re.split(r": |; |, ", line)]
    return [c for c in pieces if len(c) >= 20 and " " in c and not re.search(r"\d", c)]


@pytest.mark.parametrize("args", OUTPUTS, ids=" ".join)
def test_no_clause_is_said_twice_and_no_line_is_wider_than_100(args, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    rest = [str(H100 / a[1:]) if a.startswith("@") else a for a in args[2:]]
    result = CliRunner().invoke(app, [args[0], str(H100 / args[1]), *rest])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert [line for line in out.splitlines() if len(line) > 100] == []
    # the table's words (headers, names) repeat by design: the notes after it (a diff has blocks, no table)
    table_end = out.index("\n\n") if args[0] != "diff" else 0
    repeated = {c: n for c, n in Counter(_clauses(out[table_end:])).items() if n > 1}
    assert repeated == {}
