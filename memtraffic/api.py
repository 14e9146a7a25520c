"""The public Python API (memtraffic.__all__), and the chains across layers that the CLI runs.

What a notebook calls instead of the CLI, with the same numbers: `analyze(run)` is the table
`memtraffic analyze RUN` prints (`records(table)` is its --format json), `per_op(run)` is
`--group-by op`, `lines(run)` is `memtraffic lines`, `roofline(run)` and `traffic(run)` are the
figures of `memtraffic roofline`. `run_measure` and `run_profile` are `memtraffic measure` and
`memtraffic profile`: the measuring side saves the run folder, the analysis here reads it.
`load_run(path)` (memtraffic.runfolder.load, the one run loader) gives a run's plan, run.json and reports.
Everything but run_measure/run_profile reads runs without torch. Imports sit at the top; those inside a
function bring torch (collect.variants, collect.runner, probes.bench), which the base install lacks.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import pandas as pd

from memtraffic.analysis.analyze import (
    analyze_path,
    analyze_reports,
    gaps,  # noqa: F401 - public: what an analyzed run lacks of its plan
    save_results,
    to_records,
)
from memtraffic.analysis.analyze import require_whole as require_rows
from memtraffic.analysis.check import CheckResult, load_expectations
from memtraffic.analysis.check import check as check_expectations
from memtraffic.analysis.diff import Diff, parse_fraction
from memtraffic.analysis.diff import diff as diff_runs
from memtraffic.analysis.first_look import remeasure
from memtraffic.analysis.floor import Floor, floor_of_table, floor_run
from memtraffic.analysis.lines import LineRow, read_lines
from memtraffic.analysis.merge import merge_runs
from memtraffic.analysis.per_op import needs_full_look
from memtraffic.analysis.per_op import to_records as op_records
from memtraffic.analysis.reuse import reuse_counts, varied, varied_line
from memtraffic.collect.fallback import CountersUnavailable
from memtraffic.collect.measure import (
    MeasureOptions,
    MeasureResult,
    SecondPassRule,
    measure,
    plan_for,
    record_analysis,
)
from memtraffic.collect.profile import ProfileOptions, ProfileResult, profile
from memtraffic.collect.sweep import grid_counts
from memtraffic.collect.timing_only import measure_timing, profile_timing
from memtraffic.collect.trace_ops import TracedRun, check_run, require_torch, run_traced
from memtraffic.host.roofs_cache import cache_file, find_roofs
from memtraffic.ncu.chips import SetRow, chip_metric_names, known_chips, local_metric_names, set_rows
from memtraffic.ncu.command import NcuRun, run_ncu
from memtraffic.ncu.metrics import METRIC_SETS, Remeasure
from memtraffic.ncu.report import EmptyReportError
from memtraffic.probes.roof_probes import get_roofs, roofs_for_floor, write_reference
from memtraffic.runfolder.load import Run as Run  # public: load_run(path) -> Run
from memtraffic.runfolder.load import load_run as load_run
from memtraffic.runfolder.records import Outcome, RunRecord, needs_rerun
from memtraffic.views.html_report import devices_of, latest_run, plot_runs, resolve_roofs
from memtraffic.views.html_report import write_report as write_html_report
from memtraffic.views.roofline import parse_levels, roofline_figure
from memtraffic.views.tables import bench_table
from memtraffic.views.traffic_chart import traffic_figure
from memtraffic.vocab.arch import CHIPS
from memtraffic.vocab.configs import GridCount, ModelError, call_model
from memtraffic.vocab.errors import ReportError, UsageError, say, warn
from memtraffic.vocab.extras import missing_extra
from memtraffic.vocab.files import refuse_nonempty
from memtraffic.vocab.grouping import DiffGrouping, Grouping
from memtraffic.vocab.ops import OPS, format_shape, parse_dtype, parse_shape, torch_dtype
from memtraffic.vocab.roofs import RoofsEntry, load_roofs_file
from memtraffic.vocab.variant import Variant, minimum_row, shipped_catalog

if TYPE_CHECKING:  # plotly is imported where a figure is drawn (views.roofline, views.traffic_chart)
    import plotly.graph_objects as go

Echo = Callable[[str], None]
LEVELS = ("dram", "l2", "l1")


def analyze(run: str | Path | Run, min_bytes: str | Sequence[str] | None = None,
            group_by: Grouping = "range") -> pd.DataFrame:
    """`memtraffic analyze RUN`: one row per NVTX range (group_by 'kernel': per launch, 'op': per op).
    Each row has a `status` (ok, partial, missing, failed); `gaps(table)` names what the run lacks of
    its plan, one line each (the CLI's warnings; it exits 1 on them unless --partial)."""
    return analyze_path(run, min_bytes=min_bytes, group_by=group_by)


def per_op(run: str | Path | Run, min_bytes: str | Sequence[str] | None = None) -> pd.DataFrame:
    """`memtraffic analyze RUN --group-by op`: one row per op type of a traced program, worst excess first."""
    return analyze(run, min_bytes=min_bytes, group_by="op")


def full_look_ops(table: pd.DataFrame) -> list[str]:
    """The op types a first look (--metrics bytes) found above their minimum in L1, whose reason the full
    set (--metrics traffic) would tell: `memtraffic profile --ops` measures just them."""
    return needs_full_look(table)


def floor(run: str | Path | Run | ProfileResult, partial: bool = True, warn_gaps: bool = False) -> Floor:
    """`memtraffic floor RUN`: the run's time against its floor (memtraffic.analysis.floor.Floor: gpu_time_s,
    floor_s, recoverable_s, by_op rows, eager_min_bytes, fused_min_bytes, dram_bytes; .to_dict() is the
    CLI's --format json, .summary() its first lines, .table() its rows as a DataFrame). `.no_floor` says
    why a run has none (no measured roofs for its GPU, no kernel time): its floor_s is then NaN. `partial`
    False: a run with gaps is PartialRunError ('incomplete: N of M ...'), as the CLI without --partial;
    True: its floor, each gap a warning with `warn_gaps` (the CLI's --partial)."""
    if isinstance(run, ProfileResult):  # a profile just made: its analyzed table, not read again
        return floor_of_table(run.table, run.plan, run.run_dir.name)
    return floor_run(run, partial, warn_gaps)


def lines(run: str | Path | Run, kernel: str | None = None, top: int | None = None) -> list[LineRow]:
    """`memtraffic lines RUN`: per source line of each kernel, the bytes it moved and its verdict."""
    return read_lines(run.path if isinstance(run, Run) else run, kernel=kernel, top=top)


def records(table: pd.DataFrame) -> list[dict[str, object]]:
    """An analyzed table as the CLI's --format json writes it (NaN -> None, whole counts as int)."""
    if "op" in table.columns and "calls" in table.columns:  # per_op's table
        return op_records(table)
    return to_records(table)


def _table(run: str | Path | Run | pd.DataFrame) -> pd.DataFrame:
    return analyze(run) if isinstance(run, str | Path | Run) else run


def roofline(run: str | Path | Run | pd.DataFrame, levels: Sequence[str] = LEVELS,
             roofs_file: str | Path | None = None, title: str | None = None) -> go.Figure:
    """`memtraffic roofline`'s roofline: one panel per level, with this device's roofs where known
    (a roofs file, else the cache, else reports/roofs/)."""
    table = _table(run)
    entries, _ = resolve_roofs(devices_of(table), Path(roofs_file) if roofs_file else None)
    return roofline_figure(table, entries, levels, title=title)


def traffic(run: str | Path | Run | pd.DataFrame, levels: Sequence[str] = LEVELS,
            title: str | None = None) -> go.Figure:
    """`memtraffic roofline`'s traffic chart: bytes each level moved beside the minimum, per config."""
    return traffic_figure(_table(run), levels, title)


def run_measure(opts: MeasureOptions, echo: Echo | None = None,
                ncu_runner: Callable[..., NcuRun] | None = None) -> MeasureResult:
    """`memtraffic measure`: profile the plan's configs under ncu, analyze the reports, save the results.

    The result's `table` is the analyzed DataFrame (empty when nothing was profiled). `ncu_runner` runs
    each ncu argv (default memtraffic.ncu.command.run_ncu). With --metrics auto, measure asks which
    configs of the first look the full set must measure again (its second pass: _Reading.second_pass,
    analysis.first_look.remeasure). With --timing-only, or when ncu is missing or may not read the
    counters, the plan is timed instead (memtraffic.collect.timing_only).
    """
    echo = echo or say
    reading = _Reading(opts.roofs, echo)
    result = _measured(opts, echo, reading.second_pass, ncu_runner)
    table, kernels = reading.analysis(result)
    if len(table):
        save_results(table, result.run_dir)
    result.table = table
    record_analysis(result, kernels, echo)
    return result


Analysis = tuple["pd.DataFrame", "pd.DataFrame"]  # an analyzed table and its launches (analyze_reports)


class _Reading:
    """The analysis of a run `measure` makes: after its first look (or only pass) the GPU's roofs, measured
    once outside ncu when none are known, then its reports analyzed; the first look's analysis is the run's
    own unless a second pass followed it."""

    def __init__(self, roofs: bool, echo: Echo) -> None:
        self.roofs, self.echo = roofs, echo
        self.first: Analysis | None = None

    def second_pass(self, result: MeasureResult) -> Remeasure | None:
        """measure's second-pass rule: the configs of the first look the full set must measure again."""
        self.first = self.analysis(result)
        return remeasure(*self.first)

    def analysis(self, result: MeasureResult) -> Analysis:
        if self.roofs:
            _roofs_for(result.run, self.echo)
            self.roofs = False
        if self.first is not None and "second_pass" not in result.run:
            return self.first
        return _analysis(result.reports, result)


def _analysis(reports: Sequence[Path], result: MeasureResult | ProfileResult) -> Analysis:
    """The reports of a run just made, analyzed against its plan and run.json."""
    try:
        return analyze_reports(reports, result.plan, run_name=result.run_dir.name, meta=result.run)
    except EmptyReportError:  # ncu wrote reports without kernels: record_analysis names the ranges
        return analyze_reports([], result.plan)


def _measured(opts: MeasureOptions, echo: Echo, second_pass: SecondPassRule,
              ncu_runner: Callable[..., NcuRun] | None) -> MeasureResult:
    """The run folder of `memtraffic measure`, by ncu or else the timer, not yet analyzed."""
    try:
        return measure_timing(opts, echo) if opts.timing_only else \
            measure(opts, echo, ncu_runner or run_ncu, second_pass)
    except CountersUnavailable as err:
        echo(err.reason)
        return measure_timing(opts, echo, err.reason)


def failed_configs(run: RunRecord) -> list[Outcome]:
    """The configs of a run.json to measure again (not finished ok, or no kernel profiled in their range):
    what `memtraffic measure` names on stderr and exits 1 on."""
    return [c for c in run.get("configs", []) if needs_rerun(c)]  # a profile's run.json has none


def _roofs_for(run: RunRecord, echo: Echo) -> None:
    """The roofs of the run's GPU, measured now if none are known (probes.roof_probes.roofs_for_floor)."""
    roofs_for_floor(str((run.get("environment") or {}).get("gpu") or ""), echo)


def run_profile(opts: ProfileOptions, echo: Echo | None = None) -> ProfileResult:
    """`memtraffic profile -- CMD`: the program under ncu, its report analyzed against its trace, saved.
    With --timing-only, or when ncu is missing or may not read the counters, the program runs timed
    instead (memtraffic.collect.timing_only)."""
    echo = echo or say
    result = _profiled(opts, echo)
    started = time.perf_counter()
    table, kernels = _analysis([result.report], result)
    counts = reuse_counts(kernels, result.plan)
    if counts is not None:  # --distinct: say what was measured and what reuses it
        echo(counts.line())
    spread = varied(table, result.plan) if counts is not None else []
    if line := varied_line(spread):  # calls of one signature measured more than once that differ
        echo(line)
    if len(table):
        save_results(table, result.run_dir)
    result.table = table
    if result.run.get("kind") == "profile":  # where the time after ncu went (run.json's "startup" before)
        result.record.save(analysis_s=round(time.perf_counter() - started, 3), varied=spread)
    return result


def _profiled(opts: ProfileOptions, echo: Echo) -> ProfileResult:
    """The run folder of `memtraffic profile` (ncu, else the timer), not yet analyzed; then the GPU's roofs
    when none are known (measured once, outside ncu)."""
    if opts.torch_ops:  # said before ncu, the GPU or the program is looked at
        require_torch(opts.command, "memtraffic profile --torch-ops")
    try:
        result = profile_timing(opts, echo) if opts.timing_only else profile(opts, echo)
    except CountersUnavailable as err:
        echo(err.reason)
        result = profile_timing(replace(opts, out=err.out) if err.out else opts, echo, err.reason)
    if opts.roofs:
        _roofs_for(result.run, echo)
    return result


# --- models, roofs and your own variants (the lessons in notebooks/ use these) -----------------------------


class Minimum(TypedDict):
    """An op's minimum at a shape and dtype (minimum()): bytes read, written and both, model FLOPs, FLOP per
    byte at the minimum, and how the FLOPs are counted."""

    op: str
    shape: str
    dtype: str
    read: int
    write: int
    total: int
    flops: int
    intensity: float
    flops_note: str


def minimum(op: str, shape: str | Sequence[int], dtype: str = "fp32") -> Minimum:
    """An op's minimum traffic and model FLOPs at a shape: what `memtraffic list` puts in its minimum
    columns (read, write and total bytes, FLOPs, FLOP per byte at the minimum, and how FLOPs are counted)."""
    if op not in OPS:
        raise UsageError(f"unknown op {op!r}: use one of {', '.join(OPS)}")
    dims = parse_shape(shape) if isinstance(shape, str) else tuple(shape)
    least = OPS[op].minimum(dims, parse_dtype(dtype))
    flops = OPS[op].flops(dims)
    return {"op": op, "shape": format_shape(dims), "dtype": parse_dtype(dtype), "read": least.read,
            "write": least.write, "total": least.total, "flops": flops, "intensity": flops / least.total,
            "flops_note": OPS[op].flops_note}


def roofs(source: str | Path) -> RoofsEntry:
    """A GPU's roofs, as `memtraffic roofs` measured them: from a roofs file (reports/roofs/*.json)
    or by device name (this machine's cache, then reports/roofs/). Keys: device, date, measured,
    ncu_theoretical (bytes/s and FLOP/s), method."""
    if Path(source).suffix == ".json" or Path(source).exists():
        return load_roofs_file(Path(source))
    entry = find_roofs(str(source))
    if entry is None:
        raise UsageError(f"no roofs known for {source!r}: give a roofs file, or run 'memtraffic "
                         "roofs' on that GPU")
    return entry


ceilings = roofs  # roofs' old name, kept for notebooks and scripts that call it


def list_variants(shape: str | Sequence[int] | None = None, dtype: str = "fp32",
                  variant_files: Sequence[str | Path] = ()) -> pd.DataFrame:
    """`memtraffic list`: every shipped variant (then those of your variant files) with its op's minimum and
    its own predicted bytes, FLOPs and intensity at a shape (default: each op's own). Without torch (the
    base install) the predicted columns are empty and a warning says why."""
    table: pd.DataFrame = pd.DataFrame(list_rows(shape, dtype, variant_files))
    return table


def list_rows(shape: str | Sequence[int] | None, dtype: str, variant_files: Sequence[str | Path] = ()
              ) -> list[dict[str, Any]]:
    """The rows of `memtraffic list` (see list_variants)."""
    dt = parse_dtype(dtype)
    sh = (parse_shape(shape) if isinstance(shape, str) else tuple(shape)) if shape is not None else None
    try:
        from memtraffic.collect.variants import list_row
        from memtraffic.collect.variants import load_variants as load
    except ModuleNotFoundError as err:  # the base install: the ops' minimums, without the variants' models
        missing = missing_extra(err, "predicting bytes (each variant's model)")
        if missing is None or variant_files:
            raise
        warn("predicted bytes need the [measure] extra (torch, triton): pip install 'memtraffic[measure]'")
        return [minimum_row(e, sh, dt) for e in shipped_catalog()]
    _triton_on_cpu()

    rows = []
    for variant in load([str(f) for f in variant_files], on_problem=warn).values():
        try:
            rows.append(list_row(variant, sh, torch_dtype(dt)))
        except ModelError as err:  # one broken variant of a user's file: said, left out, the others listed
            warn(f"{err.problem}: left out")
    return rows


def _triton_on_cpu() -> None:
    """Without a CUDA GPU, Triton kernels run in its interpreter: chosen before the first one is imported."""
    import torch

    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")


def load_variants(*files: str | Path) -> dict[str, Variant]:
    """The shipped variants, then those of each variant file (`--variants FILE`): name -> Variant. Without
    a CUDA GPU, Triton kernels are set to run in Triton's interpreter (TRITON_INTERPRET=1)."""
    _triton_on_cpu()
    from memtraffic.collect.variants import load_variants as load

    return load(files)


def predicted(variant: Variant | str, shape: str | Sequence[int], dtype: str = "fp32",
              params: dict[str, object] | None = None) -> dict[str, int]:
    """A variant's own model of the bytes its loads and stores move through L1 (read, write), at a shape,
    with its default parameters updated by `params`. `variant`: a Variant or a shipped variant's name."""
    from memtraffic.collect.variants import get_variant

    _triton_on_cpu()
    v = get_variant(variant) if isinstance(variant, str) else variant
    dims = parse_shape(shape) if isinstance(shape, str) else tuple(shape)
    traffic = call_model(f"variant {v.name}", "predicted", v.predicted, dims, torch_dtype(dtype),
                         {**v.params, **(params or {})})
    return {"read": traffic.read, "write": traffic.write}


def check_variant(variant: Variant | str, shape: str | Sequence[int], dtype: str = "fp32",
                  device: str | None = None, **params: object) -> float:
    """Run a variant once on seeded inputs and check its output against the op's float64 reference, as the
    measuring process does before ncu counts: the max abs error, or an error beyond the dtype's tolerance
    (or a shape the variant refuses). `device`: cuda when there is one, else cpu (Triton's interpreter)."""
    _triton_on_cpu()
    import torch

    from memtraffic.collect.runner import check_output
    from memtraffic.collect.variants import get_variant, unsupported_reason

    v = get_variant(variant) if isinstance(variant, str) else variant
    dims = parse_shape(shape) if isinstance(shape, str) else tuple(shape)
    reason = unsupported_reason(v, dims, torch_dtype(dtype), params)
    if reason is not None:
        raise UsageError(reason)
    op = OPS[v.op]
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    inputs = op.make_inputs(dims, torch_dtype(dtype), dev, 0)
    return check_output(v.run(*inputs, **{**v.params, **params}), op.reference(*inputs), dtype)


def measure_variants(*variants: str, shape: str | Sequence[str] = (), dtype: str | Sequence[str] = "fp32",
                     variant_files: Sequence[str | Path] = (), echo: Echo | None = None, **options: Any
                     ) -> MeasureResult:
    """`memtraffic measure VARIANTS --shape S --dtype D [--variants FILE]` from Python (a CUDA GPU and ncu):
    the result's `table` is the analysis, `run_dir` the new run folder. `options` are MeasureOptions' fields
    (out, metrics, params=['BLOCK=64,128'], source, ...)."""
    shapes: list[str | tuple[int, ...]] = [shape] if isinstance(shape, str) else list(shape)
    dtypes = [dtype] if isinstance(dtype, str) else list(dtype)
    opts = MeasureOptions(variants=list(variants), shapes=shapes, dtypes=dtypes,
                          variant_files=[str(f) for f in variant_files], **options)
    return run_measure(opts, echo)


# --- the other commands' work (memtraffic/cli/ parses their options and prints what these return) --------


def require_whole(table: pd.DataFrame | Sequence[str], what: str, partial: bool = False) -> None:
    """What `memtraffic analyze` exits 1 on: a table (or gap lines) that lacks what its plan lists, unless
    `partial` (then each gap is a warning)."""
    require_rows(table, what, partial)


def line_gaps(path: str | Path) -> list[str]:
    """What a run given to `memtraffic lines` lacks of its plan, a line each ([] for a report without traffic
    counters: its lines are all there is to show)."""
    try:
        return gaps(analyze_path(path))
    except ReportError:
        return []


def count_grid(variants: Sequence[str] = (), shapes: Sequence[str] = (), dtypes: Sequence[str] = (),
               params: Sequence[str] = (), all_variants: bool = False, sweep: str | Path | None = None,
               variant_files: Sequence[str | Path] = ()) -> list[GridCount]:
    """`memtraffic list --count`: how many configs `measure` with these grid options would profile, per
    variant and skipped, without a GPU."""
    grid_shapes: list[str | tuple[int, ...]] = list(shapes)
    plan = plan_for(MeasureOptions(
        variants=list(variants), shapes=grid_shapes, dtypes=list(dtypes), params=list(params),
        all_variants=all_variants, sweep=Path(sweep) if sweep is not None else None,
        variant_files=[str(f) for f in variant_files]))
    return grid_counts(plan)


def diff(a: str | Path, b: str | Path, group_by: DiffGrouping = "range", time_tolerance: str | float = "5%",
         allow_mixed: bool = False) -> Diff:
    """`memtraffic diff A B`: the two runs matched row by row (`.rows`, `.notes`; each side's `.gaps`), and
    B's Inductor kernels beside A's fusion groups (`.fusion`: memtraffic.analysis.fusion.Match)."""
    return diff_runs(a, b, group_by, parse_fraction(time_tolerance, "--time-tolerance"), allow_mixed)


def check(run: str | Path, expect: str | Path, baseline: str | Path | None = None) -> list[CheckResult]:
    """`memtraffic check RUN --expect FILE`: every (matched row, limit) with its value and `ok`."""
    return check_expectations(run, load_expectations(expect), baseline)


def trace_ops(command: Sequence[str], from_first_forward: bool = False) -> TracedRun:
    """`memtraffic ops -- CMD`: the program run with every aten op traced (no ncu); `.records` per call,
    `.warnings`. `check_traced(run, command)` raises what `memtraffic ops` exits with."""
    return run_traced(list(command), mode="forward" if from_first_forward else "1")


def check_traced(run: TracedRun, command: Sequence[str]) -> None:
    """The error of a traced run that failed or traced nothing, if any."""
    check_run(run, list(command))


def merge(runs: Sequence[str | Path], out: str | Path, allow_mixed: bool = False, echo: Echo | None = None
          ) -> tuple[pd.DataFrame, RunRecord]:
    """`memtraffic merge RUNS --out OUT`: the new merged run folder, analyzed, and its run.json."""
    merged, run = merge_runs([Path(r) for r in runs], Path(out), allow_mixed, echo=echo)
    return analyze_path(merged), run


def write_roofline(runs: Sequence[str | Path] = (), level: str = "all", out: str | Path | None = None,
                   png: str | Path | None = None, roofs_file: str | Path | None = None, force: bool = False,
                   partial: bool = False) -> tuple[list[Path], list[str]]:
    """`memtraffic roofline RUNS`: the roofline and traffic figures written (HTML, PNG); (paths, notes).
    No runs: the newest under reports/runs."""
    levels = parse_levels(level)
    run_dirs = [Path(r) for r in runs] or [latest_run()]
    return plot_runs(run_dirs, levels, out=Path(out) if out else None, png=Path(png) if png else None,
                     roofs_file=Path(roofs_file) if roofs_file else None, force=force, partial=partial)


def write_report(run: str | Path, out: str | Path | None = None, roofs_file: str | Path | None = None,
                 baseline: str | Path | None = None, force: bool = False, partial: bool = False) -> Path:
    """`memtraffic report RUN`: the self-contained HTML page written; its path."""
    return write_html_report(Path(run), Path(out) if out else None, Path(roofs_file) if roofs_file else None,
                 Path(baseline) if baseline else None, force=force, partial=partial)


def metric_sets(chip: str | None = None, all_chips: bool = False, set_name: str | None = None
                ) -> tuple[list[SetRow], str | None]:
    """`memtraffic metrics`: a row per (chip, set, alias) with its ncu name or why it is not measured; and,
    for this machine's GPU (no chip given), the line saying where its metric list came from."""
    if set_name is not None and set_name not in METRIC_SETS:
        raise UsageError(f"unknown metric set {set_name!r}: use one of {', '.join(METRIC_SETS)}")
    sets = [set_name] if set_name else list(METRIC_SETS)
    if chip is not None and all_chips:
        raise UsageError("give --chip CHIP or --all-chips, not both")
    if chip is not None and chip.strip().lower() not in known_chips():
        raise UsageError(f"unknown chip {chip!r}: use one of {', '.join(known_chips())}")
    if all_chips or chip is not None:
        chips = known_chips() if all_chips else [chip.strip().lower()]  # type: ignore[union-attr]
        return [r for c in chips for r in set_rows(c, chip_metric_names(c), CHIPS.get(c), sets)], None
    label, local, names = local_metric_names()
    line = f"{label}: metrics from this machine's ncu" if local is None or label != local.name else label
    return set_rows(local.name if local else label, names, local, sets), line


def measure_roofs(refresh: bool = False, ncu: bool = True, save_reference: bool = False,
                     echo: Echo | None = None) -> RoofsEntry:
    """`memtraffic roofs`: this GPU's roofs, measured once and cached (`refresh`: measured again);
    `save_reference` also writes reports/roofs/<device>.json. Needs a CUDA GPU."""
    echo = echo or say
    entry, cached = get_roofs(refresh=refresh, with_ncu=ncu, progress=echo)
    if cached:
        echo(f"cached in {cache_file()} (--refresh measures again)")
    if save_reference:
        echo(f"wrote {write_reference(entry)}")
    return entry


def bench(variants: Sequence[str] = (), shapes: Sequence[str] = (), dtypes: Sequence[str] = (),
          budget: float = 0.3, out: str | Path | None = None, variant_files: Sequence[str | Path] = (),
          echo: Echo | None = None) -> dict[str, Any]:
    """`memtraffic bench`: variants timed with CUDA events beside a copy and torch's kernels; the result
    (environment, rows), also written to `out` (results.json, table.txt) when given. Needs a CUDA GPU."""
    from memtraffic.collect.variants import get_variant
    from memtraffic.collect.variants import load_variants as load
    from memtraffic.probes import bench as b

    if not 0 < budget < math.inf:
        raise UsageError(f"--budget {budget}: give the seconds of timed repetitions per config, more than 0 "
                         "(e.g. 0.3)")
    if out is not None:
        refuse_nonempty(Path(out))  # before the GPU work, not after it
    catalogue = load([str(f) for f in variant_files], on_problem=warn)
    names = list(variants) or [n for n, v in catalogue.items() if v.op in b.SUITE]
    for n in names:
        get_variant(n, catalogue)
    dims = [parse_shape(s) for s in shapes] if shapes else None
    dts = [torch_dtype(parse_dtype(d)) for d in dtypes] if dtypes else list(b.SUITE_DTYPES)
    result = b.run_bench(names, dims, dts, budget_s=budget, progress=echo or say, catalogue=catalogue)
    if out is not None:
        b.write_result(result, Path(out), bench_table(result))
    return result
