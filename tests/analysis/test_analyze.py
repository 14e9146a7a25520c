"""extract + analyze on the committed H100 reference runs, and every way a report file can be bad.

The real reports are the runs under reports/h100/, made by scripts/make_reference_reports.py. The
literals asserted below were read from those committed .ncu-rep files with ncu_report: they are
measured values of a NVIDIA H100 80GB HBM3, ncu 2025.3.1, 2026-11-22 (see each run.json). They pin
what extract and analyze make of fixed files, so a change that alters them fails here.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import sys
from pathlib import Path

import pytest
from report_bytes import report_bytes
from typer.testing import CliRunner

from memtraffic.analysis.analyze import (
    _check_metrics,
    analyze_path,
    parse_min_bytes,
    to_records,
)
from memtraffic.analysis.findings import sentences
from memtraffic.analysis.row import COLUMNS
from memtraffic.cli import app
from memtraffic.ncu import report as extract
from memtraffic.views.tables import render_results
from memtraffic.vocab.errors import ReportError, UsageError
from memtraffic.vocab.units import parse_size


def diagnose(*args, **kwargs) -> str:
    """The findings of a row as the diagnosis column says them (their sentences, in order)."""
    from memtraffic.analysis.findings import diagnose as findings_of

    return sentences(findings_of(*args, **kwargs))

REPO = Path(__file__).resolve().parents[2]
H100 = REPO / "reports" / "h100"
MIB8 = 8 * 2**20  # softmax of 1048576x2 fp32: read 8 MiB, write 8 MiB (the op's minimum, not a measurement)

# The seed run: Triton softmax with one row per program (num_warps=4) and 128 rows per program, and
# torch.softmax, 1048576x2 fp32.
REAL = {"path": H100 / "seed_1048576x2_fp32",
        "naive": "mt|softmax_naive|1048576x2|fp32|num_warps=4",
        "tiled": "mt|softmax_tiled|1048576x2|fp32|BLOCK_M=128",
        "torch": "mt|torch_softmax|1048576x2|fp32"}
SEED_REPORT = REAL["path"] / "profile.ncu-rep"


def _rows(df):
    return {r["range"]: r for r in df.to_dict("records")}


@pytest.fixture(scope="module")
def seed():
    """The seed run analyzed as a run folder: its plan gives each range a variant and the op's minimum."""
    return _rows(analyze_path(REAL["path"]))


@pytest.fixture
def bare(tmp_path):
    """The seed run's report alone, as a user who ran ncu by hand would have it: no plan, no run.json."""
    path = tmp_path / "mine.ncu-rep"
    shutil.copy(SEED_REPORT, path)
    return path


def test_seed_run_bytes_are_the_reports(seed):
    assert list(seed) == [REAL["naive"], REAL["tiled"], REAL["torch"]]
    naive, tiled, torch_row = seed[REAL["naive"]], seed[REAL["tiled"]], seed[REAL["torch"]]
    assert (naive["l1_ld_bytes"], naive["l1_st_bytes"]) == (134_217_728, 33_554_432)
    assert (tiled["l1_ld_bytes"], tiled["l1_st_bytes"]) == (8_388_608, 8_388_608)
    assert (torch_row["l1_ld_bytes"], torch_row["l1_st_bytes"]) == (16_777_216, 16_777_216)
    assert [r["dram_rd_bytes"] for r in seed.values()] == [8_397_056, 8_391_936, 8_394_752]
    assert [r["time_ns"] for r in seed.values()] == [632_672, 7_616, 10_112]
    assert [r["kernels"] for r in seed.values()] == [["_softmax_naive_kernel"], ["_softmax_tiled_kernel"],
                                                    ["softmax_warp_forward"]]
    assert {r["device"] for r in seed.values()} == {"NVIDIA H100 80GB HBM3"}


