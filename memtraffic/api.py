"""The chains across layers, for the CLI and for Python: measure or profile, then analyze and save.

The measuring side never imports the analysis; these functions call one after the other.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from memtraffic.analysis.analyze import analyze_reports, save_results
from memtraffic.core.rundir import partial_reports_expected
from memtraffic.ncu.report import EmptyReportError

if TYPE_CHECKING:
    from memtraffic.measure.measure import MeasureOptions, MeasureResult
    from memtraffic.measure.profile import ProfileOptions, ProfileResult

Echo = Callable[[str], None]


def run_measure(opts: MeasureOptions, echo: Echo | None = None, **kwargs) -> MeasureResult:
    """`memtraffic measure`: profile the plan's configs under ncu, analyze the reports, save the results.

    The result's `table` is the analyzed DataFrame (empty when nothing was profiled). kwargs go to
    memtraffic.measure.measure.measure (e.g. ncu_runner, for tests).
    """
    from memtraffic.measure.measure import measure, record_analysis

    result = measure(opts, echo, **kwargs)
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
    """`memtraffic profile -- CMD`: the program under ncu, its report analyzed against its trace, saved."""
    from memtraffic.measure.profile import profile

    result = profile(opts, echo)
    try:
        table, _ = analyze_reports([result.report], result.plan, allow_partial=result.partial,
                                   run_name=result.run_dir.name)
    except EmptyReportError:
        table, _ = analyze_reports([], result.plan)
    if len(table):
        save_results(table, result.run_dir)
    result.table = table
    return result
