"""The lessons in notebooks/: committed with their outputs, which a fresh run reproduces; written against
the public API only; readable where no plotly.js runs (every figure carries a PNG) and as plain Python.

The numbers a notebook shows are the reports' because the notebook computes them through the public API
from the committed reports, and this test re-executes the committed .ipynb and requires the same outputs
(text, tables, markdown and the figures' data), so no output can go stale. `scripts/execute_notebooks.py`
rebuilds and re-executes them after an edit of a .py source.
"""

from __future__ import annotations

import ast
import copy
import functools
import re
import subprocess
import sys
from pathlib import Path

import pytest

import memtraffic

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
jupytext = pytest.importorskip("jupytext")
pytest.importorskip("ipykernel")

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
NAMES = sorted(p.stem for p in NOTEBOOKS.glob("*.py"))
CELL_TIMEOUT = 300  # seconds per cell; a whole notebook takes seconds to a minute on 2 CPU cores
PLOTLY = "application/vnd.plotly.v1+json"


def test_every_notebook_has_both_files():
    assert NAMES, "no notebooks found"
    assert sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb")) == NAMES


def committed(name: str):
    return nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)


@functools.cache
def executed(name: str):
    """The committed .ipynb run again, top to bottom, in a fresh python3 kernel of this interpreter."""
    nb = copy.deepcopy(committed(name))
    client = nbclient.NotebookClient(nb, timeout=CELL_TIMEOUT, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOKS)}})
    client.execute()  # CellExecutionError, with the cell and its traceback, on any error
    return nb


def shown(output) -> dict:
    """What a reader sees of an output, less what differs between runs of the same code: the PNG's bytes
    (Chromium's rasterizing), a figure's theme (plotly's version) and stderr (warnings)."""
    if output.output_type == "stream":
        return {"stdout": output.text} if output.name == "stdout" else {}
    data = {k: v for k, v in output.get("data", {}).items() if k != "image/png"}
    if PLOTLY in data:
        layout = {k: v for k, v in data[PLOTLY]["layout"].items() if k != "template"}
        data[PLOTLY] = {**data[PLOTLY], "layout": layout}
    return {"data": data} if data else {}


def shown_all(outputs) -> list[dict]:
    """A cell's outputs as shown, consecutive stdout pieces joined (the kernel flushes them as it likes)."""
    out: list[dict] = []
    for s in (shown(o) for o in outputs):
        if "stdout" in s and out and "stdout" in out[-1]:
            out[-1] = {"stdout": out[-1]["stdout"] + s["stdout"]}
        elif s:
            out.append(s)
    return out


def measures(cell) -> bool:
    """A cell tagged `gpu` measures on a GPU (notebook 03): its committed outputs are the H100's, kept
    when scripts/execute_notebooks.py runs where there is none; every other cell is compared exactly."""
    return "gpu" in cell.metadata.get("tags", [])


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_a_fresh_run_reproduces_the_committed_outputs(name):
    for old, new in zip(committed(name).cells, executed(name).cells, strict=True):
        if old.cell_type == "code" and not measures(old):
            want, got = shown_all(old.outputs), shown_all(new.outputs)
            assert got == want, f"{name}: outputs changed (run scripts/execute_notebooks.py):\n{old.source}"


def _text(outputs) -> str:
    return "".join(o.get("text", "") if o.output_type == "stream"
                   else str(o.get("data", {}).get("text/plain", "")) for o in outputs)