def test_seed_run_models_give_the_minimum(seed):
    tiled = seed[REAL["tiled"]]
    assert (tiled["variant"], tiled["op"], tiled["shape"], tiled["dtype"]) == ("softmax_tiled", "softmax",
                                                                             "1048576x2", "fp32")
    assert tiled["params"]["BLOCK_M"] == 128
    assert (tiled["min_read_bytes"], tiled["min_write_bytes"]) == (MIB8, MIB8)
    assert tiled["pred_read_bytes"] == MIB8 and tiled["model_flops"] == 5 * 1048576 * 2
    assert tiled["run"] == "seed_1048576x2_fp32"
    assert seed[REAL["naive"]]["pred_read_bytes"] == seed[REAL["naive"]]["l1_ld_bytes"]  # the model's 16x


def test_tiled_range_is_at_the_minimum(seed):
    tiled = seed[REAL["tiled"]]
    assert tiled["req_ld_bytes"] == MIB8 and tiled["l2_rd_bytes"] == MIB8
    assert tiled["eff_l1_ld"] == 1.0 and tiled["eff_l1_st"] == 1.0 and tiled["eff_l2"] == 1.0
    assert tiled["sector_eff_ld"] == 1.0 and tiled["n_kernels"] == 1
    assert f"{tiled['eff_l1_ld']:.2f}" == "1.00"
    # at the minimum everywhere but DRAM writes, whose output L2 still held when the kernel ended: said
    assert tiled["dram_wr_bytes"] * 1.05 < tiled["min_write_bytes"]
    assert tiled["diagnosis"] == ("DRAM writes below the minimum: the output was still in L2 when the kernel "
                                  "ended")
    assert tiled["bw_min_Bps"] == pytest.approx(2 * MIB8 / (tiled["time_ns"] * 1e-9))


def test_one_row_per_program_explains_its_16x(seed):
    naive = seed[REAL["naive"]]
    assert naive["amp_l1_ld"] == 16.0 and naive["eff_l1_ld"] == 1 / 16 and naive["eff_l1_st"] == 0.25
    assert naive["sector_eff_ld"] == 0.25 and naive["req_ld_bytes"] == 4 * MIB8  # 4x sectors x 4x requests
    assert naive["eff_dram_rd"] > 0.9  # the caches absorb it before DRAM
    d = naive["diagnosis"]
    assert "loads and stores use 8 of every 32-byte sector" in d
    assert "each input byte requested 4x" in d
    assert "the L1 requests take it (16x the minimum)" in d


def test_torch_softmax_half_sectors(seed):
    torch_row = seed[REAL["torch"]]
    assert torch_row["sector_eff_ld"] == 0.5 and torch_row["eff_l1_ld"] == 0.5
    assert "loads and stores use 16 of every 32-byte sector" in torch_row["diagnosis"]


def test_bare_report_without_minimum_shows_bytes_and_blank_efficiencies(bare):
    df = analyze_path(bare)
    assert list(df["range"]) == [REAL["naive"], REAL["tiled"], REAL["torch"]]
    assert (df["variant"] == "").all() and df["eff_l1_ld"].isna().all() and df["eff_dram"].isna().all()
    assert list(df["l1_ld_bytes"]) == [134_217_728, 8_388_608, 16_777_216]
    assert (df["run"] == "mine").all()
    text = render_results(df, "table")
    assert "no minimum known: pass --min-bytes" in text and "134.22 MB" in text


def test_bare_report_with_per_direction_minimum(bare):
    rows = _rows(analyze_path(bare, min_bytes=f"{MIB8}:{MIB8}"))
    assert [r["eff_l1_ld"] for r in rows.values()] == [1 / 16, 1.0, 0.5]
    assert [r["eff_l1_st"] for r in rows.values()] == [0.25, 1.0, 0.5]
    assert "each input byte requested 4x" in rows[REAL["naive"]]["diagnosis"]


def test_bare_report_total_minimum_gives_l2_and_dram_only(bare):
    tiled = _rows(analyze_path(bare, min_bytes="16MiB"))[REAL["tiled"]]
    assert math.isnan(tiled["eff_l1_ld"]) and tiled["min_bytes"] == 2 * MIB8
    assert tiled["eff_l2"] == 1.0


