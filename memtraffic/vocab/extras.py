"""What the base install leaves out, said in one line: the extras that bring torch, triton and kaleido.

The base install (`pip install memtraffic`) reads, analyzes, diffs, checks, reports and plots run folders.
Measuring (torch, triton) and static PNG figures (kaleido) come with extras; a command that reaches for
one of them without it gets one line naming the extra, never a traceback.
"""

from __future__ import annotations

from memtraffic.vocab.errors import MemtrafficError

# top-level module -> (extra that installs it, what it is for)
EXTRAS: dict[str, tuple[str, str]] = {
    "torch": ("measure", "torch and triton, the measuring side"),
    "triton": ("measure", "torch and triton, the measuring side"),
    "kaleido": ("png", "kaleido, static PNG figures (it also needs a Chromium)"),
}


class MissingExtraError(MemtrafficError, ImportError):
    """A module of an extra is not installed (an ImportError too, so `except ImportError` still works)."""


def install_line(extra: str) -> str:
    """How to install an extra, from PyPI and from a clone with the README's .venv."""
    return f"pip install 'memtraffic[{extra}]' (in a clone: .venv/bin/pip install -e '.[{extra}]')"


def missing_extra(err: ImportError, what: str) -> MissingExtraError | None:
    """The one-line error for `what` (e.g. 'memtraffic measure') when `err` is a missing extra's module,
    else None (a real import bug keeps its traceback)."""
    top = (getattr(err, "name", None) or "").split(".")[0]
    if not isinstance(err, ModuleNotFoundError) or top not in EXTRAS:
        return None
    extra, purpose = EXTRAS[top]
    return MissingExtraError(f"{what} needs {purpose}, which the base install leaves out: "
                             + install_line(extra))


def require(what: str, *modules: str) -> None:
    """MissingExtraError for `what` unless every module is installed (looked up, not imported): said before
    the environment is looked at, e.g. before `measure` looks for ncu and falls back to timing-only."""
    from importlib.util import find_spec

    for module in modules:
        if find_spec(module) is None:
            missing = ModuleNotFoundError(f"No module named {module!r}", name=module)
            raise missing_extra(missing, what) or missing
