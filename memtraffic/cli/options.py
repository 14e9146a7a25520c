"""The options more than one command takes, each declared once as an `Annotated` type: a command names its
parameter with one (`wide: Wide = False`) and gets the same flag, help text and value name as every other
command taking it (value names: memtraffic/cli/help_text.py, by parameter name). The default stays with each
command, where it can differ (`--metrics`: auto for measure, bytes for profile)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from memtraffic.ncu.metrics import METRIC_SETS
from memtraffic.views import formats
from memtraffic.views.formats import FOR_ROWS


def format_option(offered: tuple[str, ...], **notes: str) -> Any:
    """The --format option of a command offering these formats (memtraffic.views.formats), its help written
    from the registry (`notes`: what a format holds for this command)."""
    return typer.Option("--format", "-f", help=formats.help_text(offered, **notes))


def width(wide: bool) -> int | None:
    """The width tables fit for --wide (None: one line each, however long)."""
    from memtraffic.views.tables import terminal_width

    return None if wide else terminal_width()


Fmt = Annotated[str, format_option(FOR_ROWS)]
Wide = Annotated[
    bool, typer.Option("--wide", help="Tables and notes one line each, however long (by default they fit "
                       "the terminal: COLUMNS, else 100 columns; the same cells).")
]
Explain = Annotated[
    bool, typer.Option("--explain", help="Under each finding, the arithmetic behind it (the JSON carries "
                       "it as each finding's evidence).")
]
Partial = Annotated[
    bool,
    typer.Option("--partial", help="Accept a run that lacks what its plan lists (a report cut short or "
                 "missing, an interrupted run): exit 0, with each gap named on stderr and marked in the "
                 "'status' column (missing, failed, partial). Without it such a run exits 1."),
]
AllowMixed = Annotated[
    bool, typer.Option("--allow-mixed", help="Accept runs measured on different GPUs (or ncu versions) "
                       "anyway.")
]

# what to measure: measure and list --count (the grid), measure and bench (variant files)
Variants = Annotated[
    list[str] | None, typer.Argument(help="Variant names (see 'memtraffic list'); or use --all.")
]
VariantFiles = Annotated[
    list[Path] | None,
    typer.Option(
        "--variants",
        help="A Python file of your own variants (VARIANTS = {'name': Variant(...)}, the interface of "
        "memtraffic/kernels/); repeatable. They join the shipped suite.",
    ),
]
Shape = Annotated[
    list[str] | None,
    typer.Option(help="MxN, or MxNxK for matmuls; repeatable. Each variant gets the shapes of its rank. "
                 "Default: each op's own shape."),
]
Dtype = Annotated[list[str] | None, typer.Option(help="fp32, fp16 or bf16; repeatable. Default: fp32.")]
Param = Annotated[
    list[str] | None,
    typer.Option(help="KEY=VALUE or KEY=V1,V2 for the variants that take KEY; repeatable. Every "
                 "combination is measured."),
]
AllVariants = Annotated[
    bool, typer.Option("--all", help="Every variant (the suite and those of --variants).")
]
Sweep = Annotated[
    Path | None,
    typer.Option(help="A TOML sweep file (variants, shapes, dtypes, [params], [[grid]] tables) instead of "
                 "variant names and grid options."),
]

# how ncu measures: measure and profile
# --metrics, written from the one table of metric sets (memtraffic.ncu.metrics): the set names only
# ('memtraffic metrics' says what each measures; the help stays a screen long), after what the command's
# default does (auto is measure's alone)
METRICS_HELP = (f"Metric sets ({', '.join(METRIC_SETS)}; 'memtraffic metrics' says what each measures), "
                "aliases or ncu names.")
MeasureMetrics = Annotated[
    str,
    typer.Option("--metrics", help="auto (the default): the one-pass bytes set for every config, then "
                 "traffic again for those below 0.9 L1 load or store efficiency that their model does not "
                 "predict. Or: " + METRICS_HELP),
]
ProfileMetrics = Annotated[
    str, typer.Option("--metrics", help=METRICS_HELP + " bytes: one replay pass a kernel.")
]
TimingOnly = Annotated[
    bool, typer.Option("--timing-only", help="No ncu: time the kernels with torch.profiler: bandwidth at "
                       "the minimum, no per-level bytes. Automatic when ncu cannot read the counters.")
]
Roofs = Annotated[
    bool, typer.Option("--roofs/--no-roofs", help="Measure the GPU's roofs after the run when none are "
                       "known, once (about 20 s): the floor needs them.")
]
Source = Annotated[
    bool,
    typer.Option("--source/--no-source", help="Also per-line counters and source, for 'memtraffic lines' "
                 "(H100, 2026-11-23: 8 replay passes a kernel, not 6; 95 MB, not 0.53)."),
]
RunOut = Annotated[
    Path | None,
    typer.Option(help="New or empty folder for the run (never overwritten). Default: "
                 "reports/runs/<UTC time>_<name>/."),
]
ClockControl = Annotated[
    str, typer.Option(help="ncu --clock-control: none (the GPU's clocks) or base (locked).")
]
CacheControl = Annotated[
    str, typer.Option(help="ncu --cache-control: all (flushed before each pass) or none.")
]
Verbose = Annotated[bool, typer.Option("--verbose", "-v", help="Also show ncu's own ==PROF== lines.")]
Baseline = Annotated[
    Path | None,
    typer.Option(help="An earlier run folder, .ncu-rep or saved table (analyze --format json): print "
                 "'memtraffic diff BASELINE NEW' right after this run (to stderr with --format json/csv)."),
]

# traced programs: profile --torch-ops and ops
FromFirstForward = Annotated[
    bool, typer.Option("--from-first-forward", help="Trace from the first nn.Module forward (leaves weight "
                       "initialisation out).")
]
AllCalls = Annotated[
    bool, typer.Option("--all-calls", help="Every op call; by default the calls moving the most bytes and "
                       "the per-op summary.")
]

# the HTML pages: roofline and report
RoofsFile = Annotated[
    Path | None, typer.Option("--roofs-file", help="Roofs JSON; default: cached, then committed ones.")
]
OldRoofsFile = Annotated[Path | None, typer.Option("--ceilings", hidden=True)]  # --roofs-file's old name
Force = Annotated[bool, typer.Option("--force", help="Replace output files that exist.")]
