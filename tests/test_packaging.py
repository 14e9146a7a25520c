"""The installed distribution has no top-level `kernels` module and coexists with Hugging Face's `kernels`.

Builds memtraffic's wheel, installs it and Hugging Face's `kernels` (from PyPI, with its dependencies)
into one folder, and imports both from a process started elsewhere, so neither the source tree nor the
editable install can stand in for the wheel.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from memtraffic.vocab.files import read_toml

REPO = Path(__file__).resolve().parent.parent
HF_KERNELS = "kernels==0.17.2"


def _pip(*args: str, timeout: int = 600) -> None:
    env = {"PIP_DISABLE_PIP_VERSION_CHECK": "1", "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-m", "pip", "-q", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    _pip("wheel", "--no-deps", "--no-build-isolation", "-w", str(out), str(REPO))
    (path,) = out.glob("memtraffic-*.whl")
    return path


def test_the_wheel_installs_only_the_memtraffic_package(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"memtraffic", wheel.name.split("-py")[0] + ".dist-info"}
    assert "memtraffic/kernels/softmax_rows.py" in names and "memtraffic/kernels/__init__.py" in names
    assert "memtraffic/ncu/chip_metrics.json.gz" in names  # `memtraffic metrics --chip` needs no ncu


def test_every_package_folder_is_listed():
    """Each folder with an __init__.py is in pyproject.toml's `packages` (a wheel would still hold a folder
    left out, its files packed as data, so the wheel test above cannot tell)."""
    listed = read_toml(REPO / "pyproject.toml", "pyproject.toml")["tool"]["setuptools"]["packages"]
    inits = (REPO / "memtraffic").glob("*/__init__.py")
    folders = {".".join(p.parent.relative_to(REPO).parts) for p in inits}
    assert "memtraffic.host" in folders and folders <= set(listed), folders - set(listed)


@pytest.mark.slow
def test_memtraffic_and_hugging_face_kernels_import_side_by_side(wheel, tmp_path):
    site = tmp_path / "site"
    _pip("install", "--no-deps", "--target", str(site), str(wheel))
    _pip("install", "--target", str(site), HF_KERNELS)
    code = (
        "import kernels, memtraffic.kernels\n"
        "from memtraffic.kernels import VARIANTS\n"
        "print(kernels.__file__); print(memtraffic.kernels.__file__); print(len(VARIANTS))\n"
        "print(callable(kernels.get_kernel))\n"
    )
    # Started in an empty folder, with the target first on the path: the repository is not importable.
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                          env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin", "TRITON_INTERPRET": "1"},
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    hf, ours, n, has_get_kernel = proc.stdout.split()
    assert hf == str(site / "kernels" / "__init__.py")
    assert ours == str(site / "memtraffic" / "kernels" / "__init__.py")
    assert int(n) >= 18 and has_get_kernel == "True"
