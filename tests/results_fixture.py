"""Synthetic analyzed tables and roofs for the figure and report tests.

Round made-up numbers, not measurements: each row is built from a few byte counts and a time, and
the derived columns follow analyze.py's definitions, so the tests can recompute what a figure shows.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from memtraffic.analysis.analyze import to_records
from memtraffic.analysis.row import ANALYZED

DEVICE = "Test GPU 1000"

ROOFS_ENTRY = {
    "device": DEVICE,
    "date": "2000-01-01",
    "measured": {"dram_Bps": 1e12, "l2_Bps": 4e12, "fp32_flops": 2e13, "bf16_tc_flops": 4e14,
                 "fp16_tc_flops": 4e14},
    "ncu_theoretical": {"dram_Bps": 1.5e12, "l2_Bps": 5e12, "l1_Bps": 1e13, "fp32_flops": 3e13},
    "method": {"dram_Bps": "synthetic"},
}


def _row(variant, op, shape, dtype, params, time_ns, l1, l2, dram, minimum, flops, req, hw=math.nan,
         diagnosis=""):
    (l1_ld, l1_st), (l2_rd, l2_wr), (dr, dw), (mr, mw) = l1, l2, dram, minimum
    explicit = ",".join(f"{k}={v}" for k, v in params.items())
    r = {
        "run": "run-a", "range": f"mt|{variant}|{shape}|{dtype}|{explicit}", "variant": variant, "op": op,
        "shape": shape, "dtype": dtype, "params": params, "kernels": [f"{variant}_kernel"], "n_kernels": 1,
        "device": DEVICE, "time_ns": time_ns, "l1_ld_bytes": l1_ld, "l1_st_bytes": l1_st,
        "l2_rd_bytes": l2_rd, "l2_wr_bytes": l2_wr, "dram_rd_bytes": dr, "dram_wr_bytes": dw,
        "req_ld_bytes": req[0], "req_st_bytes": req[1], "min_read_bytes": mr, "min_write_bytes": mw,
        "min_bytes": mr + mw, "fadd": math.nan, "fmul": math.nan, "ffma": math.nan, "hw_flops": hw,
        "model_flops": flops, "pred_read_bytes": l1_ld, "pred_write_bytes": l1_st, "diagnosis": diagnosis,
        "passes": 5, "report": "profile.ncu-rep", "status": "ok", "launch_dims": ["64x128"],
    }
    div = lambda a, b: a / b if b else math.nan
    r.update(
        eff_l1_ld=div(mr, l1_ld), eff_l1_st=div(mw, l1_st), eff_l2=div(mr + mw, l2_rd + l2_wr),
        eff_dram=div(mr + mw, dr + dw), eff_dram_rd=div(mr, dr), eff_dram_wr=div(mw, dw),
        sector_eff_ld=div(req[0], l1_ld), sector_eff_st=div(req[1], l1_st),
        bw_min_Bps=(mr + mw) / (time_ns * 1e-9), bw_dram_Bps=(dr + dw) / (time_ns * 1e-9),
    )
    for lv in ("l1_ld", "l1_st", "l2", "dram"):
        r[f"amp_{lv}"] = div(1.0, r[f"eff_{lv}"])
    return r


def results() -> pd.DataFrame:
    """Three configs: a wasteful softmax, a tight one (hardware FLOPs known), a bf16 matmul."""
    rows = [
        _row("softmax_rows", "softmax", "1024x2", "fp32", {"ROWS": 1}, 4000.0,
             (131072, 32768), (16384, 8192), (8192, 8192), (8192, 8192), 10240, (32768, 8192),
             diagnosis="loads and stores use 8 of every 32 bytes per sector"),
        _row("softmax_rows", "softmax", "1024x2", "fp32", {"ROWS": 128}, 1000.0,
             (8192, 8192), (8192, 8192), (8192, 0), (8192, 8192), 10240, (8192, 8192), hw=7168.0),
        _row("torch_matmul", "matmul", "64x64x64", "bf16", {}, 2000.0,
             (65536, 8192), (32768, 8192), (16384, 8192), (16384, 8192), 2 * 64**3, (65536, 8192)),
    ]
    df = pd.DataFrame(rows)
    return df.reindex(columns=ANALYZED)  # columns no row here sets are NaN


def write_run(folder: Path, df: pd.DataFrame | None = None, run_json: dict | None = None) -> Path:
    """A run folder as `memtraffic measure` leaves it, minus the .ncu-rep files."""
    folder.mkdir(parents=True, exist_ok=True)
    df = results() if df is None else df
    (folder / "results.json").write_text(json.dumps(to_records(df), indent=2))
    meta = run_json if run_json is not None else {
        "started": "2000-01-01T00:00:00Z", "command": "memtraffic measure softmax_rows",
        "environment": {"gpu": DEVICE, "driver": "999.1", "torch": "9.9.9", "triton": "8.8.8",
                        "ncu_version": "2099.1.1", "python": "3.99"},
        "metric_set": "roofline", "clock_control": "none",
        "configs": [{"id": 0, "variant": "softmax_rows", "range": "x", "status": "ok", "error": None,
                     "profiled": True}],
    }
    (folder / "run.json").write_text(json.dumps(meta, indent=2))
    return folder


def write_roofs(path: Path, entry: dict | None = None) -> Path:
    path.write_text(json.dumps(entry or ROOFS_ENTRY))
    return path
