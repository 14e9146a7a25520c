"""`memtraffic ops -- CMD`: run a program with its aten ops traced (no ncu); views.tables shows them.

Torch-free: the program traces itself through memtraffic/_inject/sitecustomize.py, which `tracer_env`
puts first on PYTHONPATH (`memtraffic profile --torch-ops` uses the same environment under ncu).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from memtraffic.runfolder.records import trace_records
from memtraffic.runfolder.trace import TORCH_MARK_ENV, TORCH_OPS_ENV, TRACE_ENV, TRACE_FROM, read_trace
from memtraffic.vocab.errors import MemtrafficError, UsageError
from memtraffic.vocab.extras import MissingExtraError, install_line

INJECT_DIR = Path(__file__).resolve().parent.parent / "_inject"
PYTHON_NAME = re.compile(r"python(\d+(\.\d+)*)?")  # python, python3, python3.12


def tracer_env(trace: Path, env: Mapping[str, str] | None = None,
               torch_mark: Path | None = None, mode: str = "1") -> dict[str, str]:
    """The environment in which a Python program traces its aten ops into `trace`.

    `torch_mark`: a file the program creates when it imports torch (tells "no torch" from "no op"),
    holding the tracer's warnings. `mode`: from when (memtraffic.runfolder.trace.TRACE_FROM).
    """
    if mode not in TRACE_FROM:
        raise UsageError(f"unknown trace mode {mode!r}: use one of {', '.join(TRACE_FROM)}")
    out = dict(os.environ if env is None else env)
    out[TRACE_ENV] = str(trace)
    out[TORCH_OPS_ENV] = mode
    out["PYTHONPATH"] = os.pathsep.join([str(INJECT_DIR), *filter(None, [out.get("PYTHONPATH")])])
    if torch_mark is not None:
        out[TORCH_MARK_ENV] = str(torch_mark)
    return out


def program_python(cmd: Sequence[str]) -> str | None:
    """The Python that will run `cmd`: cmd[0] when it is one (python3, a venv's bin/python), else the
    interpreter a script's '#!' line names (torchrun, a script of your own); None for other programs."""
    exe = shutil.which(cmd[0]) if cmd else None
    if exe is None:
        return None
    if PYTHON_NAME.fullmatch(Path(cmd[0]).name):
        return exe
    try:
        with open(exe, "rb") as file:
            first = file.readline(300)
    except OSError:
        return None
    words = first[2:].decode(errors="replace").split() if first.startswith(b"#!") else []
    if words and Path(words[0]).name == "env":  # #!/usr/bin/env [-S] python3
        words = [w for w in words[1:] if not w.startswith("-")]
    if words and PYTHON_NAME.fullmatch(Path(words[0]).name):
        return shutil.which(words[0]) or words[0]
    return None


def require_torch(cmd: Sequence[str], what: str) -> None:
    """MissingExtraError, before the program starts, when the Python that will run it has no torch (looked
    up in that interpreter, not imported): tracing aten ops needs the [measure] extra there."""
    python = program_python(cmd)
    if python is None:
        return
    look = "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)"
    try:
        found = subprocess.run([python, "-c", look], capture_output=True, timeout=60, check=False).returncode
    except (OSError, subprocess.TimeoutExpired):
        return  # the program's own start will say what is wrong
    if found == 1:
        raise MissingExtraError(f"{what} traces PyTorch programs, and the program's Python ({python}) has no "
                                f"torch: {install_line('measure')}")


class CommandFailedError(MemtrafficError):
    """The traced command exited non-zero: `memtraffic ops` exits with the same code."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass
class TracedRun:
    records: list[dict[str, object]]  # trace records (runfolder.trace.read_trace)
    returncode: int
    imported_torch: bool
    warnings: list[str] = field(default_factory=list)
    mode: str = "1"  # from when it traced (runfolder.trace.TRACE_FROM)


def tracer_warnings(mark: Path) -> list[str]:
    """The warnings the traced program's tracer left in its mark file (none if it never imported torch)."""
    return [line for line in mark.read_text().splitlines() if line.strip()] if mark.is_file() else []


def run_traced(cmd: Sequence[str], mode: str = "1") -> TracedRun:
    """Run `cmd` with its aten ops traced; its stdout goes to our stderr, so stdout stays the table."""
    if not cmd:
        raise UsageError("no command to trace: write `memtraffic ops -- python train.py ARGS`")
    if shutil.which(cmd[0]) is None:
        raise UsageError(f"command not found: {cmd[0]!r} is not on PATH or not an executable file")
    require_torch(cmd, "memtraffic ops")
    with tempfile.TemporaryDirectory(prefix="memtraffic-ops-") as tmp:
        trace, mark = Path(tmp) / "trace.jsonl", Path(tmp) / "torch-imported"
        proc = subprocess.run(list(cmd), env=tracer_env(trace, torch_mark=mark, mode=mode), stdout=2,
                              check=False)
        records, skipped = trace_records(read_trace(trace))
        warnings = tracer_warnings(mark)
        if skipped:  # a line the program wrote itself, or cut: said, never indexed
            warnings.append(f"{len(skipped)} trace {'record' if len(skipped) == 1 else 'records'} left out "
                            f"(first: {skipped[0].get('range')}: {skipped[0]['reason']})")
        return TracedRun(cast("list[dict[str, object]]", records), proc.returncode, mark.exists(), warnings,
                         mode)


def check_run(run: TracedRun, cmd: Sequence[str]) -> None:
    """Raise the error of a finished run, if any; the caller prints what was traced first."""
    shown = shlex.join(cmd)
    if run.returncode != 0:
        traced = "the ops traced before it ended are above" if run.records else "no op was traced"
        if run.returncode < 0:  # killed by a signal: exit as a shell would
            raise CommandFailedError(f"`{shown}` was killed by signal {-run.returncode}; {traced}",
                                     128 - run.returncode)
        raise CommandFailedError(f"`{shown}` exited with code {run.returncode}; {traced}", run.returncode)
    if not run.imported_torch and not run.records:
        raise MemtrafficError(f"`{shown}` never imported torch (or is not a Python program): `memtraffic "
                              "ops` traces PyTorch programs; mark other code with memtraffic.region(...)")
    if not run.records and run.mode == "forward":  # tracing waits for a forward that never came
        raise MemtrafficError(f"`{shown}` ran no nn.Module forward, so --from-first-forward traced nothing: "
                              "drop --from-first-forward to trace the whole program")
    if not run.records:
        raise MemtrafficError(f"`{shown}` imported torch but ran no aten op: nothing to show")
