"""The premise of distinct-launch profiling, checked on a real run: do repeated calls move the same bytes?

    python scripts/check_repeats.py RUN [--json OUT.json] [--all]

RUN is a `memtraffic profile --torch-ops --every-launch` run folder (every call measured; its trace
records each call's signature). Calls are grouped by signature (memtraffic.vocab.launches: op, shapes,
strides, dtypes, alignment, scalars); for each signature that ran more than once, the spread
((max - min) / max) of its calls' L1 load/store and DRAM read/write bytes. A group differs when L1
spreads beyond 1%, or DRAM reads beyond 3% and 4 KiB (memtraffic.analysis.reuse; DRAM writes are shown,
not judged: L2 write-back timing): what differs must be measured every time (op_rules.VALUE_DEPENDENT)
or keyed more finely. Prints a summary line and the differing groups
(--all: every group); --json writes every group. Exit code 0 when no group differs, 1 otherwise.
No GPU needed.
"""

from __future__ import annotations

import argparse
import json
import sys

from memtraffic.analysis.analyze import analyze_run
from memtraffic.analysis.reuse import signature_groups
from memtraffic.runfolder.load import load_run
from memtraffic.vocab.errors import MemtrafficError
from memtraffic.vocab.files import plain_records


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run")
    parser.add_argument("--json", help="write every group here")
    parser.add_argument("--all", action="store_true", help="print every group, not only those that differ")
    args = parser.parse_args()
    try:
        run = load_run(args.run)
    except MemtrafficError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if (run.meta or {}).get("distinct"):
        print(f"warning: {args.run} was profiled with --distinct {run.meta['distinct']}: its repeats were "
              "not measured; check an --every-launch run", file=sys.stderr)
    if not any(c.get("signature") for c in (run.plan or {}).get("configs", [])):
        print(f"error: {args.run}'s trace has no call signatures (profiled before distinct launches "
              "existed): profile it again with --torch-ops --every-launch", file=sys.stderr)
        return 2
    groups = signature_groups(analyze_run(run), run.plan)
    differ = groups[groups["differs"] != ""]
    print(f"{len(groups)} signatures ran more than once ({int(groups['calls'].sum()) if len(groups) else 0} "
          f"calls); {len(differ)} differ (L1 beyond 1%, or DRAM reads beyond 3% and 4 KiB)")
    shown = groups if args.all else differ
    for r in shown.to_dict("records"):
        spreads = ", ".join(f"{c.removesuffix('_bytes_spread')} {r[c]:.1%}" for c in shown.columns
                            if c.endswith("_spread"))
        print(f"  {r['op']} {r['shape']} {r['dtype']} x{r['calls']} [{r['kernels']}]: {spreads}"
              f"{'  DIFFERS: ' + r['differs'] if r['differs'] else ''}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(plain_records(groups, {"calls"}), f, indent=1)
    return 1 if len(differ) else 0


if __name__ == "__main__":
    sys.exit(main())
