"""The machine a run ran on: the GPU nvidia-smi sees, the driver, the Python stack's versions, the time.

Torch-free (nvidia-smi and package metadata), so that profiling any program and the reading side can ask.
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TypedDict

from memtraffic.vocab.errors import GpuNotFoundError

ANYWHERE = "`memtraffic analyze` reads existing runs on any machine"  # the tail of every no-GPU error


def gpu_name() -> str:
    """The name of GPU 0 from nvidia-smi (no torch: profile runs any program), or GpuNotFoundError."""
    try:
        proc = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        proc = None
    names = proc.stdout.strip().splitlines() if proc is not None and proc.returncode == 0 else []
    if not names:
        raise GpuNotFoundError(f"no NVIDIA GPU is visible (nvidia-smi found none): profiling needs one, and "
                               f"ncu; {ANYWHERE}")
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return names[int(visible)] if visible.isdigit() and int(visible) < len(names) else names[0]


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


class Environment(TypedDict, total=False):
    """What a run ran on (run.json's "environment"; bench results and roofs entries carry it too)."""

    gpu: str | None
    chip: str | None
    driver: str | None
    ncu: str | None
    ncu_version: str | None
    torch: str | None
    cuda: str | None
    triton: str | None
    python: str
    host: str


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
