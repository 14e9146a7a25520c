"""The teaching notebooks in notebooks/: each runs on a CPU from the committed reports, the numbers it
shows are the reports' (recomputed here independently from `analyze_path`, the model and the ceilings
file), its markdown types no measured number, and its .ipynb holds exactly the cells of its .py (the
jupytext source that review reads).

Each notebook prints the numbers it shows, as JSON, in its cell tagged `key-numbers`.
"""

from __future__ import annotations

import functools
import json
import math
import re
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
jupytext = pytest.importorskip("jupytext")
pytest.importorskip("ipykernel")

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
REPORTS = ROOT / "reports" / "h100"
CEILINGS_FILE = next((ROOT / "reports" / "ceilings").glob("*H100*.json"))
NAMES = sorted(p.stem for p in NOTEBOOKS.glob("*.py"))
CELL_TIMEOUT = 180  # seconds per cell; a whole notebook takes a few seconds on 2 CPU cores


def test_every_notebook_has_both_files():
    assert NAMES, "no notebooks found"
    assert sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb")) == NAMES


@functools.cache
def executed(name: str):
    """The committed .ipynb, run top to bottom in a fresh python3 kernel of this interpreter."""
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    client = nbclient.NotebookClient(nb, timeout=CELL_TIMEOUT, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOKS)}})
    client.execute()  # CellExecutionError, with the cell and its traceback, on any error
    return nb


def key_numbers(name: str) -> dict:
    cells = [c for c in executed(name).cells if "key-numbers" in c.metadata.get("tags", [])]
    assert len(cells) == 1, f"{name}: one cell tagged key-numbers"
    text = "".join(o.get("text", "") for o in cells[0].outputs if o.output_type == "stream")
    return json.loads(text)


@functools.cache
def analyzed(run: str):
    from memtraffic.analysis.analyze import analyze_path

    return analyze_path(REPORTS / run).set_index("range")


def row(run: str, rng: str):
    return analyzed(run).loc[rng]