def test_user_minimum_overrides_the_model():
    tiled = _rows(analyze_path(REAL["path"], min_bytes="4MiB:4MiB"))[REAL["tiled"]]
    assert tiled["variant"] == "softmax_tiled" and tiled["eff_l1_ld"] == 0.5


def test_launch_table():
    kernels = extract.read_report(SEED_REPORT)
    assert list(kernels["range"]) == [REAL["naive"], REAL["tiled"], REAL["torch"]]
    assert list(kernels["kernel"]) == ["_softmax_naive_kernel", "_softmax_tiled_kernel",
                                       "softmax_warp_forward"]
    assert list(kernels["grid_size"]) == [1048576, 8192, 8192]
    assert list(kernels["passes"]) == [6, 6, 6]


def test_range_sums_its_kernels_and_group_by_kernel_splits_them():
    """torch_manual in the 1048576x2 suite is five launches in one NVTX range."""
    run = H100 / "suite_1048576x2_fp32"
    manual = "mt|torch_manual|1048576x2|fp32"
    by_range = _rows(analyze_path(run))
    row = by_range[manual]
    assert row["n_kernels"] == 5
    assert row["kernels"] == ["reduce_kernel", "elementwise_kernel", "vectorized_elementwise_kernel",
                              "reduce_kernel", "elementwise_kernel"]
    assert (row["l1_ld_bytes"], row["l1_st_bytes"], row["time_ns"]) == (50_331_648, 33_554_432, 57_984)
    assert row["diagnosis"].startswith("each input byte requested 6x")
    assert "5 kernels, each a pass over memory: fusing them saves passes" in row["diagnosis"]
    by_kernel = analyze_path(run, group_by="kernel")
    assert len(by_kernel) == len(extract.read_report(run / "profile.ncu-rep")) == 24
    assert (by_kernel["n_kernels"] == 1).all()
    parts = by_kernel[by_kernel["range"] == manual]
    assert len(parts) == 5 and parts["l1_ld_bytes"].sum() == row["l1_ld_bytes"]
    assert parts["time_ns"].sum() == row["time_ns"]


def test_every_config_of_a_run_is_recorded_with_its_check():
    """matmul_softmax, fp32 (IEEE dot) and bf16: each config checked, profiled and in run.json and status."""
    run = H100 / "matmul_softmax_4096x1024x1024"
    configs = {c["range"]: c for c in json.loads((run / "run.json").read_text())["configs"]}
    assert all(c["status"] == "ok" and c["profiled"] and c["max_err"] >= 0 for c in configs.values())
    status = [json.loads(line) for line in (run / "status.jsonl").read_text().splitlines()]
    assert {s["range"] for s in status if s["status"] == "ok"} == set(configs)
    df = analyze_path(run)
    assert list(df["range"]) == list(configs)
    assert list(df["n_kernels"]) == [1, 1, 2, 2]  # fused; unfused is a Triton matmul then torch's softmax


@pytest.fixture(scope="module")
def matmul():
    return _rows(analyze_path(H100 / "matmul_4096x4096x4096"))


def test_cp_async_loads_are_counted_once(matmul):
    """l1tex op_ld bytes already hold LDGSTS (cp.async) copies: cuBLAS's fp32 gemm runs no LDG (SASS ld
    bytes 0) yet its op_ld bytes equal its LDGSTS bytes. Only the requested side adds LDGSTS."""
    cublas = matmul["mt|matmul_torch|4096x4096x4096|fp32"]
    assert cublas["l1_ld_bytes"] == cublas["req_ld_bytes"] == cublas["l1_ldgsts_bytes"] == 3_221_225_472
    assert cublas["sector_eff_ld"] == 1.0 and "bytes per sector" not in cublas["diagnosis"]
    triton_bf16 = matmul["mt|matmul_triton|4096x4096x4096|bf16"]  # LDGSTS.BYPASS only: l1_ldgsts_bytes 0
    assert triton_bf16["l1_ld_bytes"] == triton_bf16["pred_read_bytes"] == 2_147_483_648
    assert triton_bf16["l1_ldgsts_bytes"] == 0 and triton_bf16["sector_eff_ld"] == 1.0
    fused = _rows(analyze_path(H100 / "matmul_softmax_4096x1024x1024"))[
        "mt|matmul_softmax_fused|4096x1024x1024|bf16"]
    assert fused["l1_ld_bytes"] == fused["pred_read_bytes"] == 276_824_064
    assert fused["req_ld_bytes"] == 276_824_064  # all of it LDGSTS: the pipelined loop loads only that way


