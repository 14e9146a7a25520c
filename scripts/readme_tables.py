"""Regenerate the measured tables in README.md and docs/*.md from the committed reports, so no number is
typed.

Each table lives between marker comments that this script owns, in whichever of those files holds them
(the seed table in README.md, the rest in docs/ pages); the prose around them is the file's own:

  <!-- table:seed -->   ... <!-- /table:seed -->    the seed softmax (1048576x2 fp32) from
                                                    reports/h100/seed_1048576x2_fp32, beside the RTX 3080 Ti
                                                    figures the project started from
  <!-- table:suite -->  ... <!-- /table:suite -->   every variant of the 4096x4096 and 8192x8192 suite runs
  <!-- table:bench -->  ... <!-- /table:bench -->   the newest reports/bench/*/results.json; left as it is
                                                    when no benchmark run is committed
  <!-- table:profile --> ... <!-- /table:profile --> `memtraffic analyze` output of the committed
                                                    `memtraffic profile` runs (per op type, per region)
  <!-- table:gpus -->   ... <!-- /table:gpus -->    what each metric set measures on each chip ncu
                                                    2025.3.1 knows, from the shipped chip metric lists
  <!-- table:diff -->   ... <!-- /table:diff -->    `memtraffic diff` of the committed before/after pair
                                                    (scripts/make_diff_pair.sh); left as it is while the
                                                    pair is not committed
  <!-- table:launches --> ... <!-- /table:launches --> every-launch against distinct-launch profiles of
                                                    the committed pairs (LAUNCH_PAIRS)
  <!-- table:floor -->  ... <!-- /table:floor -->   `memtraffic floor` of the committed floor runs
                                                    (scripts/gpu_floor.sh): the GELU three ways, then the
                                                    transformer block eager and compiled
  <!-- table:floor_window --> ... <!-- /table:floor_window --> one profiler-window program's time and
                                                    recoverable time per op type, profiled with the
                                                    defaults and with --timing-only (scripts/
                                                    gpu_floor_window.sh); left as it is while the pair is
                                                    not committed
  <!-- table:fusion --> ... <!-- /table:fusion -->  the fusion groups of the eager block (memtraffic floor)
                                                    and the compiled block's Inductor kernels matched to
                                                    them (memtraffic diff)
  <!-- table:speed -->  ... <!-- /table:speed -->   issue 41's programs: alone, defaults, every launch
                                                    (reports/h100/speed/summary.json); left as it is
                                                    when not committed

Numbers come from the .ncu-rep files through `memtraffic.analysis.analyze` (the current op models give the
minimum) and from the runs' run.json (device, ncu version, date). The three RTX 3080 Ti figures in
PUBLISHED (a measurement this project started from, not made here, and without a public source to cite) are
the only numbers written here, and the table labels them as quoted.
Blocks whose markers are in no file are appended to the first, under "## Measured on the H100".

Usage: python scripts/readme_tables.py [--check] [--readme FILE ...] [--reports reports]
  --check   change nothing; exit 1 when a file differs from what the reports give
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

HEADING = "## Measured on the H100"
SEED_RUN = "h100/seed_1048576x2_fp32"
SUITE_RUNS = ("h100/suite_4096x4096", "h100/suite_8192x8192")
PUBLISHED_SOURCE = "load bytes reported on an RTX 3080 Ti, the measurement this project started from"
# (implementation, the seed run's variant that does the same, ld MB): quoted from that measurement (no public
# source to cite), never measured by this project.
PUBLISHED = [
    ("TensorRT softmax", None, "33.55"),
    ("Triton, one row per program", "softmax_naive", "33.55"),
    ("Triton, 4*32 rows per program", "softmax_tiled", "8.39"),
]
NO_BENCH = "_No benchmark run is committed yet (`memtraffic bench --out reports/bench/DATE-GPU`)._"


def _mb(n: float) -> str:
    return f"{n / 1e6:.2f}" if _ok(n) else "-"


def _ok(x: Any) -> bool:
    return isinstance(x, int | float) and math.isfinite(x)


def _times(x: float) -> str:
    if not _ok(x):
        return "-"
    return f"{round(x)}x" if abs(x - round(x)) < 0.005 * x else f"{x:.2f}x"


def _eff(x: Any) -> str:
    return f"{x:.2f}" if _ok(x) else "-"


def _markdown(headers: list[str], rows: list[list[str]], right_from: int) -> list[str]:
    """A Markdown table; columns from right_from on are numbers, right-aligned."""
    align = ["---" if i < right_from else "---:" for i in range(len(headers))]
    return ["| " + " | ".join(cells) + " |" for cells in (headers, align, *rows)]


def _run_json(folder: Path) -> dict[str, Any]:
    path = folder / "run.json"
    if not path.is_file():
        raise SystemExit(f"error: {path} is missing: the tables need the committed reference runs")
    return json.loads(path.read_text())


def _source(folder: Path, reports: Path) -> str:
    """Device, ncu version and date of a run, with a link to its folder."""
    run = _run_json(folder)
    env = run.get("environment", {})
    rel = Path("reports") / folder.relative_to(reports)
    return (f"{env.get('gpu', 'unknown GPU')}, ncu {env.get('ncu_version', '?')}, {run['started'][:10]} "
            f"(torch {env.get('torch', '?')}, triton {env.get('triton', '?')}; [{rel.as_posix()}]"
            f"({rel.as_posix()}))")


def _analyze(folder: Path) -> list[dict[str, Any]]:
    from memtraffic.analysis.analyze import analyze_path

    if not folder.is_dir():
        raise SystemExit(f"error: {folder} is missing: the tables need the committed reference runs")
    return analyze_path(folder).to_dict("records")


def _explicit(r: dict[str, Any]) -> str:
    """The parameters the run set by hand, from the range name ('mt|variant|shape|dtype|K=V,...')."""
    parts = r["range"].split("|")
    return parts[4].replace(",", ", ") if len(parts) > 4 else ""


def seed_table(reports: Path) -> list[str]:
    from memtraffic.vocab.units import fmt_time

    folder = reports / SEED_RUN
    rows = {r["variant"]: r for r in _analyze(folder)}
    some = next(iter(rows.values()))
    lines = [f"Softmax over 1048576 rows of 2 fp32 columns; minimum read {_mb(some['min_read_bytes'])} MB, "
             f"write {_mb(some['min_write_bytes'])} MB. Measured on {_source(folder, reports)}.", ""]
    headers = ["implementation", "H100 kernel (variant)", "L1 ld MB (x minimum)", "L1 st MB (x minimum)",
               "DRAM read MB", "ncu time", "RTX 3080 Ti ld MB (quoted)"]
    body = []
    matched = set()
    for name, variant, published in PUBLISHED:
        r = rows.get(variant) if variant else None
        body.append(_seed_cells(name, r, published, fmt_time))
        matched.add(variant)
    body += [_seed_cells("torch.softmax" if v == "torch_softmax" else v, r, "-", fmt_time)
             for v, r in rows.items() if v not in matched]
    lines += _markdown(headers, body, right_from=2)
    lines += ["", f"Last column: {PUBLISHED_SOURCE} (the same softmax, 1024x1024 rows of 2 fp32 columns), "
                  "quoted for reference: not measured by this project, and without a public source to cite."]
    return lines


def _seed_cells(name: str, r: dict[str, Any] | None, published: str, fmt_time: Callable[[Any], str]
                ) -> list[str]:
    if r is None:
        return [name, "not measured here", "-", "-", "-", "-", published]
    params = _explicit(r)
    kernel = f"`{r['kernels'][0]}` ({r['variant']}{', ' + params if params else ''})"
    ld = f"{_mb(r['l1_ld_bytes'])} ({_times(r['amp_l1_ld'])})"
    st = f"{_mb(r['l1_st_bytes'])} ({_times(r['amp_l1_st'])})"
    return [name, kernel, ld, st, _mb(r["dram_rd_bytes"]), fmt_time(r["time_ns"]), published]


def suite_table(reports: Path) -> list[str]:
    from memtraffic.vocab.units import fmt_rate, fmt_time

    lines = ["Efficiency is minimum bytes / bytes moved (1.00 is ideal). DRAM counts reads only: written "
             "output can still sit in L2 when a kernel ends. Bandwidth is minimum bytes / ncu time."]
    headers = ["op", "variant", "dtype", "kernels", "ncu time", "eff L1 ld", "eff L1 st", "eff DRAM rd",
               "bandwidth"]
    for name in SUITE_RUNS:
        folder = reports / name
        rows = _analyze(folder)
        shapes = ", ".join(dict.fromkeys(r["shape"] for r in rows))
        ops = ", ".join(dict.fromkeys(r["op"] for r in rows))
        lines += ["", f"**{shapes}** ({ops}) on {_source(folder, reports)}:", ""]
        body = [[r["op"], r["variant"], r["dtype"], str(r["n_kernels"]), fmt_time(r["time_ns"]),
                 _eff(r["eff_l1_ld"]), _eff(r["eff_l1_st"]), _eff(r["eff_dram_rd"]),
                 fmt_rate(r["bw_min_Bps"])] for r in rows]
        lines += _markdown(headers, body, right_from=3)
        failed = [c for c in _run_json(folder).get("configs", []) if c.get("status") != "ok"]
        if failed:
            lines += ["", "Not profiled: " + "; ".join(
                f"{c['variant']} {c['dtype']} ({c['status']}: {c.get('error') or ''})" for c in failed) + "."]
    return lines


def newest_bench(reports: Path) -> Path | None:
    """The newest committed benchmark: latest date, then folder name with its numbers compared as numbers
    (a day's r10 is newer than its r9)."""
    found = []
    for path in (reports / "bench").glob("*/results.json"):
        result = json.loads(path.read_text())
        date = result.get("date") or result.get("environment", {}).get("date", "")  # older: in environment
        name = [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path.parent.name)]
        found.append((date, name, path))
    return max(found)[2] if found else None


