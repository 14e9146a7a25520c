"""Thin typer commands over memtraffic.api: each parses its options, calls one api function (the work, which
a notebook calls alike) and prints through memtraffic.views (formats from its registry). Errors end in
memtraffic/cli_errors.py: a line or two on stderr and an exit code."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from memtraffic.cli_errors import Cli
from memtraffic.ncu.metrics import METRIC_SETS
from memtraffic.views import formats
from memtraffic.views.formats import FOR_OBJECTS, FOR_ROWS
from memtraffic.vocab.errors import MemtrafficError, ReportError, UsageError, warn

if TYPE_CHECKING:
    from memtraffic.api import Run
    from memtraffic.collect.profile import ProfileResult

app = typer.Typer(
    cls=Cli,
    rich_markup_mode=None,
    no_args_is_help=True,
    add_completion=False,
    help="Where did my bytes go? Run GPU kernel variants under Nsight Compute and compare the bytes each "
    "memory level moved (L1, L2, DRAM) with the operation's theoretical minimum.",
)


def _print_version(value: bool) -> None:
    if value:
        from memtraffic import __version__

        typer.echo(f"memtraffic {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", help="Print the version and exit.", callback=_print_version,
                           is_eager=True)
    ] = False,
) -> None:
    """The options every command shares (--version)."""


def _format_option(offered: tuple[str, ...], **notes: str) -> Any:
    """The --format option of a command offering these formats (memtraffic.views.formats), its help written
    from the registry (`notes`: what a format holds for this command)."""
    return typer.Option("--format", "-f", help=formats.help_text(offered, **notes))


Fmt = Annotated[str, _format_option(FOR_ROWS)]
# --metrics of measure and profile, written from the one table of metric sets (memtraffic.ncu.metrics)
# (the set names only: 'memtraffic metrics' says what each measures; the help stays a screen long)
METRICS_HELP = (f"Comma-separated metric sets ({', '.join(METRIC_SETS)}; 'memtraffic metrics' says what "
                "each measures), aliases or raw ncu names; checked against this GPU's 'ncu --query-metrics'.")
VariantFiles = Annotated[
    list[Path] | None,
    typer.Option(
        "--variants",
        help="A Python file of your own variants (VARIANTS = {'name': Variant(...)}, the interface of "
        "memtraffic/kernels/); repeatable. They join the shipped suite.",
    ),
]


Partial = Annotated[
    bool,
    typer.Option("--partial", help="Accept a run that lacks what its plan lists (a report cut short or "
                 "missing, an interrupted run): exit 0, with each gap named on stderr and marked in the "
                 "'status' column (missing, failed, partial). Without it such a run exits 1."),
]
Roofs = Annotated[
    bool, typer.Option("--roofs/--no-roofs", help="Measure the GPU's roofs after the run when none are "
                       "known, once (about 20 s): the floor needs them.")
]
Wide = Annotated[
    bool, typer.Option("--wide", help="Tables and notes one line each, however long (by default they fit "
                       "the terminal: COLUMNS, else 100 columns; the same cells).")
]
Explain = Annotated[
    bool, typer.Option("--explain", help="Under each finding, the arithmetic behind it (the JSON carries "
                       "it as each finding's evidence).")
]


def _width(wide: bool) -> int | None:
    from memtraffic.views.tables import terminal_width

    return None if wide else terminal_width()


Baseline = Annotated[
    Path | None,
    typer.Option(help="An earlier run folder, .ncu-rep or saved table (analyze --format json): print "
                 "'memtraffic diff BASELINE NEW' right after this run (to stderr with --format json/csv)."),
]


def _print_baseline_diff(baseline: Path | None, run_dir: Path, fmt: str, width: int | None = None) -> None:
    """The diff of a new run against its --baseline; a refusal (other GPU) is a warning, the run stays."""
    if baseline is None:
        return
    from memtraffic.api import diff
    from memtraffic.views.diff_table import render

    try:
        text = render(diff(baseline, run_dir), "table", width)
    except MemtrafficError as err:
        warn(f"no diff against {baseline}: {err}")
        return
    typer.echo(f"\ndiff against {baseline}:\n{text}", err=fmt != "table")


def _print_floor_summary(path: Path | Run | ProfileResult, width: int | None = None) -> None:
    """The floor's summary (memtraffic.analysis.floor) above a table of a run; a run it cannot read (no
    minimum, no time) gets none: the table says what there is."""
    from memtraffic.api import floor as floor_of

    try:
        text = floor_of(path).summary(width)
    except MemtrafficError:
        return
    if text:
        typer.echo("\n".join([text, "  (memtraffic floor RUN: every op type, the reasons, a legend)", ""]))


def _check_baseline(baseline: Path | None) -> None:
    """Before measuring: a --baseline that is not there would only be found after the run."""
    if baseline is not None and not baseline.exists():
        raise UsageError(f"--baseline {baseline}: no such run folder or file")


@app.command("list")
def list_(
    variants: Annotated[
        list[str] | None, typer.Argument(help="With --count: the variants of the grid (or --all).")
    ] = None,
    shape: Annotated[
        list[str] | None,
        typer.Option(help="Shape as MxN (or MxNxK for matmuls); default: each op's own. Repeatable with "
                     "--count."),
    ] = None,
    dtype: Annotated[
        list[str] | None, typer.Option(help="fp32, fp16 or bf16 (default fp32); repeatable with --count.")
    ] = None,
    param: Annotated[
        list[str] | None, typer.Option(help="With --count: KEY=V1,V2 as 'measure --param' takes it.")
    ] = None,
    all_variants: Annotated[bool, typer.Option("--all", help="With --count: every variant.")] = False,
    sweep: Annotated[Path | None, typer.Option(help="With --count: a TOML sweep file.")] = None,
    count: Annotated[
        bool,
        typer.Option("--count", help="Instead of the table: how many configs 'measure' with the same grid "
                     "options would profile (per variant, and those skipped), without a GPU."),
    ] = False,
    variant_files: VariantFiles = None,
    fmt: Fmt = "table",
    wide: Wide = False,
) -> None:
    """List the kernel variants with their minimum vs predicted traffic, FLOPs and arithmetic intensity.

    With --count, the size of a grid before running it: give the options
    you would give 'measure' (variants, --shape, --dtype, --param, --all,
    --sweep) and it prints the number of configs per variant and in all.

    Examples:
      memtraffic list --shape 4096x4096 --dtype bf16
      memtraffic list --count softmax_tiled --shape 4096x4096 --param BLOCK_M=1,8
      memtraffic list --count --sweep grid.toml
    """
    from memtraffic.api import count_grid, list_rows
    from memtraffic.views.tables import render_list

    formats.check(fmt, FOR_ROWS)
    if count:
        from memtraffic.views.tables import grid_count_table

        counts = count_grid(variants or [], shape or [], dtype or [], param or [], all_variants, sweep,
                            variant_files or [])
        typer.echo(formats.render(fmt, counts, lambda: grid_count_table(counts)))
        return
    if variants or param or all_variants or sweep or len(shape or []) > 1 or len(dtype or []) > 1:
        raise UsageError("variant names, --param, --all, --sweep and repeated --shape/--dtype go with "
                         "--count (the table takes one --shape and one --dtype)")
    rows = list_rows(shape[0] if shape else None, dtype[0] if dtype else "fp32", variant_files or [])
    typer.echo(render_list(rows, fmt, _width(wide)))


@app.command()
def measure(
    variants: Annotated[
        list[str] | None, typer.Argument(help="Variant names (see 'memtraffic list'); or use --all.")
    ] = None,
    shape: Annotated[
        list[str] | None,
        typer.Option(
            help="MxN, or MxNxK for matmuls; repeatable. Each variant gets the shapes of its rank. "
            "Default: each op's own shape."
        ),
    ] = None,
    dtype: Annotated[
        list[str] | None, typer.Option(help="fp32, fp16 or bf16; repeatable. Default: fp32.")
    ] = None,
    param: Annotated[
        list[str] | None,
        typer.Option(
            help="KEY=VALUE or KEY=V1,V2 for the variants that take KEY; repeatable. Every "
            "combination is measured."
        ),
    ] = None,
    all_variants: Annotated[
        bool, typer.Option("--all", help="Measure every variant (the suite and those of --variants).")
    ] = False,
    variant_files: VariantFiles = None,
    timing_only: Annotated[
        bool, typer.Option("--timing-only", help="No ncu: time each config's kernels with torch.profiler: "
                           "bandwidth at the minimum, no per-level bytes. Automatic when ncu cannot "
                           "read the counters.")
    ] = False,
    roofs: Roofs = True,
    metrics: Annotated[
        str,
        typer.Option(help="auto (the default): the one-pass bytes set for every config, then traffic "
                     "again for those below 0.9 L1 load or store efficiency that their model does not "
                     "predict. Or: " + METRICS_HELP),
    ] = "auto",
    out: Annotated[
        Path | None,
        typer.Option(
            help="New or empty folder for the run (never overwritten). Default: "
            "reports/runs/<UTC time>_<variant>/."
        ),
    ] = None,
    clock_control: Annotated[
        str, typer.Option(help="ncu --clock-control: none (the GPU's own clocks) or base (locked base).")
    ] = "none",
    cache_control: Annotated[
        str, typer.Option(help="ncu --cache-control: all (flush caches before each replay pass) or none.")
    ] = "all",
    source: Annotated[
        bool,
        typer.Option(
            "--source/--no-source",
            help="Also per-instruction counters and the kernels' source and SASS, for 'memtraffic lines'. "
            "On an H100 (2026-11-23, measure --all): 8 replay passes a kernel, not 6; 95 MB, not 0.53.",
        ),
    ] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Also show ncu's own ==PROF== lines.")
    ] = False,
    gpus: Annotated[
        str | None,
        typer.Option(
            help="all, or GPU indices like 0,1: one ncu process per GPU, each taking the next config "
            "when it finishes one; a report per GPU."
        ),
    ] = None,
    sweep: Annotated[
        Path | None,
        typer.Option(help="A TOML sweep file (variants, shapes, dtypes, [params], [[grid]] tables) "
                     "instead of variant names and grid options."),
    ] = None,
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
        variants=list(variants or []),
        shapes=list(shape or []),
        dtypes=list(dtype or []),
        params=list(param or []),
        all_variants=all_variants,
        variant_files=[str(f) for f in variant_files or []],
        metrics=metrics,
        out=out,
        clock_control=clock_control,
        cache_control=cache_control,
        source=source,
        verbose=verbose,
        sweep=sweep,
        rerun=rerun,
        shard=shard,
        gpus=gpus,
        timing_only=timing_only,
        roofs=roofs,
    )
    result = run_measure(opts, echo=lambda line: typer.echo(line, err=True))
    if len(result.table):
        typer.echo(render_results(result.table, fmt, width=_width(wide)))
        _print_baseline_diff(baseline, result.run_dir, fmt, _width(wide))
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


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
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
        bool, typer.Option("--triton/--no-triton", help="Python programs: give each Triton kernel launch its "
                           "own NVTX range; torch.compile's generated kernels get their minimum from their "
                           "buffers and name the aten ops they fused.")
    ] = True,
    timing_only: Annotated[
        bool, typer.Option("--timing-only", help="No ncu: time each kernel with torch.profiler and show "
                           "bandwidth at the minimum, no per-level bytes (automatic without ncu's counters).")
    ] = False,
    roofs: Roofs = True,
    from_first_forward: Annotated[
        bool, typer.Option("--from-first-forward", help="With --torch-ops: trace from the program's first "
                           "nn.Module forward (leaves weight initialisation out).")
    ] = False,
    all_calls: Annotated[
        bool, typer.Option("--all-calls", help="With --torch-ops: print every op call; by default the "
                           "per-op summary and the worst calls (results.csv always holds every call).")
    ] = False,
    metrics: Annotated[
        str, typer.Option(help=f"Metric sets ({', '.join(METRIC_SETS)}; 'memtraffic metrics' says what each "
                          "measures), aliases or ncu names. bytes: one replay pass a kernel.")
    ] = "bytes",
    ops: Annotated[
        list[str] | None,
        typer.Option(help="With --torch-ops: measure only these ops (aten.mm or aten.mm.default, "
                     "comma-separated), e.g. with --metrics traffic."),
    ] = None,
    source: Annotated[
        bool, typer.Option("--source", help="Also per-line counters and the embedded source, for "
                           "'memtraffic lines' (larger reports).")
    ] = False,
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
        str, typer.Option(help="How ncu replays: kernel (each kernel), range (each op, region or Triton "
                          "launch range as one unit; its kernels timed in a run without ncu) or auto "
                          "(kernel). run.json says which, why, and where times come from.")
    ] = "auto",
    target_processes: Annotated[
        str, typer.Option(help="all (the program and its children) or application-only.")
    ] = "all",
    profile_from_start: Annotated[
        str, typer.Option(help="on, or off to profile only between cudaProfilerStart and cudaProfilerStop.")
    ] = "on",
    out: Annotated[
        Path | None,
        typer.Option(help="New or empty folder for the run. Default: reports/runs/<time>_<program>/."),
    ] = None,
    clock_control: Annotated[str, typer.Option(help="ncu --clock-control: none or base.")] = "none",
    cache_control: Annotated[str, typer.Option(help="ncu --cache-control: all or none.")] = "all",
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Also show ncu's own ==PROF== lines.")
    ] = False,
    baseline: Baseline = None,
    fmt: Fmt = "table",
    wide: Wide = False,
) -> None:
    """Profile any program under Nsight Compute (Python, trtexec, a CUDA binary).

    ncu runs it into a new run folder and the analysis is printed. Minimums
    come from the program: --torch-ops traces every aten op of a PyTorch
    program; memtraffic.region(...) marks any block (JAX, CuPy). A program
    that fails keeps its partial report, analyzed, and its exit code.

    Examples:
      memtraffic profile --torch-ops -- python train.py --steps 2
      memtraffic profile --kernel-name softmax --launch-count 10 -- ./my_cuda_app
      memtraffic profile -- trtexec --onnx=model.onnx --iterations=1
      memtraffic profile --torch-ops --baseline runs/before -- python train.py
    """
    from memtraffic.api import full_look_ops, run_profile
    from memtraffic.collect.profile import FULL_LOOK, ProfileOptions
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
        replay=replay, roofs=roofs)
    result = run_profile(opts, echo=lambda line: typer.echo(line, err=True))
    if len(result.table) and fmt == "table":
        _print_floor_summary(result, _width(wide))
    if len(result.table) and torch_ops and fmt == "table" and not all_calls:
        typer.echo(op_calls_table(result.table, width=_width(wide)))
    elif len(result.table):
        typer.echo(render_results(result.table, fmt, width=_width(wide)))
        _print_baseline_diff(baseline, result.run_dir, fmt, _width(wide))
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


@app.command()
def analyze(
    path: Annotated[Path, typer.Argument(help="A run folder from 'memtraffic measure', or any .ncu-rep.")],
    min_bytes: Annotated[
        list[str] | None,
        typer.Option(
            help="The minimum traffic, for reports captured by hand: TOTAL (read + write), or "
            "READ:WRITE for per-direction efficiencies. Sizes as 8388608, 8.39MB (SI) or 8MiB "
            "(binary), e.g. 8MiB:8MiB. REGEX=READ:WRITE (or REGEX=TOTAL), repeatable: the ranges "
            "and kernels whose name matches REGEX get that minimum (the first matching one wins), e.g. "
            "'attn=8MiB:8MiB' for memtraffic.region('attn', ...). Overrides the op model of our own runs."
        ),
    ] = None,
    group_by: Annotated[
        str,
        typer.Option(
            help="range: a row per NVTX range, its kernels summed; kernel: a row per launch; op: a row "
            "per op type of a traced program (profile --torch-ops) or region name, largest excess first."
        ),
    ] = "range",
    fmt: Annotated[str, _format_option(
        FOR_ROWS, table="readable units",
        json="a list of objects, raw numbers in bytes, ns, B/s; stable keys", csv="same columns")] = "table",
    partial: Partial = False,
    wide: Wide = False,
    explain: Explain = False,
) -> None:
    """Per-level efficiency: minimum bytes / bytes moved (1.00 is ideal).

    Rows are NVTX ranges (a range's kernels summed) or kernel launches,
    with the bytes L1, L2 and DRAM moved. Needs no GPU and no ncu: reports
    are read with the ncu-report package or an Nsight Compute install's
    ncu_report module. For memtraffic runs the minimum comes from each
    variant's op model; for other reports give --min-bytes, else the
    efficiencies stay blank and the bytes are still shown. Rows below ~0.9
    get a diagnosis: sector waste, redundant requests, extra passes,
    caches absorbing traffic before DRAM.

    Examples:
      memtraffic analyze reports/h100/seed_1048576x2_fp32
      memtraffic analyze my_app.ncu-rep --min-bytes 8MiB:8MiB
      memtraffic analyze app.ncu-rep --min-bytes attn=24MiB:8MiB --min-bytes 16MiB
      memtraffic analyze RUN --group-by kernel --format json > rows.json
      memtraffic analyze RUN --group-by op
    """
    from memtraffic.api import analyze as analyze_run
    from memtraffic.api import load_run, require_whole
    from memtraffic.views.tables import render_results

    formats.check(fmt, FOR_ROWS)
    run = load_run(path)  # once: the floor's summary above a table per op reads the same run
    table = analyze_run(run, min_bytes=min_bytes, group_by=group_by)
    if group_by == "op" and fmt == "table" and len(table):
        _print_floor_summary(run, _width(wide))
    typer.echo(render_results(table, fmt, group_by, _width(wide), explain))
    require_whole(table, str(path), partial)  # after the table: what there is, is shown


@app.command()
def floor(
    path: Annotated[Path, typer.Argument(help="A run folder (profile, measure) or a .ncu-rep.")],
    fmt: Annotated[
        str,
        typer.Option("--format", "-f", help="table (for people, with a legend) or json (gpu_time_s, "
                     "floor_s, by_op rows, eager_min_bytes, fused_min_bytes, dram_bytes, groups; seconds, "
                     "bytes)."),
    ] = "table",
    wide: Wide = False,
    partial: Annotated[bool, typer.Option("--partial", help="Show the floor of what an interrupted or cut "
                                          "run holds (each gap a warning) instead of exit 1.")] = False,
    explain: Explain = False,
) -> None:
    """How far the run is from its floor: time, floor and recoverable time per op type, and why.

    Each call's floor is the larger of its minimum bytes at the measured
    copy roof and its FLOPs at the measured roof of its dtype and unit;
    recoverable = time - floor, with the reason that holds it (bytes above
    the minimum, compute below its roof, launch-bound, occupancy, spills, a
    grid too small for the GPU, latency). Beside it the fused minimum of a
    traced program: what it must move if every intermediate stayed on chip,
    and its fusion groups: the chains of ops whose intermediates stay inside
    them, each with its time now, its time at the fused floor, and how to
    get the saving (torch.compile, a matmul epilogue, CUDA graphs, a kernel).

    Examples:
      memtraffic floor reports/h100/floor_eager_block
      memtraffic floor RUN --format json
    """
    from memtraffic.api import floor as floor_of
    from memtraffic.views.floor_table import render_floor

    formats.check(fmt, ("table", "json"))
    found = floor_of(path, partial, warn_gaps=True)
    if found.no_floor:  # never a floor of 0 or one set against ncu's range durations
        raise ReportError(f"{path}: {found.no_floor}")
    typer.echo(render_floor(found, fmt, _width(wide), explain))


@app.command()
def diff(
    a: Annotated[Path, typer.Argument(help="Before: a run folder, a .ncu-rep, or a saved table "
                                      "(results.json, analyze --format json).")],
    b: Annotated[Path, typer.Argument(help="After: the same kinds.")],
    group_by: Annotated[
        str,
        typer.Option(help="range: configs of measure (variant, op, shape, dtype, params), op calls and "
                     "regions of profile (name and call order); kernel: each kernel of those; op: per op "
                     "type; line: per source line (runs measured with --source)."),
    ] = "range",
    time_tolerance: Annotated[
        str,
        typer.Option(help="Time changes within this fraction (or within the spread of the runs' repeated "
                     "measurements, if larger) are noise, not changes: 5% or 0.05."),
    ] = "5%",
    allow_mixed: Annotated[
        bool, typer.Option("--allow-mixed", help="Diff runs measured on different GPUs anyway.")
    ] = False,
    fmt: Annotated[str, _format_option(
        FOR_ROWS, table="A, B and change per matched row, with a verdict",
        json="rows (a row per match: each measure's _a, _b, _change, _rel, time_noise, verdict) and fusion "
             "(each Inductor kernel of B beside the fusion group of A it fused)",
        csv="the same rows")] = "table",
    partial: Partial = False,
    wide: Wide = False,
) -> None:
    """Did my change help? Two runs matched config by config: bytes per level, time, efficiency, change.

    Byte counters are exact; a time change within the noise band (the
    tolerance, or the runs' own spread where they hold repeated
    measurements) is marked '~' and not called a change. Matched rows come
    largest change first, each with a one-line verdict (which level moved,
    and why: sector waste, redundant requests, kernels); rows only in A or
    only in B are listed after. Runs of different GPUs are refused unless
    --allow-mixed. Needs no GPU. Where A is an eager run and B a compiled
    one of the same traced program, each Inductor kernel of B stands beside
    the fusion group of A whose ops it fused (memtraffic floor): the group's
    fused floor against the kernels' time, and the share of its saving they
    reached.

    Examples:
      memtraffic diff runs/before runs/after
      memtraffic diff runs/before runs/after --group-by line
      memtraffic diff saved.json runs/after --format json > changes.json
    """
    from memtraffic.api import diff as diff_runs
    from memtraffic.api import require_whole
    from memtraffic.views.diff_table import render

    formats.check(fmt, FOR_ROWS)
    result = diff_runs(a, b, group_by, time_tolerance, allow_mixed)
    typer.echo(render(result, fmt, _width(wide)))
    cut = [side for side in (result.a, result.b) if side.gaps]
    require_whole([g for side in cut for g in side.gaps], " and ".join(str(side.path) for side in cut),
                  partial)


@app.command()
def check(
    run: Annotated[Path, typer.Argument(help="A run folder, .ncu-rep or saved table to check.")],
    expect: Annotated[Path, typer.Option(help="The TOML file of expectations (see below).")],
    baseline: Annotated[
        Path | None, typer.Option(help="The baseline of no_worse_than; overrides the file's 'baseline'.")
    ] = None,
    fmt: Annotated[str, _format_option(FOR_OBJECTS, table="a line per failed check",
                                       json="for CI")] = "table",
) -> None:
    """A traffic gate for CI: exit 0 when every expectation holds, 1 with a line per failed one.

    The file holds [[expect]] tables: a regex over row names (match) and
    limits: max_bytes per level, min_efficiency per level, max_time, or
    no_worse_than a baseline run by a fraction. A regex that matches no
    row, or a malformed file, exits 2 with one line.

    \b
    baseline = "runs/before"      # for no_worse_than, relative to this file
    [[expect]]
    match = "softmax_tiled"
    max_bytes = { l1_ld = "8.4MB", dram = "17MB" }
    min_efficiency = { l1_ld = 0.95 }
    max_time = "20us"
    no_worse_than = "5%"

    Examples:
      memtraffic check runs/after --expect traffic.toml
      memtraffic check runs/after --expect traffic.toml --format json > check.json
    """
    from memtraffic.api import check as check_run
    from memtraffic.views.check_output import render, summary

    formats.check(fmt, FOR_OBJECTS)
    results = check_run(run, expect, baseline)
    typer.echo(render(results, fmt, str(run), str(expect)))
    if not all(r["ok"] for r in results):  # said on stderr too: a CI log that keeps only stderr shows it
        typer.echo(f"error: {run} fails {expect}: {summary(results)}", err=True)
        raise typer.Exit(code=1)


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def ops(
    command: Annotated[
        list[str] | None, typer.Argument(help="The program and its arguments, after --.")
    ] = None,
    from_first_forward: Annotated[
        bool, typer.Option("--from-first-forward", help="Trace from the program's first nn.Module forward "
                           "(leaves weight initialisation out).")
    ] = False,
    all_calls: Annotated[
        bool, typer.Option("--all-calls", help="List every call in program order (default: the calls "
                           "moving the most bytes, then the per-op summary).")
    ] = False,
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


@app.command()
def lines(
    path: Annotated[Path, typer.Argument(help="A run folder measured with --source, or any .ncu-rep with "
                                         "ncu's SourceCounters section.")],
    kernel: Annotated[
        str | None, typer.Option(help="Only kernels whose name or NVTX range matches this regex.")
    ] = None,
    top: Annotated[
        int | None, typer.Option(help="At most N lines per kernel, the largest excess first.")
    ] = None,
    fmt: Annotated[str, _format_option(FOR_ROWS, json="objects, raw counts")] = "table",
    wide: Wide = False,
) -> None:
    """Which source line moves the bytes: per line, global-memory requests, sectors, bytes and a verdict.

    One row per source line of each kernel that touches global memory,
    largest excess first: sector waste (a warp uses only part of each
    32-byte sector it moves; ncu's "excessive sectors") and redundancy
    (the line requests more than the operation's minimum: several warps or
    programs loading the same bytes, judged against the run's plan.json;
    ncu counts none of it as excessive). Kernels without line info
    (torch's, cuBLAS's) get a row per memory instruction (PC, SASS).

    Needs a report with ncu's per-instruction counters: 'memtraffic measure
    --source', or plain 'ncu --section SourceCounters --import-source yes'.

    Examples:
      memtraffic lines reports/h100/source_seed_1048576x2_fp32
      memtraffic lines RUN --kernel naive --top 3
      memtraffic lines my_app.ncu-rep --format json > lines.json
    """
    from memtraffic.api import line_gaps
    from memtraffic.api import lines as read_lines
    from memtraffic.views.tables import render_lines

    formats.check(fmt, FOR_ROWS)
    typer.echo(render_lines(read_lines(path, kernel=kernel, top=top), fmt, _width(wide)))
    for line in line_gaps(path):  # what the run lacks of its plan (lines shows what there is)
        warn(line)


@app.command()
def merge(
    runs: Annotated[list[Path], typer.Argument(help="Run folders to combine (shards, reruns, machines).")],
    out: Annotated[Path, typer.Option(help="New or empty folder for the merged run (never overwritten).")],
    allow_mixed: Annotated[
        bool, typer.Option("--allow-mixed", help="Merge runs of different GPUs or ncu versions anyway.")
    ] = False,
    fmt: Fmt = "table",
    wide: Wide = False,
) -> None:
    """Combine run folders into one new run: reports copied, one plan, one run.json.

    Configs are renumbered; each keeps its part, its reports and every
    ncu argv of its run. Runs measured on different GPUs or ncu versions
    are refused unless --allow-mixed. A config measured in two runs keeps
    both rows (the second labelled #2). 'analyze', 'roofline' and
    'report' then read the merged folder as one run.

    Examples:
      memtraffic merge runs/part1 runs/part2 runs/part3 --out runs/sweep
      memtraffic merge runs/a runs/a-rerun --out runs/a-complete
    """
    from memtraffic.api import merge as merge_runs
    from memtraffic.views.tables import render_results

    formats.check(fmt, FOR_ROWS)
    table, run = merge_runs(runs, out, allow_mixed, echo=lambda line: typer.echo(line, err=True))
    typer.echo(render_results(table, fmt, width=_width(wide)))
    if run["missing"]:
        raise typer.Exit(code=1)


@app.command()
def roofline(
    runs: Annotated[
        list[Path] | None, typer.Argument(help="Run folders from 'memtraffic measure'; default: the newest.")
    ] = None,
    level: Annotated[str, typer.Option(help="dram, l2, l1 or all (comma-separated works too).")] = "all",
    out: Annotated[
        Path | None,
        typer.Option(help="HTML file (offline); default: roofline-RUN.html in the current folder."),
    ] = None,
    png: Annotated[Path | None, typer.Option(help="Also a static PNG (needs kaleido and Chromium).")] = None,
    ceilings_file: Annotated[
        Path | None, typer.Option("--ceilings", help="Ceilings JSON; default: cached, then committed ones.")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace output files that exist.")] = False,
    partial: Partial = False,
) -> None:
    """Hierarchical roofline (log-log) and traffic-vs-minimum bars of one or more runs.

    One point per config and level (L1, L2, DRAM): performance = model
    FLOPs / kernel time, intensity = model FLOPs / bytes at that level.
    Roofs: measured (solid), ncu theoretical (dashed).

    Examples:
      memtraffic roofline reports/runs/RUN
      memtraffic roofline RUN_A RUN_B --level dram --out cmp.html
      memtraffic roofline RUN --png roof.png   # and roof-traffic.png
    """
    from memtraffic.api import write_roofline

    written, notes = write_roofline(runs or [], level, out=out, png=png, ceilings=ceilings_file, force=force,
                                    partial=partial)
    for note in notes:
        typer.echo(f"note: {note}", err=True)
    for path in written:
        typer.echo(f"wrote {path}")


@app.command()
def report(
    run: Annotated[Path, typer.Argument(help="Run folder from 'memtraffic measure'.")],
    out: Annotated[
        Path | None, typer.Option(help="HTML file; default: report-RUN.html in the current folder.")
    ] = None,
    ceilings_file: Annotated[
        Path | None, typer.Option("--ceilings", help="Ceilings JSON; default: cached, then committed ones.")
    ] = None,
    baseline: Annotated[
        Path | None,
        typer.Option(help="An earlier run (folder, .ncu-rep or saved table): the page adds 'memtraffic diff "
                     "BASELINE RUN' and both runs' tables and traffic bars side by side."),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace the output file if it exists.")] = False,
    partial: Partial = False,
) -> None:
    """One self-contained HTML page of a run: environment, analyzed table, diagnoses, roofline, traffic.

    plotly.js is inline, so the page opens offline; its numbers are those
    'memtraffic analyze' (and with --baseline, 'memtraffic diff') prints.

    Examples:
      memtraffic report reports/runs/RUN
      memtraffic report RUN --out softmax.html
      memtraffic report runs/after --baseline runs/before
    """
    from memtraffic.api import write_report

    typer.echo(f"wrote {write_report(run, out, ceilings_file, baseline, force=force, partial=partial)}")


@app.command()
def metrics(
    chip: Annotated[str | None, typer.Option(help="A chip of `ncu --list-chips` (ga102, gh100, ...); "
                                             "default: this machine's GPU, asked through ncu.")] = None,
    all_chips: Annotated[bool, typer.Option("--all-chips", help="Every chip ncu 2025.3.1 knows.")] = False,
    set_name: Annotated[str | None, typer.Option("--set", help=f"One metric set ({', '.join(METRIC_SETS)}); "
                                                 "default: all.")] = None,
    fmt: Annotated[str, _format_option(FOR_OBJECTS)] = "table",
) -> None:
    """What each metric set measures on a GPU, with which ncu names, and what it cannot count there.

    The lists of ncu 2025.3.1's 28 chips ship with memtraffic, so --chip works
    on any machine. Without --chip the local GPU is asked (its ncu's own list
    when ncu is here). Only the H100 and H200 were measured by this project.

    Examples:
      memtraffic metrics --chip ga102           # RTX 3080 Ti
      memtraffic metrics --all-chips --set traffic --format json
    """
    from memtraffic.api import metric_sets
    from memtraffic.views.metric_sets import render

    formats.check(fmt, FOR_OBJECTS)
    rows, source_line = metric_sets(chip, all_chips, set_name)
    if source_line is not None:
        typer.echo(source_line, err=True)
    typer.echo(render(rows, fmt))


@app.command()
def ceilings(
    refresh: Annotated[bool, typer.Option("--refresh", help="Measure again though cached.")] = False,
    ncu: Annotated[bool, typer.Option("--ncu/--no-ncu", help="Also read ncu's theoretical peaks.")] = True,
    save_reference: Annotated[
        bool, typer.Option("--save-reference", help="Also write reports/ceilings/<device>.json (to commit).")
    ] = False,
    fmt: Annotated[str, _format_option(FOR_OBJECTS)] = "table",
) -> None:
    """Measure this GPU's roofs once and cache them: DRAM and L2 bandwidth, FP32 FMA and tensor-core FLOP/s.

    Measured roofs (CUDA events, median of repeats) beside ncu's theoretical
    peaks (per-cycle peak x clock, when ncu is found). Cached per device in
    ~/.cache/memtraffic/ceilings.json ($MEMTRAFFIC_CACHE/ceilings.json),
    where 'memtraffic roofline' finds them. Needs a CUDA GPU.

    Examples:
      memtraffic ceilings
      memtraffic ceilings --refresh --save-reference   # commit reports/ceilings/
      memtraffic ceilings --format json
    """
    from memtraffic.api import measure_ceilings
    from memtraffic.views.tables import ceilings_table

    formats.check(fmt, FOR_OBJECTS)
    entry = measure_ceilings(refresh, ncu, save_reference, echo=lambda m: typer.echo(m, err=True))
    typer.echo(formats.render(fmt, entry, lambda: ceilings_table(entry)))


@app.command()
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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
