"""memtraffic.host.gpu: the GPU's name as nvidia-smi prints it, and a variant's capability check."""

from __future__ import annotations

import pytest

from memtraffic.host import gpu
from memtraffic.vocab.errors import GpuNotFoundError

TWO_GPUS = "NVIDIA H100 80GB HBM3\nNVIDIA H200\n"


@pytest.fixture
def smi(tmp_path, monkeypatch):
    """Put a stand-in nvidia-smi alone on PATH; smi(text, code) sets what it prints and its exit code."""

    def make(text: str, code: int = 0) -> None:
        path = tmp_path / "nvidia-smi"
        path.write_text(f"#!/bin/sh\nprintf '%s' '{text}'\nexit {code}\n")
        path.chmod(0o755)

    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return make


def test_the_name_is_the_first_visible_gpus(smi, monkeypatch):
    smi(TWO_GPUS)
    assert gpu.gpu_name() == "NVIDIA H100 80GB HBM3"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,0")
    assert gpu.gpu_name() == "NVIDIA H200"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-8f2c")  # a UUID: nvidia-smi's order cannot say which
    assert gpu.gpu_name() == "NVIDIA H100 80GB HBM3"


@pytest.mark.parametrize(("text", "code"), [("", 0), (TWO_GPUS, 9)])
def test_no_gpu_is_one_error_that_says_what_still_works(smi, text, code):
    smi(text, code)
    with pytest.raises(GpuNotFoundError) as err:
        gpu.gpu_name()
    assert str(err.value) == ("no NVIDIA GPU is visible (nvidia-smi found none): profiling needs one, and "
                              f"ncu; {gpu.ANYWHERE}")


def test_no_nvidia_smi_is_no_gpu(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder
    with pytest.raises(GpuNotFoundError):
        gpu.gpu_name()


def test_needs_capability_refuses_only_on_an_older_gpu(monkeypatch):
    monkeypatch.setattr(gpu, "current_capability", lambda: (7, 5))
    assert gpu.needs_capability("x", (8, 0), "cp.async") == \
        "x needs sm_80 or newer (cp.async); this GPU is sm_75"
    monkeypatch.setattr(gpu, "current_capability", lambda: (9, 0))
    assert gpu.needs_capability("x", (8, 0), "cp.async") is None
    monkeypatch.setattr(gpu, "current_capability", lambda: None)
    assert gpu.needs_capability("x", (8, 0), "cp.async") is None