def bench_table(reports: Path) -> list[str] | None:
    from memtraffic.vocab.units import fmt_rate, fmt_time

    path = newest_bench(reports)
    if path is None:
        return None
    result = json.loads(path.read_text())
    env = result.get("environment", {})
    rel = (Path("reports") / path.parent.relative_to(reports)).as_posix()
    device = env.get("gpu") or env.get("device", "unknown GPU")  # older results: device, date in environment
    date = result.get("date") or env.get("date", "?")
    lines = [f"Wall-clock (CUDA events, L2 flushed, median) on {device}, "
             f"{date} (torch {env.get('torch', '?')}, triton {env.get('triton', '?')}; "
             f"[{rel}]({rel})). Bandwidth is minimum bytes / time; % of copy compares with a same-size "
             "device copy.", ""]
    headers = ["variant", "shape", "dtype", "time", "bandwidth", "% of copy", "vs torch.softmax",
               "vs torch.compile"]
    body = []
    for r in result.get("rows", []):
        if r.get("status") != "ok":
            body.append([r["variant"], r["shape"], r["dtype"], r.get("status", "?"), "-", "-", "-", "-"])
            continue
        vs = [r.get(f"speedup_vs_{b}") for b in ("torch_softmax", "torch_compiled")]
        body.append([r["variant"], r["shape"], r["dtype"], fmt_time(r["time_ns"]), fmt_rate(r["bw_Bps"]),
                     f"{100 * r['frac_of_copy']:.0f}%"] + [f"{v:.2f}x" if _ok(v) else "-" for v in vs])
    return lines + _markdown(headers, body, right_from=3)


