"""The measuring commands: measure, profile, ops, bench and roofs run kernels or a program (on a GPU,
under ncu for measure and profile), call one memtraffic.api function each and print through
memtraffic.views. Registered on the app in app.py; shared options in options.py."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated, cast

import typer

from memtraffic.cli.options import (
    AllCalls,
    AllVariants,
    Baseline,
    CacheControl,
    ClockControl,
    Dtype,
    Fmt,
    FromFirstForward,
    MeasureMetrics,
    Param,
    ProfileMetrics,
    Roofs,
    RunOut,
    Shape,
    Source,
    Sweep,
    TimingOnly,
    VariantFiles,
    Variants,
    Verbose,
    Wide,
    format_option,
    width,
)
from memtraffic.cli.read_commands import print_floor_summary
from memtraffic.views import formats
from memtraffic.views.formats import FOR_OBJECTS, FOR_ROWS
from memtraffic.vocab.errors import MemtrafficError, UsageError, warn


def _print_baseline_diff(baseline: Path | None, run_dir: Path, fmt: str, columns: int | None = None) -> None:
    """The diff of a new run against its --baseline; a refusal (other GPU) is a warning, the run stays."""
    if baseline is None:
        return
    from memtraffic.api import diff
    from memtraffic.views.diff_table import render

    try:
        text = render(diff(baseline, run_dir), "table", columns)
    except MemtrafficError as err:
        warn(f"no diff against {baseline}: {err}")
        return
    typer.echo(f"\ndiff against {baseline}:\n{text}", err=fmt != "table")


def _check_baseline(baseline: Path | None) -> None:
    """Before measuring: a --baseline that is not there would only be found after the run."""
    if baseline is not None and not baseline.exists():
        raise UsageError(f"--baseline {baseline}: no such run folder or file")


def measure(
    variants: Variants = None,
    shape: Shape = None,
    dtype: Dtype = None,
    param: Param = None,
    all_variants: AllVariants = False,
    variant_files: VariantFiles = None,
    timing_only: TimingOnly = False,
    roofs: Roofs = True,
    metrics: MeasureMetrics = "auto",
    out: RunOut = None,
    clock_control: ClockControl = "none",
    cache_control: CacheControl = "all",
    source: Source = False,
    verbose: Verbose = False,
    gpus: Annotated[
        str | None,
        typer.Option(
            help="all, or GPU indices like 0,1: one ncu process per GPU, each taking the next config "
            "when it finishes one; a report per GPU."
        ),
    ] = None,
    sweep: Sweep = None,
    shard: Annotated[
        str | None,
        typer.Option(help="I/N: measure only shard I of N of the plan (balanced by predicted cost); "
                     "'memtraffic merge' joins the shards."),
    ] = None,
    rerun: Annotated[
        Path | None,
        typer.Option(help="A run folder: measure again the configs its run.json lists under 'rerun' "
                     "(failed, interrupted, or on a GPU that failed)."),
    ] = None,
    baseline: Baseline = None,
    fmt: Fmt = "table",
    wide: Wide = False,
) -> None:
    """Profile variants under Nsight Compute (ncu) and analyze their traffic.

    ONE ncu process (python -m memtraffic.collect.runner) profiles every
    variant x shape x dtype x parameter combination: inputs seeded, each result
    checked against a float64 reference, JIT and autotuning outside the NVTX
    range 'mt|...' that is profiled. A config that crashes or fails its check
    is recorded; the others go on. Each run lands in a NEW folder (reports,
    plan.json, run.json, ncu.log, results.csv and results.json).

    Needs a CUDA GPU and ncu >= 2023.1 ($MEMTRAFFIC_NCU, else PATH, else
    /usr/local/cuda/bin, else the newest /opt/nvidia/nsight-compute/*/)
    allowed to read the GPU's counters. Grids: variant x --shape x --dtype x --param, or a --sweep file (see
    docs/sweeps.md); 'memtraffic list --count' counts the configs. --gpus
    splits them across GPUs; --shard I/N runs one part anywhere, 'memtraffic
    merge' joins the parts.

    Examples:
      memtraffic measure softmax_tiled torch_softmax --shape 1048576x2
      memtraffic measure softmax_tiled --param BLOCK_M=1,128 --dtype bf16
      memtraffic measure --all --shape 4096x4096 --shape 4096x4096x4096
      memtraffic measure torch_softmax --metrics traffic,flops --out runs/a
      memtraffic measure my_kernel --variants my_kernels.py --shape 4096x4096
      memtraffic measure --sweep grid.toml --gpus all
      memtraffic measure --sweep grid.toml --shard 2/8 --out runs/part2
      memtraffic measure my_kernel --variants mine.py --baseline runs/before
    """
    from memtraffic.api import run_measure
    from memtraffic.collect.measure import MeasureOptions
    from memtraffic.views.tables import render_results

    formats.check(fmt, FOR_ROWS)
    _check_baseline(baseline)
    opts = MeasureOptions(
        variants=list(variants or []), shapes=list(shape or []), dtypes=list(dtype or []),
        params=list(param or []), all_variants=all_variants,
        variant_files=[str(f) for f in variant_files or []], metrics=metrics, out=out,
        clock_control=clock_control, cache_control=cache_control, source=source, verbose=verbose,
        sweep=sweep, rerun=rerun, shard=shard, gpus=gpus, timing_only=timing_only, roofs=roofs)
    result = run_measure(opts, echo=lambda line: typer.echo(line, err=True))
    if len(result.table):
        typer.echo(render_results(result.table, fmt, width=width(wide)))
        _print_baseline_diff(baseline, result.run_dir, fmt, width(wide))
    from memtraffic.api import failed_configs

    failed = failed_configs(result.run)
    for c in failed:
        typer.echo(f"{c['range']}: {c['status']}{': ' + str(c['error']) if c.get('error') else ''}", err=True)
    typer.echo(f"saved in {result.run_dir}", err=True)
    if result.run.get("interrupted"):
        typer.echo("interrupted: the finished configs are saved", err=True)
        raise typer.Exit(code=130)
    if failed:
        raise typer.Exit(code=1)


def profile(
    ctx: typer.Context,
    torch_ops: Annotated[
        bool,
        typer.Option("--torch-ops", help="Trace every aten op of a PyTorch program: each gets its NVTX "
                     "range, its minimum (what any implementation must move) and FLOPs. With "
                     "--profile-from-start off, only the calls between cudaProfilerStart and "
                     "cudaProfilerStop."),
    ] = False,
    triton: Annotated[
        bool, typer.Option("--triton/--no-triton", help="Python programs: an NVTX range per Triton launch; "
                           "compiled kernels get their minimum and fused aten ops.")
    ] = True,
    timing_only: TimingOnly = False,
    roofs: Roofs = True,
    from_first_forward: FromFirstForward = False,
    all_calls: AllCalls = False,
    metrics: ProfileMetrics = "bytes",
    ops: Annotated[
        list[str] | None,
        typer.Option(help="With --torch-ops: measure only these ops (aten.mm or aten.mm.default, "
                     "comma-separated), e.g. with --metrics traffic."),
    ] = None,
    source: Source = False,
    kernel_name: Annotated[
        str | None,
        typer.Option(help="Profile only kernels whose name matches this regex (ncu --kernel-name)."),
    ] = None,
    launch_skip: Annotated[
        int | None, typer.Option(help="Skip this many matching kernel launches first (ncu --launch-skip).")
    ] = None,
    launch_count: Annotated[
        int | None, typer.Option(help="Profile at most this many kernel launches (ncu --launch-count).")
    ] = None,
    nvtx_include: Annotated[
        list[str] | None, typer.Option(help="Only kernels inside matching NVTX ranges (ncu --nvtx-include "
                                       "syntax, e.g. 'step/'); repeatable.")
    ] = None,
    distinct: Annotated[
        int, typer.Option(help="Measure the first K calls of each op signature (shapes, strides, dtypes, "
                          "alignment, scalars); repeats reuse their counters, labelled reused.")
    ] = 1,
    value_calls: Annotated[
        int, typer.Option(metavar="V", help="Value-dependent ops (gathers, scatters, sorts): V calls of each "
                          "signature measured, and said if they differ (0: every call).")
    ] = 4,
    every_launch: Annotated[
        bool, typer.Option("--every-launch", help="Measure every kernel launch (--distinct 0).")
    ] = False,
    replay: Annotated[
        str, typer.Option(help="How ncu replays: kernel, range (each op, region or Triton launch as one "
                          "unit) or auto (kernel). run.json says which and why.")
    ] = "auto",
    time_from: Annotated[
        str, typer.Option(metavar="program|ncu", help="Each kernel's time: from a run without ncu (caches "
                          "as the program leaves them) or ncu's (caches flushed; faster).")
    ] = "program",
    target_processes: Annotated[
        str, typer.Option(help="all (the program and its children) or application-only.")
    ] = "all",
    profile_from_start: Annotated[
        str, typer.Option(help="on, or off to profile only between cudaProfilerStart and cudaProfilerStop.")
    ] = "on",
    out: RunOut = None,
    clock_control: ClockControl = "none",
    cache_control: CacheControl = "all",
    verbose: Verbose = False,
    baseline: Baseline = None,
    fmt: Fmt = "table",
    wide: Wide = False,
) -> None:
    """Profile any program under Nsight Compute (Python, trtexec, a CUDA binary).

    ncu runs it into a new run folder; the analysis is printed. Minimums come
    from --torch-ops (every aten op of a PyTorch program) or memtraffic.region
    blocks (JAX, CuPy). A failing program keeps its partial report, analyzed.

    Examples:
      memtraffic profile --torch-ops -- python train.py --steps 2
      memtraffic profile --kernel-name softmax --launch-count 10 -- ./my_cuda_app
      memtraffic profile -- trtexec --onnx=model.onnx --iterations=1
      memtraffic profile --torch-ops --baseline runs/before -- python train.py
    """
    from memtraffic.api import full_look_ops, run_profile
    from memtraffic.collect.profile import ProfileOptions, TimeFrom
    from memtraffic.ncu.metrics import FULL_LOOK
    from memtraffic.views.tables import op_calls_table, render_results

    formats.check(fmt, FOR_ROWS)
    _check_baseline(baseline)
    if profile_from_start not in ("on", "off"):
        raise UsageError(f"unknown --profile-from-start {profile_from_start!r}: use on or off")
    source_of_distinct = ctx.get_parameter_source("distinct")
    if every_launch and source_of_distinct is not None and source_of_distinct.name != "DEFAULT":
        raise UsageError(f"--every-launch measures every launch, --distinct {distinct} the first {distinct} "
                         "calls of each signature: give one of them")
    opts = ProfileOptions(
        command=list(ctx.args), metrics=metrics, torch_ops=torch_ops, triton=triton, timing_only=timing_only,
        source=source, kernel_name=kernel_name,
        launch_skip=launch_skip, launch_count=launch_count, nvtx_include=list(nvtx_include or []),
        ops=[op.strip() for spec in ops or [] for op in spec.split(",") if op.strip()],
        target_processes=target_processes, profile_from_start=profile_from_start == "on",
        from_first_forward=from_first_forward, clock_control=clock_control, cache_control=cache_control,
        out=out, verbose=verbose, distinct=0 if every_launch else distinct, value_calls=value_calls,
        replay=replay, roofs=roofs, time_from=cast(TimeFrom, time_from))
    result = run_profile(opts, echo=lambda line: typer.echo(line, err=True))
    if len(result.table) and fmt == "table":
        print_floor_summary(result, width(wide))
    if len(result.table) and torch_ops and fmt == "table" and not all_calls:
        typer.echo(op_calls_table(result.table, width=width(wide)))
    elif len(result.table):
        typer.echo(render_results(result.table, fmt, width=width(wide)))
        _print_baseline_diff(baseline, result.run_dir, fmt, width(wide))
    if torch_ops and fmt == "table" and (why := full_look_ops(result.table)):
        window = [] if profile_from_start == "on" else ["--profile-from-start", "off"]
        typer.echo(f"{len(why)} op type(s) moved more L1 bytes than the minimum; to see why (sectors, "
                   "bytes asked for), measure just them with the full set:\n  "
                   + shlex.join(["memtraffic", "profile", "--torch-ops", "--metrics", FULL_LOOK, "--ops",
                                 ",".join(why), *window, "--", *ctx.args]))
    typer.echo(f"saved in {result.run_dir}", err=True)
    if result.returncode:
        typer.echo(f"the program exited with code {result.returncode}: the kernels profiled before it ended "
                   "are saved and analyzed above", err=True)
        raise typer.Exit(code=result.returncode if 0 < result.returncode < 256 else 1)


def ops(
    command: Annotated[
        list[str] | None, typer.Argument(help="The program and its arguments, after --.")
    ] = None,
    from_first_forward: FromFirstForward = False,
    all_calls: AllCalls = False,
    fmt: Fmt = "table",
) -> None:
    """Run a PyTorch program with every aten op traced (no ncu, CPU or GPU): its compulsory traffic.

    Per op call (the ten moving the most bytes; every call in program
    order with --all-calls): the aten overload, shape and dtype of its
    result, the minimum bytes read and written (what any implementation
    must move: docs/op-rules.md), model FLOPs and
    FLOP/byte; then a summary per op type, most bytes first. Regions (memtraffic.region) are
    listed too. The program is not edited: memtraffic traces it from the
    moment it imports torch. Its own output goes to stderr.

    Examples:
      memtraffic ops -- python train.py --steps 1
      memtraffic ops --format json -- python infer.py > ops.json
    """
    from memtraffic.api import check_traced, trace_ops
    from memtraffic.views.tables import ops_table

    formats.check(fmt, FOR_ROWS)
    cmd = list(command or [])
    run = trace_ops(cmd, from_first_forward)
    for text in run.warnings:
        typer.echo(f"warning: {text}", err=True)
    if run.records:
        typer.echo(ops_table(run.records, fmt, all_calls=all_calls))
    check_traced(run, cmd)


def roofs(
    refresh: Annotated[bool, typer.Option("--refresh", help="Measure again though cached.")] = False,
    ncu: Annotated[bool, typer.Option("--ncu/--no-ncu", help="Also read ncu's theoretical peaks.")] = True,
    save_reference: Annotated[
        bool, typer.Option("--save-reference", help="Also write reports/roofs/<device>.json (to commit).")
    ] = False,
    fmt: Annotated[str, format_option(FOR_OBJECTS)] = "table",
) -> None:
    """Measure this GPU's roofs once and cache them: DRAM and L2 bandwidth, FP32 FMA and tensor-core FLOP/s.

    Measured roofs (CUDA events, median of repeats) beside ncu's theoretical
    peaks (per-cycle peak x clock, when ncu is found). Cached per device in
    ~/.cache/memtraffic/roofs.json ($MEMTRAFFIC_CACHE/roofs.json),
    where 'memtraffic roofline' finds them. Needs a CUDA GPU.

    Examples:
      memtraffic roofs
      memtraffic roofs --refresh --save-reference   # commit reports/roofs/
      memtraffic roofs --format json
    """
    from memtraffic.api import measure_roofs
    from memtraffic.views.tables import roofs_table

    formats.check(fmt, FOR_OBJECTS)
    entry = measure_roofs(refresh, ncu, save_reference, echo=lambda m: typer.echo(m, err=True))
    typer.echo(formats.render(fmt, entry, lambda: roofs_table(entry)))


def bench(
    variants: Annotated[
        list[str] | None, typer.Argument(help="Variants to time; default: every softmax variant.")
    ] = None,
    shape: Annotated[
        list[str] | None, typer.Option(help="MxN, repeatable; default: the bench suite's shapes per op.")
    ] = None,
    dtype: Annotated[
        list[str] | None, typer.Option(help="fp32/fp16/bf16, repeatable; default: fp32 and bf16.")
    ] = None,
    budget: Annotated[
        float, typer.Option(help="Seconds of timed repetitions per config (5 to 200 reps).")
    ] = 0.3,
    out: Annotated[Path | None, typer.Option(help="New folder for results.json and table.txt.")] = None,
    variant_files: VariantFiles = None,
    fmt: Fmt = "table",
) -> None:
    """Time variants with CUDA events (L2 flushed, median) beside a same-size copy and torch's kernels.

    Prints time, effective bandwidth (minimum bytes / time), its fraction of the copy bandwidth, and
    speedups over torch.softmax and torch.compile. Needs a CUDA GPU.

    Examples:
      memtraffic bench softmax_tiled torch_softmax --shape 4096x4096 --dtype bf16
    """
    from memtraffic.api import bench as run_bench
    from memtraffic.views.tables import bench_table

    formats.check(fmt, FOR_ROWS)
    result = run_bench(variants or [], shape or [], dtype or [], budget, out, variant_files or [],
                       echo=lambda m: typer.echo(m, err=True))
    # json: the whole result (environment, rows); csv: a line per row
    typer.echo(formats.render(fmt, result["rows"], lambda: bench_table(result), whole=[result]))
