"""The base metric names ncu 2025.3.1 offers on each chip it knows, shipped with the package.

chip_metrics.json.gz is written by scripts/make_chip_metrics.py from `ncu --query-metrics --chip CHIP`
for the 28 chips of `ncu --list-chips`, so `memtraffic metrics --chip` and the per-chip metric
resolution work on a machine without ncu or a GPU.
"""

from __future__ import annotations

import functools
import gzip
import json
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import TypedDict

from memtraffic.vocab.arch import CHIPS, Chip, chip_for_gpu

DATA = Path(__file__).with_name("chip_metrics.json.gz")


@functools.lru_cache(maxsize=1)
def _load() -> dict[str, frozenset[str]]:
    data = json.loads(gzip.decompress(DATA.read_bytes()))
    names = data["names"]
    out = {}
    for chip, hexbits in data["chips"].items():
        bits = int(hexbits, 16)
        out[chip] = frozenset(n for i, n in enumerate(names) if bits >> i & 1)
    return out


def known_chips() -> list[str]:
    """The chips whose metric lists ship with memtraffic, sorted."""
    return sorted(_load())


def chip_metric_names(chip: str) -> frozenset[str]:
    """Base metric names ncu 2025.3.1 offers on `chip` (KeyError for a chip it does not know)."""
    lists = _load()
    key = chip.strip().lower()
    if key not in lists:
        raise KeyError(f"unknown chip {chip!r}: ncu 2025.3.1 knows {', '.join(sorted(lists))}")
    return lists[key]


def closest_chip(names: Collection[str]) -> str:
    """The shipped chip whose list is most like `names` (a local `ncu --query-metrics`): equal lists
    first, else the largest overlap over union (a newer ncu adds names)."""
    offered = set(names)

    def score(chip: str) -> float:
        mine = _load()[chip]
        return len(mine & offered) / max(1, len(mine | offered))

    return max(known_chips(), key=score)


class SetRow(TypedDict):
    """One alias of a metric set on a chip: its ncu name (None: not measured) and, if not, why (note)."""

    chip: str
    set: str
    alias: str
    ncu: str | None
    available: bool
    note: str


def set_rows(chip: str, names: Collection[str], arch: Chip | None,
             sets: Sequence[str]) -> list[SetRow]:
    """What each metric set measures on one chip: a row per (set, alias) with the ncu name(s) the alias
    becomes there (None: not measured) and, when not measured, the note saying why."""
    from memtraffic.ncu.metrics import METRIC_SETS, resolve

    rows: list[SetRow] = []
    for set_name in sets:
        for item in resolve(METRIC_SETS[set_name], names, arch).items:
            rows.append({"chip": chip, "set": set_name, "alias": item.alias,
                         "ncu": None if item.form is None else str(item.form),
                         "available": item.form is not None, "note": item.note})
    return rows


def local_metric_names() -> tuple[str, Chip | None, frozenset[str]]:
    """(label, chip or None, base metric names) of this machine's GPU: ncu's own list when ncu is here,
    else the shipped list of the chip the GPU's name says. GpuNotFoundError when neither can tell."""
    from memtraffic.host.gpu import gpu_name
    from memtraffic.ncu.command import find_ncu, metrics_cache_key, ncu_version, query_metric_names
    from memtraffic.vocab.errors import GpuNotFoundError, NcuError

    hint = f"give --chip CHIP (one of {', '.join(known_chips())}) or --all-chips"
    try:
        gpu = gpu_name()
    except GpuNotFoundError:
        gpu = None
    try:
        ncu = find_ncu()
    except NcuError:
        ncu = None
    if gpu is None:
        found = "ncu but no NVIDIA GPU" if ncu else "no NVIDIA GPU and no ncu"
        raise GpuNotFoundError(f"{found} on this machine to ask which metrics it has: {hint}")
    chip = chip_for_gpu(gpu)
    if ncu is not None:
        names = query_metric_names(ncu, metrics_cache_key(ncu, ncu_version(ncu), gpu))
        return gpu, chip or CHIPS.get(closest_chip(names)), names
    if chip is None:
        raise GpuNotFoundError(f"{gpu} is not a GPU memtraffic can name and ncu is not here to list its "
                               f"metrics: {hint}")
    return f"{gpu} ({chip.name})", chip, chip_metric_names(chip.name)


def peak_names(device: str | None) -> tuple[list[str], list[str]]:
    """(ncu names, notes) of the `peaks` set on the GPU named `device`: its chip's own counters, and a
    note per roof its chip has no counter for ("DRAM roof: gb20b shares memory with the CPU; ..."). An
    unknown GPU gets the gh100 names and no notes (ncu leaves out what it lacks)."""
    from memtraffic.ncu.metrics import METRIC_SETS, resolve

    chip = chip_for_gpu(device)
    res = resolve(METRIC_SETS["peaks"], chip_metric_names(chip.name) if chip else None, chip)
    return res.names, res.notes
