"""The %%memtraffic cell magic: the exact command it builds, what it prints and returns, and its loading
as an IPython extension (`%load_ext memtraffic`). ncu itself is stood in for by a fake process here; the
GPU script runs the real one."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from memtraffic.magic import cell_argv, run_cell, saved_run
from memtraffic.vocab.errors import UsageError

REPO = Path(__file__).resolve().parent.parent
SEED = REPO / "reports" / "h100" / "seed_1048576x2_fp32"


def test_cell_argv_is_profile_with_the_lines_options_then_the_cell_in_this_python(tmp_path):
    cell = tmp_path / "cell.py"
    assert cell_argv("--torch-ops --kernel-name 'soft max' --launch-count 3", cell, "/py") == [
        "/py", "-m", "memtraffic", "profile", "--torch-ops", "--kernel-name", "soft max", "--launch-count",
        "3", "--", "/py", str(cell)]
    assert cell_argv("", cell, "/py") == ["/py", "-m", "memtraffic", "profile", "--", "/py", str(cell)]
    assert cell_argv("", cell)[0] == sys.executable


@pytest.mark.parametrize("line,message", [
    ("-- python x.py", "%%memtraffic takes profile's options only: the program is the cell itself"),
    ("--kernel-name 'open", "%%memtraffic --kernel-name 'open: No closing quotation"),
])
def test_a_bad_magic_line_is_one_usage_error(tmp_path, line, message):
    with pytest.raises(UsageError) as err:
        cell_argv(line, tmp_path / "c.py")
    assert str(err.value) == message


def test_saved_run_is_the_last_saved_in_line():
    assert saved_run("x\nsaved in a/b\nsaved in runs/c d\n") == Path("runs/c d")
    assert saved_run("error: no ncu\n") is None


class FakeProfile:
    """Stands for `python -m memtraffic profile ...`: records the argv, prints as the CLI would."""

    def __init__(self, lines: list[str]):
        self.lines, self.argv, self.cell = lines, None, None

    def __call__(self, argv, **kwargs):
        self.argv, self.cell = argv, Path(argv[-1]).read_text()
        assert kwargs["stdout"] == -1 and kwargs["stderr"] == -2 and kwargs["text"] is True
        self.stdout = iter(self.lines)
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_the_cell_runs_as_a_file_and_its_run_is_analyzed(capsys):
    fake = FakeProfile(["ncu: profiled 3 kernels\n", f"saved in {SEED}\n"])
    table = run_cell("--torch-ops", "import torch\nprint(1)\n", popen=fake)
    assert fake.argv[3:5] == ["profile", "--torch-ops"] and fake.cell == "import torch\nprint(1)\n"
    assert capsys.readouterr().out == f"ncu: profiled 3 kernels\nsaved in {SEED}\n"
    assert not Path(fake.argv[-1]).parent.exists()  # the cell's temporary folder is gone with the run
    import memtraffic

    assert table.equals(memtraffic.analyze(SEED))


def test_no_run_saved_returns_none_and_the_error_is_printed(capsys):
    fake = FakeProfile(["error: Nsight Compute (ncu) not found on PATH\n"])
    assert run_cell("", "pass\n", popen=fake) is None
    assert capsys.readouterr().out == "error: Nsight Compute (ncu) not found on PATH\n"


def test_load_ext_registers_the_cell_magic():
    shell_module = pytest.importorskip("IPython.core.interactiveshell")
    shell = shell_module.InteractiveShell.instance()
    shell.run_line_magic("load_ext", "memtraffic")
    assert "memtraffic" in shell.magics_manager.magics["cell"]


def test_python_m_memtraffic_is_the_cli():
    import subprocess

    proc = subprocess.run([sys.executable, "-m", "memtraffic", "--version"], capture_output=True, text=True,
                          cwd=REPO, timeout=120)
    assert proc.returncode == 0 and proc.stdout.startswith("memtraffic ")


@pytest.mark.gpu
@pytest.mark.ncu
def test_the_magic_profiles_a_cell_on_the_gpu(tmp_path, capsys):
    """The real thing: the cell under ncu with --torch-ops, its softmax op against its minimum."""
    cell = ("import torch\nx = torch.randn(4096, 4096, device='cuda')\n"
            "torch.cuda.synchronize()\ny = torch.softmax(x, dim=-1)\ntorch.cuda.synchronize()\n")
    table = run_cell(f"--torch-ops --out {tmp_path / 'run'}", cell)
    printed = capsys.readouterr().out
    assert table is not None, printed
    assert f"saved in {tmp_path / 'run'}" in printed
    softmax = table[table["range"].str.contains("softmax")]
    assert len(softmax) == 1, table["range"].tolist()
    assert softmax["eff_dram_rd"].iloc[0] > 0.5  # read about once: the minimum is known and met
