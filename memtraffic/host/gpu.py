"""The GPU this process sees: its name as nvidia-smi prints it (gpu_name, torch-free: profile runs any
program), and its compute capability and shared memory as torch reports them (a variant's checks ask)."""

from __future__ import annotations

import os
import subprocess

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


def current_capability() -> tuple[int, int] | None:
    """Compute capability of CUDA device 0, or None without torch or a GPU (plans built on a CPU)."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    major, minor = torch.cuda.get_device_capability(0)
    return (int(major), int(minor))


def needs_capability(what: str, need: tuple[int, int], why: str) -> str | None:
    """A variant check's refusal when the current GPU is older than `need`; None on newer GPUs and
    when no GPU is visible (a plan made on a CPU machine is checked again where it runs)."""
    cc = current_capability()
    if cc is None or cc >= need:
        return None
    return f"{what} needs sm_{need[0]}{need[1]} or newer ({why}); this GPU is sm_{cc[0]}{cc[1]}"


def current_smem_per_block() -> int | None:
    """Shared memory one block of CUDA device 0 may opt into (bytes), or None without torch or a GPU."""
    if current_capability() is None:
        return None
    import torch

    return getattr(torch.cuda.get_device_properties(0), "shared_memory_per_block_optin", None)
