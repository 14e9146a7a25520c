"""Write memtraffic/ncu/chip_metrics.json.gz: the base metric names ncu offers on every chip it knows.

Input: a folder of `ncu --query-metrics --chip CHIP` lists, one gzip'd TSV per chip (metric, type, unit,
description) and CHIPS.txt (`ncu --list-chips`); by default ../shared/reference/ncu-2025.3.1-metrics
relative to the repository. The TSVs were cut from ncu's fixed-width table, so a name longer than its
column continues at the start of the next field ('..._op_ldgsts<TAB>_cache_access Ra<TAB>tio'); names
are rejoined here. Unit.Config prefixes (`FBSP.TriageCompute.`) are dropped: ncu takes base names.

Output (a few tens of KB): {"source": ..., "names": [every name, sorted], "chips": {chip: hex bitmap
over names}}. `memtraffic metrics --chip CHIP` and the per-chip metric resolution read it.

Usage: python scripts/make_chip_metrics.py [LISTS_FOLDER] [--out memtraffic/ncu/chip_metrics.json.gz]
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_LISTS = REPO.parent / "shared" / "reference" / "ncu-2025.3.1-metrics"
DEFAULT_OUT = REPO / "memtraffic" / "ncu" / "chip_metrics.json.gz"
_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789_")


def parse_chip_tsv(path: Path) -> set[str]:
    """Base metric names of one chip's gzip'd TSV (header line first)."""
    names: set[str] = set()
    with gzip.open(path, "rt", encoding="utf-8") as f:
        next(f, None)
        for line in f:
            fields = line.rstrip("\n").split("\t")
            tokens = fields[0].split()
            if not tokens:
                continue
            name = tokens[0]
            # A name cut at the column width continues in the next field; a type (Counter, Ratio,
            # Throughput) starts with a capital, a name's rest with a lowercase letter, digit or '_'.
            if len(tokens) == 1 and len(fields) > 1 and fields[1][:1] in _NAME_CHARS:
                name += fields[1].split()[0]
            base = [part for part in name.split(".") if "__" in part]
            if base:
                names.add(base[0])
    return names


def read_lists(folder: Path) -> dict[str, set[str]]:
    """chip -> base names, for every chip of CHIPS.txt."""
    chips_txt = folder / "CHIPS.txt"
    if not chips_txt.is_file():
        raise SystemExit(f"{chips_txt}: no such file; give the folder of `ncu --query-metrics --chip` lists")
    chips = chips_txt.read_text().replace(",", " ").split()
    missing = [c for c in chips if not (folder / f"{c}.tsv.gz").is_file()]
    if missing:
        raise SystemExit(f"{folder}: no list for {', '.join(missing)} (expected CHIP.tsv.gz per chip)")
    return {chip: parse_chip_tsv(folder / f"{chip}.tsv.gz") for chip in chips}


def encode(lists: dict[str, set[str]], source: str) -> dict[str, object]:
    """Sorted union of names, and per chip a hex bitmap (bit i set: the chip has names[i])."""
    names = sorted(set().union(*lists.values()))
    chips = {}
    for chip in sorted(lists):
        bits = 0
        for i, name in enumerate(names):
            if name in lists[chip]:
                bits |= 1 << i
        chips[chip] = format(bits, "x")
    return {"source": source, "names": names, "chips": chips}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lists", nargs="?", type=Path, default=DEFAULT_LISTS)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    lists = read_lists(args.lists)
    data = encode(lists, "ncu 2025.3.1 --query-metrics --chip CHIP")
    text = json.dumps(data, separators=(",", ":"), sort_keys=True)
    # mtime=0: the same lists give the same bytes, so a rerun shows no diff.
    args.out.write_bytes(gzip.compress(text.encode(), compresslevel=9, mtime=0))
    sizes = ", ".join(f"{c} {len(n)}" for c, n in sorted(lists.items()))
    print(f"{args.out}: {len(data['names'])} names, {len(lists)} chips ({sizes}), "
          f"{args.out.stat().st_size} bytes", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
