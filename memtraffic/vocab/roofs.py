"""This GPU's roofs as data: their names, the roofs file (user cache, committed references), and
the ncu theoretical peaks computed from a report's metrics.

Two kinds, always kept apart:
- measured: what simple kernels reach here (memtraffic.probes.roof_probes measures them);
- ncu theoretical: per-cycle peaks times clock rates, read from an Nsight Compute report
  (the same expressions ncu's own roofline sections use), when ncu is available.

Where they live: a user cache (roofs.json in the user cache folder: host.roofs_cache reads it and finds a
device's roofs), and committed reference values under reports/roofs/<device>.json written by
`memtraffic roofs --save-reference` on a real GPU (memtraffic.probes.roof_probes writes both; this module
checks an entry and reads a roofs file). Numbers are never typed in by hand. Torch-free: the reading side
draws rooflines with them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypedDict, cast

from memtraffic.vocab.environment import Environment
from memtraffic.vocab.errors import ReportError, UsageError
from memtraffic.vocab.files import read_json, require_file

# Roof key -> (label, unit). Bandwidths count read + write bytes.
ROOFS: dict[str, tuple[str, str]] = {
    "dram_Bps": ("DRAM bandwidth", "B/s"),
    "l2_Bps": ("L2 bandwidth", "B/s"),
    "l1_Bps": ("L1 bandwidth", "B/s"),
    "fp32_flops": ("FP32 FMA, CUDA cores", "FLOP/s"),
    "bf16_tc_flops": ("BF16 tensor cores", "FLOP/s"),
    "fp16_tc_flops": ("FP16 tensor cores", "FLOP/s"),
}
BANDWIDTH_OF_LEVEL = {"dram": "dram_Bps", "l2": "l2_Bps", "l1": "l1_Bps"}
KINDS = {"measured": "measured", "ncu_theoretical": "ncu theoretical"}

REPO_ROOT = Path(__file__).resolve().parents[2]  # the source checkout (memtraffic/vocab/roofs.py)
COMMITTED_DIR = REPO_ROOT / "reports" / "roofs"


# ----------------------------------------------------------------------------------------------------
# A roofs file


def device_slug(device: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'NVIDIA_H100_80GB_HBM3' (a file name)."""
    return re.sub(r"[^A-Za-z0-9.-]+", "_", device).strip("_")


def read_roofs_json(path: Path, advice: str = "delete it or re-run 'memtraffic roofs --refresh'") -> Any:
    """The JSON of a roofs file (vocab.files.read_json), its error ending in what to do about a roofs file."""
    return read_json(path, advice)


class _RoofsDevice(TypedDict):
    device: str  # every entry names its device (check_entry)


class RoofsEntry(_RoofsDevice, total=False):
    """One device's roofs (the cache's value, reports/roofs/<device>.json): measured roofs (ROOFS
    keys, plus dram_latency_s and launch_s) and how each was measured, ncu's theoretical peaks."""

    measured: dict[str, float]
    method: dict[str, str]
    environment: Environment
    date: str
    ncu_theoretical: dict[str, float]
    ncu_note: str


CACHE_ADVICE = ": re-measure with 'memtraffic roofs --refresh' on that GPU"
TIMES = ("dram_latency_s", "launch_s")  # measured beside the roofs (seconds)
OVER_PEAK = 2.0  # a measured roof this many times ncu's theoretical peak is no measurement


def check_entry(entry: object, where: Path) -> RoofsEntry:
    """The entry, checked: ReportError naming the file and the first field that is no roofs entry's (a roof or
    time that is not a finite number above 0, a measured roof above OVER_PEAK x ncu's theoretical peak)."""
    if not isinstance(entry, dict) or not isinstance(entry.get("device"), str) or not isinstance(
        entry.get("measured", {}), dict
    ):
        raise ReportError(f"{where} does not hold roofs (an object with 'device' and 'measured'): "
                          "write it with 'memtraffic roofs --format json'")
    found = entry_problem(entry)
    if found:
        raise ReportError(f"{where}: {entry['device']}: {found}{CACHE_ADVICE}")
    return cast(RoofsEntry, entry)  # device, measured and the numbers checked; the rest is read with .get


