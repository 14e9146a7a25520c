"""The run folder: a new folder per run (never overwritten), the runner's status file, the environment.

A run folder holds plan.json (what was asked, with minimums), run.json (how it went: every ncu argv,
the environment, per-config status), status.jsonl (the runner's progress), ncu.log and the reports.
"""

from __future__ import annotations

import itertools
import json
import os
import platform
import re
import subprocess
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from memtraffic.core.errors import GpuNotFoundError, UsageError
from memtraffic.core.files import refuse_nonempty

DEFAULT_RUNS_ROOT = Path("reports") / "runs"


def new_run_dir(variants: Sequence[str], out: Path | None = None, root: Path = DEFAULT_RUNS_ROOT,
                now: datetime | None = None) -> Path:
    """A fresh, empty folder for this run; an existing, non-empty --out is an error, never overwritten.
    A missing --out is made exclusively: of two runs starting with the same new --out, one is refused."""
    if out is not None:
        existed = out.is_dir()
        refuse_nonempty(out)
        try:
            out.mkdir(parents=True, exist_ok=existed)
        except FileExistsError:  # made by another run since the check
            refuse_nonempty(out)
            raise UsageError(f"{out} was just made by another process: choose a new --out folder") from None
        return out
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%SZ")
    label = re.sub(r"[^A-Za-z0-9_.-]", "_", variants[0] if variants else "run")
    if len(variants) > 1:
        label += f"+{len(variants) - 1}"
    root.mkdir(parents=True, exist_ok=True)
    for n in itertools.count(1):
        path = root / (f"{stamp}_{label}" if n == 1 else f"{stamp}_{label}-{n}")
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue
    raise AssertionError("unreachable")


# --- status file (shared with the runner) -------------------------------------------------------------------


def read_status(path: Path) -> dict[int, dict[str, Any]]:
    """Config id -> its last record in the runner's JSON-lines status file ('start' until it finishes)."""
    latest: dict[int, dict[str, Any]] = {}
    if not path.exists():
        return latest
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:  # a line cut short by a crash
            continue
        if isinstance(rec, dict) and isinstance(rec.get("id"), int) and not isinstance(rec["id"], bool):
            latest[rec["id"]] = rec
    return latest


def append_status(path: Path, record: Mapping[str, Any]) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(dict(record)) + "\n")


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


def environment(gpu: str | None, ncu: Path | None = None, version: Sequence[int] | None = None
                ) -> dict[str, Any]:
    """What a run ran on: GPU, driver, ncu, and the versions of the Python stack (torch is optional).
    The one environment record: run.json, bench results and ceilings entries all carry it."""
    import sys

    from memtraffic.core.arch import chip_for_gpu

    torch = sys.modules.get("torch")  # only when the measuring side already has it: profile may not
    chip = chip_for_gpu(gpu)
    return {
        "gpu": gpu,
        "chip": chip.name if chip else None,  # ncu's chip name (memtraffic.core.arch), when the name is known
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
