"""Test set-up: Triton runs in its interpreter on CPU machines; gpu-marked tests need CUDA."""

import atexit
import os
import shutil
import tempfile

import pytest
import torch

# Report tables read during the tests go to a fresh cache, never into the user's (subprocesses inherit it).
os.environ["MEMTRAFFIC_CACHE"] = tempfile.mkdtemp(prefix="memtraffic-test-cache-")
atexit.register(shutil.rmtree, os.environ["MEMTRAFFIC_CACHE"], True)

# Must be set before any @triton.jit decorator runs, i.e. before kernels/ is imported.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

from stand_ins import stand_in  # noqa: E402,F401 - the stand-in ncu fixture, for every test folder

DEVICE = "cuda" if torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1" else "cpu"


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    needs_gpu = pytest.mark.skip(reason="needs an NVIDIA GPU (CUDA) with torch's CUDA build")
    needs_ncu = pytest.mark.skip(reason="needs an NVIDIA GPU and ncu (Nsight Compute)")
    for item in items:
        # markers, not keywords: a test's keywords also hold its folder's name (tests/ncu/)
        if item.get_closest_marker("ncu"):
            item.add_marker(needs_ncu)
        elif item.get_closest_marker("gpu"):
            item.add_marker(needs_gpu)


@pytest.fixture(autouse=True)
def _no_roofs_measured(monkeypatch):
    """profile and measure measure a GPU's roofs after a run when none are known (probes.roof_probes.
    roofs_for_floor, which memtraffic.api calls): the stand-in GPUs of these tests have none, so that step
    is left out here; tests/probes/test_roof_probes.py tests it with a stand-in measurement."""
    monkeypatch.setattr("memtraffic.api.roofs_for_floor", lambda device, echo, measure=None: None)


@pytest.fixture
def device() -> str:
    return DEVICE