PROFILE_RUNS = (  # (run, analyze --group-by, the command that made it)
    ("h100/profile_torch_model", "op", "memtraffic profile --torch-ops -- python examples/torch_model.py"),
    ("h100/profile_cupy_region", "range", "memtraffic profile -- python examples/cupy_region.py"),
)


def profile_output(reports: Path) -> list[str]:
    """What `memtraffic analyze RUN [--group-by op]` prints (120 columns) for each committed profile run."""
    from memtraffic.analysis.analyze import analyze_path
    from memtraffic.views.tables import WIDTH
    from memtraffic.views.tables import render_results as render

    lines: list[str] = []
    for run, group_by, command in PROFILE_RUNS:
        folder = reports / run
        table = analyze_path(folder, group_by=group_by)
        flag = " --group-by op" if group_by == "op" else ""
        lines += [f"`{command}`, then `memtraffic analyze reports/{run}{flag}`; measured on "
                  f"{_source(folder, reports)}:", "", "```text", render(table, "table", group_by, WIDTH),
                  "```", ""]
    return lines[:-1]


# Every-launch against distinct-launch pairs (issue 33): a folder of summaries (scripts/gpu_launches.sh's
# summary.json and the every-launch run.json, when the run folders were too large to keep) or the two run
# folders themselves, summarized here by scripts/launches_summary.py.
LAUNCH_PAIRS = (
    ("h100/launches_mlp64", "mlp64"),
    ("h100/profile_{}_mlp12", "mlp12"),
    ("h100/launches_gpt2_4steps", "gpt2"),
    ("h100/launches_gpt2", "gpt2"),
    ("h100/profile_{}_train_step", "train_step"),
)


