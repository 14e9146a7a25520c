"""Make the committed reference runs under reports/h100/ (or --out): rerun it on any GPU with ncu.

Each group is one `memtraffic measure` run (one ncu process) into its own named folder:

  seed_1048576x2_fp32            the design's seed table: softmax_naive (num_warps=4), softmax_tiled
                                 (BLOCK_M=128) and torch_softmax
  suite_1048576x2_fp32           every softmax and gelu variant
  suite_4096x4096                every softmax, softmax_dim0 and gelu variant, fp32 and bf16
  suite_8192x8192                every softmax and gelu variant, fp32 and bf16
  long_rows_16384x131072         softmax_online, softmax_split, softmax_3pass, torch_softmax,
                                 torch_compiled on 512 KB (fp32) rows, fp32 and bf16
  split_lag_16384x131072         softmax_split (its lag kernel) on the long rows, traffic counters
  split_8192x32768_bf16          softmax_split and softmax_online on 64 KB bf16 rows, byte counters
  passes_4096x4096               softmax_tiled, softmax_online forced to loop (BLOCK_N=1024) and
                                 softmax_3pass: one, two and three reads of the same rows
  matmul_4096x4096x4096          every matmul variant, fp32 and bf16
  matmul_softmax_4096x1024x1024  every matmul_softmax variant, fp32 and bf16
  source_seed_1048576x2_fp32     the seed table with --source: per-line counters for `memtraffic lines`
  source_column_4096x4096_fp32   softmax over columns, strided and coalesced, with --source

Variants are taken from memtraffic.kernels.VARIANTS by op when the script runs. A folder that exists is left
alone (the script refuses before measuring anything) unless --force, which replaces it. The
`roofline` metric set (traffic and FLOP counters) is collected, so the figures have hardware FLOPs.

Usage: python scripts/make_reference_reports.py [--out reports/h100] [--only GROUP ...] [--force] [--list]
       [--metrics SET]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


@dataclass
class Group:
    name: str
    ops: tuple[str, ...]
    shapes: list[str]
    dtypes: list[str]
    # variant -> parameters, for groups that name their variants (the seed table)
    variants: dict[str, dict[str, Any]] = field(default_factory=dict)
    metrics: str | None = None  # None: the script's --metrics
    source: bool = False  # `memtraffic measure --source`: per-line counters, source text and SASS


GROUPS = [
    Group("seed_1048576x2_fp32", ("softmax",), ["1048576x2"], ["fp32"],
          variants={"softmax_naive": {"num_warps": 4}, "softmax_tiled": {"BLOCK_M": 128},
                    "torch_softmax": {}}),
    Group("suite_1048576x2_fp32", ("softmax", "gelu"), ["1048576x2"], ["fp32"]),
    Group("suite_4096x4096", ("softmax", "softmax_dim0", "gelu"), ["4096x4096"], ["fp32", "bf16"]),
    Group("suite_8192x8192", ("softmax", "gelu"), ["8192x8192"], ["fp32", "bf16"]),
    # Rows too long for registers: two reads (online) or three (3-pass) at L1; does L2 catch the second?
    # softmax_split reads once: a group of programs holds the row in registers.
    # DRAM counters and time only: they fit one replay pass. With more passes ncu must back up the
    # kernel's 17 GB of device memory in host memory before each pass, which took over 7 minutes.
    Group("long_rows_16384x131072", ("softmax",), ["16384x131072"], ["fp32", "bf16"],
          variants={"softmax_online": {}, "softmax_split": {}, "softmax_3pass": {}, "torch_softmax": {},
                    "torch_compiled": {}},
          metrics="time,dram_rd_bytes,dram_wr_bytes"),
    # softmax_split's lag kernel at L1, L2 and DRAM: its slot polls are loads the model cannot count.
    # Traffic counters (six passes: about 1.5 minutes a dtype on the H100, memory backed up each pass).
    Group("split_lag_16384x131072", ("softmax",), ["16384x131072"], ["bf16", "fp32"],
          variants={"softmax_split": {}}, metrics="traffic"),
    # The shape furthest from a copy (bf16, 64 KB rows): bytes at every level at the minimum, time not.
    Group("split_8192x32768_bf16", ("softmax",), ["8192x32768"], ["bf16"],
          variants={"softmax_split": {}, "softmax_online": {}}, metrics="bytes"),
    # The same passes at a size whose rows do fit: softmax_online forced to loop (BLOCK_N=1024).
    Group("passes_4096x4096", ("softmax",), ["4096x4096"], ["fp32", "bf16"],
          variants={"softmax_tiled": {}, "softmax_online": {"BLOCK_N": 1024}, "softmax_3pass": {}}),
    Group("matmul_4096x4096x4096", ("matmul",), ["4096x4096x4096"], ["fp32", "bf16"]),
    Group("matmul_softmax_4096x1024x1024", ("matmul_softmax",), ["4096x1024x1024"], ["fp32", "bf16"]),
    # Per source line: the naive softmax's loads are redundant (4 warps load each row), the strided
    # column kernel's are sector waste (4 of 32 bytes used); traffic counters only, to keep them small.
    Group("source_seed_1048576x2_fp32", ("softmax",), ["1048576x2"], ["fp32"],
          variants={"softmax_naive": {"num_warps": 4}, "softmax_tiled": {"BLOCK_M": 128},
                    "torch_softmax": {}},
          metrics="traffic", source=True),
    Group("source_column_4096x4096_fp32", ("softmax_dim0",), ["4096x4096"], ["fp32"],
          variants={"softmax_column_strided": {}, "softmax_column_coalesced": {}},
          metrics="traffic", source=True),
]
GROUPS_BY_NAME = {g.name: g for g in GROUPS}


def group_plan(group: Group) -> tuple[dict[str, Any] | None, list[str]]:
    """The group's plan from the variants registered now, and notes on what is missing."""
    from memtraffic.collect.planning import build_plan
    from memtraffic.kernels import VARIANTS
    from memtraffic.runfolder.records import merge_plans

    notes: list[str] = []
    if group.variants:
        plans = []
        for name, params in group.variants.items():
            if name not in VARIANTS:
                notes.append(f"variant {name} is not registered: left out")
                continue
            taken = {k: v for k, v in params.items() if k in VARIANTS[name].params}
            notes += [f"{name} takes no parameter {k}: left at its default" for k in params if k not in taken]
            given = [f"{k}={v}" for k, v in taken.items()]
            plans.append(build_plan([name], group.shapes, group.dtypes, given))
        return (merge_plans(plans) if plans else None), notes
    names = [n for n, v in VARIANTS.items() if v.op in group.ops]
    if not names:
        return None, [f"no variant of {', '.join(group.ops)} is registered"]
    return build_plan(names, group.shapes, group.dtypes, []), notes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--out", type=Path, default=REPO / "reports" / "h100", help="parent folder")
    parser.add_argument("--only", nargs="+", metavar="GROUP", help="run only these groups")
    parser.add_argument("--force", action="store_true", help="replace group folders that already exist")
    parser.add_argument("--list", action="store_true", help="print the groups and their configs, run nothing")
    parser.add_argument("--metrics", default="roofline",
                        help="metric sets or names as for `memtraffic measure` (default: roofline)")
    args = parser.parse_args(argv)

    from memtraffic.api import run_measure as measure
    from memtraffic.collect.measure import MeasureOptions
    from memtraffic.vocab.errors import MemtrafficError

    unknown = [n for n in args.only or [] if n not in GROUPS_BY_NAME]
    if unknown:
        parser.error(f"unknown group {', '.join(unknown)}: choose from {', '.join(GROUPS_BY_NAME)}")
    groups = [GROUPS_BY_NAME[n] for n in args.only] if args.only else GROUPS

    plans = {}
    for g in groups:
        plan, notes = group_plan(g)
        for note in notes:
            print(f"{g.name}: {note}", file=sys.stderr)
        if plan is None:
            print(f"{g.name}: nothing to measure, skipped", file=sys.stderr)
            continue
        plans[g.name] = plan
        if args.list:
            print(f"{g.name}: {len(plan['configs'])} configs")
            for c in plan["configs"]:
                print(f"  {c['range']}")
    if args.list:
        return 0
    taken = [args.out / n for n in plans if (args.out / n).exists() and any((args.out / n).iterdir())]
    if taken and not args.force:
        print(f"refusing to overwrite {', '.join(map(str, taken))}: pass --force to replace them",
              file=sys.stderr)
        return 1

    failures = 0
    for name, plan in plans.items():
        folder = args.out / name
        if folder.exists():
            shutil.rmtree(folder)
        print(f"== {name}: {len(plan['configs'])} configs -> {folder}", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        try:
            group = GROUPS_BY_NAME[name]
            result = measure(MeasureOptions(variants=[], plan=plan, out=folder,
                                            metrics=group.metrics or args.metrics, source=group.source))
        except MemtrafficError as err:
            print(f"== {name}: error: {err}", file=sys.stderr)
            failures += 1
            continue
        bad = [c for c in result.run["configs"] if c["status"] != "ok" or not c["profiled"]]
        for c in bad:
            print(f"   {c['range']}: {c['status']} {c.get('error') or ''}", file=sys.stderr)
        failures += bool(bad)
        print(f"== {name}: {len(plan['configs']) - len(bad)}/{len(plan['configs'])} ok in "
              f"{time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