@pytest.mark.slow
def test_notebook_03_committed_outputs_are_an_h100_measurement():
    """Its measuring cells ran on an H100 (their outputs name the run ncu saved and what it measured); the
    cells reading the run show the GPU and date; a fresh run without a GPU says why it did not measure."""
    nb = committed("03_measure_your_kernel")
    gpu_cells = [c for c in nb.cells if c.cell_type == "code" and measures(c)]
    assert len(gpu_cells) == 2
    for cell in gpu_cells:
        text = _text(cell.outputs)
        assert "saved in reports/runs/" in text and "not measured here" not in text and "error:" not in text
    assert "1 kernel launch measured" in _text(gpu_cells[1].outputs)  # the %%memtraffic cell profiled
    shown = "".join(_text(c.outputs) for c in nb.cells if c.cell_type == "code")
    assert "measured on an NVIDIA H100 80GB HBM3 on 2026-11-26" in shown
    if not _has_gpu():
        fresh = [c for c in executed("03_measure_your_kernel").cells if c.cell_type == "code" and measures(c)]
        assert "not measured here (" in _text(fresh[0].outputs)


def _has_gpu() -> bool:
    import shutil

    return shutil.which("nvidia-smi") is not None


@pytest.mark.parametrize("name", NAMES)
def test_committed_with_outputs_and_a_static_image_for_every_figure(name):
    nb = committed(name)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count is not None for c in code), f"{name}: committed unexecuted"
    outputs = [o for c in code for o in c.outputs]
    figures = [o for o in outputs if PLOTLY in o.get("data", {})]
    for o in figures:  # GitHub and an nbconvert HTML export run no plotly.js: they show this PNG
        assert o["data"]["image/png"], f"{name}: a figure without its PNG"
    assert not [o for o in outputs if "Markdown object" in str(o.get("data", {}).get("text/plain", ""))]
    assert not [o for o in outputs if o.output_type == "error"]
    if name.startswith(("01", "02")):
        assert figures, f"{name} shows no figure"


@pytest.mark.parametrize("name", [n for n in NAMES if not n.startswith("03")])
def test_an_html_export_shows_every_figure(name):
    """`jupyter nbconvert --to html`: each figure is an image in the page (it runs no plotly.js)."""
    exporter = pytest.importorskip("nbconvert").HTMLExporter()
    page, _ = exporter.from_notebook_node(committed(name))
    figures = sum(PLOTLY in o.get("data", {}) for c in committed(name).cells for o in c.get("outputs", []))
    assert figures and len(re.findall(r'<img [^>]*src="data:image/png;base64,', page)) == figures
    assert "Markdown object" not in page


def test_a_figure_output_is_plotly_json_with_a_png():
    """What test above relies on: GitHub and nbconvert pick image/png, since they know no plotly mime."""
    nb = committed("01_arithmetic_intensity")
    (fig,) = [o for c in nb.cells for o in c.get("outputs", []) if PLOTLY in o.get("data", {})]
    assert set(fig["data"]) == {PLOTLY, "image/png", "text/plain"}
    assert fig["data"]["image/png"].startswith("iVBORw0KGgo")  # base64 of the PNG signature


# --- the public API only ------------------------------------------------------------------------------

ALLOWED_IMPORTS = {"memtraffic", "pandas", "plotly", "torch", "triton", "math", "pathlib", "tempfile"}


def _code(name: str) -> list[str]:
    """The notebook's code cells, magics left out (`%load_ext`, the cell a %%memtraffic magic runs)."""
    nb = jupytext.read(NOTEBOOKS / f"{name}.py")
    return [c.source for c in nb.cells if c.cell_type == "code" and not c.source.startswith("%")]


def _strings_of_code(source: str) -> list[str]:
    """Python source held in string constants (a variant module the notebook writes to a file)."""
    return [n.value for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Constant)
            and isinstance(n.value, str) and "import " in n.value and "\n" in n.value]


@pytest.mark.parametrize("name", NAMES)
def test_notebook_uses_only_the_public_api(name):
    public = set(memtraffic.__all__)
    sources = _code(name)
    sources += [s for src in sources for s in _strings_of_code(src)]
    for source in sources:
        tree = ast.parse(source)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    assert alias.name.split(".")[0] in ALLOWED_IMPORTS - {"memtraffic"} or alias.name == (
                        "memtraffic"), f"{name}: import {alias.name}"
            elif isinstance(node, ast.ImportFrom):
                assert node.module.split(".")[0] in ALLOWED_IMPORTS, f"{name}: from {node.module} import"
                if node.module.split(".")[0] == "memtraffic":
                    assert node.module == "memtraffic", f"{name}: from {node.module} (not public)"
                    assert {a.name for a in node.names} <= public, f"{name}: {[a.name for a in node.names]}"
            elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                  and node.value.id == "memtraffic"):
                assert node.attr in public, f"{name}: memtraffic.{node.attr} is not in memtraffic.__all__"