def test_tma_gemm_is_diagnosed_as_bypassing_the_lsu(matmul):
    """cuBLAS's bf16 gemm on Hopper moves its tiles with TMA: L1 (LSU) reads 0 B while L2 moved 890 MB."""
    tma = matmul["mt|matmul_torch|4096x4096x4096|bf16"]
    assert (tma["l1_ld_bytes"], tma["l1_st_bytes"]) == (0, 0)
    assert (tma["l2_rd_bytes"], tma["l2_wr_bytes"]) == (854_835_328, 33_554_432)
    assert tma["kernels"] == ["nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"]
    assert math.isnan(tma["eff_l1_ld"]) and math.isnan(tma["eff_l1_st"])
    assert tma["diagnosis"].startswith("loads and stores bypass the L1 (LSU) counters (TMA or other async "
                                       "copies): judge by L2, DRAM and FLOPs; DRAM moves")
    assert not any(f.rule == "lsu_bypass" for r in matmul.values() if r is not tma for f in r["findings"])


def test_json_and_csv_are_raw_and_stable():
    df = analyze_path(REAL["path"])
    records = json.loads(render_results(df, "json"))
    assert isinstance(records, list) and len(records) == 3
    assert list(records[0]) == COLUMNS
    tiled = next(r for r in records if r["range"] == REAL["tiled"])
    assert tiled["l1_ld_bytes"] == MIB8 and isinstance(tiled["l1_ld_bytes"], int)
    assert isinstance(tiled["kernels"], list) and isinstance(tiled["params"], dict)
    assert tiled["eff_l1_ld"] == 1.0
    total = json.loads(render_results(analyze_path(REAL["path"], min_bytes="16MiB"), "json"))
    assert total[1]["eff_l1_ld"] is None  # NaN becomes null, never the invalid NaN token
    csv_text = render_results(df, "csv")
    assert csv_text.splitlines()[0].startswith(",".join(COLUMNS[:5]))


def _cells(output: str, label: str) -> list[str]:
    line = next(ln for ln in output.splitlines() if ln.startswith(label + " "))
    return re.split(r"\s{2,}", line.strip())


def test_cli_analyze_run_folder_prints_the_table():
    res = CliRunner().invoke(app, ["analyze", str(REAL["path"]), "--wide"])  # a line a row (test_width.py)
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines[0] == "NVIDIA H100 80GB HBM3"
    assert re.split(r"\s{2,}", lines[1].strip())[:3] == ["range", "n", "time"]
    cells = _cells(res.output, "softmax_tiled 1048576x2 fp32 BLOCK_M=128")
    assert cells[1:5] == ["1", "7.6 us", "8.39 MB", "8.39 MB"]
    assert cells[8:12] == ["1.00", "1.00", "1.00", "1.00"]  # eff L1 ld, L1 st, L2, DRAM rd
    naive = _cells(res.output, "softmax_naive 1048576x2 fp32 num_warps=4")
    assert naive[3:5] == ["134.22 MB", "33.55 MB"] and naive[8:10] == ["0.06", "0.25"]
    # sector waste on two rows: said once, its numbers as a range, each row's own under it
    assert "  2 rows: loads and stores use 8-16 of every 32-byte sector" in res.output
    assert "    softmax_naive 1048576x2 fp32 num_warps=4: 8\n" in res.output