def entry_problem(entry: Mapping[str, Any]) -> str | None:
    """Where a roofs entry's numbers are not roofs, as 'measured.dram_Bps is -1.0, expected ...'; None
    when every roof and time is a finite number above 0 and no measured roof exceeds OVER_PEAK x its ncu
    theoretical peak."""
    theo = entry.get("ncu_theoretical", {})
    if not isinstance(theo, dict):
        return f"ncu_theoretical is {type(theo).__name__}, expected an object"
    for part, values in (("ncu_theoretical", theo), ("measured", entry.get("measured", {}))):
        for key, value in values.items():
            if key not in ROOFS and key not in TIMES:
                continue  # a newer writer's field: not read here
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
                return f"{part}.{key} is {value!r}, expected a number above 0"
            peak = theo.get(key)
            if part == "measured" and peak and value > OVER_PEAK * peak:
                return (f"measured.{key} is {value:.4g}, {value / peak:.1f}x ncu's theoretical peak "
                        f"{peak:.4g}: no kernel goes past the peak")
    return None


def load_roofs_file(path: Path, device: str | None = None) -> RoofsEntry:
    """A file holding one entry (reports/roofs/*.json) or a cache (device -> entry)."""
    if not require_file(path, "give a file written by 'memtraffic roofs --format json'", usage=True,
                        option="--roofs-file"):
        raise UsageError(f"roofs file {path} does not exist")
    data = read_roofs_json(path, "give --roofs-file a file written by 'memtraffic roofs --format json' "
                                 "(or one of reports/roofs/)")
    if isinstance(data, dict) and "device" in data:
        return check_entry(data, path)
    if isinstance(data, dict) and data:
        entries = {dev: check_entry(e, path) for dev, e in data.items()}
        if device in entries:
            return entries[device]
        if len(entries) == 1:
            return next(iter(entries.values()))
        raise UsageError(f"{path} holds roofs for {', '.join(entries)}, not for {device!r}")
    raise ReportError(f"{path} does not hold roofs: write it with 'memtraffic roofs --format json'")


# ----------------------------------------------------------------------------------------------------
# ncu theoretical peaks


def theoretical_from_metrics(values: Mapping[str, float]) -> dict[str, float]:
    """Peaks from the `peaks` metric set (alias -> value): per-cycle peak x cycles per second.

    FP32: 2 FLOPs per FFMA, as ncu's roofline section counts it. Missing or NaN inputs leave the
    roof out rather than guess it.
    """

    def get(alias: str) -> float | None:
        v = values.get(alias)
        return float(v) if v is not None and math.isfinite(float(v)) and float(v) > 0 else None

    out: dict[str, float] = {}
    pairs = {
        "dram_Bps": ("peak_dram_bytes_per_cycle", "dram_cycles_per_s", 1.0),
        "l2_Bps": ("peak_l2_bytes_per_cycle", "l2_cycles_per_s", 1.0),
        "l1_Bps": ("peak_l1_bytes_per_cycle", "l1_cycles_per_s", 1.0),
        "fp32_flops": ("peak_ffma_per_cycle", "sm_cycles_per_s", 2.0),
    }
    for key, (per_cycle, rate, factor) in pairs.items():
        a, b = get(per_cycle), get(rate)
        if a is not None and b is not None:
            out[key] = factor * a * b
    return out


class RoofsRow(TypedDict):
    """A roof of roofs_rows: its ROOFS key, label and unit, measured and ncu theoretical values."""

    roof: str
    label: str
    unit: str
    measured: float | None
    ncu_theoretical: float | None
    fraction: float | None
    method: str


def roofs_rows(entry: RoofsEntry) -> list[RoofsRow]:
    """One row per roof: measured and ncu theoretical side by side (None where unknown)."""
    rows: list[RoofsRow] = []
    measured = entry.get("measured", {})
    theo = entry.get("ncu_theoretical", {})
    for key, (label, unit) in ROOFS.items():
        m, t = measured.get(key), theo.get(key)
        if m is None and t is None:
            continue
        rows.append({"roof": key, "label": label, "unit": unit, "measured": m, "ncu_theoretical": t,
                     "fraction": (m / t) if m and t else None,
                     "method": entry.get("method", {}).get(key, "")})
    return rows
