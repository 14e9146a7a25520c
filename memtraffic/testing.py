"""A pytest helper: hold a run to traffic expectations in a test, as `memtraffic check` does in CI.

    from memtraffic.testing import assert_traffic

    def test_my_kernel_moves_the_minimum():
        assert_traffic("runs/my_kernel", match="my_kernel", max_bytes={"l1_ld": "8.4MB"},
                       min_efficiency={"l1_ld": 0.95}, max_time="20us")
        assert_traffic("runs/my_kernel", expect="traffic.toml")   # or the check command's file

The limits are those of memtraffic.analysis.check (max_bytes and min_efficiency per level, max_time,
no_worse_than a baseline run). Reading a run needs no GPU.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["assert_traffic"]


def assert_traffic(run: str | Path, expect: str | Path | None = None, *, match: str | None = None,
                   by: str = "range", max_bytes: Mapping[str, Any] | None = None,
                   min_efficiency: Mapping[str, float] | None = None, max_time: str | float | None = None,
                   no_worse_than: str | float | None = None, baseline: str | Path | None = None) -> None:
    """Raise AssertionError listing every failed check of the run (a line each); return when all hold.

    Give either `expect` (a TOML file as `memtraffic check --expect` takes) or `match` (a regex over
    row names) with one or more limits. A regex that matches no row, or a malformed limit, raises
    memtraffic.vocab.errors.UsageError: the test is wrong, not the kernel.
    """
    from memtraffic.analysis.check import Expectations, check, expectation, failures, load_expectations
    from memtraffic.vocab.errors import UsageError

    if (expect is None) == (match is None):
        raise UsageError("assert_traffic: give either expect=FILE or match=REGEX with limits")
    if expect is not None:
        expectations = load_expectations(expect)
    else:
        table: dict[str, object] = {"match": match, "by": by}
        for key, value in (("max_bytes", max_bytes), ("min_efficiency", min_efficiency),
                           ("max_time", max_time), ("no_worse_than", no_worse_than)):
            if value is not None:
                table[key] = dict(value) if isinstance(value, Mapping) else value
        expectations = Expectations("assert_traffic", [expectation(table, "assert_traffic")])
    results = check(run, expectations, baseline)
    failed = failures(results)
    if failed:
        raise AssertionError(f"{len(failed)} of {len(results)} traffic checks failed for {run}:\n"
                             + "\n".join(failed))