def same(a, b) -> bool:
    if isinstance(b, int | float) and isinstance(a, int | float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return a == b


# --- executing: every notebook runs and shows the reports' numbers ----------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_notebook_runs_and_its_report_numbers_are_the_reports(name):
    key = key_numbers(name)
    assert key.get("reports") or key.get("model"), f"{name} shows no checked numbers"
    for run, ranges in key.get("reports", {}).items():
        for rng, values in ranges.items():
            assert rng in analyzed(run).index, f"{name}: {run} has no range {rng}"
            for column, value in values.items():
                want = row(run, rng)[column]
                assert same(value, want.item() if hasattr(want, "item") else want), (
                    f"{name}: {run} {rng} {column} = {value}, the report says {want}")


@pytest.mark.parametrize("name", NAMES)
def test_notebook_per_line_numbers_are_memtraffic_lines(name):
    from memtraffic.analysis.lines import read_lines

    for run, shown in key_numbers(name).get("lines", {}).items():
        lines = {(r["kernel"], r["line"]): r for r in read_lines(REPORTS / run)}
        for r in shown:
            want = lines[(r["kernel"], r["line"])]
            assert {k: want[k] for k in r} == r, f"{name}: {run} line {r['line']} is not what lines says"


@pytest.mark.parametrize("name", NAMES)
def test_notebook_model_and_ceiling_numbers_are_the_model_and_the_measured_file(name):
    from memtraffic.core.ops import OPS, parse_dtype, parse_shape

    key = key_numbers(name)
    ceilings = json.loads(CEILINGS_FILE.read_text())
    for dotted, value in key.get("ceilings", {}).items():
        kind, roof = dotted.split(".")
        assert value == ceilings[kind][roof]
    for label, values in key.get("model", {}).items():
        op, shape, dtype = label.split()
        if op not in OPS:  # a notebook's own variant: its op's minimum is checked below
            continue
        minimum = OPS[op].minimum(parse_shape(shape), parse_dtype(dtype))
        assert (values["read"], values["write"], values["flops"]) == (
            minimum.read, minimum.write, OPS[op].flops(parse_shape(shape)))


def _ceil(kind: str, roof: str) -> float:
    return json.loads(CEILINGS_FILE.read_text())[kind][roof]


def _total(r, a: str, b: str) -> float:
    return r[a] + r[b]


def _seed_factors(variant: str) -> dict:
    """What notebook 02 derives for one kernel of the seed run, from its counters."""
    from memtraffic.ncu.report import read_report

    table = analyzed("seed_1048576x2_fp32")
    r = table[table["variant"] == variant].iloc[0]
    launch = read_report(REPORTS / "seed_1048576x2_fp32" / "profile.ncu-rep").set_index("range").loc[r.name]
    m = int(r["shape"].split("x")[0])
    return {
        "redundancy": r["req_ld_bytes"] / r["min_read_bytes"],
        "sector_waste": r["l1_ld_bytes"] / r["req_ld_bytes"],
        "l1_ld_over_min": r["l1_ld_bytes"] / r["min_read_bytes"],
        "store_redundancy": r["req_st_bytes"] / r["min_write_bytes"],
        "store_sector_waste": r["l1_st_bytes"] / r["req_st_bytes"],
        "programs": launch["grid_size"], "threads_per_program": launch["block_size"],
        "load_requests_per_row": r["l1_ld_requests"] / m,
        "sectors_per_load_request": r["l1_ld_sectors"] / r["l1_ld_requests"],
        "useful_bytes_per_sector": 32 * r["req_ld_bytes"] / r["l1_ld_bytes"],
    }


def _expected_derived() -> dict:
    """Every derived number a notebook shows, recomputed here from the reports and the ceilings."""
    from memtraffic.core.ops import parse_shape, torch_dtype
    from memtraffic.kernels import VARIANTS

    seed = "seed_1048576x2_fp32"
    s1, s8, s4 = "suite_1048576x2_fp32", "suite_8192x8192", "suite_4096x4096"
    naive, tiled = row(seed, "mt|softmax_naive|1048576x2|fp32|num_warps=4"), row(
        seed, "mt|softmax_tiled|1048576x2|fp32|BLOCK_M=128")
    torch_row = row(seed, "mt|torch_softmax|1048576x2|fp32")
    gelu_ops, gelu_tr = row(s8, "mt|gelu_torch_ops|8192x8192|fp32"), row(s8, "mt|gelu_triton|8192x8192|fp32")
    manual8 = row(s8, "mt|torch_manual|8192x8192|fp32")
    fused8 = [row(s8, f"mt|{v}|8192x8192|fp32")["time_ns"] for v in ("torch_softmax", "torch_compiled",
                                                                    "softmax_tiled")]
    manual1 = row(s1, "mt|torch_manual|1048576x2|fp32")
    out = {
        # notebook 01
        "ridge_fp32": _ceil("measured", "fp32_flops") / _ceil("measured", "dram_Bps"),
        "ridge_bf16_tc": _ceil("measured", "bf16_tc_flops") / _ceil("measured", "dram_Bps"),
        "gelu_unfused_dram_over_fused": _total(gelu_ops, "dram_rd_bytes", "dram_wr_bytes")
        / _total(gelu_tr, "dram_rd_bytes", "dram_wr_bytes"),
        "gelu_unfused_time_over_fused": gelu_ops["time_ns"] / gelu_tr["time_ns"],
        "softmax_floor_ns": _total(tiled, "min_read_bytes", "min_write_bytes") / _ceil("measured", "dram_Bps")
        * 1e9,
        # notebook 02
        "naive_time_over_tiled": naive["time_ns"] / tiled["time_ns"],
        "torch_time_over_tiled": torch_row["time_ns"] / tiled["time_ns"],
        "manual_8192_dram_over_min": _total(manual8, "dram_rd_bytes", "dram_wr_bytes")
        / _total(manual8, "min_read_bytes", "min_write_bytes"),
        "manual_8192_time_over_best_fused": manual8["time_ns"] / min(fused8),
        "manual_1m_dram_reads_over_min": manual1["dram_rd_bytes"] / manual1["min_read_bytes"],
        "manual_1m_dram_writes_over_min": manual1["dram_wr_bytes"] / manual1["min_write_bytes"],
        "column_fp32_strided_time_over_coalesced":
        row(s4, "mt|softmax_column_strided|4096x4096|fp32")["time_ns"]
        / row(s4, "mt|softmax_column_coalesced|4096x4096|fp32")["time_ns"],
    }
    for v in ("softmax_naive", "softmax_tiled", "torch_softmax"):
        out[v] = _seed_factors(v)
    for v in ("softmax_tiled", "softmax_online", "softmax_3pass"):
        r = row(s8, f"mt|{v}|8192x8192|fp32")
        out[f"{v}_8192_l1_reads"] = r["l1_ld_bytes"] / r["min_read_bytes"]
        out[f"{v}_8192_dram_reads"] = r["dram_rd_bytes"] / r["min_read_bytes"]
    for dt in ("bf16", "fp32"):
        r = row("split_lag_16384x131072", f"mt|softmax_split|16384x131072|{dt}")
        model = VARIANTS["softmax_split"].predicted(parse_shape("16384x131072"), torch_dtype(dt), {}).read
        out[f"split_{dt}_l1_reads"] = r["l1_ld_bytes"] / r["min_read_bytes"]
        out[f"split_{dt}_model_reads"] = model / r["min_read_bytes"]
        out[f"split_{dt}_dram_reads"] = r["dram_rd_bytes"] / r["min_read_bytes"]
    for v in ("softmax_column_strided", "softmax_column_coalesced"):
        for dt in ("fp32", "bf16"):
            r = row(s4, f"mt|{v}|4096x4096|{dt}")
            out[f"{v}_{dt}_useful_bytes_per_sector"] = 32 * r["req_ld_bytes"] / r["l1_ld_bytes"]
    return out


@pytest.mark.parametrize("name", NAMES)
def test_notebook_derived_numbers_recomputed_from_the_reports(name):
    derived = key_numbers(name).get("derived", {})
    expected = _expected_derived()
    own = {"pred_read_over_min", "pred_write_over_min"}  # notebook 03's model of its own kernel: below
    for k, value in derived.items():
        if k in own:
            continue
        assert k in expected, f"{name} shows derived number {k!r}: recompute it in _expected_derived"
        want = expected[k]
        if isinstance(value, dict):
            for sub, v in value.items():
                assert same(v, float(want[sub])), f"{name}: {k}.{sub} = {v}, the reports give {want[sub]}"
        else:
            assert same(value, float(want)), f"{name}: {k} = {value}, the reports give {want}"


def test_notebook_03_variant_predicts_twice_the_softmax_minimum_and_shows_the_committed_run():
    from memtraffic.core.ops import OPS, parse_dtype

    key = key_numbers("03_measure_your_kernel")
    model = key["model"]["softmax_pairs 1048576x2 fp32"]
    minimum = OPS["softmax"].minimum((1048576, 2), parse_dtype("fp32"))
    assert (model["min_read_bytes"], model["min_write_bytes"]) == (minimum.read, minimum.write)
    # two strided loads (stores) each touching every sector of the input (output)
    assert (model["pred_read_bytes"], model["pred_write_bytes"]) == (2 * minimum.read, 2 * minimum.write)
    assert key["derived"] == {"pred_read_over_min": 2.0, "pred_write_over_min": 2.0}
    import torch

    if not torch.cuda.is_available():
        assert key["source"] == "committed"
        assert set(key["reports"]["seed_1048576x2_fp32"]) == {
            "mt|softmax_naive|1048576x2|fp32|num_warps=4", "mt|softmax_tiled|1048576x2|fp32|BLOCK_M=128"}


@pytest.mark.gpu
@pytest.mark.ncu
def test_notebook_03_measures_its_variant_on_the_gpu_as_predicted():
    """On a GPU with ncu the notebook measures softmax_pairs: the prediction is checked here."""
    key = key_numbers("03_measure_your_kernel")
    assert key["source"] == "measured"
    m = key["measured"]
    pred = key["model"]["softmax_pairs 1048576x2 fp32"]
    assert m["l1_ld_bytes"] == pytest.approx(pred["pred_read_bytes"], rel=0.02)
    assert m["l1_st_bytes"] == pytest.approx(pred["pred_write_bytes"], rel=0.02)


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
    ipynb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    assert _cells(ipynb) == _cells(py), (
        f"notebooks/{name}.ipynb differs from its .py: run `jupytext --sync notebooks/{name}.py`")
    assert ipynb.metadata["kernelspec"]["name"] == "python3"
    # Committed without outputs: an output would be a copy of numbers that could go stale.
    assert all(not c.get("outputs") for c in ipynb.cells if c.cell_type == "code")