def test_cli_analyze_json_has_the_documented_keys():
    res = CliRunner().invoke(app, ["analyze", str(REAL["path"]), "--format", "json"])
    assert res.exit_code == 0, res.output
    records = json.loads(res.output)
    assert len(records) == 3
    for record in records:
        assert list(record) == COLUMNS  # analysis.row.Row's keys, in its order
    assert [r["l1_st_bytes"] for r in records] == [33_554_432, 8_388_608, 16_777_216]


def test_cli_analyze_group_by_kernel_gives_a_row_per_launch():
    run = H100 / "suite_1048576x2_fp32"
    res = CliRunner().invoke(app, ["analyze", str(run), "--group-by", "kernel", "--format", "json"])
    assert res.exit_code == 0, res.output
    records = json.loads(res.output)
    assert len(records) == 24 and all(r["n_kernels"] == 1 for r in records)
    manual = [r["kernels"][0] for r in records if r["variant"] == "torch_manual"]
    assert manual == ["reduce_kernel", "elementwise_kernel", "vectorized_elementwise_kernel", "reduce_kernel",
                      "elementwise_kernel"]
    res = CliRunner().invoke(app, ["analyze", str(run), "--group-by", "kernel", "--wide"])
    assert res.exit_code == 0 and res.output.splitlines()[1].startswith("kernel ")
    assert "torch_manual 1048576x2 fp32 [vectorized_elementwise_kernel]" in res.output


def test_cli_analyze_bare_report_with_min_bytes(bare):
    res = CliRunner().invoke(app, ["analyze", str(bare), "--min-bytes", "8MiB:8MiB", "--wide"])
    assert res.exit_code == 0, res.output
    assert _cells(res.output, REAL["tiled"])[8:12] == ["1.00", "1.00", "1.00", "1.00"]
    assert _cells(res.output, REAL["naive"])[8:10] == ["0.06", "0.25"]
    assert _cells(res.output, REAL["torch"])[8:10] == ["0.50", "0.50"]
    assert "no minimum known" not in res.output
    res = CliRunner().invoke(app, ["analyze", str(bare)])
    assert res.exit_code == 0 and "no minimum known: pass --min-bytes" in res.output


# --- bad files ---------------------------------------------------------------------------------------------


def test_junk_file(tmp_path):
    junk = tmp_path / "junk.ncu-rep"
    junk.write_text("this is not a report\n")
    with pytest.raises(ReportError, match=f"{junk} holds no profiled kernel"):
        extract.read_report(junk)


def test_empty_and_missing_files(tmp_path):
    empty = tmp_path / "empty.ncu-rep"
    empty.touch()
    with pytest.raises(ReportError, match=f"{empty} is empty"):
        extract.read_report(empty)
    with pytest.raises(ReportError, match="no such"):
        analyze_path(tmp_path / "missing.ncu-rep")
    with pytest.raises(ReportError, match="no .ncu-rep file in this folder"):
        analyze_path(tmp_path / "..")


def test_truncated_report(tmp_path):
    data = report_bytes(SEED_REPORT)
    cut = tmp_path / "cut.ncu-rep"
    cut.write_bytes(data[: len(data) - 100])
    with pytest.raises(ReportError, match=f"{cut} is truncated or damaged: kernel launch #2"):
        extract.read_report(cut)
    with pytest.warns(UserWarning, match="truncated"):
        assert len(extract.read_report(cut, allow_partial=True)) == 2


def test_cli_bad_report_is_one_line(tmp_path):
    junk = tmp_path / "junk.ncu-rep"
    junk.write_bytes(b"\x00\x01garbage")
    res = CliRunner().invoke(app, ["analyze", str(junk)])
    assert res.exit_code == 1
    assert res.output.count("\n") == 1 and str(junk) in res.output and res.output.startswith("error: ")


