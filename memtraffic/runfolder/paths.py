"""Run folders you can share: the paths a run records, made relative so that no folder of the machine that
measured (its checkout, home or temp folders) stays in run.json or plan.json.

- a path inside the run folder: relative to it ('profile.ncu-rep'; the folder itself is '.');
- a path inside the folder memtraffic ran from (a checkout): relative to it ('scripts/sweeps/x.toml');
- a program: its name, as a user types it (ncu, python3, memtraffic for memtraffic's own entry points);
- any other absolute path: from its repository folder on ('reports/h100/x') when it has one, else its name.

scripts/share_runs.py applies the same rules to committed runs; `memtraffic.lines()` to source files.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import TypeVar, cast

PROGRAMS = re.compile(r"(ncu|nsys|python\d*(\.\d+)*|memtraffic|torchrun|trtexec)")
# memtraffic's own entry points, as sys.argv[0] shows them: `memtraffic`, `python -m memtraffic`
ENTRY = re.compile(r".*/memtraffic/(cli|__main__)\.py")
# the repository's top folders: a path through one of them is the repository's file
REPO_FOLDERS = ("reports", "scripts", "examples", "kernels", "memtraffic", "notebooks", "tests", "docs")

T = TypeVar("T")


def _inside(path: PurePosixPath, folder: Path | None) -> str | None:
    if folder is None:
        return None
    try:
        rel = path.relative_to(PurePosixPath(os.path.abspath(folder)))
    except ValueError:
        return None
    return str(rel) if str(rel) != "." else "."


def portable_path(text: str, run_dir: Path | None = None, cwd: Path | None = None) -> str:
    """`text` unchanged unless it is an absolute path; then as the module doc says."""
    if not text.startswith("/"):
        return text
    path = PurePosixPath(text)
    if ENTRY.fullmatch(text):
        return "memtraffic"
    for folder in (run_dir, cwd):
        rel = _inside(path, folder)
        if rel is not None:
            return rel
    if PROGRAMS.fullmatch(path.name):
        return path.name
    parts = path.parts
    for i, part in enumerate(parts[1:], start=1):
        if part in REPO_FOLDERS and i < len(parts) - 1:
            return str(PurePosixPath(*parts[i:]))
    return path.name


def portable_command(text: str, run_dir: Path | None = None, cwd: Path | None = None) -> str:
    """A command line with each absolute path in it made portable (a line shlex cannot split is kept)."""
    try:
        words = shlex.split(text)
    except ValueError:
        return text
    if not any(w.startswith("/") or "=/" in w for w in words):
        return text
    out = []
    for w in words:
        key, eq, value = w.partition("=")
        out.append(f"{key}={portable_path(value, run_dir, cwd)}" if eq and value.startswith("/") and
                   key.startswith("-") else portable_path(w, run_dir, cwd))
    return shlex.join(out)


def portable(record: T, run_dir: Path | None = None, cwd: Path | None = None) -> T:
    """A copy of a run.json or plan.json record: every string that is an absolute path made portable,
    'command' lines word by word, and the measuring machine's host name left out."""
    # Each copy has the type of what it copies (a record stays its TypedDict, a string a string).
    if isinstance(record, Mapping):
        out: dict[object, object] = {}
        for key, value in record.items():
            if key == "host":
                continue
            out[key] = (portable_command(value, run_dir, cwd) if key == "command" and isinstance(value, str)
                        else portable(value, run_dir, cwd))
        return cast(T, out)
    if isinstance(record, list):
        return cast(T, [portable(v, run_dir, cwd) for v in record])
    if isinstance(record, str):  # an argv word '--timings=/abs/path' too, as in command lines
        key, eq, value = record.partition("=")
        if eq and key.startswith("-") and value.startswith("/"):
            return cast(T, f"{key}={portable_path(value, run_dir, cwd)}")
        return cast(T, portable_path(record, run_dir, cwd))
    return record
