"""--group-by parsed once into its Literal: the choices, the one error line, and the API's check of text
from a caller without the type checker."""

from __future__ import annotations

from pathlib import Path

import pytest

import memtraffic
from memtraffic.vocab.errors import UsageError
from memtraffic.vocab.grouping import DIFF_GROUPINGS, GROUPINGS, diff_grouping, grouping

SEED = Path(__file__).resolve().parents[2] / "reports" / "h100" / "seed_1048576x2_fp32"


def test_the_choices_are_the_literals_values():
    assert GROUPINGS == ("range", "kernel", "op")
    assert DIFF_GROUPINGS == ("range", "op", "kernel", "line")
    assert [grouping(g) for g in GROUPINGS] == list(GROUPINGS)
    assert [diff_grouping(g) for g in DIFF_GROUPINGS] == list(DIFF_GROUPINGS)


@pytest.mark.parametrize(("parse", "text", "said"), [
    (grouping, "line", "unknown --group-by 'line': use one of range, kernel, op"),
    (grouping, "Range", "unknown --group-by 'Range': use one of range, kernel, op"),
    (diff_grouping, "warp", "unknown --group-by 'warp': use one of range, op, kernel, line"),
    (diff_grouping, "", "unknown --group-by '': use one of range, op, kernel, line"),
])
def test_anything_else_is_one_usage_error_naming_the_choices(parse, text, said):
    with pytest.raises(UsageError) as err:
        parse(text)
    assert str(err.value) == said


def test_the_api_checks_the_text_a_notebook_gives():
    with pytest.raises(UsageError, match=r"^unknown --group-by 'warp': use one of range, kernel, op$"):
        memtraffic.analyze(SEED, group_by="warp")  # type: ignore[arg-type]  # what an untyped caller may pass
    with pytest.raises(UsageError, match=r"^unknown --group-by 'warp': use one of range, op, kernel, line$"):
        memtraffic.diff(SEED, SEED, group_by="warp")  # type: ignore[arg-type]
