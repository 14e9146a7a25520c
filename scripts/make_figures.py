"""Regenerate the committed figures under reports/figures/ from the committed H100 runs and roofs.

No GPU needed: it analyzes the reports under reports/h100/ (as `memtraffic analyze` does, with the
current models) and reads the committed roofs (never the user cache), so the figures are the same on
every machine. Rerun it when the runs, the roofs, analyze.py or roofline.py change.

  roofline_h100_dram.png   DRAM roofline of the big softmax/gelu suite, the matmuls, matmul_softmax and
                           the 1048576x2 seed shape
  roofline_h100_all.png    the same configs at L1, L2 and DRAM, one panel per level
  traffic_h100_<run>.png   measured / minimum bytes per level, one figure per run under reports/h100/

Usage: python scripts/make_figures.py [--html]   (--html: also roofline_h100.html, plotly inline, ~5 MB;
       not committed, `memtraffic roofline RUN... --out FILE` makes the same page on demand)
PNG export needs kaleido >= 1 and a Chromium (Debian: apt-get install chromium).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / "reports" / "h100"
ROOFS_FILE = ROOT / "reports" / "roofs" / "NVIDIA_H100_80GB_HBM3.json"
OUT = ROOT / "reports" / "figures"
ROOFLINE_RUNS = ("suite_8192x8192", "matmul_4096x4096x4096", "matmul_softmax_4096x1024x1024",
                 "suite_1048576x2_fp32")
MAX_PNG_BYTES = 300_000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--html", action="store_true", help="also write roofline_h100.html (~5 MB)")
    args = parser.parse_args(argv)

    sys.path.insert(0, str(ROOT))  # run from a checkout without installing it
    from memtraffic.views import roofline as rf
    from memtraffic.views.figure_files import write_html, write_png
    from memtraffic.views.html_report import load_runs
    from memtraffic.views.traffic_chart import traffic_figure
    from memtraffic.vocab.roofs import load_roofs_file

    roofs = [load_roofs_file(ROOFS_FILE, None)]
    df, _ = load_runs([RUNS / r for r in ROOFLINE_RUNS])
    device = roofs[0]["device"]
    figs = {
        "roofline_h100_dram": rf.roofline_figure(df, roofs, ("dram",), title=f"DRAM roofline - {device}"),
        "roofline_h100_all": rf.roofline_figure(df, roofs, rf.LEVELS,
                                                title=f"Hierarchical roofline - {device}"),
    }
    for run in sorted(p.name for p in RUNS.iterdir() if (p / "results.json").is_file()):
        one, _ = load_runs([RUNS / run])
        figs[f"traffic_h100_{run}"] = traffic_figure(
            one, title=f"Measured / minimum bytes per level - {run} ({device})")

    written = [write_png(fig, OUT / f"{name}.png") for name, fig in figs.items()]
    if args.html:
        written.append(write_html([figs["roofline_h100_all"], figs["roofline_h100_dram"]],
                                     OUT / "roofline_h100.html", f"memtraffic roofline: {device}",
                                     [rf.FLOPS_NOTE]))
    too_big = []
    for path in written:
        size = path.stat().st_size
        print(f"wrote {path.relative_to(ROOT)} ({size / 1e3:.0f} kB)")
        if path.suffix == ".png" and size > MAX_PNG_BYTES:
            too_big.append(path.name)
    if too_big:  # the README embeds them: keep the repository light
        print(f"error: over {MAX_PNG_BYTES / 1e3:.0f} kB: {', '.join(too_big)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
