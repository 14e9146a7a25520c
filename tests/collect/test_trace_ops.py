"""The Python that will run a traced program, found without starting it (collect/trace_ops.py)."""

from __future__ import annotations

import shutil
import sys

import pytest

from memtraffic.collect.trace_ops import program_python, require_torch
from memtraffic.vocab.extras import MissingExtraError


def _script(tmp_path, name: str, first_line: str):
    path = tmp_path / name
    path.write_text(f"{first_line}\nprint('hi')\n")
    path.chmod(0o755)
    return path


def test_a_python_command_is_its_own_interpreter():
    assert program_python([sys.executable, "train.py"]) == shutil.which(sys.executable)
    assert program_python(["python3", "-m", "x"]) == shutil.which("python3")


@pytest.mark.parametrize("line", ["#!/usr/bin/env python3", "#!/usr/bin/env -S python3 -u",
                                  f"#!{sys.executable}"])
def test_a_scripts_interpreter_comes_from_its_first_line(tmp_path, line):
    script = _script(tmp_path, "torchrun", line)
    found = program_python([str(script), "--nproc", "2"])
    assert found in (shutil.which("python3"), sys.executable)


@pytest.mark.parametrize("line", ["#!/bin/sh", "\x7fELF binary", ""])
def test_other_programs_are_not_looked_into(tmp_path, line):
    assert program_python([str(_script(tmp_path, "app", line))]) is None
    assert program_python(["no-such-program-here"]) is None
    assert program_python([]) is None


def test_require_torch_passes_where_torch_is_installed_and_names_the_extra_where_not(tmp_path):
    pytest.importorskip("torch")
    require_torch([sys.executable, "x.py"], "memtraffic ops")  # this test's Python has torch
    bare = _script(tmp_path, "python", f'#!/bin/sh\nexec {sys.executable} -S "$@"')
    with pytest.raises(MissingExtraError, match=r"^memtraffic ops traces PyTorch programs, and the program's "
                       r"Python \(.*python\) has no torch: pip install 'memtraffic\[measure\]'"):
        require_torch([str(bare), "x.py"], "memtraffic ops")