def _launch_pair(reports: Path, where: str, name: str) -> tuple[dict[str, Any], dict[str, Any], str]:
    """(the pair's summary, the every-launch run.json, the folder to link) for one LAUNCH_PAIRS entry."""
    if "{}" in where:
        if str(REPO / "scripts") not in sys.path:
            sys.path.insert(0, str(REPO / "scripts"))
        from launches_summary import pair

        full, sampled = reports / where.format("full"), reports / where.format("sampled")
        return pair(full, sampled), _run_json(full), where.format("full")
    folder = reports / where
    summary = json.loads((folder / "summary.json").read_text())["pairs"][name]
    return summary, json.loads((folder / "full_run.json").read_text()), where


def launches_table(reports: Path) -> list[str]:
    """Per committed pair: the program, its metric set, kernels and seconds (ncu and the program: run.json
    wall_time_s) every launch and distinct, their ratio, what one more measured kernel cost, and the op
    types off issue 33's bar (L1 loads beyond 1%, DRAM reads beyond 3% and 4 KiB)."""
    rows, dates = [], set()
    for where, name in LAUNCH_PAIRS:
        summary, full_run, link = _launch_pair(reports, where, name)
        program = " ".join(Path(full_run["program"][1]).name.split()[:1] + full_run["program"][2:])
        dates.add(full_run.get("started", "")[:10])
        full, sampled = summary["full"], summary["sampled"]
        rows.append([f"[`{program}`](reports/{link})", full["metric_set"],
                     f"{full['kernels_profiled']} / {sampled['kernels_profiled']}",
                     f"{full['wall_time_s']:.1f} / {sampled['wall_time_s']:.1f}",
                     f"{summary['time_ratio']:.2f}", f"{summary['s_per_extra_kernel']:.3f}",
                     str(len(summary["ops_off"]))])
    headers = ["program (every launch)", "set", "kernels: every / distinct", "seconds: every / distinct",
               "ratio", "s per kernel", "op types off"]
    env = full_run["environment"]
    when = ", ".join(sorted(d for d in dates if d))
    note = (f"{env['gpu']}, ncu {env['ncu_version']}, {when}; seconds are "
            "run.json's `wall_time_s` (the program's own start-up included); \"s per kernel\" is what each "
            "kernel the distinct run did not measure cost the every-launch run.")
    return _markdown(headers, rows, right_from=2) + ["", note]


GPU_SETS = ("traffic", "bytes", "flops", "peaks")


def gpus_table(reports: Path) -> list[str]:
    """Per chip of ncu 2025.3.1 (chips with the same result share a row): what each metric set measures,
    from the chip metric lists shipped in memtraffic/ncu/chip_metrics.json.gz, and the other names the
    aliases take there. No measurement: ncu's own lists."""
    from memtraffic.ncu.chips import chip_metric_names, known_chips
    from memtraffic.ncu.metrics import METRIC_SETS, METRICS, resolve
    from memtraffic.vocab.arch import CHIPS

    groups: dict[tuple[str, ...], list[str]] = {}
    for chip in known_chips():
        info = CHIPS[chip]
        cells = []
        renamed: dict[str, str] = {}
        for set_name in GPU_SETS:
            items = resolve(METRIC_SETS[set_name], chip_metric_names(chip), info).items
            missing = [r.alias for r in items if r.form is None]
            cells.append("all" if not missing else "all but " + ", ".join(f"`{a}`" for a in missing))
            renamed.update({r.alias: str(r.form) for r in items
                            if r.form is not None and r.form.names != (METRICS[r.alias].ncu,)})
        other = "; ".join(f"`{a}` = `{f}`" for a, f in renamed.items()) or "-"
        key = (f"{info.arch} ({info.sm})", *cells, other)
        groups.setdefault(key, []).append(chip)
    headers = ["chips", "architecture", "GPUs", *(f"`{s}`" for s in GPU_SETS), "other ncu names"]
    body = [[", ".join(chips), key[0], "; ".join(CHIPS[c].gpus for c in chips), *key[1:]]
            for key, chips in groups.items()]
    lines = _markdown(headers, body, right_from=len(headers))
    notes = []
    for chip in known_chips():
        for set_name in GPU_SETS:
            notes += resolve(METRIC_SETS[set_name], chip_metric_names(chip), CHIPS[chip]).notes
    reasons = list(dict.fromkeys(_generic(n) for n in notes))
    lines += ["", "Why an alias is not measured (CHIP is each chip of the row):", ""]
    lines += [f"- {r}" for r in reasons]
    return lines


