"""The %%memtraffic cell magic (`%load_ext memtraffic`): the cell runs as a program under ncu, and its
analysis is the cell's result.

    %%memtraffic --torch-ops
    import torch
    x = torch.randn(8192, 8192, device="cuda")
    torch.softmax(x, dim=-1)

Nsight Compute 2025.3.1 cannot attach to a running process, so the cell is written to a file and run by
`memtraffic profile [OPTIONS] -- python CELL.py` in a fresh Python (this kernel's interpreter): the cell sees
none of the notebook's variables; it imports and builds what it measures. The line takes profile's options
(--torch-ops, --kernel-name, --launch-count, --source, --out, --metrics, ...). The run folder is saved like
any other (`memtraffic analyze`, `diff`, `report` read it).
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memtraffic.vocab.errors import UsageError

if TYPE_CHECKING:
    import pandas as pd


def cell_argv(line: str, cell_file: Path, python: str = sys.executable) -> list[str]:
    """The command that profiles a cell: memtraffic's CLI in this Python, profile's options from the magic's
    line, then the cell's file run by the same Python."""
    try:
        options = shlex.split(line)
    except ValueError as err:
        raise UsageError(f"%%memtraffic {line}: {err}") from None
    if "--" in options:
        raise UsageError("%%memtraffic takes profile's options only: the program is the cell itself")
    return [python, "-m", "memtraffic", "profile", *options, "--", python, str(cell_file)]


def saved_run(output: str) -> Path | None:
    """The run folder `memtraffic profile` names on its last 'saved in RUN' line."""
    found = re.findall(r"^saved in (.+)$", output, re.M)
    return Path(found[-1]) if found else None


def run_cell(line: str, cell: str, popen: Callable[..., subprocess.Popen[str]] = subprocess.Popen
             ) -> pd.DataFrame | None:
    """Profile the cell, printing memtraffic's output as it comes (ncu's progress, the table), and return
    the run's analysis (a DataFrame), or None when no run folder was saved (the printed error says why).
    The cell's file is removed once profile returns: the run folder holds what ncu read of it."""
    lines = []
    with tempfile.TemporaryDirectory(prefix="memtraffic-cell-") as folder:
        cell_file = Path(folder) / "cell.py"
        cell_file.write_text(cell)
        argv = cell_argv(line, cell_file)
        with popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
            assert proc.stdout is not None  # stdout=PIPE
            for text in proc.stdout:
                # the cell's temporary file and this kernel's interpreter by name: the notebook is shared
                print(text.replace(str(cell_file), cell_file.name).replace(argv[0], Path(argv[0]).name),
                      end="", flush=True)
                lines.append(text)
    run_dir = saved_run("".join(lines))
    if run_dir is None or not run_dir.exists():
        return None
    from memtraffic.api import analyze

    return analyze(run_dir)


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext memtraffic`: registers the %%memtraffic cell magic."""
    ipython.register_magic_function(lambda line, cell: run_cell(line, cell), magic_kind="cell",
                                    magic_name="memtraffic")
