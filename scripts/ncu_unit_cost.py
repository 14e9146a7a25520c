"""GPU: what ncu costs for each kernel it measures, option by option (issue 41's per-unit floor).

    python scripts/ncu_unit_cost.py [--kernels N] [--variants options|metrics] [--json FILE]

A child program launches N distinct elementwise kernels, each inside an NVTX range named as memtraffic's
(`mt|op|<i>|add`), and is run under ncu with memtraffic's argv for the one-pass `bytes` set
(memtraffic.ncu.command.build_ncu_command) and with one ncu option changed a row (`options`, and the
program holding 40 GiB of GPU memory), or one metric of the set a row and the set less one level
(`metrics`). Each variant's wall time, less the same program under ncu measuring nothing, divided by the
kernels ncu profiled, is ncu's cost per kernel. Prints one table (a legend under it); --json writes the
rows. Results: reports/h200/ncu_unit_cost/.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def child(kernels: int, alloc_gb: float) -> None:
    """The program ncu runs: N distinct adds (sizes differ, so every one is a new launch to measure)."""
    import torch

    hold = torch.empty(int(alloc_gb * 2**30), dtype=torch.uint8, device="cuda") if alloc_gb else None
    xs = [torch.ones(4096 + 128 * i, device="cuda") for i in range(kernels)]
    torch.cuda.synchronize()
    for i, x in enumerate(xs):
        torch.cuda.nvtx.range_push(f"mt|op|{i}|add")
        x.add_(1.0)
        torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    del hold


def variants(ncu: str, report: str, app: list[str], which: str = "options") -> dict[str, list[str]]:
    """Each variant's ncu argv: memtraffic's own, then one option changed ("options"), or one metric of
    the bytes set at a time and the set less one level ("metrics")."""
    from memtraffic.ncu.command import build_ncu_command, resolve_metrics

    bytes_set = resolve_metrics("bytes")

    def ours(metrics: list[str] = bytes_set, **kw: object) -> list[str]:
        return build_ncu_command(ncu, metrics, report, app, **kw)  # type: ignore[arg-type]

    base = ours()
    app_at = base.index("--export")
    if which == "metrics":
        rows = {"none measured": ours(nvtx_include=(r"regex:^nothing/",)), "memtraffic (bytes)": base}
        rows |= {name: ours([name]) for name in bytes_set}
        for level in ("l1tex__", "lts__", "dram__"):
            rows[f"bytes without {level}"] = ours([m for m in bytes_set if not m.startswith(level)])
        return rows
    return {
        "none measured": ours(nvtx_include=(r"regex:^nothing/",)),
        "memtraffic (bytes)": base,
        "time metric only": ours(["gpu__time_duration.sum"]),
        "--cache-control none": ours(cache_control="none"),
        "--clock-control base": ours(clock_control="base"),
        "--apply-rules no": base[:app_at] + ["--apply-rules", "no"] + base[app_at:],
        "no NVTX filter": ours(nvtx_include=()),
        "--replay-mode application": base[:app_at] + ["--replay-mode", "application"] + base[app_at:],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", type=int, default=300)
    parser.add_argument("--alloc-gb", type=float, default=0.0, help="GPU memory the program holds")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--variants", choices=("options", "metrics"), default="options",
                        help="options: one ncu option changed a row; metrics: one metric a row")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.child:
        child(args.kernels, args.alloc_gb)
        return 0
    ncu = os.environ.get("MEMTRAFFIC_NCU", "ncu")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        cases = [(args.kernels, args.alloc_gb)]
        if args.variants == "options":  # does the memory the program holds matter?
            cases.append((args.kernels, 40.0))
        for kernels, alloc in cases:
            app = [sys.executable, __file__, "--child", "--kernels", str(kernels), "--alloc-gb", str(alloc)]
            for name, argv in variants(ncu, str(Path(tmp) / "r.ncu-rep"), app, args.variants).items():
                if alloc != args.alloc_gb and name not in ("none measured", "memtraffic (bytes)"):
                    continue
                t0 = time.monotonic()
                proc = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)
                wall = time.monotonic() - t0
                profiled = proc.stdout.count("==PROF== Profiling")
                rows.append({"variant": name, "kernels": kernels, "alloc_gb": alloc, "rc": proc.returncode,
                             "profiled": profiled, "wall_s": round(wall, 2)})
                if proc.returncode:
                    print(proc.stdout[-2000:], proc.stderr[-2000:], file=sys.stderr)
                for f in Path(tmp).glob("r*.ncu-rep"):
                    f.unlink()
    idle = {r["alloc_gb"]: r["wall_s"] for r in rows if r["variant"] == "none measured"}
    print(f"{'variant':28} {'GiB held':>8} {'kernels':>8} {'wall s':>7} {'ms/kernel':>9}")
    for r in rows:
        per = (r["wall_s"] - idle[r["alloc_gb"]]) / r["profiled"] * 1e3 if r["profiled"] else float("nan")
        r["ms_per_kernel"] = round(per, 1) if r["profiled"] else None  # JSON has no NaN
        print(f"{r['variant']:28} {r['alloc_gb']:8.0f} {r['profiled']:8d} {r['wall_s']:7.2f} {per:9.1f}")
    print("ms/kernel: (wall - the same program under ncu measuring nothing) / kernels profiled; one option "
          "changed from memtraffic's argv per row.")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
