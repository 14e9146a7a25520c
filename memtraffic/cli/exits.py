"""The CLI's one error path: every failure ends in one or two plain lines and an exit code.

- usage errors (a missing argument, an unknown option, a bad integer or choice): 'error: ...' and a line
  naming the command's --help, exit 2; checked by click before the command runs, so before any GPU or ncu;
- memtraffic's own errors: 'error: ...', their exit code (2 for usage, 1 otherwise);
- a file system that refuses (full, read-only, no permission, a deleted working folder): one line naming the
  path, exit 1;
- Ctrl-C: 'interrupted', exit 130;
- anything else is a bug: 'internal error: ...' in one line, exit 1; MEMTRAFFIC_TRACEBACK=1 prints the
  traceback instead, for the bug report.
"""

from __future__ import annotations

import errno
import os
import sys
import traceback
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import typer
import typer.core

if TYPE_CHECKING:  # checked against the click typer carries (the type checkers see one module)
    from typer._click import exceptions as click
    from typer._click.utils import echo
else:
    try:  # typer 0.2x carries its own copy of click
        from typer._click import exceptions as click
        from typer._click.utils import echo
    except ImportError:  # pragma: no cover - older typer depends on click
        from click import echo  # the same functions, from click itself
        from click import exceptions as click

from memtraffic.vocab.errors import MemtrafficError
from memtraffic.vocab.files import os_error_line

TRACEBACK_VAR = "MEMTRAFFIC_TRACEBACK"


def usage_line(err: click.UsageError) -> str:
    """click's message in the project's style: 'Missing argument 'PATH'.' -> "missing argument 'PATH'"."""
    text = " ".join(err.format_message().split()).rstrip(".")
    return text[:1].lower() + text[1:]


def one_line(text: str) -> str:
    """An error message as one line: control characters a user's input brought in (a carriage return in a
    metric name, a newline in a path) shown escaped, as Python writes them, instead of breaking the line."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _exit_code(err: BaseException, command: str = "") -> tuple[int, str | None]:
    """(exit code, the line(s) to print or None) for an exception that ended `memtraffic COMMAND`."""
    if isinstance(err, typer.Exit):
        return err.exit_code, None
    if isinstance(err, getattr(click, "NoArgsIsHelpError", ())):
        ctx = getattr(err, "ctx", None)
        return 2, ctx.get_help() if ctx else None  # bare `memtraffic`: the help, as click does
    if isinstance(err, click.UsageError):
        where = err.ctx.command_path if err.ctx and err.ctx.parent else f"memtraffic {command}".strip()
        return 2, f"error: {usage_line(err)}\nTry '{where} --help' for help."
    if isinstance(err, click.ClickException):
        return err.exit_code, f"error: {' '.join(err.format_message().split())}"
    if isinstance(err, MemtrafficError):
        return err.exit_code, f"error: {one_line(str(err))}"
    if isinstance(err, KeyboardInterrupt | typer.Abort):
        return 130, "interrupted"
    if isinstance(err, ModuleNotFoundError):  # an extra the base install leaves out (torch, kaleido)
        from memtraffic.vocab.extras import missing_extra

        missing = missing_extra(err, f"memtraffic {command}".strip())
        if missing is not None:
            return missing.exit_code, f"error: {missing}"
    if isinstance(err, OSError):
        if err.errno == errno.EPIPE:  # `memtraffic ... | head`: the reader left, nothing to say
            _silence()
            return 1, None
        return 1, f"error: {os_error_line(err)}"
    first = (str(err).strip().splitlines() or [""])[0][:300]
    return 1, (f"internal error: {type(err).__name__}{': ' + first if first else ''} "
               f"(set {TRACEBACK_VAR}=1 for the traceback, and report it)")


class Cli(typer.core.TyperGroup):
    """typer's group with one error path (module docstring) instead of typer's boxes and tracebacks, and
    help that fits a terminal (memtraffic/cli/help_text.py)."""

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True, windows_expand_args: bool = True,
             **extra: Any) -> Any:
        args = sys.argv[1:] if args is None else list(args)
        try:
            # always 'memtraffic' (not 'python -m memtraffic.cli', not a test runner's name): the usage and
            # 'Try ... --help' lines name the command a user types
            from memtraffic.cli.help_text import tidy

            tidy(self)  # examples first, values named by what to give (help_text.py)
            with self.make_context("memtraffic", args, **extra) as ctx:
                os.getcwd()  # a deleted working folder: said here, before torch (which aborts in one) loads
                self.invoke(ctx)
            code, line = 0, None
        except Exception as err:
            if os.environ.get(TRACEBACK_VAR, "").strip() not in ("", "0") and not isinstance(
                    err, typer.Exit | click.UsageError | MemtrafficError):
                traceback.print_exc()
                code, line = 1, None
            else:
                code, line = _exit_code(err, args[0] if args and args[0] in self.commands else "")
        except KeyboardInterrupt as err:
            code, line = _exit_code(err)
        if line is not None:
            print_line(line, to_stdout=not line.startswith(("error: ", "internal error: ", "interrupted")))
        if standalone_mode:
            sys.exit(code)
        return code


def print_line(line: str, to_stdout: bool = False) -> None:
    """Print, surviving a closed stdout/stderr (the message is then lost, the exit code is not)."""
    try:
        echo(line, err=not to_stdout)
    except OSError:
        _silence()


def _silence() -> None:
    """Send what is still buffered for a closed pipe nowhere: the interpreter's final flush must not fail."""
    sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - lives until the interpreter exits
