"""What a run ran on and when: the driver, ncu and the Python stack's versions (environment, the record
of vocab.environment), and the time (utc_now).

Torch-free (nvidia-smi and package metadata), so that profiling any program and the reading side can ask.
"""

from __future__ import annotations

import platform
import re
import subprocess
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

from memtraffic.vocab.environment import Environment


def _driver_version() -> str | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.strip()
        if out:
            return out.splitlines()[0]
    except (OSError, subprocess.TimeoutExpired):
        pass
    try:
        match = re.search(r"Kernel Module\s+(\S+)", Path("/proc/driver/nvidia/version").read_text())
        return match.group(1) if match else None
    except OSError:
        return None


def _version_of(module: str) -> str | None:
    """A package's version without importing it (torch takes a second): None when not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(module)
    except PackageNotFoundError:
        return None


def environment(gpu: str | None, ncu: Path | None = None, version: Sequence[int] | None = None
                ) -> Environment:
    """What a run ran on: GPU, driver, ncu, and the versions of the Python stack (torch is optional).
    The one environment record: run.json, bench results and roofs entries all carry it."""
    import sys

    from memtraffic.vocab.arch import chip_for_gpu

    # torch only when the measuring side already has it (profile may not), and only once imported whole:
    # measure builds its plan in a thread that may still be importing it (no __version__ yet).
    torch = sys.modules.get("torch")
    torch = torch if getattr(torch, "__version__", None) and hasattr(torch, "version") else None
    chip = chip_for_gpu(gpu)
    return {
        "gpu": gpu,
        "chip": chip.name if chip else None,  # ncu's chip name (vocab.arch), when the name is known
        "driver": _driver_version(),
        "ncu": str(ncu) if ncu else None,
        "ncu_version": ".".join(map(str, version)) if version else None,
        "torch": torch.__version__ if torch else _version_of("torch"),
        "cuda": torch.version.cuda if torch else None,
        "triton": _version_of("triton"),
        "python": platform.python_version(),
        "host": platform.node(),
    }


def utc_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