def test_missing_metrics_name_the_report():
    import pandas as pd

    kernels = pd.DataFrame({"time": [math.nan], "l1_ld_bytes": [1.0], "l1_st_bytes": [1.0],
                            "l2_rd_sectors": [1.0], "l2_wr_sectors": [1.0], "dram_rd_bytes": [1.0],
                            "dram_wr_bytes": [1.0]})
    with pytest.raises(ReportError, match="a.ncu-rep lacks gpu__time_duration.sum"):
        _check_metrics(kernels, "a.ncu-rep")
    kernels = kernels.assign(time=1.0, l1_ld_bytes=math.nan, l1_st_bytes=math.nan, l2_rd_sectors=math.nan,
                             l2_wr_sectors=math.nan, dram_rd_bytes=math.nan, dram_wr_bytes=math.nan)
    with pytest.raises(ReportError, match="b.ncu-rep lacks every traffic metric .*dram__bytes_read.sum"):
        _check_metrics(kernels, "b.ncu-rep")


def test_ncu_report_falls_back_to_the_ncu_install(tmp_path, monkeypatch):
    extras = tmp_path / "nsight-compute" / "2099.1" / "extras" / "python"
    extras.mkdir(parents=True)
    (extras / "ncu_report.py").write_text("FROM_INSTALL = True\n")
    ncu = tmp_path / "nsight-compute" / "2099.1" / "ncu"
    ncu.write_text("")
    monkeypatch.setenv("MEMTRAFFIC_NCU", str(ncu))
    monkeypatch.setitem(sys.modules, "ncu_report", None)  # the package is "not installed"
    monkeypatch.setattr(extract, "_ncu_report", None)
    monkeypatch.setattr(sys, "path", list(sys.path))
    module = extract.import_ncu_report()
    assert module.FROM_INSTALL and str(extras) in sys.path


def test_ncu_report_missing_everywhere(monkeypatch):
    monkeypatch.setitem(sys.modules, "ncu_report", None)
    monkeypatch.setattr(extract, "_ncu_report", None)
    monkeypatch.setattr(extract, "_extras_dirs", lambda: [])
    with pytest.raises(ReportError, match="pip install ncu-report"):
        extract.import_ncu_report()


# --- sizes and diagnoses -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "size"), [
    ("8388608", 8388608), ("8MB", 8_000_000), ("8MiB", 8388608), ("8.39MB", 8_390_000), ("8 mib", 8388608),
    ("1KiB", 1024), ("2GB", 2 * 10**9), ("512B", 512),
])
def test_parse_size(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "8XB", "MiB", "-8MB", "8MiB:"])
def test_parse_size_rejects(text):
    with pytest.raises(UsageError):
        parse_min_bytes(text) if ":" in text else parse_size(text)


def test_parse_min_bytes():
    assert parse_min_bytes("8MiB:8MiB") == (MIB8, MIB8, 2 * MIB8)
    read, write, total = parse_min_bytes("16MB")
    assert math.isnan(read) and math.isnan(write) and total == 16_000_000


def _row(**kw):
    base = {"n_kernels": 1, "req_ld_bytes": 100.0, "req_st_bytes": 100.0, "min_read_bytes": 100.0,
            "min_write_bytes": 100.0, "sector_eff_ld": 1.0, "sector_eff_st": 1.0, "eff_l1_ld": 1.0,
            "eff_l1_st": 1.0, "eff_l2": 1.0, "eff_dram": 1.0, "eff_dram_rd": 1.0, "eff_dram_wr": 1.0,
            "bw_min_Bps": 1e12}
    return {**base, **kw}


def test_diagnosis_cases():
    assert diagnose(_row()) == ""
    d = diagnose(_row(n_kernels=5, req_ld_bytes=500.0, eff_l1_ld=0.2))
    assert d.startswith("each input byte requested 5x: warps or programs repeat it, or the kernel makes "
                        "passes; 5 kernels, each a pass over memory: fusing them saves passes")
    assert "DRAM moves 3.2x the minimum" in diagnose(_row(eff_dram=1 / 3.2))
    assert "L1 loads 0.05x the minimum: loads through TMA are not in these counters" in diagnose(
        _row(eff_l1_ld=20.0))


LEVELS = {"l1_ld_bytes": 100.0, "l1_st_bytes": 100.0, "l2_rd_bytes": 100.0, "l2_wr_bytes": 100.0}


