"""What one row of a table is (--group-by), typed once: analyze groups by NVTX range, kernel launch or op
type; diff and check also by source line. Each parser turns the option's text into its Literal, or a
UsageError naming the choices."""

from __future__ import annotations

from typing import Literal, get_args

from memtraffic.vocab.errors import choice

Grouping = Literal["range", "kernel", "op"]  # a range with its kernels summed, one launch, one op type
GROUPINGS: tuple[Grouping, ...] = get_args(Grouping)
DiffGrouping = Literal["range", "op", "kernel", "line"]  # analyze's groupings, and one source line
DIFF_GROUPINGS: tuple[DiffGrouping, ...] = get_args(DiffGrouping)


def grouping(text: str) -> Grouping:
    """analyze's --group-by as given: the grouping, or UsageError."""
    return choice("--group-by", text, GROUPINGS)


def diff_grouping(text: str) -> DiffGrouping:
    """diff's --group-by as given: the grouping, or UsageError."""
    return choice("--group-by", text, DIFF_GROUPINGS)
