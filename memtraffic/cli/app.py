"""The `memtraffic` command: the typer app (pyproject's [project.scripts] names memtraffic.cli:app), its
commands in the order --help lists them, and the commands that fit neither side. The commands live in
read_commands.py (reading runs: no GPU) and measure_commands.py (running kernels and programs) beside it;
the options more than one command takes are declared once in options.py. Each command parses
its options, calls one memtraffic.api function (the work, which a notebook calls alike) and prints through
memtraffic.views (formats from its registry). Errors end in memtraffic/cli/exits.py: a line or two on
stderr and an exit code. The command modules import memtraffic.api and the views inside each command, so
`memtraffic --help` and shell completion start without pandas (0.1 s instead of 0.8 s on 2 CPU cores)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from memtraffic.cli.exits import Cli
from memtraffic.cli.measure_commands import bench, measure, ops, profile, roofs
from memtraffic.cli.options import (
    AllowMixed,
    AllVariants,
    Dtype,
    Fmt,
    Param,
    Shape,
    Sweep,
    VariantFiles,
    Wide,
    format_option,
    width,
)
from memtraffic.cli.read_commands import analyze, check, diff, floor, lines, report, roofline
from memtraffic.ncu.metrics import METRIC_SETS
from memtraffic.views import formats
from memtraffic.views.formats import FOR_OBJECTS, FOR_ROWS
from memtraffic.vocab.errors import UsageError

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


def list_(
    variants: Annotated[
        list[str] | None, typer.Argument(help="With --count: the variants of the grid (or --all).")
    ] = None,
    shape: Shape = None,
    dtype: Dtype = None,
    param: Param = None,
    all_variants: AllVariants = False,
    sweep: Sweep = None,
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
    typer.echo(render_list(rows, fmt, width(wide)))


def merge(
    runs: Annotated[list[Path], typer.Argument(help="Run folders to combine (shards, reruns, machines).")],
    out: Annotated[Path, typer.Option(help="New or empty folder for the merged run (never overwritten).")],
    allow_mixed: AllowMixed = False,
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
    typer.echo(render_results(table, fmt, width=width(wide)))
    if run.get("missing"):
        raise typer.Exit(code=1)


def metrics(
    chip: Annotated[str | None, typer.Option(help="A chip of `ncu --list-chips` (ga102, gh100, ...); "
                                             "default: this machine's GPU, asked through ncu.")] = None,
    all_chips: Annotated[bool, typer.Option("--all-chips", help="Every chip ncu 2025.3.1 knows.")] = False,
    set_name: Annotated[str | None, typer.Option("--set", help=f"One metric set ({', '.join(METRIC_SETS)}); "
                                                 "default: all.")] = None,
    fmt: Annotated[str, format_option(FOR_OBJECTS)] = "table",
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


# The program to run follows `--`: profile and ops take the arguments they do not know as its own.
PROGRAM_AFTER_DASHES = {"allow_extra_args": True, "ignore_unknown_options": True}
for command in (list_, measure, profile, analyze, floor, diff, check, ops, lines, merge, roofline, report,
                metrics, roofs, bench):  # the order of --help
    app.command(command.__name__.rstrip("_"),
                context_settings=PROGRAM_AFTER_DASHES if command in (profile, ops) else None)(command)
app.command("ceilings", hidden=True)(roofs)  # roofs' old name, kept working for scripts that call it