def _generic(note: str) -> str:
    """A note with its chip, architecture and sm named generically, so chips of one reason share it."""
    return re.sub(r"\b(tu|ga|ad|gh|gb)\d+b?\b( \(\w+, sm_\d+\))?", "CHIP", note)


DIFF_PAIR = ("h100/diff_gelu_strided_4096x4096", "h100/diff_gelu_coalesced_4096x4096")
NO_DIFF = ("_The before/after pair is not committed yet: `bash scripts/make_diff_pair.sh` measures it "
           "(GPU and ncu)._")


def diff_output(reports: Path) -> list[str] | None:
    """What `memtraffic diff BEFORE AFTER` prints (120 columns) for the committed pair; None while it is not
    committed."""
    from memtraffic.analysis.diff import diff
    from memtraffic.views.diff_table import render
    from memtraffic.views.tables import WIDTH

    before, after = (reports / run for run in DIFF_PAIR)
    if not (before / "run.json").is_file() or not (after / "run.json").is_file():
        return None
    return [f"`bash scripts/make_diff_pair.sh`, then `memtraffic diff reports/{DIFF_PAIR[0]} "
            f"reports/{DIFF_PAIR[1]}`; measured on {_source(after, reports)}:", "", "```text",
            render(diff(before, after), "table", WIDTH), "```"]


FLOOR_GELU = ("h100/floor_gelu_eager", "h100/floor_gelu_triton", "h100/floor_gelu_compiled")
FLOOR_BLOCK = ("h100/floor_eager_block", "h100/floor_compiled_block")


def floor_output(reports: Path) -> list[str] | None:
    """The GELU runs' bytes and times against their minimums and floors, then what `memtraffic floor RUN`
    prints (120 columns) for the block eager and compiled; None while the runs are not committed."""
    from memtraffic.analysis.floor import floor_run
    from memtraffic.views.floor_table import render_floor
    from memtraffic.views.tables import WIDTH
    from memtraffic.vocab.units import fmt_bytes, fmt_time

    if not all((reports / run / "run.json").is_file() for run in (*FLOOR_GELU, *FLOOR_BLOCK)):
        return None
    rows = []
    for run in FLOOR_GELU:
        f = floor_run(reports / run)
        rows.append([f"[{run.split('_')[-1]}](reports/{run})", fmt_time(f.gpu_time_s * 1e9),
                     fmt_time(f.floor_s * 1e9), fmt_bytes(f.eager_min_bytes), fmt_bytes(f.fused_min_bytes),
                     fmt_bytes(f.dram_bytes), fmt_time(f.fused_min_bytes / f.roofs["dram_Bps"] * 1e9)])
    lines = [f"GELU on 4096x4096 fp32 (`examples/floor_gelu.py`), measured on "
             f"{_source(reports / FLOOR_GELU[0], reports)}:", "",
             *_markdown(["GELU", "time", "floor", "eager minimum", "fused minimum", "DRAM measured",
                         "fused minimum at the copy roof"], rows, 1), ""]
    for run in FLOOR_BLOCK:
        lines += [f"`memtraffic floor reports/{run}`; measured on {_source(reports / run, reports)}:", "",
                  "```text", render_floor(floor_run(reports / run), "table", WIDTH), "```", ""]
    return lines[:-1]


# One profiler-window program (examples/floor_block.py) profiled on one GPU in each mode
# (scripts/gpu_floor_window.sh): reports/<gpu>/floor_window/<mode>. `default` and `timing_only` make the
# table; `range` (--replay range) joins it when committed.
WINDOW_MODES = {"default": "default", "time_from_ncu": "--time-from ncu", "timing_only": "--timing-only",
                "range": "--replay range"}