@pytest.mark.parametrize("name", NAMES)
def test_the_prose_names_only_the_public_api(name):
    """The markdown speaks of `memtraffic.NAME` with NAME in memtraffic.__all__, never of a module inside."""
    cells = jupytext.read(NOTEBOOKS / f"{name}.py").cells
    prose = " ".join(c.source for c in cells if c.cell_type == "markdown")
    named = re.findall(r"\bmemtraffic\.(\w+)(\.\w+)?", prose)
    assert not [f"memtraffic.{a}{b}" for a, b in named if a not in memtraffic.__all__ or b], named


def test_the_public_api_check_catches_an_internal_import(monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "_code",
                        lambda name: ["from memtraffic.vocab.ops import OPS\nimport memtraffic\n"])
    with pytest.raises(AssertionError, match="from memtraffic.vocab.ops"):
        test_notebook_uses_only_the_public_api("x")
    monkeypatch.setattr(sys.modules[__name__], "_code", lambda name: ["import memtraffic\nmemtraffic.api\n"])
    with pytest.raises(AssertionError, match="memtraffic.api is not in"):
        test_notebook_uses_only_the_public_api("x")


# --- plain Python ------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_the_py_source_runs_as_plain_python_and_prints_text(name):
    proc = subprocess.run([sys.executable, f"{name}.py"], capture_output=True, text=True, cwd=NOTEBOOKS,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "IPython.core.display" not in proc.stdout and "<Figure" not in proc.stdout
    if name.startswith("01"):
        assert "[figure: DRAM roofline - NVIDIA H100 80GB HBM3 (committed reference runs)]" in proc.stdout


# --- the text types no measured number ---------------------------------------------------------------------

# A measurement in prose: a number with a unit of bytes, time, rate, or an 'x' amplification ("16x";
# a shape like 1048576x2 is not one). Such numbers are printed by code cells, computed from the reports.
MEASURED = re.compile(
    r"\b\d+(?:[.,]\d+)?\s*(?:[kKMGTP]?B\b|[kKMGTP]?B/s|[kKMGTP]?FLOP/s|us\b|µs|ms\b|ns\b|x\b)")


@pytest.mark.parametrize("name", NAMES)
def test_markdown_types_no_measured_number(name):
    nb = jupytext.read(NOTEBOOKS / f"{name}.py")
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            found = MEASURED.findall(cell.source)
            assert not found, f"{name}: markdown types {found}: print it from the reports instead"


def test_the_measured_number_pattern_catches_typed_numbers():
    assert MEASURED.findall("softmax_naive moves 134.22 MB, 16x the minimum, in 633.1 us at 26.5 GB/s")
    assert not MEASURED.findall("a 1048576x2 fp32 matrix, 32-byte sectors, 4 warps, FP32 and BF16")


# --- .ipynb in sync with .py ------------------------------------------------------------------------------


def _cells(nb) -> list[tuple[str, str, list[str]]]:
    return [(c.cell_type, c.source.strip(), sorted(c.metadata.get("tags", []))) for c in nb.cells]


@pytest.mark.parametrize("name", NAMES)
def test_ipynb_holds_the_cells_of_its_py_source(name):
    py = jupytext.read(NOTEBOOKS / f"{name}.py")
    assert _cells(committed(name)) == _cells(py), (
        f"notebooks/{name}.ipynb differs from its .py: run scripts/execute_notebooks.py {name}")
    assert committed(name).metadata["kernelspec"]["name"] == "python3"