@pytest.mark.parametrize(("levels", "expected"), [
    ({"l1_ld_bytes": 0.0, "l1_st_bytes": 0.0}, "loads and stores bypass the L1 (LSU) counters"),
    ({"l1_ld_bytes": 0.5}, "loads bypass the L1 (LSU) counters"),  # under 1% of L2's 100 B
    ({"l1_st_bytes": 0.0}, "stores bypass the L1 (LSU) counters"),
    ({"l1_ld_bytes": 0.0, "l2_rd_bytes": 0.0}, None),  # nothing moved anywhere: nothing bypassed
    ({"l1_ld_bytes": 2.0}, None),  # a small kernel's few LSU bytes are still LSU bytes
    ({}, None),
])
def test_diagnosis_lsu_bypass(levels, expected):
    d = diagnose(_row(**{**LEVELS, **levels}))
    if expected is None:
        assert "bypass the L1 (LSU) counters" not in d
    else:
        assert d.startswith(expected + " (TMA or other async copies): judge by L2, DRAM and FLOPs")


def test_every_efficiency_above_one_has_its_reason():
    # less than the minimum reached L2: the minimum over-counts the call
    assert diagnose(_row(eff_l2=3.0, eff_dram=3.0)) == (
        "below the minimum at L2, DRAM: the minimum over-counts this call, a bound it beats")
    # a bound the tracer recorded explains every level
    d = diagnose(_row(eff_l1_ld=4.0, eff_l2=2.0), bound="the minimum is an upper bound (index on the GPU)")
    assert d == "below the minimum at L1 ld, L2: the minimum is an upper bound (index on the GPU)"
    assert "L1 stores 0.25x the minimum" in diagnose(_row(eff_l1_st=4.0))
    assert "part of the input came from L2" in diagnose(_row(eff_dram_rd=2.0))
    assert diagnose(_row(eff_l1_ld=1.04)) == ""


@pytest.mark.parametrize("name", ["suite_1048576x2_fp32", "split_lag_16384x131072",
                                  "source_column_4096x4096_fp32", "profile_torch_model"])
def test_committed_kernels_above_the_minimum_say_why(name):
    """Per kernel, a multi-kernel range's minimum sits on its main kernel; helpers show none."""
    table = analyze_path(H100 / name, group_by="kernel")
    levels = ["eff_l1_ld", "eff_l1_st", "eff_l2", "eff_dram_rd"]
    for r in table.to_dict("records"):
        if any(r[k] > 1.05 for k in levels):
            assert any("below_minimum" in f.rule or f.rule == "lsu_bypass" for f in r["findings"]), r
    helpers = table[[bool(f) and f[0].rule == "helper_kernel" for f in table["findings"]]]
    assert helpers["min_bytes"].isna().all()
    if name != "profile_torch_model":
        assert len(helpers) > 0
    ranges = table[table["range"].astype(bool)].groupby("range")["min_bytes"].count()
    assert (ranges <= 1).all()  # no range's minimum counted twice


def test_a_global_min_bytes_on_a_plain_report_names_its_limit():
    table = analyze_path(H100 / "plain_ncu_torch_softmax", min_bytes="8MiB:8MiB")
    rng = table[table["kernels"].map(lambda k: k[0].startswith("distribution_elementwise"))].iloc[0]
    assert math.isnan(rng["eff_dram_rd"]) and rng["no_efficiency"]["eff_dram_rd"] == "cached"  # not a result
    assert "applies to every row" in rng["diagnosis"]


def test_lsu_bypass_replaces_the_below_minimum_note():
    d = diagnose(_row(**{**LEVELS, "l1_ld_bytes": 0.5}, eff_l1_ld=200.0))
    assert "loads bypass the L1 (LSU) counters" in d and "below the minimum" not in d
    assert diagnose(_row(sector_eff_st=0.5)) == ("stores use 16 of every 32-byte sector: adjacent threads "
                                                 "should touch adjacent addresses")


