"""Stand-ins for ncu: executable Python scripts that answer as ncu would, so measuring runs on a CPU."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from memtraffic.collect import profile as prof
from memtraffic.ncu import command as ncu_mod
from memtraffic.ncu import session as session_mod


def fake_ncu(path: Path, body: str) -> Path:
    """An executable Python script standing in for ncu."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!{sys.executable}\nimport sys\n{body}\n")
    path.chmod(0o755)
    return path


VERSION_2025 = 'print("NVIDIA (R) Nsight Compute Command Line Profiler\\nVersion 2025.3.1.0 (build 1)")'


# A stand-in for ncu that runs the application it is given (the runner, on the CPU) but profiles
# nothing and writes no report: the whole measure stage up to "no kernel profiled" runs on a laptop.
RUNNER_PASS_THROUGH = """
import os, subprocess
argv = sys.argv[1:]
if argv == ["--version"]:
    print("Version 2025.3.1.0")
    sys.exit(0)
app = argv[argv.index("--export") + 2:]
print("==PROF== Connected to process 1")
sys.exit(subprocess.call(app))
"""


# The same for `profile`: it runs the program and says that no kernel was profiled.
PASS_THROUGH = """
import os, subprocess
argv = sys.argv[1:]
if argv == ["--version"]:
    print("Version 2025.3.1.0")
    sys.exit(0)
app = argv[argv.index("--export") + 2:]
print("==PROF== Connected to process 1")
code = subprocess.call(app)
print("==WARNING== No kernels were profiled.")
sys.exit(code)
"""


REGION_PROGRAM = """
import sys
import numpy as np
import memtraffic
x = np.zeros((64, 32), dtype=np.float32)
with memtraffic.region("step", inputs=[x], outputs=[x]):
    pass
print("program ran")
sys.exit(int(sys.argv[1]))
"""


@pytest.fixture
def stand_in(tmp_path, monkeypatch):
    ncu = fake_ncu(tmp_path / "ncu", PASS_THROUGH)
    monkeypatch.setenv("MEMTRAFFIC_NCU", str(ncu))
    monkeypatch.setattr(prof, "gpu_name", lambda: "Fake GPU")
    monkeypatch.setattr(session_mod, "query_metric_names", lambda ncu, key=None: ncu_mod.parse_query_metrics(
        "\n".join(ncu_mod.base_name(n) for n in ncu_mod.resolve_metrics("traffic"))))
    program = tmp_path / "prog.py"
    program.write_text(REGION_PROGRAM)
    return program
