"""One self-contained HTML page per run: the analyzed table, diagnoses, figures, and the environment last.

The page carries plotly.js inline, so it opens offline. Its numbers come from the same DataFrame
and the same formatting functions as `memtraffic analyze`, so the two always agree.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from memtraffic.analysis.analyze import gaps, load_results
from memtraffic.analysis.diff import diff
from memtraffic.analysis.findings import RULES, explain, say, told_once
from memtraffic.analysis.floor import Floor, floor_of_table, summary_lines
from memtraffic.analysis.fusion import HOW_KINDS
from memtraffic.analysis.lines import LineRow, report_lines
from memtraffic.analysis.outside import left_out, left_out_line
from memtraffic.analysis.per_op import summarize
from memtraffic.analysis.reuse import table_reuse_line
from memtraffic.analysis.row import row_dicts
from memtraffic.host.roofs_cache import find_roofs
from memtraffic.ncu.chips import peak_names
from memtraffic.ncu.kernel_table import kernel_table
from memtraffic.runfolder.folder import DEFAULT_RUNS_ROOT
from memtraffic.runfolder.load import Run, load_run
from memtraffic.runfolder.records import RunRecord
from memtraffic.views import roofline as rf
from memtraffic.views.diff_table import html_section
from memtraffic.views.figure_files import (
    check_new_file,
    default_output,
    figures_html,
    plotly_js,
    write_html,
    write_page,
    write_png,
)
from memtraffic.views.floor_table import HOW_LEGEND, how_text
from memtraffic.views.roofline import FLOPS_NOTE, roofline_figure
from memtraffic.views.tables import LEGEND, results_table_rows
from memtraffic.views.traffic_chart import same_scale, traffic_figure
from memtraffic.vocab.errors import ReportError
from memtraffic.vocab.files import require_folder
from memtraffic.vocab.finding import LEVELS, Evidence, Finding
from memtraffic.vocab.roofs import RoofsEntry, device_slug, load_roofs_file
from memtraffic.vocab.units import NUMBER_UNIT, fmt_bytes, fmt_eff, fmt_time
from memtraffic.vocab.version import __version__

if TYPE_CHECKING:  # plotly is imported where a figure is drawn (views.roofline, views.traffic_chart)
    import plotly.graph_objects as go

# ----------------------------------------------------------------------------------------------------
# Loading a run folder


def _load(run_dir: Path) -> Run:
    run_dir = Path(run_dir)
    if not require_folder(run_dir, "give the run folder that holds results.json"):
        raise ReportError(f"run folder {run_dir} does not exist: give the folder 'memtraffic measure' wrote")
    return load_run(run_dir)


def load_runs(run_dirs: Sequence[Path], partial: bool = False) -> tuple[pd.DataFrame, list[RunRecord]]:
    """Several runs stacked into one table (a 'run' column tells them apart) and their run.json; an
    incomplete run only with `partial` (its gaps are named on stderr either way, and kept in the
    table's gaps for the page's notes)."""
    frames, metas, found = [], [], []
    for d in run_dirs:
        run = _load(d)
        df = load_results(run, partial)
        meta = run.meta or {}
        if "run" not in df.columns:
            df = df.assign(run=run.name)
        if "device" not in df.columns and meta.get("device"):
            df = df.assign(device=_device_name(meta))
        frames.append(df)
        metas.append(meta)
        found += [f"incomplete run {run.name}: {gap}" for gap in gaps(df)]
    table = pd.concat(frames, ignore_index=True)
    table.attrs["gaps"] = found
    return table, metas


def _device_name(meta: Mapping[str, object]) -> str | None:
    """run.json names the GPU under environment.gpu (collect.py); older layouts under device."""
    env = meta.get("environment")
    if isinstance(env, Mapping) and env.get("gpu"):
        return str(env["gpu"])
    dev = meta.get("device")
    return str(dev.get("name")) if isinstance(dev, Mapping) else (str(dev) if dev else None)


def devices_of(df: pd.DataFrame, metas: Sequence[Mapping[str, object]] = ()) -> list[str]:
    """The devices a table was measured on (its device column, then run.json), each named once."""
    names = [str(d) for d in df["device"].dropna().unique() if str(d)] if "device" in df else []
    names += [n for m in metas if (n := _device_name(m))]
    seen: dict[str, str] = {}
    for n in names:
        seen.setdefault(device_slug(n).lower(), n)
    return list(seen.values())


def resolve_roofs(devices: Sequence[str], roofs_file: Path | None = None
                     ) -> tuple[list[RoofsEntry], list[str]]:
    """(entries, notes): the roofs of each device (a given file, else cache, else committed)."""
    entries: list[RoofsEntry] = []
    notes: list[str] = []
    if roofs_file is not None:
        entry = load_roofs_file(Path(roofs_file), devices[0] if devices else None)
        notes.append(f"roofs: {entry['device']} from {roofs_file}")
        return [entry], notes
    for dev in devices:
        # A roof the GPU has no counter for is named, not drawn (no DRAM roof on unified memory).
        notes += [f"{dev}: {note}" for note in peak_names(dev)[1]]
        known = find_roofs(dev)
        if known is None:
            notes.append(f"no roofs known for {dev}: run 'memtraffic roofs' on it to draw its roofs")
        else:
            entries.append(known)
            notes.append(f"roofs: {dev}, measured {known.get('date', '(date unknown)')}")
    if not devices:
        notes.append("the run does not name its device: no roofs drawn (give --roofs-file FILE)")
    return entries, notes


# ----------------------------------------------------------------------------------------------------
# Tables


def _html_table(headers: Sequence[str], rows: Sequence[Sequence[object]], cls: str = "data") -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{prose(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table class='{cls}'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def environment_rows(meta: Mapping[str, object], prefix: str = "") -> list[tuple[str, str]]:
    """run.json as key/value rows: nested objects dotted, lists of names joined; per-config records
    (configs, attempts, skipped) summarized, since the results table shows the configs."""
    out: list[tuple[str, str]] = []
    for k, v in meta.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out += environment_rows(v, key + ".")
        elif isinstance(v, list | tuple) and any(isinstance(x, Mapping) for x in v):
            if k == "configs":
                status: dict[str, int] = {}
                for c in v:
                    status[str(c.get("status"))] = status.get(str(c.get("status")), 0) + 1
                out.append((key, ", ".join(f"{n} {s}" for s, n in status.items())))
                out += [(f"{key}: {c.get('variant')} {c.get('range', '')}", str(c.get("error")))
                        for c in v if c.get("error")]
            else:
                out.append((key, f"{len(v)} records"))
        elif isinstance(v, list | tuple):
            out.append((key, " ".join(str(x) for x in v)))
        else:
            out.append((key, "-" if v is None else str(v)))
    return out


# ----------------------------------------------------------------------------------------------------
# The page

_CSS = """
body { font-family: 'Segoe UI', Helvetica, Arial, sans-serif; margin: 1.5em 2.5em; color: #222; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; margin-top: 1.6em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: right; }
th { background: #f3f3f3; } td:first-child, th:first-child { text-align: left; }
table.env td { text-align: left; font-family: monospace; } table.env th { text-align: left; }
.note { color: #555; font-size: 0.9em; } .error { color: #a00; }
table.lines td.src { text-align: left; font-family: monospace; white-space: pre; }
table.lines td.bar { width: 16em; text-align: left; }
.need, .excess { display: inline-block; height: 0.9em; vertical-align: middle; }
.need { background: #4a8; } .excess { background: #d44; }
/* Two figures side by side: grid columns exist before the second figure is parsed, so plotly sizes the
   first to its half (a flex item would take the whole row until its sibling arrives). */
.pair { display: grid; grid-template-columns: repeat(2, minmax(0, 1fr)); gap: 1.5em; align-items: start; }
.wide { max-width: 100%; overflow-x: auto; }
.howto { background: #f7f7f7; border-left: 3px solid #4a8; padding: 0.4em 1em; max-width: 60em; }
"""

HOW_TO_READ = (
    "Each row is one measured range: a config of <code>memtraffic measure</code>, or an op call or region of "
    "a profiled program. For each memory level (L1, L2, DRAM) the run table puts the bytes the kernels moved "
    "beside the <b>minimum</b>, what any implementation must read and write; <b>efficiency</b> = minimum / "
    "bytes moved (1.00 is ideal; 0.25 means four times the minimum). The findings under it say where the "
    "excess comes from and what to try. The roofline places each row by FLOPs per byte and speed under this "
    "GPU's roofs; the traffic chart shows each level's bytes as a multiple of the minimum.")


# A page lists at most this many rows; a larger run (a traced program of thousands of op calls) gets a
# summary per op type and its rows that took the most time, so the page stays small.
MAX_ROWS = 60


def _shown_rows(df: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The rows a page lists (all, or the MAX_ROWS that took the most time, in run order) and its summary
    sections (per op type for a traced program)."""
    if len(df) <= MAX_ROWS:
        return df, []

    sections = []
    total = df["time_ns"].sum()
    if "op" in df and df["op"].astype(bool).any():
        ops = summarize(df)
        headers = ["op", "calls", "kernels", "time", "share of time", "excess bytes", "eff L1 ld", "eff L2",
                   "eff DRAM"]
        rows = [[r["op"], f"{r['calls']} ({r['reused']} reused)" if r.get("reused") else r["calls"],
                 r["n_kernels"], fmt_time(r["time_ns"]),
                 f"{r['time_ns'] / total:.0%}" if total else "-", fmt_bytes(r["excess_bytes"]),
                 fmt_eff(r["eff_l1_ld"]), fmt_eff(r["eff_l2"]), fmt_eff(r["eff_dram"])]
                for r in ops.head(MAX_ROWS).to_dict("records")]
        more = (f" ({len(ops) - MAX_ROWS} more op types)" if len(ops) > MAX_ROWS else "")
        sections.append("<h2>Per op type</h2>" + _html_table(headers, rows)
                        + f"<p class='note'>largest excess first{more}; worst call of each: "
                        "<code>memtraffic analyze RUN --group-by op</code></p>")
    shown = df.loc[df["time_ns"].fillna(0).nlargest(MAX_ROWS).index.sort_values()]
    share = shown["time_ns"].sum() / total if total else float("nan")
    sections.append(f"<p class='note'>{len(df)} rows in all: the table lists the {MAX_ROWS} that took the "
                    f"most time ({share:.0%} of it); <code>memtraffic analyze RUN --format csv</code> lists "
                    "every row.</p>")
    return shown, sections


def floor_section(df: pd.DataFrame, run: Run) -> list[str]:
    """The floor's summary (memtraffic.analysis.floor), first on the page; none for a run without one."""
    found = floor_of_table(df, run.plan, run.name)
    lines = summary_lines(found, width=10**9)  # a paragraph each, unwrapped
    if not lines:
        return []
    note = "" if found.no_floor else ("<p class='note'><code>memtraffic floor</code> lists every op type "
                                      "with its floor, recoverable time and reason.</p>")
    return ["<h2>Time against the floor</h2>" + "".join(f"<p>{prose(line.strip())}</p>" for line in lines)
            + note + fusion_section(found)]


def fusion_section(floor: Floor) -> str:
    """The fusion groups (memtraffic.analysis.fusion) holding a saving, largest first, as a table with its
    legend; '' for a run without them."""
    groups = [g for g in floor.fusion.groups if g.saving_s > 0][:MAX_ROWS]
    if not groups:
        return ""
    headers = ["ops", "calls", "eager minimum", "fused minimum", "time", "at the fused floor", "saving",
               "how"]
    rows = [[" + ".join(dict.fromkeys(g.ops)), str(g.calls), fmt_bytes(g.eager_min_bytes),
             fmt_bytes(g.fused_min_bytes), fmt_time(g.time_s * 1e9), fmt_time(g.fused_time_s * 1e9),
             fmt_time(g.saving_s * 1e9), how_text(g.how)] for g in groups]
    kinds = sorted({g.how.kind for g in groups})
    legend = HOW_LEGEND + "; ".join(f"{k}: {HOW_KINDS[k]}" for k in kinds)
    return ("<h2>What fusing would save</h2>" + _html_table(headers, rows)
            + f"<p class='note'>{html.escape(legend)}.</p>")


def _told(r: Mapping[str, object]) -> list[Finding | str]:
    """A row's findings: its records (Finding, or their JSON from a saved table), else the diagnosis of a
    table saved before findings were records, or a saved finding of a rule no longer known (a sentence
    without its arithmetic)."""
    found = r.get("findings")
    if isinstance(found, list) and found:
        return [f if isinstance(f, Finding) else _record(f) if f.get("rule") in RULES
                else str(f.get("say", "")) for f in found if isinstance(f, Finding | dict)]
    diagnosis = r.get("diagnosis")
    return [diagnosis] if isinstance(diagnosis, str) and diagnosis else []


def _record(d: Mapping[str, object]) -> Finding:
    """A finding's record back from its JSON (Finding.to_dict); a number JSON kept as null is unknown."""
    saved = d.get("evidence")
    evidence: Evidence = {str(k): math.nan if v is None else v for k, v in saved.items()
                          if v is None or isinstance(v, int | float | str)} if isinstance(saved, dict) else {}
    level = d.get("level", "")
    return Finding(str(d.get("rule", "")), level=level if level in LEVELS else "", evidence=evidence)


def findings_html(names: Sequence[str], rows: Sequence[Sequence[Finding | str]]) -> str:
    """Each row's findings with their arithmetic; a rule on several rows said once with their count and
    its numbers that differ as ranges, each of its rows under it with its own values and arithmetic (as
    the terminal says it: memtraffic.analysis.findings.told_once)."""

    def item(said: str, why: str) -> str:
        return f"<li>{prose(said)}" + (f"<br><span class='note'>{prose(why)}</span>" if why else "") + "</li>"

    own, told = told_once([[f for f in found if isinstance(f, Finding)] for found in rows])
    legacy = [[f for f in found if isinstance(f, str)] for found in rows]
    items = "".join(f"<li><b>{html.escape(name)}</b><ul>"
                    + "".join(item(say(f), explain(f)) for f in dict.fromkeys(mine))
                    + "".join(item(sentence, "") for sentence in old) + "</ul></li>"
                    for name, mine, old in zip(names, own, legacy, strict=True) if mine or old)
    items += "".join(f"<li><b>{len(t.rows)} rows</b>: {prose(t.sentence)}<ul>"
                     + "".join(item(names[i] + (f": {values}" if values else ""),
                                    "; ".join(dict.fromkeys(map(explain, mine))))
                               for i, values, mine in t.per_row()) + "</ul></li>" for t in told)
    return f"<ul>{items}</ul>" if items else "<p>none</p>"


def prose(text: str) -> str:
    """Text for a page: escaped, `code` as <code>, each number held to its unit (a non-breaking space)."""
    escaped = html.escape(text)
    escaped = re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped)
    return NUMBER_UNIT.sub("\\1&nbsp;", escaped)


def build_report(run_dir: Path, roofs_file: Path | None = None, baseline: Path | None = None,
                 partial: bool = False) -> str:
    """The HTML text of the report of one run folder: results and diagnoses first (with a baseline, the
    diff of the two and their tables and traffic bars side by side before them), then the figures and
    source lines, notes, and the environment last. A large run is summarized (see MAX_ROWS)."""
    run_dir = Path(run_dir)
    df, metas = load_runs([run_dir], partial)
    meta = metas[0]
    if df.empty:
        raise ReportError(f"{run_dir} holds no analyzed rows: nothing to report")
    devices = devices_of(df, metas)
    roofs, roof_notes = resolve_roofs(devices, roofs_file)

    left = left_out_line(df)  # launches that are not the program's work: one line, as analyze says them
    shown, sections = _shown_rows(df[~left_out(df)])
    sections[:0] = floor_section(df, _load(run_dir))
    headers, rows = results_table_rows(shown)  # the rows `memtraffic analyze` prints

    reuse = table_reuse_line(df)  # profile --distinct: what was measured, what reuses it
    sections.append("<h2>Measured traffic vs minimum</h2>" + _html_table(headers, rows)
                    + "<p class='note'>efficiency = minimum bytes / measured bytes (1.00 is ideal)."
                    + (f" {html.escape(reuse)}; rows marked (reused)." if reuse else "")
                    + (f" {html.escape(left)}: {html.escape(LEGEND['left out'])}." if left else "") + "</p>")

    if "findings" in shown.columns or "diagnosis" in shown.columns:
        sections.append("<h2>Findings</h2>" + findings_html([row[0] for row in rows],
                                                            [_told(r) for r in row_dicts(shown)]))

    figs: list[tuple[str, go.Figure]] = []
    fig_notes: list[tuple[str, str]] = []
    makers: list[tuple[str, Callable[[], go.Figure]]] = [
        ("roofline", lambda: roofline_figure(shown, roofs)), ("traffic", lambda: traffic_figure(shown))]
    if baseline is not None:
        baseline = Path(baseline)
        compared, base_df = baseline_section(baseline, run_dir, df)
        sections.insert(0, compared)
        makers += [("baseline traffic", lambda: traffic_figure(base_df, title=f"baseline: {baseline.name}")),
                   ("run traffic", lambda: traffic_figure(df, title=f"this run: {run_dir.name}"))]
    for name, make in makers:
        try:
            figs.append((name, make()))
        except ReportError as err:  # one missing metric must not lose the rest of the page
            fig_notes.append((name, str(err)))
    pair = [f for name, f in figs if name in ("baseline traffic", "run traffic")]
    same_scale(*pair)  # a baseline pair's bars on one scale
    fragments = dict(zip([name for name, _ in figs], _fragments([f for _, f in figs]), strict=True))
    titles = {"roofline": "Hierarchical roofline", "traffic": "Traffic per level"}
    for name, frag in fragments.items():
        if name in titles:
            sections.append(f"<h2>{titles[name]}</h2><div class='fig'>{frag}</div>")
    for name, msg in fig_notes:
        if name in titles:
            sections.append(f"<h2>{titles[name]}</h2><p class='error'>not drawn: {html.escape(msg)}</p>")
    if baseline is not None:  # the two traffic charts side by side, under the comparison's tables
        notes_of = dict(fig_notes)
        cells = [fragments.get(n) or f"<p class='error'>not drawn: {html.escape(notes_of.get(n, ''))}</p>"
                 for n in ("baseline traffic", "run traffic")]
        sections[0] += ("<div class='pair'>" + "".join(f"<div class='fig'>{c}</div>" for c in cells)
                        + "</div>")

    sections += source_lines_section(run_dir)

    notes = df.attrs.get("gaps", []) + [FLOPS_NOTE] + roof_notes
    sections.append("<h2>Notes</h2><ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>")
    env_rows = environment_rows(meta) or [("run.json", "missing: environment unknown")]
    sections.append("<h2>Environment</h2>" + _html_table(["key", "value"], env_rows, cls="env"))
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    title = f"memtraffic report: {run_dir.name}"
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>{_CSS}</style>"
        + (plotly_js() if fragments else "") + "</head><body>\n"
        f"<h1>{html.escape(title)}</h1>\n"
        f"<p class='note'>{html.escape(', '.join(devices) or 'device unknown')}"
        f" &middot; generated by memtraffic {__version__} on {stamp}</p>\n"
        f"<h2>How to read this page</h2><p class='howto'>{HOW_TO_READ}</p>\n"
        + "\n".join(sections) + "\n</body></html>\n"
    )


def baseline_section(baseline: Path, run_dir: Path, df: pd.DataFrame) -> tuple[str, pd.DataFrame]:
    """(HTML, the baseline's table): `memtraffic diff BASELINE RUN`, then the baseline's analyzed table (the
    run's own is the page's run table; the two traffic charts are added under them by build_report)."""
    compared = diff(baseline, run_dir)
    base_df = pd.DataFrame(compared.a.rows)  # analyze's rows of the baseline
    headers, rows = results_table_rows(base_df)  # this run's own table follows in its section: not twice
    text = (f"<h2>Compared with the baseline {html.escape(baseline.name)}</h2>{html_section(compared)}"
            f"<h3>baseline: {html.escape(baseline.name)}</h3><div class='wide'>{_html_table(headers, rows)}"
            "</div>")
    return text, base_df


def _bar(row: LineRow, widest: float) -> str:
    """The line's bytes moved as a bar: the part its kernel's minimum justifies, then its excess in red."""
    excess = row["excess_sectors"] * 32
    need, extra = (100 * (row["bytes_moved"] - excess) / widest, 100 * excess / widest) if widest else (0, 0)
    return (f"<span class='need' style='width:{need:.1f}%'></span>"
            f"<span class='excess' style='width:{extra:.1f}%'></span>")


def source_lines_section(run_dir: Path) -> list[str]:
    """Per kernel measured with --source: its lines that touch global memory, each with a traffic bar."""
    run = load_run(run_dir)
    with_lines = []
    for report in run.reports:
        try:
            if kernel_table(report, allow_partial=True).source_counters:
                with_lines.append(report)
        except ReportError:  # the results table came from results.json: no lines to show
            continue
    rows, _ = report_lines(with_lines, run.plan)
    if not rows:
        return []
    parts = ["<h2>Source lines</h2><p class='note'>bytes each line moves (sectors x 32), scaled to the "
             "kernel's busiest line; red: excess (sector waste, or sectors beyond the minimum).</p>"]
    headers = ["line", "op", "bytes moved", "share", "excess", "", "verdict", "source"]
    for launch in dict.fromkeys(r["launch"] for r in rows):
        mine = [r for r in rows if r["launch"] == launch]
        widest = max(r["bytes_moved"] for r in mine)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in (
                f"{Path(r['file']).name}:{r['line']}" if r["file"] else r["pc"], r["operation"],
                fmt_bytes(r["bytes_moved"]), f"{r['share']:.0%}", fmt_bytes(r["excess_sectors"] * 32)))
            + f"<td class='bar'>{_bar(r, widest)}</td><td>{html.escape(r['verdict'])}</td>"
            + f"<td class='src'>{html.escape(r['source'])}</td></tr>" for r in mine)
        head = "".join(f"<th>{h}</th>" for h in headers)
        title = mine[0]["kernel"] + (f" [{mine[0]['range']}]" if mine[0]["range"] else "")
        parts.append(f"<h3>{html.escape(title)}</h3><table class='lines'><thead><tr>{head}</tr></thead>"
                     f"<tbody>{body}</tbody></table>")
    return ["".join(parts)]


def _fragments(figs: Sequence[go.Figure]) -> list[str]:
    return figures_html(figs) if figs else []


def write_report(run_dir: Path, out: Path | None = None, roofs_file: Path | None = None,
                 baseline: Path | None = None, force: bool = False, partial: bool = False) -> Path:
    """Write the report (default: report-<run>.html in the current folder) and return its path. An
    existing file is replaced only with force; an incomplete run is reported only with partial."""
    out = Path(out) if out is not None else default_output("report", [Path(run_dir)])
    check_new_file(out, force)
    return write_page(out, build_report(Path(run_dir), roofs_file, baseline, partial), force)


def latest_run(root: Path | None = None) -> Path:
    """The newest run folder (by modification time) under reports/runs that holds results."""
    root = Path(root) if root is not None else DEFAULT_RUNS_ROOT
    runs = [d for d in root.glob("*") if (d / "results.json").is_file()] if root.is_dir() else []
    if not runs:
        raise ReportError(f"no run folder with results under {root}: give one, "
                          "e.g. 'memtraffic roofline RUN_DIR'")
    return max(runs, key=lambda d: (d / "results.json").stat().st_mtime)


def plot_runs(run_dirs: Sequence[Path], levels: Sequence[str], out: Path | None = None,
              png: Path | None = None, roofs_file: Path | None = None,
              force: bool = False, partial: bool = False) -> tuple[list[Path], list[str]]:
    """Roofline + traffic figures of one or more runs: an offline HTML page (default: roofline-<run>.html
    in the current folder) and/or PNGs. An existing file is replaced only with force. (paths, notes)."""
    pngs = None if png is None else (Path(png), Path(png).with_name(Path(png).stem + "-traffic.png"))
    for path in pngs or ():
        check_new_file(path, force, "--png")
    if out is not None or png is None:
        out = Path(out) if out is not None else default_output("roofline", run_dirs)
        check_new_file(out, force)
    df, metas = load_runs(run_dirs, partial)
    roofs, notes = resolve_roofs(devices_of(df, metas), roofs_file)
    notes += rf.roofline_points(df, levels).attrs.get("notes", [])
    roof = rf.roofline_figure(df, roofs, levels)
    traffic = traffic_figure(df, levels)
    written: list[Path] = []
    if pngs is not None:
        written.append(write_png(roof, pngs[0], force=force))
        written.append(write_png(traffic, pngs[1], force=force))  # its own size: it grows with its bars
    if out is not None:
        names = ", ".join(Path(d).name for d in run_dirs)
        page_title = f"memtraffic roofline: {names}"
        page_notes = df.attrs.get("gaps", []) + [rf.FLOPS_NOTE] + notes  # gaps: said on stderr already
        written.insert(0, write_html([roof, traffic], out, page_title, page_notes, force))
    return written, notes
