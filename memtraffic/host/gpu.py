"""The GPUs this process sees: their names as nvidia-smi prints them (gpu_name, smi_names: torch-free, as
profile runs any program), else torch's (cuda_device_names, require_gpu), and device 0's compute capability
and shared memory as torch reports them (a variant's checks ask)."""

from __future__ import annotations

import os
import subprocess

from memtraffic.vocab.errors import GpuNotFoundError

ANYWHERE = "`memtraffic analyze` reads existing runs on any machine"  # the tail of every no-GPU error


def _smi_names_all() -> list[str] | None:
    """Every GPU nvidia-smi lists (in milliseconds, where torch's CUDA start-up takes seconds), or None
    without nvidia-smi or when it fails."""
    try:
        proc = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return [n.strip() for n in proc.stdout.splitlines() if n.strip()] if proc.returncode == 0 else None


def gpu_name() -> str:
    """The name of GPU 0 from nvidia-smi (no torch: profile runs any program), or GpuNotFoundError."""
    names = _smi_names_all()
    if not names:
        raise GpuNotFoundError(f"no NVIDIA GPU is visible (nvidia-smi found none): profiling needs one, and "
                               f"ncu; {ANYWHERE}")
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return names[int(visible)] if visible.isdigit() and int(visible) < len(names) else names[0]


def smi_names() -> list[str] | None:
    """The GPUs this process sees, named by nvidia-smi and narrowed by CUDA_VISIBLE_DEVICES as CUDA does;
    None when only CUDA can say (no nvidia-smi, or UUIDs and MIG names in CUDA_VISIBLE_DEVICES)."""
    names = _smi_names_all()
    if not names:
        return None
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return names
    seen: list[str] = []
    for token in (t.strip() for t in visible.split(",")):
        if not token:
            break
        if not token.isdigit():
            return None
        if int(token) >= len(names):  # CUDA stops at the first invalid ordinal
            break
        seen.append(names[int(token)])
    return seen


def cuda_device_names() -> list[str]:
    """The names of the CUDA devices this process sees (none: an empty list): nvidia-smi's where it can
    say, so measure --gpus starts its ncu processes without importing torch, else torch's."""
    names = smi_names()
    if names is not None:
        return names
    import torch

    if not torch.cuda.is_available():
        return []
    return [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]


def require_gpu(needs: str) -> str:
    """The name of CUDA device 0, or GpuNotFoundError: 'no CUDA GPU is visible: <needs>; ...'."""
    names = cuda_device_names()
    if not names:
        raise GpuNotFoundError(f"no CUDA GPU is visible: {needs}; {ANYWHERE}")
    return names[0]


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
