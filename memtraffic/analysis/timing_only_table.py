"""Timing-only runs on the reading side: a timings.json as a kernel table, and what its rows can say.

A timings file (memtraffic.runfolder.timings) holds each kernel's device time and range, no counter: its
kernel table has the time and every traffic column NaN, so analyze's efficiencies per level stay NaN
(levels absent) while `bw_min_Bps` (minimum bytes / time) is the achieved bandwidth at the minimum.
`mark` adds `copy_roof_Bps`, the measured device-to-device copy bandwidth of the run's GPU (its
roofs: user cache, then reports/roofs/), `frac_copy_roof` (bw_min_Bps / copy_roof_Bps) and
`timing_only`, and says in each row's diagnosis that no per-level bytes were measured. A fraction above 1
is a kernel whose data was (partly) in L2: the program runs as it does, caches warm.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from memtraffic.analysis.findings import sentences
from memtraffic.host.roofs_cache import find_roofs
from memtraffic.runfolder.timings import read_timings
from memtraffic.vocab.finding import Finding, Subject


def timing_kernels(path: Path) -> pd.DataFrame:
    """The kernel table of a timings file: one row per launch with its range and time (ns)."""
    data = read_timings(path)
    rows = [{"launch": k.get("launch", i), "range": k["range"], "nvtx": k.get("nvtx") or [],
             "kernel": k["kernel"], "kernel_full": k["kernel"], "grid_size": None, "block_size": None,
             "device": data.get("device", ""), "passes": 0, "time": float(k["time_ns"]), "report": str(path)}
            for i, k in enumerate(data["kernels"])]
    kernels: pd.DataFrame = pd.DataFrame(rows, columns=["launch", "range", "nvtx", "kernel", "kernel_full",
                                                        "grid_size", "block_size", "device", "passes", "time",
                                                        "report"])
    return kernels


def copy_roof(device: str) -> float | None:
    """The measured copy bandwidth (read + write, B/s) of this device, if its roofs are known."""
    entry = find_roofs(device) if device else None
    value = entry.get("measured", {}).get("dram_Bps") if entry else None
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def mark(table: pd.DataFrame, subjects: Sequence[Subject]) -> pd.DataFrame:
    """The analyzed table of a timing-only run with its roof fraction and its findings (each row's about
    its subject, in the table's order)."""
    if table.empty:
        empty: pd.DataFrame = table.assign(timing_only=[], copy_roof_Bps=[], frac_copy_roof=[])
        return empty
    roofs = {d: copy_roof(d) for d in set(table["device"].fillna(""))}
    roof = [roofs.get(d) or math.nan for d in table["device"].fillna("")]
    table = table.assign(timing_only=True, copy_roof_Bps=roof)
    table["frac_copy_roof"] = table["bw_min_Bps"] / table["copy_roof_Bps"]
    found = []
    for r, subject in zip(table.to_dict("records"), subjects, strict=True):
        if isinstance(r["bw_min_Bps"], float) and math.isfinite(r["bw_min_Bps"]):
            frac = r["frac_copy_roof"]
            # faster than any DRAM copy: the bytes did not all come from DRAM
            rule = "timing_only_above_roof" if frac > 1 else "timing_only_rate"
            found.append([Finding(rule, subject, "DRAM", {"rate_Bps": r["bw_min_Bps"], "roof_eff": frac})])
        else:
            found.append([Finding("timing_only_no_minimum", subject)])
    table["findings"] = pd.Series(found, index=table.index, dtype=object)
    table["diagnosis"] = [sentences(f) for f in found]
    return table
