"""The Finding record and the one registry of rules (memtraffic.analysis.findings.RULES): records carry
numbers, the registry's templates make the words, and no code reads the words back."""

from __future__ import annotations

import ast
import re
import string
from pathlib import Path

import pytest

from memtraffic.analysis.findings import RULES, SAY_WIDTH, explain, say, to_dicts
from memtraffic.vocab.finding import Finding, Subject, fmt_factor, fmt_value

PACKAGE = Path(__file__).resolve().parents[2] / "memtraffic"


def test_a_finding_names_a_rule_of_the_registry():
    with pytest.raises(KeyError, match="no rule 'nope'"):
        say(Finding("nope"))


def test_the_sentence_and_the_explanation_come_from_the_evidence():
    f = Finding("redundant_requests", Subject(config="softmax_naive 1048576x2 fp32 num_warps=4"), "L1 ld",
                {"what": "input", "requested_x": 4.0, "requested_bytes": 33554432, "min_bytes": 8388608,
                 "sector_x": 4.0, "l1_x": 16.0, "moved_bytes": 134217728})
    assert say(f) == ("each input byte requested 4x: warps or programs repeat it, or the kernel makes "
                      "passes")
    assert explain(f) == ("33.55 MB requested for a minimum of 8.39 MB: 4x; times the sector amplification "
                          "4x, L1 moves 16x the minimum (134.22 MB)")
    record = to_dicts([f])[0]
    assert record["rule"] == "redundant_requests" and record["level"] == "L1 ld"
    assert record["subject"] == {"run": "", "config": "softmax_naive 1048576x2 fp32 num_warps=4", "op": "",
                                 "call": None, "kernel": "", "line": ""}
    assert record["evidence"]["requested_x"] == 4.0 and record["time_s"] is None


def test_an_unknown_number_reads_as_a_dash():
    assert say(Finding("dram_excess", evidence={"dram_x": float("nan")})) == "DRAM moves - the minimum"
    assert say(Finding("dram_excess")) == "DRAM moves - the minimum"


@pytest.mark.parametrize(("x", "text"), [(16.2, "16x"), (4.02, "4x"), (3.2, "3.2x"), (0.84, "0.84x"),
                                         (113.4, "113x"), (float("inf"), "-")])
def test_one_factor_formatter(x, text):
    assert fmt_factor(x) == text


def test_a_subject_is_named_as_people_name_it():
    assert Subject(op="aten.addmm.default", call=14).label() == "aten.addmm.default call 14"
    assert Subject(config="c", line="softmax_rows.py:38").label() == "softmax_rows.py:38"


@pytest.mark.parametrize("name", sorted(RULES))
def test_every_rule_speaks_in_one_short_sentence(name):
    """Each field filled with a wide value still leaves the sentence within SAY_WIDTH, except for words a
    rule quotes from elsewhere (a bound's reason, a kernel name)."""
    rule = RULES[name]
    assert rule.checks and rule.say and rule.explain
    fields = {f for _, f, _, _ in string.Formatter().parse(rule.say) if f}
    quoted = {"bound", "main", "limiter", "cause", "line", "a", "b", "levels", "via"}
    wide = {f: (888.8e12 if f.endswith(("_bytes", "_Bps", "_flops")) else 0.8888 if f.endswith("_s")
                else 88.88 if f.endswith(("_x", "_eff")) else 32 if f.endswith("used_n") else 8888)
            for f in fields - quoted}
    wide.update({f: "" for f in fields & quoted}, what="loads and stores")
    assert len(say(Finding(name, evidence=wide))) <= SAY_WIDTH, say(Finding(name, evidence=wide))
    assert "; " not in rule.say  # one sentence: the details go in `explain`


def test_values_are_written_by_their_names():
    assert fmt_value("min_bytes", 8388608) == "8.39 MB"
    assert fmt_value("time_s", 632.7e-6) == "632.7 us"
    assert fmt_value("rate_Bps", 26.52e9) == "26.52 GB/s"
    assert fmt_value("share_frac", 0.8) == "80%"
    assert fmt_value("blocks_n", 1024) == "1,024"


# --- nothing reads finding text back ------------------------------------------------------------------------

TEXT_NAMES = re.compile(r"diagnosis|verdict|reason|note|finding|said|clause", re.I)


def _reads_text_back(tree: ast.AST) -> list[str]:
    """Calls that split or search text held in a variable or key named like a finding: `x.split("; ")`,
    `"; " in ...diagnosis`, `re.search(..., diagnosis)`."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            args = [a for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            if node.func.attr in ("split", "partition") and any(a.value.strip() in (";", ":") for a in args) \
                    and TEXT_NAMES.search(ast.unparse(node.func.value)):
                found.append(ast.unparse(node))
            if node.func.attr in ("search", "match", "findall", "fullmatch") and any(
                    TEXT_NAMES.search(ast.unparse(a)) for a in node.args):
                found.append(ast.unparse(node))
        if isinstance(node, ast.Compare) and any(isinstance(op, ast.In | ast.NotIn) for op in node.ops) \
                and isinstance(node.left, ast.Constant) and isinstance(node.left.value, str) \
                and any(TEXT_NAMES.search(ast.unparse(c)) for c in node.comparators):
            found.append(ast.unparse(node))
    return found


def test_no_code_splits_or_searches_finding_text():
    offenders = {str(p.relative_to(PACKAGE.parent)): hits for p in sorted(PACKAGE.rglob("*.py"))
                 if (hits := _reads_text_back(ast.parse(p.read_text())))}
    assert offenders == {}


def test_the_check_catches_what_it_should():
    assert _reads_text_back(ast.parse('said = row["diagnosis"].split("; ")'))
    assert _reads_text_back(ast.parse('m = _WORST.search(diagnosis)'))
    assert _reads_text_back(ast.parse('x = "below the minimum" in note'))
    assert not _reads_text_back(ast.parse('parts = text.split(",")'))


def test_every_rule_is_made_somewhere_and_every_rule_made_is_registered():
    """No dead entry in the registry, and no Finding of a rule it lacks: each rule has its check beside it
    (an efficiency rule) or its name appears as a string in the code outside the registry, and each
    Finding("...") or .found("...") names a registered rule."""
    registry = PACKAGE / "analysis" / "findings.py"
    text = "\n".join(p.read_text() for p in PACKAGE.rglob("*.py") if p != registry)
    assert [name for name, rule in RULES.items() if rule.find is None and f'"{name}"' not in text] == []
    text += registry.read_text()
    made = (set(re.findall(r'Finding\(\s*"(\w+)"', text)) | set(re.findall(r'\.found\(\s*"(\w+)"', text))
            | set(re.findall(r' found\(\s*"\w+", "(\w+)"', text)))  # time_notes: found(kind, rule, ...)
    assert {"l1_requests", "sector_waste", "diff_kernels", "kernel_passes"} <= made
    assert made - set(RULES) == set()
