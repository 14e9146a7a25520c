"""The CLI in a subprocess where `import torch` and `import triton` fail: the reading side's promise."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

_BLOCK = """
import sys
for name in ("torch", "triton"):
    sys.modules[name] = None  # any import of them now raises ImportError
from memtraffic.cli import app
try:
    app(sys.argv[1:], prog_name="memtraffic")
finally:
    loaded = [m for m, v in sys.modules.items() if v is not None and m.split(".")[0] in ("torch", "triton")]
    assert not loaded, loaded
"""


def cli_without_torch(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    """`memtraffic ARGS...` run with torch and triton blocked (the process fails if either loads)."""
    return subprocess.run([sys.executable, "-c", _BLOCK, *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300)
