"""Thin typer commands over the pipeline stages. Errors become one line on stderr and a non-zero exit."""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from memtraffic.exceptions import MemtrafficError

app = typer.Typer(
    rich_markup_mode="rich",
    no_args_is_help=True,
    add_completion=False,
    help="Where did my bytes go? Run GPU kernel variants under Nsight Compute and compare the bytes each "
    "memory level moved (L1, L2, DRAM) with the operation's theoretical minimum.",
)


def _errors_to_exit(func):
    """Turn package errors into one readable line and an exit code; keep tracebacks for real bugs."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except MemtrafficError as err:
            typer.echo(f"error: {err}", err=True)
            raise typer.Exit(code=err.exit_code) from None
        except KeyboardInterrupt:
            typer.echo("interrupted", err=True)
            raise typer.Exit(code=130) from None

    return wrapper


@app.callback()
def _main(
    version: Annotated[bool, typer.Option("--version", help="Print the version and exit.")] = False,
) -> None:
    if version:
        from memtraffic import __version__

        typer.echo(__version__)
        raise typer.Exit()


Fmt = Annotated[str, typer.Option("--format", "-f", help="table (for people), json or csv (for scripts).")]


def _check_format(fmt: str, allowed: tuple[str, ...]) -> None:
    if fmt not in allowed:
        from memtraffic.exceptions import UsageError

        raise UsageError(f"unknown format {fmt!r}: use one of {', '.join(allowed)}")


@app.command("list")
@_errors_to_exit
def list_(
    shape: Annotated[str | None, typer.Option(help="Shape as MxN (or MxNxK for matmuls); default: each op's own.")] = None,
    dtype: Annotated[str, typer.Option(help="fp32, fp16 or bf16.")] = "fp32",
    fmt: Fmt = "table",
) -> None:
    """List the kernel variants with their minimum vs predicted traffic, FLOPs and arithmetic intensity."""
    from kernels import VARIANTS
    from memtraffic.model import parse_dtype, parse_shape
    from memtraffic.suite import describe
    from memtraffic.tables import render

    _check_format(fmt, ("table", "json", "csv"))
    dt = parse_dtype(dtype)
    sh = parse_shape(shape) if shape else None
    rows = [describe(v, sh, dt) for v in VARIANTS.values()]
    typer.echo(render(rows, fmt, kind="list"))


@app.command()
@_errors_to_exit
def bench(
    variants: Annotated[list[str] | None, typer.Argument(help="Variants to time; default: every softmax variant.")] = None,
    shape: Annotated[list[str] | None, typer.Option(help="MxN, repeatable; default: the issue's suite per op.")] = None,
    dtype: Annotated[list[str] | None, typer.Option(help="fp32/fp16/bf16, repeatable; default: fp32 and bf16.")] = None,
    budget: Annotated[float, typer.Option(help="Seconds of timed repetitions per config (5 to 200 reps).")] = 0.3,
    out: Annotated[Path | None, typer.Option(help="New folder for results.json and table.txt.")] = None,
    fmt: Fmt = "table",
) -> None:
    """Time variants with CUDA events (L2 flushed, median) beside a same-size copy and torch's kernels.

    Prints time, effective bandwidth (minimum bytes / time), its fraction of the copy bandwidth, and
    speedups over torch.softmax and torch.compile. Needs a CUDA GPU.

    Example: memtraffic bench softmax_tiled torch_softmax --shape 4096x4096 --dtype bf16
    """
    from kernels import VARIANTS
    from memtraffic import bench as b
    from memtraffic.model import parse_dtype, parse_shape
    from memtraffic.suite import get_variant
    from memtraffic.tables import dump

    _check_format(fmt, ("table", "json"))
    names = variants or [n for n, v in VARIANTS.items() if v.op in b.SUITE]
    for n in names:
        get_variant(n)
    shapes = [parse_shape(s) for s in shape] if shape else None
    dtypes = [parse_dtype(d) for d in dtype] if dtype else list(b.SUITE_DTYPES)
    result = b.run_bench(names, shapes, dtypes, budget_s=budget, progress=lambda m: typer.echo(m, err=True))
    if out is not None:
        b.write_result(result, out)
    typer.echo(b.bench_table(result) if fmt == "table" else dump([result], "json"))


def main() -> None:  # pragma: no cover - console entry point alias
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