NO_WINDOW = ("_The pair is not committed yet: `bash scripts/gpu_floor_window.sh OUT` profiles "
             "`examples/floor_block.py` in its profiler window with the defaults and with `--timing-only` "
             "(GPU and ncu) into `reports/<gpu>/floor_window/`._")
AGREE = (0.10, 3e-6)  # an op type's times agree within 10% or 3 us (issue 51)


def window_table(runs: dict[str, Path], share: float = 0.01) -> list[str]:
    """Per op type holding at least `share` of a run's GPU time, each run's time and recoverable time side by
    side (memtraffic floor), then every run's GPU time and recoverable time; runs: label -> run folder,
    the first the one the others are held against."""
    from memtraffic.analysis.floor import floor_run
    from memtraffic.vocab.units import fmt_time

    floors = {label: floor_run(run) for label, run in runs.items()}
    by_op = {label: {r.op: r for r in f.by_op} for label, f in floors.items()}
    first, *others = runs

    def time_of(op: str, label: str) -> float | None:
        row = by_op[label].get(op)
        return row.time_s if row else None

    def recoverable_of(op: str, label: str) -> float | None:
        row = by_op[label].get(op)
        return row.recoverable_s if row else None

    def ns(seconds: float | None) -> str:
        return fmt_time(seconds * 1e9) if seconds is not None and math.isfinite(seconds) else "-"

    def cells(times: list[float | None], recoverable: list[float | None]) -> list[str]:
        ratios = [f"{times[0] / t:.2f}" if times[0] and t else "-" for t in times[1:]]
        return [*map(ns, times), *ratios, *map(ns, recoverable)]

    ops = dict.fromkeys(op for rows in by_op.values() for op in rows)
    shown = sorted((op for op in ops if any((time_of(op, label) or 0) >= share * f.gpu_time_s
                                            for label, f in floors.items())),
                   key=lambda op: -max(time_of(op, label) or 0 for label in runs))
    rows = [[f"`{op}`", *cells([time_of(op, label) for label in runs],
                               [recoverable_of(op, label) for label in runs])] for op in shown]
    rows.append(["all (GPU time)", *cells([f.gpu_time_s for f in floors.values()],
                                          [f.recoverable_s for f in floors.values()])])
    headers = ([f"time: {label}" for label in runs] + [f"{first} / {label}" for label in others]
               + [f"recoverable: {label}" for label in runs])

    def agrees(op: str, label: str) -> bool:
        a, b = time_of(op, first), time_of(op, label)
        return a is not None and b is not None and abs(a - b) <= max(AGREE[0] * b, AGREE[1])

    gaps = []
    for label in others:
        apart = abs(floors[first].recoverable_s - floors[label].recoverable_s)
        if math.isfinite(apart) and floors[label].gpu_time_s > 0:  # both have a floor
            gaps.append(f"{label} {ns(apart)} apart, {apart / floors[label].gpu_time_s:.1%} of its GPU time")
    sources = [f"{label}: {', '.join(f.time_sources) or 'no time'}{f'; {f.no_floor}' if f.no_floor else ''}"
               for label, f in floors.items()]
    ratios = ", ".join(f"{first} / {label}" for label in others)
    legend = (f"Op types holding at least {share:.0%} of a run's GPU time, largest first; time: every kernel "
              f"of the op type, recoverable: time above its floor (`memtraffic floor`); {ratios}: the ratio "
              f"of the times. Op types whose {first} time agrees within {AGREE[0]:.0%} (or "
              f"{AGREE[1] * 1e6:.0f} us): "
              + ", ".join(f"with {label} {sum(agrees(op, label) for op in shown)} of {len(shown)}"
                          for label in others)
              + f"; recoverable time against {first}: "
              f"{'; '.join(gaps) or '-'}. Where each run's times come from (run.json's time_source): "
              f"{'; '.join(sources)}.")
    return _markdown(["op type", *headers], rows, 1) + ["", legend]


