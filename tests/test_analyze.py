"""extract + analyze on a real H100 report, and every way a report file can be bad.

The real report comes from ONE place, REAL below. Byte counts are asserted as multiples of the
1048576x2 fp32 softmax minimum (8 MiB each way), read from the report, never typed from a measurement.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memtraffic import extract
from memtraffic.analyze import (
    COLUMNS,
    _check_metrics,
    analyze_path,
    diagnose,
    parse_min_bytes,
    render,
    to_records,
)
from memtraffic.cli import app
from memtraffic.exceptions import ReportError, UsageError
from memtraffic.units import parse_size

REPO = Path(__file__).resolve().parent.parent
MIB8 = 8 * 2**20  # softmax of 1048576x2 fp32: read 8 MiB, write 8 MiB

# The real report. The probe (Triton softmax with 1 and 128 rows per program at num_warps=4, and
# torch.softmax, 1048576x2 fp32, H100, ncu 2025.3.1) until the committed reference run replaces it:
#   REAL = {"path": REPO / "reports/h100/seed_1048576x2_fp32",
#           "naive": "mt|softmax_naive|1048576x2|fp32|num_warps=4",
#           "tiled": "mt|softmax_tiled|1048576x2|fp32|BLOCK_M=128",
#           "torch": "mt|torch_softmax|1048576x2|fp32"}
REAL = {"path": REPO / ".notes" / "probe.ncu-rep", "naive": "mt|tiled|bm=1", "tiled": "mt|tiled|bm=128",
        "torch": "mt|torch"}


@pytest.fixture
def real() -> dict:
    if not REAL["path"].exists():
        pytest.skip(f"real report {REAL['path']} is not here (the lead commits reference runs from the H100)")
    return REAL


def _rows(df):
    return {r["range"]: r for r in df.to_dict("records")}


def test_tiled_range_is_at_the_minimum(real):
    rows = _rows(analyze_path(real["path"], min_bytes=f"{MIB8}:{MIB8}"))
    tiled = rows[real["tiled"]]
    assert tiled["l1_ld_bytes"] == MIB8 and tiled["l1_st_bytes"] == MIB8
    assert tiled["req_ld_bytes"] == MIB8 and tiled["l2_rd_bytes"] == MIB8
    assert tiled["eff_l1_ld"] == 1.0 and tiled["eff_l1_st"] == 1.0 and tiled["eff_l2"] == 1.0
    assert tiled["sector_eff_ld"] == 1.0 and tiled["n_kernels"] == 1
    assert f"{tiled['eff_l1_ld']:.2f}" == "1.00"
    assert tiled["diagnosis"] == "" or "L2 when the kernel ended" in tiled["diagnosis"]
    assert tiled["time_ns"] > 0 and tiled["device"].startswith("NVIDIA")
    assert tiled["bw_min_Bps"] == pytest.approx(2 * MIB8 / (tiled["time_ns"] * 1e-9))


def test_one_row_per_program_explains_its_16x(real):
    naive = _rows(analyze_path(real["path"], min_bytes=f"{MIB8}:{MIB8}"))[real["naive"]]
    assert naive["l1_ld_bytes"] == 16 * MIB8 and naive["amp_l1_ld"] == 16.0 and naive["eff_l1_ld"] == 1 / 16
    assert naive["sector_eff_ld"] == 0.25 and naive["req_ld_bytes"] == 4 * MIB8  # 4x sectors x 4x requests
    assert naive["eff_dram_rd"] > 0.9  # the caches absorb it before DRAM
    d = naive["diagnosis"]
    assert "8 of every 32 bytes per sector" in d
    assert "each input byte requested 4x" in d
    assert "L1/L2 absorb the extra loads before DRAM" in d and "but time pays" in d


def test_torch_softmax_half_sectors(real):
    torch_row = _rows(analyze_path(real["path"], min_bytes=f"{MIB8}:{MIB8}"))[real["torch"]]
    assert torch_row["l1_ld_bytes"] == 2 * MIB8 and torch_row["sector_eff_ld"] == 0.5
    assert "16 of every 32 bytes per sector" in torch_row["diagnosis"]
    assert "softmax_warp_forward" in torch_row["kernels"][0]


def test_without_minimum_bytes_stay_and_efficiencies_blank(real):
    df = analyze_path(real["path"])
    assert df["eff_l1_ld"].isna().all() and df["eff_dram"].isna().all()
    assert (df["l1_ld_bytes"] > 0).all()
    text = render(df, "table")
    assert "no minimum known: pass --min-bytes" in text and "134.22 MB" not in text.split("\n")[0]


def test_total_minimum_gives_l2_and_dram_only(real):
    tiled = _rows(analyze_path(real["path"], min_bytes="16MiB"))[real["tiled"]]
    assert math.isnan(tiled["eff_l1_ld"]) and tiled["min_bytes"] == 2 * MIB8
    assert tiled["eff_l2"] == 1.0


def test_group_by_kernel_and_kernel_table(real):
    df = analyze_path(real["path"], group_by="kernel")
    assert len(df) == 3 and (df["n_kernels"] == 1).all()
    kernels = extract.read_report(real["path"])
    assert list(kernels["range"]) == [real["naive"], real["tiled"], real["torch"]]
    assert (kernels["passes"] >= 1).all() and kernels["grid_size"].iloc[1] == 1048576 // 128


def test_plan_supplies_minimum_and_models(real, tmp_path):
    """A run folder: the plan maps ranges to variants, so the op model gives the minimum."""
    if real["path"].is_dir():
        pytest.skip("the real report is already a run folder with its own plan")
    shutil.copy(real["path"], tmp_path / "profile.ncu-rep")
    config = {"id": 0, "range": real["tiled"], "variant": "torch_softmax", "op": "softmax",
              "shape": [1048576, 2], "dtype": "fp32", "params": {}, "explicit_params": {}}
    (tmp_path / "plan.json").write_text(json.dumps({"configs": [config], "skipped": []}))
    rows = _rows(analyze_path(tmp_path))
    tiled = rows[real["tiled"]]
    assert (tiled["variant"], tiled["op"], tiled["shape"], tiled["dtype"]) == ("torch_softmax", "softmax",
                                                                             "1048576x2", "fp32")
    assert tiled["min_read_bytes"] == MIB8 and tiled["eff_l1_ld"] == 1.0
    assert tiled["pred_read_bytes"] == MIB8 and tiled["model_flops"] == 5 * 1048576 * 2
    assert tiled["run"] == tmp_path.name
    assert rows[real["torch"]]["variant"] == ""  # not in the plan: no model, no efficiency
    assert math.isnan(rows[real["torch"]]["eff_l1_ld"])


def test_json_and_csv_are_raw_and_stable(real):
    df = analyze_path(real["path"], min_bytes="8MiB:8MiB")
    records = json.loads(render(df, "json"))
    assert isinstance(records, list) and len(records) == 3
    assert list(records[0])[: len(COLUMNS)] == COLUMNS
    tiled = next(r for r in records if r["range"] == real["tiled"])
    assert tiled["l1_ld_bytes"] == MIB8 and isinstance(tiled["l1_ld_bytes"], int)
    assert isinstance(tiled["kernels"], list) and isinstance(tiled["params"], dict)
    assert tiled["model_flops"] is None  # NaN becomes null, never the invalid NaN token
    csv_text = render(df, "csv")
    assert csv_text.splitlines()[0].startswith(",".join(COLUMNS[:5]))


def test_cli_analyze(real):
    res = CliRunner().invoke(app, ["analyze", str(real["path"]), "--min-bytes", "8MiB:8MiB"])
    assert res.exit_code == 0, res.output
    line = next(ln for ln in res.output.splitlines() if ln.startswith(real["tiled"] + " "))
    cells = re.split(r"\s{2,}", line.strip())
    assert cells[8:11] == ["1.00", "1.00", "1.00"]  # eff L1 ld, eff L1 st, eff L2
    res = CliRunner().invoke(app, ["analyze", str(real["path"]), "--format", "json"])
    assert res.exit_code == 0 and len(json.loads(res.output)) == 3


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


def test_truncated_report(real, tmp_path):
    if real["path"].is_dir():
        pytest.skip("needs a single report file")
    data = real["path"].read_bytes()
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
    assert d.startswith("5 kernels: loads request 5x the minimum (extra passes over memory)")
    assert "DRAM moves 3.2x the minimum" in diagnose(_row(eff_dram=1 / 3.2))
    assert "bypass the LSU path" in diagnose(_row(eff_l1_ld=20.0))
    assert diagnose(_row(sector_eff_st=0.5)) == "stores use 16 of every 32 bytes per sector"


def test_records_convert_numpy_and_nan():
    import pandas as pd

    df = pd.DataFrame({"l1_ld_bytes": [8.0], "eff_l2": [float("nan")], "kernels": [["k"]]})
    assert to_records(df) == [{"l1_ld_bytes": 8, "eff_l2": None, "kernels": ["k"]}]


def test_run_folder_after_a_crash_keeps_the_good_report(real, tmp_path):
    """Attempt 2 of a run whose runner died may leave an empty report: the other one still counts."""
    if real["path"].is_dir():
        pytest.skip("needs a single report file")
    shutil.copy(real["path"], tmp_path / "profile.ncu-rep")
    (tmp_path / "profile-2.ncu-rep").write_text("nothing profiled\n")
    run = {"reports": ["profile.ncu-rep", "profile-2.ncu-rep"],
           "attempts": [{"returncode": 139}, {"returncode": 0}]}
    (tmp_path / "run.json").write_text(json.dumps(run))
    assert len(analyze_path(tmp_path)) == 3
    (tmp_path / "only").mkdir()
    (tmp_path / "only" / "profile.ncu-rep").write_text("nothing profiled\n")
    with pytest.raises(ReportError, match="holds no profiled kernel"):
        analyze_path(tmp_path / "only")
