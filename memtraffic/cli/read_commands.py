"""The reading commands: analyze, floor, diff, check, lines, roofline and report read run folders, reports or
saved tables (no GPU, no ncu), call one memtraffic.api function each and print through memtraffic.views.
Registered on the app in app.py; shared options in options.py."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from memtraffic.cli.options import (
    AllowMixed,
    Explain,
    Force,
    OldRoofsFile,
    Partial,
    RoofsFile,
    Wide,
    format_option,
    width,
)
from memtraffic.views import formats
from memtraffic.views.formats import FOR_OBJECTS, FOR_ROWS
from memtraffic.vocab.errors import MemtrafficError, ReportError, warn
from memtraffic.vocab.grouping import diff_grouping, grouping

if TYPE_CHECKING:
    from memtraffic.api import Run
    from memtraffic.collect.profile import ProfileResult


def print_floor_summary(path: Path | Run | ProfileResult, columns: int | None = None) -> None:
    """The floor's summary (memtraffic.analysis.floor) above a table of a run; a run it cannot read (no
    minimum, no time) gets none: the table says what there is."""
    from memtraffic.api import floor as floor_of

    try:
        text = floor_of(path).summary(columns)
    except MemtrafficError:
        return
    if text:
        typer.echo("\n".join([text, "  (memtraffic floor RUN: every op type, the reasons, a legend)", ""]))


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
    fmt: Annotated[str, format_option(
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
    by = grouping(group_by)
    table = analyze_run(run, min_bytes=min_bytes, group_by=by)
    if by == "op" and fmt == "table" and len(table):
        print_floor_summary(run, width(wide))
    typer.echo(render_results(table, fmt, by, width(wide), explain))
    require_whole(table, str(path), partial)  # after the table: what there is, is shown


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
    typer.echo(render_floor(found, fmt, width(wide), explain))


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
    allow_mixed: AllowMixed = False,
    fmt: Annotated[str, format_option(
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
    result = diff_runs(a, b, diff_grouping(group_by), time_tolerance, allow_mixed)
    typer.echo(render(result, fmt, width(wide)))
    cut = [side for side in (result.a, result.b) if side.gaps]
    require_whole([g for side in cut for g in side.gaps], " and ".join(str(side.path) for side in cut),
                  partial)


def check(
    run: Annotated[Path, typer.Argument(help="A run folder, .ncu-rep or saved table to check.")],
    expect: Annotated[Path, typer.Option(help="The TOML file of expectations (see below).")],
    baseline: Annotated[
        Path | None, typer.Option(help="The baseline of no_worse_than; overrides the file's 'baseline'.")
    ] = None,
    fmt: Annotated[str, format_option(FOR_OBJECTS, table="a line per failed check",
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


def lines(
    path: Annotated[Path, typer.Argument(help="A run folder measured with --source, or any .ncu-rep with "
                                         "ncu's SourceCounters section.")],
    kernel: Annotated[
        str | None, typer.Option(help="Only kernels whose name or NVTX range matches this regex.")
    ] = None,
    top: Annotated[
        int | None, typer.Option(help="At most N lines per kernel, the largest excess first.")
    ] = None,
    fmt: Annotated[str, format_option(FOR_ROWS, json="objects, raw counts")] = "table",
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
    typer.echo(render_lines(read_lines(path, kernel=kernel, top=top), fmt, width(wide)))
    for line in line_gaps(path):  # what the run lacks of its plan (lines shows what there is)
        warn(line)


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
    roofs_file: RoofsFile = None,
    force: Force = False,
    partial: Partial = False,
    old_roofs_file: OldRoofsFile = None,
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

    written, notes = write_roofline(runs or [], level, out=out, png=png,
                                    roofs_file=roofs_file or old_roofs_file, force=force, partial=partial)
    for note in notes:
        typer.echo(f"note: {note}", err=True)
    for path in written:
        typer.echo(f"wrote {path}")


def report(
    run: Annotated[Path, typer.Argument(help="Run folder from 'memtraffic measure'.")],
    out: Annotated[
        Path | None, typer.Option(help="HTML file; default: report-RUN.html in the current folder.")
    ] = None,
    roofs_file: RoofsFile = None,
    baseline: Annotated[
        Path | None,
        typer.Option(help="An earlier run (folder, .ncu-rep or saved table): the page adds 'memtraffic diff "
                     "BASELINE RUN' and both runs' tables and traffic bars side by side."),
    ] = None,
    force: Force = False,
    partial: Partial = False,
    old_roofs_file: OldRoofsFile = None,
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

    written = write_report(run, out, roofs_file or old_roofs_file, baseline, force=force, partial=partial)
    typer.echo(f"wrote {written}")