def floor_window_output(reports: Path) -> list[str] | None:
    """window_table of each committed floor_window pair (reports/<gpu>/floor_window/{default,
    timing_only}, with range when there); None while none is committed."""
    lines: list[str] = []
    for folder in sorted(reports.glob("*/floor_window")):
        runs = {mode: folder / mode for mode in WINDOW_MODES if (folder / mode / "run.json").is_file()}
        if "default" not in runs or "timing_only" not in runs:
            continue
        how = ", ".join(f"`{mode}`: {WINDOW_MODES[mode]}" for mode in runs)
        lines += [f"`examples/floor_block.py` in its profiler window, profiled with "
                  f"`memtraffic profile --torch-ops --profile-from-start off` ({how}); measured on "
                  f"{_source(runs['default'], reports)}:", "", *window_table(runs), ""]
    return lines[:-1] or None


def fusion_output(reports: Path) -> list[str] | None:
    """The eager block's fusion groups (memtraffic.analysis.fusion), then each group the compiled block's
    Inductor kernels matched: its predicted fused floor against their time. None while not committed."""
    from memtraffic.analysis.diff import diff
    from memtraffic.views.floor_table import group_label, how_text
    from memtraffic.vocab.units import fmt_bytes, fmt_time

    eager, compiled = (reports / run for run in FLOOR_BLOCK)
    if not all((run / "run.json").is_file() for run in (eager, compiled)):
        return None
    d = diff(eager, compiled)
    groups = d.floors[0].fusion.groups
    rows = [[f"`{group_label(g, 60)}`", how_text(g.how), str(g.calls), fmt_bytes(g.eager_min_bytes),
             fmt_bytes(g.fused_min_bytes), fmt_bytes(g.recomputable_bytes) if g.recomputable_bytes else "-",
             fmt_time(g.time_s * 1e9), fmt_time(g.fused_time_s * 1e9), fmt_time(g.saving_s * 1e9)]
            for g in groups]
    lines = [f"`memtraffic floor reports/{FLOOR_BLOCK[0]}`, its groups; measured on "
             f"{_source(eager, reports)}:",
             "", *_markdown(["group", "how", "calls", "eager minimum", "fused minimum", "recomputable",
                             "time", "at the fused floor", "saving"], rows, 2), ""]
    matched: dict[int, list[Any]] = {}
    for m in d.fusion:
        matched.setdefault(m.group, []).append(m)
    rows = []
    for _, ms in sorted(matched.items(), key=lambda im: -groups[im[0]].saving_s):
        m = ms[0]
        label = " with ".join(f"`{group_label(groups[j], 60)}`" for j in m.groups)
        rows.append([label, fmt_time(m.group_time_s * 1e9),
                     fmt_time(m.fused_time_s * 1e9), str(len(ms)), fmt_time(m.group_kernels_time_s * 1e9),
                     "-" if m.reached is None else "none (slower)" if m.reached < 0 else f"{m.reached:.0%}",
                     f"{m.group_kernels_time_s / m.fused_time_s:.3f}"])
    lines += [f"`memtraffic diff reports/{FLOOR_BLOCK[0]} reports/{FLOOR_BLOCK[1]}`, the groups its Inductor "
              f"kernels matched; measured on {_source(compiled, reports)}:", "",
              *_markdown(["group", "eager", "fused floor", "Inductor kernels", "their time", "saving reached",
                          "time / fused floor"], rows, 1)]
    served = {i for m in d.fusion for i in m.groups}
    alone = [f"`{group_label(g, 60)}`" for i, g in enumerate(groups) if i not in served]
    if alone:
        lines += ["", f"Groups no Inductor kernel matched: {', '.join(alone)}."]
    return lines


SPEED_RUN = "h100/speed"


