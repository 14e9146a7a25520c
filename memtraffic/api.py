"""The public Python API (memtraffic.__all__), and the chains across layers that the CLI runs.

What a notebook calls instead of the CLI, with the same numbers: `analyze(run)` is the table
`memtraffic analyze RUN` prints (`records(table)` is its --format json), `per_op(run)` is
`--group-by op`, `lines(run)` is `memtraffic lines`, `roofline(run)` and `traffic(run)` are the
figures of `memtraffic roofline`. `run_measure` and `run_profile` are `memtraffic measure` and
`memtraffic profile`: the measuring side saves the run folder, the analysis here reads it.
`load_run(path)` (memtraffic.ncu.run, the one run loader) gives a run's plan, run.json and reports.
Everything but run_measure/run_profile reads runs without torch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memtraffic.analysis.analyze import analyze_path, analyze_reports, save_results, to_records
from memtraffic.core.errors import say
from memtraffic.core.rundir import partial_reports_expected
from memtraffic.ncu.report import EmptyReportError
from memtraffic.ncu.run import Run, load_run  # noqa: F401 - public: load_run(path) -> Run

if TYPE_CHECKING:
    import pandas as pd
    import plotly.graph_objects as go

    from memtraffic.measure.measure import MeasureOptions, MeasureResult
    from memtraffic.measure.profile import ProfileOptions, ProfileResult

Echo = Callable[[str], None]
LEVELS = ("dram", "l2", "l1")


def analyze(run: str | Path | Run, min_bytes: str | Sequence[str] | None = None,
            group_by: str = "range") -> pd.DataFrame:
    """`memtraffic analyze RUN`: one row per NVTX range (group_by 'kernel': per launch, 'op': per op)."""
    return analyze_path(run.path if isinstance(run, Run) else run, min_bytes=min_bytes, group_by=group_by)


def per_op(run: str | Path | Run, min_bytes: str | Sequence[str] | None = None) -> pd.DataFrame:
    """`memtraffic analyze RUN --group-by op`: one row per op type of a traced program, worst excess first."""
    return analyze(run, min_bytes=min_bytes, group_by="op")


def lines(run: str | Path | Run, kernel: str | None = None, top: int | None = None) -> list[dict[str, Any]]:
    """`memtraffic lines RUN`: per source line of each kernel, the bytes it moved and its verdict."""
    from memtraffic.analysis.lines import read_lines

    return read_lines(run.path if isinstance(run, Run) else run, kernel=kernel, top=top)


def records(table: pd.DataFrame) -> list[dict[str, Any]]:
    """An analyzed table as the CLI's --format json writes it (NaN -> None, whole counts as int)."""
    if "op" in table.columns and "calls" in table.columns:  # per_op's table
        from memtraffic.analysis import per_op as per_op_table

        return per_op_table.to_records(table)
    return to_records(table)


def _table(run: str | Path | Run | pd.DataFrame) -> pd.DataFrame:
    return analyze(run) if isinstance(run, str | Path | Run) else run


def roofline(run: str | Path | Run | pd.DataFrame, levels: Sequence[str] = LEVELS,
             ceilings: str | Path | None = None) -> go.Figure:
    """`memtraffic roofline`'s roofline: one panel per level, with this device's roofs where known
    (a ceilings file, else the cache, else reports/ceilings/)."""
    from memtraffic.views.html_report import devices_of, resolve_ceilings
    from memtraffic.views.roofline import roofline_figure

    table = _table(run)
    entries, _ = resolve_ceilings(devices_of(table), Path(ceilings) if ceilings else None)
    return roofline_figure(table, entries, levels)


def traffic(run: str | Path | Run | pd.DataFrame, levels: Sequence[str] = LEVELS) -> go.Figure:
    """`memtraffic roofline`'s traffic chart: bytes each level moved beside the minimum, per config."""
    from memtraffic.views.traffic_chart import traffic_figure

    return traffic_figure(_table(run), levels)


def run_measure(opts: MeasureOptions, echo: Echo | None = None, **kwargs: Any) -> MeasureResult:
    """`memtraffic measure`: profile the plan's configs under ncu, analyze the reports, save the results.

    The result's `table` is the analyzed DataFrame (empty when nothing was profiled). kwargs go to
    memtraffic.measure.measure.measure (e.g. ncu_runner, for tests). With --timing-only, or when ncu is
    missing or may not read the counters, the plan is timed instead (memtraffic.measure.measure_timing).
    """
    from memtraffic.measure.fallback import CountersUnavailable
    from memtraffic.measure.measure import measure, record_analysis
    from memtraffic.measure.measure_timing import measure_timing

    echo = echo or say
    try:
        result = measure_timing(opts, echo) if opts.timing_only else measure(opts, echo, **kwargs)
    except CountersUnavailable as err:
        echo(err.reason)
        result = measure_timing(opts, echo, err.reason)
    try:
        table, kernels = analyze_reports(result.reports, result.plan,
                                         allow_partial=partial_reports_expected(result.run),
                                         run_name=result.run_dir.name)
    except EmptyReportError:  # ncu wrote reports without kernels: record_analysis names the ranges
        table, kernels = analyze_reports([], result.plan)
    if len(table):
        save_results(table, result.run_dir)
    result.table = table
    record_analysis(result, kernels, echo)
    return result


def run_profile(opts: ProfileOptions, echo: Echo | None = None) -> ProfileResult:
    """`memtraffic profile -- CMD`: the program under ncu, its report analyzed against its trace, saved.
    With --timing-only, or when ncu is missing or may not read the counters, the program runs timed
    instead (memtraffic.measure.timing_only)."""
    from memtraffic.measure.fallback import CountersUnavailable
    from memtraffic.measure.profile import profile
    from memtraffic.measure.timing_only import profile_timing

    echo = echo or say
    try:
        result = profile_timing(opts, echo) if opts.timing_only else profile(opts, echo)
    except CountersUnavailable as err:
        echo(err.reason)
        result = profile_timing(replace(opts, out=err.out) if err.out else opts, echo, err.reason)
    try:
        table, _ = analyze_reports([result.report], result.plan, allow_partial=result.partial,
                                   run_name=result.run_dir.name)
    except EmptyReportError:
        table, _ = analyze_reports([], result.plan)
    if len(table):
        save_results(table, result.run_dir)
    result.table = table
    return result
