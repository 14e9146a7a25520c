"""The base metric names ncu 2025.3.1 offers on each chip it knows, shipped with the package.

chip_metrics.json.gz is written by scripts/make_chip_metrics.py from `ncu --query-metrics --chip CHIP`
for the 28 chips of `ncu --list-chips`, so `memtraffic metrics --chip` and the per-chip metric
resolution work on a machine without ncu or a GPU.
"""

from __future__ import annotations

import functools
import gzip
import json
from collections.abc import Collection
from pathlib import Path

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