def speed_table(reports: Path) -> list[str] | None:
    """Issue 41's programs (reports/h100/speed/summary.json, scripts/speed_summary.py): each alone, with
    memtraffic's defaults (`profile --torch-ops`: the first look) and how ncu replayed it, what that
    measured, and its op types against an every-launch profile of a smaller size. None when not
    committed."""
    path = reports / SPEED_RUN / "summary.json"
    if not path.is_file():
        return None
    rows = []
    for r in json.loads(path.read_text()):
        every = (f"{r['every_launch_s']:.1f} ({r['kernels_every']} kernels)" if _ok(r["every_launch_s"])
                 else "not run")
        ops = (f"{r['op_types']}: {r['op_types_off']} / {r['op_types_off_l1']}" if r["op_types"] is not None
               else "-")
        rows.append([f"`{r['program']}`", (r["replay"] or {}).get("mode", "-"),
                     f"{r['bare_s']:.1f}" if _ok(r["bare_s"]) else "-",
                     f"{r['profile_s']:.1f}" if _ok(r["profile_s"]) else "not run",
                     _times(r["profile_over_bare"]) if _ok(r["profile_over_bare"]) else "-",
                     str(r["measured_units"]) if r["measured_units"] is not None else "-", every, ops])
    headers = ["program", "replay", "alone (s)", "defaults (s)", "over alone", "units measured",
               "every launch, smaller (s)", "op types: off / off in L1"]
    machine = (reports / SPEED_RUN / "machine.txt").read_text().splitlines()
    ncu = machine[3].split("(")[0].replace("Version", "ncu").strip()
    note = (f"{machine[1].split(',')[0]}, {ncu}, {machine[2][:10]}; "
            "seconds are whole commands (memtraffic, ncu and the program); \"off\": L1 load bytes beyond "
            "1% or DRAM read bytes beyond 3% and 4 KiB a kernel launch of the every-launch run, op type by "
            "op type; the smaller size of each program is in the summary's `every_launch_size`.")
    return _markdown(headers, rows, right_from=2) + ["", note]


BLOCKS: dict[str, Callable[[Path], list[str] | None]] = {
    "seed": seed_table, "suite": suite_table, "bench": bench_table, "profile": profile_output,
    "gpus": gpus_table,
    "diff": diff_output,
    "launches": launches_table,
    "floor": floor_output,
    "floor_window": floor_window_output,
    "fusion": fusion_output,
    "speed": speed_table,
}


def _pattern(name: str) -> re.Pattern[str]:
    return re.compile(rf"(<!-- table:{name} -->\n)(.*?)(<!-- /table:{name} -->)", re.DOTALL)


def render(text: str, reports: Path, prefix: str = "", append: list[str] | None = None) -> str:
    """The text with every block it holds regenerated, and the blocks named in `append` (default: those it
    lacks) appended under HEADING. `prefix` goes before the repository paths the blocks link to ('../'
    for a page in docs/)."""
    missing = [name for name in BLOCKS if not _pattern(name).search(text)] if append is None else append
    if missing:
        if HEADING not in text:
            text = text.rstrip("\n") + f"\n\n{HEADING}\n"
        for name in missing:
            placeholder = {"bench": NO_BENCH, "diff": NO_DIFF, "floor_window": NO_WINDOW}.get(name, "")
            text = text.rstrip("\n") + f"\n\n<!-- table:{name} -->\n{placeholder}\n<!-- /table:{name} -->\n"
    for name, make in BLOCKS.items():
        if not _pattern(name).search(text):
            continue
        lines = make(reports)
        if lines is None:  # nothing to show (no benchmark or diff pair committed): keep what the block holds
            continue
        body = re.sub(r"\]\((reports|examples|kernels|scripts)/", rf"]({prefix}\1/", "\n".join(lines) + "\n")
        text = _pattern(name).sub(lambda m, body=body: m.group(1) + body + m.group(3), text, count=1)
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 if a file is out of date")
    parser.add_argument("--readme", type=Path, action="append",
                        help="a Markdown file holding blocks (repeatable; default: README.md and docs/*.md); "
                        "blocks found in none are appended to the first")
    parser.add_argument("--reports", type=Path, default=REPO / "reports")
    args = parser.parse_args(argv)

    files = args.readme or [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    old = {f: f.read_text() for f in files}
    missing = [n for n in BLOCKS if not any(_pattern(n).search(t) for t in old.values())]
    new = {f: render(old[f], args.reports.resolve(), "../" if f.resolve().parent.name == "docs" else "",
                     missing if i == 0 else []) for i, f in enumerate(files)}
    stale = [f for f in files if new[f] != old[f]]
    if not stale:
        print("tables up to date: " + ", ".join(str(f) for f in files))
        return 0
    if args.check:
        for f in stale:
            names = [n for n in BLOCKS if (m := _pattern(n).search(old[f])) and m.group(0) not in new[f]]
            names += missing if f == files[0] else []
            print(f"{f}: out of date ({', '.join(names) or 'layout'}): run python scripts/readme_tables.py",
                  file=sys.stderr)
        return 1
    for f in stale:
        f.write_text(new[f])
        print(f"{f}: tables regenerated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
