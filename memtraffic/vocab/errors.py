"""Few, actionable errors, and the one way to warn or report progress.

Each error message says what is wrong and what to do; the CLI prints it as one line ('error: ...').
The measuring side warns through `warn` and reports progress through `say` (both one line on stderr);
its functions take an `echo` to send progress elsewhere (the CLI, a test's list).
"""

import sys
from collections.abc import Sequence
from typing import TypeVar

C = TypeVar("C", bound=str)


class MemtrafficError(Exception):
    """Base class: the CLI turns any of these into one clear line and a non-zero exit."""

    exit_code = 1


class UsageError(MemtrafficError):
    """Bad input from the user: unknown variant, malformed shape, unsupported dtype or shape."""

    exit_code = 2


class NcuError(MemtrafficError):
    """Nsight Compute is missing, too old, cannot read counters, or failed."""


class GpuNotFoundError(MemtrafficError):
    """The operation needs a CUDA GPU and none is visible."""


class ReportError(MemtrafficError):
    """A .ncu-rep or run folder cannot be read, or lacks what the analysis needs."""


def choice(option: str, value: str, choices: Sequence[C]) -> C:
    """`value` as the one of `choices` it is (typed as they are: a Literal's values), else a UsageError
    naming `option` and the choices. Every option with fixed choices is parsed through it, once."""
    for known in choices:
        if value == known:
            return known
    raise UsageError(f"unknown {option} {value!r}: use one of {', '.join(choices)}")


def say(line: str) -> None:
    """One progress line on stderr, flushed (a long ncu run shows it as it happens)."""
    print(line, file=sys.stderr, flush=True)


def warn(line: str) -> None:
    """One warning line on stderr: 'warning: LINE'."""
    say(f"warning: {line}")