def test_records_convert_numpy_and_nan():
    import pandas as pd

    df = pd.DataFrame({"l1_ld_bytes": [8.0], "eff_l2": [float("nan")], "kernels": [["k"]]})
    assert to_records(df) == [{"l1_ld_bytes": 8, "eff_l2": None, "kernels": ["k"]}]


def test_run_folder_after_a_crash_keeps_the_good_report(tmp_path):
    """Attempt 2 of a run whose runner died may leave an empty report: the other one still counts."""
    shutil.copy(SEED_REPORT, tmp_path / "profile.ncu-rep")
    (tmp_path / "profile-2.ncu-rep").write_text("nothing profiled\n")
    run = {"reports": ["profile.ncu-rep", "profile-2.ncu-rep"],
           "attempts": [{"returncode": 139}, {"returncode": 0}]}
    (tmp_path / "run.json").write_text(json.dumps(run))
    assert len(analyze_path(tmp_path)) == 3
    (tmp_path / "only").mkdir()
    (tmp_path / "only" / "profile.ncu-rep").write_text("nothing profiled\n")
    with pytest.raises(ReportError, match="holds no profiled kernel"):
        analyze_path(tmp_path / "only")


def test_plain_ncu_capture_of_a_torch_program_is_analyzed_with_min_bytes():
    """scripts/capture_plain_ncu.sh: `ncu --set full -o` around torch.softmax, H100, 2026-11-22.

    No plan and no NVTX ranges: one row per kernel, named by the kernel; --set full has no LSU byte
    counters, so L1 is blank while L2 and DRAM are analyzed against the user's minimum.
    """
    report = H100 / "plain_ncu_torch_softmax" / "profile.ncu-rep"
    rows = {r["kernels"][0]: r for r in analyze_path(report, min_bytes="8MiB:8MiB").to_dict("records")}
    assert list(rows) == ["distribution_elementwise_grid_stride_kernel", "softmax_warp_forward"]
    softmax = rows["softmax_warp_forward"]
    assert (softmax["range"], softmax["variant"], softmax["n_kernels"]) == ("", "", 1)
    assert (softmax["dram_rd_bytes"], softmax["time_ns"]) == (8_394_752, 9_952)
    assert softmax["eff_dram_rd"] == pytest.approx(MIB8 / 8_394_752)
    assert math.isnan(softmax["l1_ld_bytes"]) and math.isnan(softmax["eff_l1_ld"])
    result = CliRunner().invoke(app, ["analyze", str(report), "--min-bytes", "8MiB:8MiB"])
    assert result.exit_code == 0 and "softmax_warp_forward" in result.output


def test_a_range_whose_kernels_all_lack_a_time_is_still_analyzed(monkeypatch):
    """A range whose every kernel has no time (NaN) has no longest kernel to name: pandas 3's groupby
    idxmax raises on such a group (pandas 2 gave NaN), so the launch of the longest kernel is looked up
    among timed kernels only and that range's row keeps blank launch statistics."""
    from memtraffic.analysis import analyze as module

    real = module.kernel_table

    def one_range_untimed(report, allow_partial=False):
        read = real(report, allow_partial)
        read.kernels.loc[read.kernels["range"] == REAL["naive"], "time"] = math.nan
        return read

    monkeypatch.setattr(module, "kernel_table", one_range_untimed)
    rows = _rows(analyze_path(REAL["path"]))
    assert math.isnan(rows[REAL["naive"]]["time_ns"]) and math.isnan(rows[REAL["naive"]]["grid_size"])
    assert rows[REAL["tiled"]]["grid_size"] == 8192 and rows[REAL["tiled"]]["time_ns"] > 0


def test_a_timing_only_run_grouped_by_kernel_has_no_launch_statistics_and_no_error():
    """Timing-only kernels carry no launch statistics (registers, waves, occupancy): by kernel they are NaN,
    not a KeyError (the committed H100 run of an Inductor-compiled step)."""
    result = CliRunner().invoke(app, ["analyze", str(H100 / "timing_only_layernorm_mlp_adamw"), "--group-by",
                                      "kernel", "--format", "json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert rows and all(r["registers"] is None and r["time_ns"] > 0 for r in rows)
