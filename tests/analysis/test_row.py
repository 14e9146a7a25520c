"""The analyzed table is Row's: committed runs of every kind analyze to exactly Row's columns, in its order,
each value of the type Row gives it (NaN where a number is missing: a float), and the metric aliases the
table carries are those of ncu.metrics.METRICS."""

from __future__ import annotations

import math
import types
import typing
from pathlib import Path

import pytest

from memtraffic.analysis.analyze import analyze_path
from memtraffic.analysis.row import ANALYZED, COLUMNS, TIMING_ONLY, Counters, Row, TimingOnlyRow, row_dicts
from memtraffic.ncu.metrics import LAUNCH_STATS, METRICS
from memtraffic.vocab.finding import Finding

H100 = Path(__file__).resolve().parents[2] / "reports" / "h100"
H200 = Path(__file__).resolve().parents[2] / "reports" / "h200"
RUNS = {  # one of each kind a table comes from
    "measured variants": (H100 / "suite_4096x4096", "range"),
    "one row a launch": (H100 / "suite_4096x4096", "kernel"),
    "per-line counters, configs missing": (H100 / "source_cost_all" / "source", "range"),
    "a traced compiled program": (H100 / "compiled_layernorm_mlp_adamw", "range"),
    "a plain ncu report": (H100 / "plain_ncu_torch_softmax", "range"),
    "an H200 profile": (H200 / "first_profile_roofs" / "first", "range"),
}
TIMING_ONLY_RUN = H100 / "timing_only_layernorm_mlp_adamw"


def _has_type(value: object, hint: object) -> bool:
    """Whether a value is of a type hint (int counts as float, as type checkers take it; NaN is a float)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_has_type(value, a) for a in args)
    if origin is list:
        return isinstance(value, list) and all(_has_type(v, args[0]) for v in value)
    if origin is dict:
        return isinstance(value, dict) and all(_has_type(k, args[0]) and _has_type(v, args[1])
                                               for k, v in value.items())
    if hint is object:
        return True
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    assert isinstance(hint, type), hint
    return isinstance(value, hint)


HINTS = typing.get_type_hints(TimingOnlyRow, localns={"Finding": Finding})


def _wrong_types(rows: list[Row]) -> list[str]:
    return [f"{r['range'] or r['kernels']}: {key} = {value!r} is no {HINTS[key]}"
            for r in rows for key, value in r.items() if not _has_type(value, HINTS[key])]


@pytest.mark.parametrize("kind", sorted(RUNS))
def test_a_committed_run_analyzes_to_rows_columns_and_types(kind):
    run, group_by = RUNS[kind]
    table = analyze_path(run, group_by=group_by)
    assert len(table) > 0
    assert list(table.columns) == COLUMNS
    assert _wrong_types(row_dicts(table)) == []


def test_a_timing_only_run_adds_its_copy_roof_columns():
    table = analyze_path(TIMING_ONLY_RUN)
    assert len(table) > 0
    assert list(table.columns) == [*COLUMNS, *TIMING_ONLY] == list(TimingOnlyRow.__annotations__)
    assert _wrong_types(row_dicts(table)) == []


def test_the_numbers_missing_are_nan_where_row_says_float():
    """A planned config with no kernel (source_cost_all lacks some) keeps every column: NaN numbers."""
    rows = row_dicts(analyze_path(H100 / "source_cost_all" / "source"))
    lost = [r for r in rows if r["status"] != "ok"]
    assert lost and all(math.isnan(r["time_ns"]) and math.isnan(r["eff_l2"]) for r in lost)


def test_the_table_carries_every_metric_alias_but_time_once():
    """Row's Counters are METRICS' aliases (in its order) that Analyzed does not already hold: a new alias
    in METRICS needs its column in Counters; the launch statistics are Analyzed's."""
    others = [a for a in METRICS if a not in ANALYZED and a != "time"]
    assert list(Counters.__annotations__) == others
    assert len(set(COLUMNS)) == len(COLUMNS)
    at = ANALYZED.index("block_size") + 1  # the launch of the range's longest kernel, as ncu names it
    assert ANALYZED[at:at + len(LAUNCH_STATS)] == list(LAUNCH_STATS)
    assert [*ANALYZED, *others, "reuses"] == COLUMNS


def test_an_empty_table_has_rows_columns():
    """A run whose report holds no kernel of its plan still has Row's columns."""
    table = analyze_path(H100 / "bytes_vs_traffic" / "bytes-1")
    assert table.empty and list(table.columns) == COLUMNS
