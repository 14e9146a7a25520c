"""Building the suite's CUDA C++ kernels (torch's load_inline, on first use) and saying why one cannot be."""

from __future__ import annotations

import functools
from types import ModuleType

import torch


@functools.cache
def unavailable(variant: str) -> str | None:
    """Why a CUDA C++ variant cannot be built or run here (one line naming the fix), or None. Cached: it
    runs `ninja --version`, which would add milliseconds to every call of the kernel it guards."""
    if not torch.cuda.is_available():
        return f"{variant} needs a CUDA GPU (it is a CUDA C++ kernel with no CPU path)"
    from torch.utils import cpp_extension

    if cpp_extension.CUDA_HOME is None:
        return f"{variant} needs nvcc to build its kernel: install the CUDA toolkit or set CUDA_HOME"
    if not cpp_extension.is_ninja_available():
        return f"{variant} needs ninja to build its kernel: pip install ninja"
    return None


@functools.cache
def build(name: str, cpp_decl: str, cuda_source: str, functions: tuple[str, ...]) -> ModuleType:
    """The compiled extension (cached per process; torch caches the build on disk across processes)."""
    from torch.utils.cpp_extension import load_inline

    return load_inline(
        name=name,
        cpp_sources=cpp_decl,
        cuda_sources=cuda_source,
        functions=list(functions),
        extra_cuda_cflags=["-O3", "-lineinfo"],  # -lineinfo: PCs map to lines (memtraffic lines)
        verbose=False,
    )
