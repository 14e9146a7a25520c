"""Every plain-text table for people (json/csv for scripts: memtraffic.views.formats)."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd

from memtraffic.analysis import per_op
from memtraffic.analysis.analyze import kernel_list, row_label, to_records
from memtraffic.analysis.findings import NOT_A_RESULT, REPEATED, say, to_dicts, told_once
from memtraffic.analysis.findings import explain as explain_finding
from memtraffic.analysis.lines import LineRow, location
from memtraffic.analysis.outside import left_out, left_out_line
from memtraffic.analysis.row import row_dicts
from memtraffic.views import formats
from memtraffic.vocab.finding import Finding
from memtraffic.vocab.grouping import Grouping
from memtraffic.vocab.launches import measured_range
from memtraffic.vocab.ops import format_shape
from memtraffic.vocab.roofs import ROOFS, RoofsEntry, roofs_rows
from memtraffic.vocab.units import NUMBER_UNIT, fmt_bytes, fmt_eff, fmt_rate, fmt_time

if TYPE_CHECKING:
    from memtraffic.vocab.configs import GridCount

WIDTH = 100  # columns the CLI's tables fit where the terminal's are unknown (--wide: one line each)
NOTE_WIDTH = 100  # the lines under a table (legend, findings) are read, not scanned: at most this

# What the tables' words mean, said under each table that uses them (analysis/analyze.py computes them).
LEGEND = {
    "eff": "eff: minimum / bytes moved at that level (1.00: at the minimum; 0.25: 4x the minimum)",
    "minimum": "minimum: the bytes any implementation must read and write (inputs once, outputs once)",
    "sector": "sector ld/st: bytes the instructions asked for / bytes moved in 32-byte sectors (L1 and L2 "
              "move global memory in sectors), loads/stores",
    "excess": "excess: bytes beyond the minimum, at the level (L1, L2, DRAM) with the most",
    "reused": "reused: calls not measured again, which reuse the first call's counters (--distinct)",
    "n": "n: kernels in the row; range: an NVTX range (a named span of the program) or a config",
    "lsu": "L1 ld/st: global loads and stores through the LSU (load/store unit) pipe, at L1",
    "left out": "left out: launches in no op, region or Triton range; json/csv keep them (outside_program)",
    "autotuning": "autotuning: a Triton kernel's benchmark runs outside its range; flushes: cache flushes "
                  "between them",
}


def terminal_width() -> int:
    """The columns tables fit: COLUMNS, else the terminal's, else WIDTH."""
    import shutil

    return shutil.get_terminal_size((WIDTH, 24)).columns


def text_table(headers: Sequence[str], rows: Sequence[Sequence[object]], width: int | None = None,
               stack: bool = True) -> str:
    """Left-aligned first column, right-aligned numbers, one space-padded line per row.

    With a `width` the table is narrowed until it fits, the cells unchanged: first each header wider than
    its column splits onto two lines, then (if `stack`) the first column (the row's name) goes on a line
    of its own above the row's other cells."""
    body = [["-" if c is None else str(c) for c in r] for r in rows]
    one_line = [[str(h)] for h in headers]
    two_lines = [one_line[0]] + [_two_lines(h[0], max((len(r[i]) for r in body), default=0))
                                 for i, h in enumerate(one_line[1:], start=1)]
    table = _layout(one_line, body)
    if width is None or len(headers) < 2:
        return table
    layouts = [("", one_line), ("", two_lines)] + [("inline", one_line), ("inline", two_lines),
                                                   ("alone", one_line), ("alone", two_lines)] * stack
    # One space between columns only where two do not fit; last, numbers joined to their units ('8.39MB').
    squeezed = [[r[0], *(c.replace(" ", "") for c in r[1:])] for r in body]
    for stacked, heads in layouts:
        for cells, gap in ((body, "  "), (body, " "), (squeezed, " ")):
            table = (_stacked(heads, cells, stacked == "inline", width, gap) if stacked
                     else _layout(heads, cells, gap))
            if _widest(table) <= width:
                return table
    return table


def _stacked(heads: list[list[str]], body: list[list[str]], inline: bool = True, width: int | None = None,
             gap: str = "  ") -> str:
    """Each row's first cell on a line of its own, its other cells indented on the next. `inline`: the names'
    header heads the numbers' column of blanks (alone on a line it reads as a stray word); else, where that
    indent makes the table too wide, it stands on the first line. A name longer than `width` (an Inductor
    kernel's) wraps onto the lines below it, as prose does."""
    rest = _layout(heads if inline else [[""], *heads[1:]], [["", *r[1:]] for r in body], gap).splitlines()
    depth = max(len(h) for h in heads)
    out = rest[:depth + 1] if inline else [heads[0][0]] + rest[:depth + 1]
    for r, numbers in zip(body, rest[depth + 1:], strict=True):
        out += [*fit(r[0], width).splitlines(), numbers]
    return "\n".join(out)


def _widest(text: str) -> int:
    return max(len(line) for line in text.splitlines())


def _two_lines(header: str, cells: int) -> list[str]:
    """A header wider than its cells split at the space that makes its longer line shortest."""
    words = header.split(" ")
    if len(header) <= cells or len(words) < 2:
        return [header]
    splits = [(" ".join(words[:i]), " ".join(words[i:])) for i in range(1, len(words))]
    return list(min(splits, key=lambda pair: max(map(len, pair))))


def _layout(heads: Sequence[Sequence[str]], body: Sequence[Sequence[str]], gap: str = "  ") -> str:
    """Headers (each a list of lines, bottom-aligned), a dash line, then the rows."""
    depth = max(len(h) for h in heads)
    head_rows = [[h[i - depth + len(h)] if i >= depth - len(h) else "" for h in heads] for i in range(depth)]
    widths = [max(len(r[i]) for r in head_rows + list(body)) for i in range(len(heads))]

    def line(r: Sequence[str]) -> str:
        return gap.join(
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ).rstrip()

    return "\n".join([*map(line, head_rows), gap.join("-" * w for w in widths), *map(line, body)])


def fit(text: str, width: int | None) -> str:
    """Each line longer than `width` wrapped at spaces, its continuation indented 4 more than the line
    (notes and diagnoses; tables are narrowed by text_table), never between a number and its unit. Only a
    word longer than a line is split (a kernel name of 200 characters)."""
    if width is None:
        return text
    out = []
    for line in text.splitlines():
        if len(line) <= width:
            out.append(line)
            continue
        indent = " " * (len(line) - len(line.lstrip()))  # the paragraph's own indent stays on its first line
        held = NUMBER_UNIT.sub("\\1\u00a0", line)  # a number with its unit: textwrap breaks at ASCII spaces
        out += [part.replace("\u00a0", " ") for part in
                textwrap.wrap(held, width, subsequent_indent=indent + "    ", break_on_hyphens=False)]
    return "\n".join(out)


def legend(*keys: str) -> str:
    """The legend lines for these table words."""
    return "\n".join(LEGEND[k] for k in keys)


def not_shown_legend(df: pd.DataFrame) -> str:
    """Why an efficiency shows '-' (analysis.findings.NOT_A_RESULT), each reason found in the table once."""
    found = sorted({why for u in df.get("no_efficiency", pd.Series(dtype=object)) if isinstance(u, dict)
                    for why in u.values()})
    return "\n".join(f"eff -: {NOT_A_RESULT[why]}" for why in found)


def left_out_note(df: pd.DataFrame) -> tuple[str, list[str]]:
    """(the line that sums the rows left out (analysis.outside), the legend keys its words need), or
    ('', []) when no row is left out."""
    line = left_out_line(df)
    if line is None:
        return "", []
    kinds = set(df.loc[left_out(df), "outside_kind"])
    return line, ["left out", *["autotuning"] * bool(kinds - {"other"})]


def _only_left_out(line: str, keys: Sequence[str], width: int | None) -> str:
    """A table whose every row is left out: that said, the line and its legend."""
    text = f"(no launch of the program's ops)\n\n{line}\n\n{legend(*keys)}"
    return fit(text, width and min(width, NOTE_WIDTH))


def findings(rows: Sequence[tuple[str, Sequence[Finding]]], tails: Sequence[str] = (),
             explain: bool = False, noun: str = "rows") -> list[str]:
    """(row name, its findings) pairs as note lines: each row's name (and its tail, e.g. its worst call),
    then one line per finding, its sentence. A rule found on REPEATED rows or more is said once after
    them, with their count and the numbers that differ as ranges (analysis.findings.told_once), then each
    of its rows with its own values where they differ (the JSON keeps every row's records). `explain`:
    each sentence's arithmetic under it (a rule said once: each row's, under the row)."""
    tails = list(tails) or [""] * len(rows)
    own, told = told_once([found for _, found in rows], NOTE_WIDTH - len(f"  {len(rows)} {noun}: "))
    out: list[str] = []
    for (name, _), tail, mine in zip(rows, tails, own, strict=True):
        if mine:
            out.append(f"  {name}{tail}:")
            for f in _once(mine):
                out.append(f"    {say(f)}")
                if explain:
                    out.append(f"      = {explain_finding(f)}")
    for t in told:
        out.append(f"  {len(t.rows)} {noun}: {t.sentence}")
        if not t.varies and not explain:
            continue
        for i, values, mine in t.per_row():
            out.append(f"    {rows[i][0]}" + (f": {values}" if values else ""))
            if explain:
                out += [f"      = {explain_finding(f)}" for f in mine]
    return out


def kernel_lines(rows: Sequence[tuple[str, str]]) -> list[str]:
    """(row name, its kernels) as note lines; the same kernels on REPEATED rows or more said once, the rows
    under them."""
    on: dict[str, list[str]] = {}
    for name, kernels in rows:
        on.setdefault(kernels, []).append(name)
    out = []
    for kernels, names in on.items():
        if len(names) < REPEATED:
            out += [f"  {name}: kernels {kernels}" for name in names]
        else:
            out += [f"  {len(names)} rows: kernels {kernels}", *(f"    {name}" for name in names)]
    return out


def _once(found: Sequence[Finding]) -> list[Finding]:
    """A row's findings, a sentence said twice kept once."""
    first: dict[str, Finding] = {}
    for f in found:
        first.setdefault(say(f), f)
    return list(first.values())


def render_list(rows: Sequence[dict[str, Any]], fmt: str, width: int | None = None) -> str:
    """`memtraffic list`'s output in `fmt`."""
    return formats.render(fmt, rows, lambda: fit(_list_table(rows, width), width))


def _list_table(rows: Sequence[dict[str, Any]], width: int | None = None) -> str:
    headers = [
        "variant",
        "op",
        "shape",
        "dtype",
        "min read",
        "min write",
        "pred read",
        "pred write",
        "pred/min",
        "FLOPs",
        "FLOP/B",
    ]
    body = []
    notes = []
    for r in rows:
        if not r["supported"]:
            body.append([r["name"], r["op"], r["shape"], r["dtype"]] + ["n/a"] * 7)
            notes.append(f"  {r['name']}: {r['reason']}")
            continue
        predicted = r["pred_read_bytes"] is not None  # None: listed without torch (no model)
        amp = ((r["pred_read_bytes"] + r["pred_write_bytes"]) / (r["min_read_bytes"] + r["min_write_bytes"])
               if predicted else None)
        body.append(
            [
                r["name"],
                r["op"],
                r["shape"],
                r["dtype"],
                fmt_bytes(r["min_read_bytes"]),
                fmt_bytes(r["min_write_bytes"]),
                fmt_bytes(r["pred_read_bytes"]) if predicted else None,
                fmt_bytes(r["pred_write_bytes"]) if predicted else None,
                f"{amp:.2f}x" if predicted else None,
                f"{r['flops']:.3g}",
                f"{r['intensity']:.3g}",
            ]
        )
    if all(r["pred_read_bytes"] is None for r in rows if r["supported"]):  # no model (the base install)
        keep = [i for i, h in enumerate(headers) if not h.startswith("pred")]
        headers, body = [headers[i] for i in keep], [[row[i] for i in keep] for row in body]
    text = text_table(headers, body, width)
    if notes:
        text += "\n\nnot applicable at this shape/dtype:\n" + "\n".join(notes)
    return text


def roofs_table(entry: RoofsEntry) -> str:
    """`memtraffic roofs`: each roof measured beside ncu's theoretical peak, then how each was measured."""
    body = []
    for r in roofs_rows(entry):
        body.append([r["label"], fmt_rate(r["measured"], r["unit"]),
                     fmt_rate(r["ncu_theoretical"], r["unit"]),
                     f"{100 * r['fraction']:.0f}%" if r["fraction"] else "-"])
    head = f"{entry['device']}" + (f", measured {date}" if (date := entry.get("date")) else "")
    text = head + "\n" + text_table(["roof", "measured", "ncu theoretical", "measured/theoretical"], body)
    # Not roofs, but what analyze's time notes use beside them (memtraffic.analysis.time_notes).
    latencies = {"launch_s": "launch floor", "dram_latency_s": "DRAM latency"}
    measured = entry.get("measured", {})
    text += "".join(f"\n{label}: {fmt_time(measured[k] * 1e9)}" for k, label in latencies.items()
                    if measured.get(k))
    methods = [f"  {ROOFS[k][0] if k in ROOFS else latencies[k]}: {v}"
               for k, v in entry.get("method", {}).items() if k in ROOFS or k in latencies]
    if methods:
        text += "\n\nhow measured:\n" + "\n".join(methods)
    if note := entry.get("ncu_note"):
        text += f"\nncu theoretical: {note}"
    return text


def grid_count_table(rows: Sequence[GridCount]) -> str:
    """`list --count`: configs per variant (rows of collect.sweep.grid_counts), skipped ones, the total."""
    width = max(len(r["variant"]) for r in rows)
    lines = [f"{r['variant']:<{width}}  {r['configs']:>5} configs"
             + (f"  ({r['skipped']} skipped)" if r["skipped"] else "") for r in rows]
    configs, skipped = sum(r["configs"] for r in rows), sum(r["skipped"] for r in rows)
    total = f"{configs} configs in all" + (f" ({skipped} combinations skipped)" if skipped else "")
    return "\n".join([*lines, total])


def bench_table(result: dict[str, Any]) -> str:
    """The people's table: time, effective bandwidth, fraction of copy, speedups over torch."""
    headers = [
        "variant",
        "shape",
        "dtype",
        "time",
        "eff. bandwidth",
        "% of copy",
        "vs torch.softmax",
        "vs torch.compile",
    ]
    body = []
    for r in result["rows"]:
        if r["status"] != "ok":
            body.append([r["variant"], r["shape"], r["dtype"], r["status"], "-", "-", "-", "-"])
            continue
        vs = [r.get(f"speedup_vs_{b}") for b in ("torch_softmax", "torch_compiled")]
        body.append(
            [
                r["variant"],
                r["shape"],
                r["dtype"],
                fmt_time(r["time_ns"]),
                fmt_rate(r["bw_Bps"]),
                f"{100 * r['frac_of_copy']:.0f}%",
            ]
            + [f"{v:.2f}x" if v else "-" for v in vs]
        )
    env = result["environment"]  # results written before the one environment record: device, date inside
    device, date = env.get("gpu") or env.get("device"), result.get("date") or env.get("date")
    head = f"{device}, torch {env['torch']}, triton {env['triton']}, {date}"
    return head + "\n" + text_table(headers, body)


# The keys of `memtraffic ops --format json|csv`, per traced call.
OPS_KEYS = ["seq", "pid", "kind", "range", "op", "shape", "dtype", "inputs", "outputs", "min_read_bytes",
            "min_write_bytes", "min_note", "model_flops", "intensity"]


def _intensity(r: dict[str, Any]) -> float | None:
    total = r["min_read_bytes"] + r["min_write_bytes"]
    return r["model_flops"] / total if r["model_flops"] is not None and total > 0 else None


def ops_rows(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One plain object per traced call (OPS_KEYS), in program order."""
    return [{k: (_intensity(r) if k == "intensity" else r[k]) for k in OPS_KEYS} for r in records]


def summary(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per op type, most bytes first: calls, bytes, FLOPs (regions left out: their ops count already)."""
    by_op: dict[str, dict[str, Any]] = {}
    for r in records:
        if r["kind"] != "op":
            continue
        s = by_op.setdefault(r["op"], {"op": r["op"], "calls": 0, "min_read_bytes": 0, "min_write_bytes": 0,
                                       "model_flops": None})
        s["calls"] += 1
        s["min_read_bytes"] += r["min_read_bytes"]
        s["min_write_bytes"] += r["min_write_bytes"]
        if r["model_flops"] is not None:
            s["model_flops"] = (s["model_flops"] or 0) + r["model_flops"]
    rows = sorted(by_op.values(), key=lambda s: -(s["min_read_bytes"] + s["min_write_bytes"]))
    for s in rows:
        s["intensity"] = _intensity(s)
    return rows


def _moves_nothing(r: dict[str, Any]) -> bool:
    return r["min_read_bytes"] == 0 and r["min_write_bytes"] == 0 and not r["model_flops"]


WORST_CALLS = 10  # calls `ops` and `profile --torch-ops` list by default (most bytes, largest excess)


def ops_table(records: Sequence[dict[str, Any]], fmt: str, all_calls: bool = False) -> str:
    """table: the calls (all of them in program order with `all_calls`, else the WORST_CALLS moving the
    most bytes), then per op type; json/csv: `ops_rows` (every call)."""
    if fmt != "table":
        return formats.render(fmt, ops_rows(records), str)

    def flops(x: float | None) -> str:
        return "-" if x is None else f"{x:.3g}"

    several = len({r["pid"] for r in records}) > 1
    shown = [r for r in records if not _moves_nothing(r)]
    heading = ""
    if not all_calls and len(shown) > WORST_CALLS:
        heading = (f"the {WORST_CALLS} calls moving the most bytes, of {len(shown)} (all of them: "
                   "--all-calls, or --format json):\n")
        shown = sorted(shown, key=lambda r: -(r["min_read_bytes"] + r["min_write_bytes"]))[:WORST_CALLS]
    body = [[f"{r['pid']}:{r['seq']}" if several else str(r["seq"]),
             r["op"] if r["kind"] == "op" else f"[region] {r['op']}",
             format_shape(r["shape"]), r["dtype"], fmt_bytes(r["min_read_bytes"]),
             fmt_bytes(r["min_write_bytes"]), flops(r["model_flops"]), flops(_intensity(r))] for r in shown]
    text = heading + text_table(["#", "op", "shape", "dtype", "min read", "min write", "FLOPs", "FLOP/B"],
                                body)
    notes = sorted({r["min_note"] for r in shown if r.get("min_note")})
    if notes:
        text += "\n\nminimums that are upper bounds: " + "; ".join(notes)
    idle = sorted({r["op"] for r in records if _moves_nothing(r)})
    if idle:
        count = sum(_moves_nothing(r) for r in records)
        text += (f"\n\n{count} calls moved no data (views, aliases, allocations), not shown: "
                 f"{', '.join(idle)}")
    rows = summary(records)
    if rows:
        body = [[s["op"], str(s["calls"]), fmt_bytes(s["min_read_bytes"]), fmt_bytes(s["min_write_bytes"]),
                 fmt_bytes(s["min_read_bytes"] + s["min_write_bytes"]), flops(s["model_flops"]),
                 flops(s["intensity"])] for s in rows if s["min_read_bytes"] + s["min_write_bytes"] > 0]
        total = sum(s["min_read_bytes"] + s["min_write_bytes"] for s in rows)
        text += "\n\nper op type, most bytes first (total minimum " + fmt_bytes(total) + "):\n"
        text += text_table(["op", "calls", "min read", "min write", "min total", "FLOPs", "FLOP/B"], body)
    return text


# --- analyze, analyze --group-by op, lines ---------------------------------------------------------------


def results_table_rows(df: pd.DataFrame, group_by: Grouping = "range") -> tuple[list[str], list[list[str]]]:
    """(headers, rows) of analyze's readable table; the HTML report uses it so both show the same."""
    # DRAM writes often stay in L2 (write-back) past the kernel's end, so with a per-direction minimum
    # the table shows DRAM read efficiency; eff_dram (reads + writes) is in json/csv.
    per_direction = "eff_dram_rd" in df and df["eff_dram_rd"].notna().any()
    headers = ["range" if group_by == "range" else "kernel", "n", "time", "L1 ld", "L1 st", "L2 rd+wr",
               "DRAM rd+wr", "minimum", "eff L1 ld", "eff L1 st", "eff L2",
               "eff DRAM rd" if per_direction else "eff DRAM", "sector ld/st"]
    # A level whose counters this GPU lacks (or the report did not collect) reads n/a, not a number.
    absent = {c for c in ("l1_ld_bytes", "l1_st_bytes", "l2_rd_bytes", "dram_rd_bytes")
              if c not in df or df[c].isna().all()}

    def cell(level: str, text: str) -> str:
        return "n/a" if level in absent else text

    body = []
    for r in row_dicts(df):
        label = row_label(r)
        if group_by == "kernel" and r["variant"] and r["kernels"]:
            label += f" [{r['kernels'][0]}]"
        if r.get("status", "ok") != "ok":  # planned, not measured whole (analyze.STATUSES)
            label += f" [{r['status']}]"
        body.append([
            label, str(r["n_kernels"]), fmt_time(r["time_ns"]),
            cell("l1_ld_bytes", fmt_bytes(r["l1_ld_bytes"])),
            cell("l1_st_bytes", fmt_bytes(r["l1_st_bytes"])),
            cell("l2_rd_bytes", fmt_bytes(r["l2_rd_bytes"] + r["l2_wr_bytes"])),
            cell("dram_rd_bytes", fmt_bytes(r["dram_rd_bytes"] + r["dram_wr_bytes"])),
            fmt_bytes(r.get("min_bytes")),
            cell("l1_ld_bytes", fmt_eff(r["eff_l1_ld"])), cell("l1_st_bytes", fmt_eff(r["eff_l1_st"])),
            cell("l2_rd_bytes", fmt_eff(r["eff_l2"])),
            cell("dram_rd_bytes", fmt_eff(r["eff_dram_rd"] if per_direction else r["eff_dram"])),
            cell("l1_ld_bytes", fmt_eff(r["sector_eff_ld"])) + "/"
            + cell("l1_st_bytes", fmt_eff(r["sector_eff_st"])),
        ])
    # Local memory (spills) beside the global L1 bytes, where a report counted some.
    local = [(r["local_ld_bytes"] or 0) + (r["local_st_bytes"] or 0) for r in row_dicts(df)]
    if any(x > 0 for x in local):
        headers.insert(5, "L1 local ld+st")
        for row, x in zip(body, local, strict=True):
            row.insert(5, fmt_bytes(x))
    return headers, body


def results_table(df: pd.DataFrame, group_by: Grouping = "range", width: int | None = None,
                  explain: bool = False) -> str:
    """Readable units; a range with several kernels shows their count; diagnoses are listed below. With a
    `width`, the table is narrowed and the notes wrapped to fit it (the same cells and words)."""
    if df.empty:
        return "(no rows)"
    line, keys = left_out_note(df)
    df = df[~left_out(df)]
    if df.empty:
        return _only_left_out(line, keys, width)
    headers, body = results_table_rows(df, group_by)
    rows = row_dicts(df)
    notes = findings([(row[0], r["findings"]) for r, row in zip(rows, body, strict=True)], explain=explain)
    if group_by == "range":
        notes += kernel_lines([(row[0], kernel_list(r["kernels"]))
                               for r, row in zip(rows, body, strict=True) if r["n_kernels"] > 1])
    devices = ", ".join(sorted({d for d in df["device"] if d}))
    text = (f"{devices}\n" if devices else "") + text_table(headers, body, width)
    under = (f"{line}\n\n" if line else "") + legend("n", "lsu", "minimum", "eff", "sector", *keys)
    if shown := not_shown_legend(df):
        under += "\n" + shown
    if df["min_bytes"].isna().all():
        under += "\n\nno minimum known: pass --min-bytes TOTAL or READ:WRITE for efficiencies"
    if notes:
        under += "\n\n" + "\n".join(notes)
    return text + "\n\n" + fit(under, width and min(width, NOTE_WIDTH))


def render_results(df: pd.DataFrame, fmt: str, group_by: Grouping = "range", width: int | None = None,
                   explain: bool = False) -> str:
    """`memtraffic analyze`'s output: the table for people (fitting `width` columns if given), or json/csv
    records (always whole)."""
    if group_by == "op":
        return formats.render(fmt, lambda: per_op.to_records(df), lambda: per_op_table(df, width, explain))
    return formats.render(fmt, lambda: to_records(df), lambda: results_table(df, group_by, width, explain))


def op_calls_table(table: pd.DataFrame, n: int = WORST_CALLS, width: int | None = None,
                   explain: bool = False) -> str:
    """A traced program's analysis that fits a terminal: the per-op-type summary, then the `n` calls
    with the largest excess (bytes beyond the minimum at the level with the most); the launches that are
    not the program's work are said under the summary, in no list."""
    text = per_op_table(per_op.summarize(table), width, explain)
    table = table[~left_out(table)]
    moved = pd.concat([table[f"{level}_rd_bytes"] + table[f"{level}_wr_bytes"] for level in ("l2", "dram")]
                      + [table["l1_ld_bytes"] + table["l1_st_bytes"]], axis=1)
    excess = moved.max(axis=1) - table["min_bytes"]
    worst = table.assign(_excess=excess).sort_values("_excess", ascending=False, na_position="last",
                                                     kind="stable").head(n).drop(columns="_excess")
    text += "\n\n" + fit(f"the {len(worst)} calls with the most excess, of {len(table)} (all: --all-calls; "
                         "every call is in the run folder's results.csv):", width and min(width, NOTE_WIDTH))
    return text + "\n" + results_table(worst, width=width, explain=explain)


def per_op_table(df: pd.DataFrame, width: int | None = None, explain: bool = False) -> str:
    """`analyze --group-by op`: readable units; each op type's worst call and its diagnosis below."""
    if df.empty:
        return "(no rows)"
    line, keys = left_out_note(df)
    df = df[~left_out(df)]
    if df.empty:
        return _only_left_out(line, keys, width)
    per_direction = df["eff_dram_rd"].notna().any()
    headers = ["op", "calls", "kernels", "time", "L1 ld+st", "L2 rd+wr", "DRAM rd+wr", "minimum", "excess",
               "eff L1 ld", "eff L1 st", "eff L2", "eff DRAM rd" if per_direction else "eff DRAM"]
    # A level this GPU has no counter for reads n/a (no DRAM counter on unified memory).
    absent = {c for c in ("l1_ld_bytes", "l2_rd_bytes", "dram_rd_bytes") if df[c].isna().all()}

    def cell(level: str, text: str) -> str:
        return "n/a" if level in absent else text

    body = [[r["op"] + (f" [{r['status']}]" if r.get("status", "ok") != "ok" else ""),
             f"{r['calls']} ({r['reused']} reused)" if r.get("reused") else str(r["calls"]),
             str(r["n_kernels"]), fmt_time(r["time_ns"]),
             cell("l1_ld_bytes", fmt_bytes(r["l1_ld_bytes"] + r["l1_st_bytes"])),
             cell("l2_rd_bytes", fmt_bytes(r["l2_rd_bytes"] + r["l2_wr_bytes"])),
             cell("dram_rd_bytes", fmt_bytes(r["dram_rd_bytes"] + r["dram_wr_bytes"])),
             fmt_bytes(r["min_bytes"]), fmt_bytes(r["excess_bytes"]),
             cell("l1_ld_bytes", fmt_eff(r["eff_l1_ld"])), cell("l1_ld_bytes", fmt_eff(r["eff_l1_st"])),
             cell("l2_rd_bytes", fmt_eff(r["eff_l2"])),
             cell("dram_rd_bytes", fmt_eff(r["eff_dram_rd"] if per_direction else r["eff_dram"]))]
            for r in df.to_dict("records")]
    records = df.to_dict("records")
    notes = findings([(r["op"], r["findings"]) for r in records],
                     [f" (worst: {r['worst_call']})" if r["worst_call"] else "" for r in records],
                     explain=explain)
    reused = ["reused"] if "reused" in df and df["reused"].fillna(0).astype(bool).any() else []
    under = (f"{line}\n\n" if line else "") + legend("minimum", "excess", "eff", *reused, *keys)
    if shown := not_shown_legend(df):
        under += "\n" + shown
    if notes:
        under += "\n\n" + "\n".join(notes)
    return text_table(headers, body, width) + "\n\n" + fit(under, width and min(width, NOTE_WIDTH))


def lines_table(rows: Sequence[LineRow], source_width: int = 100,
                width: int | None = None) -> str:
    """`memtraffic lines`: per kernel, a heading, a table of the lines' traffic, then each line's source
    (cut at `source_width`) and verdict, a verdict on several of the kernel's lines said once after them
    with their count (the JSON keeps every line's records); with a `width`, the table and verdicts fit it."""

    headers = ["line", "op", "inst", "requests", "sectors", "ideal", "excess", "moved", "share"]
    out: list[str] = []
    for launch in dict.fromkeys(r["launch"] for r in rows):
        mine = [r for r in rows if r["launch"] == launch]
        first = mine[0]
        out.append(f"== {first['kernel']}" + (f"  [{range_label(first['range'])}]" if first["range"] else ""))
        spills = any(r.get("local_bytes") for r in mine)  # a column for local memory where a line spills
        body = [[location(r), r["operation"], r["inst_executed"], r["requests"], r["sectors"],
                 r["ideal_sectors"], r["excess_sectors"], fmt_bytes(r["bytes_moved"]), f"{r['share']:.0%}"]
                for r in mine]
        if spills:
            for row, r in zip(body, mine, strict=True):
                row.insert(8, fmt_bytes(r.get("local_bytes", 0)))
        out.append(text_table([*headers[:8], "local", headers[8]] if spills else headers, width=width,
                              rows=body))
        noun = "lines" if all(r["file"] for r in mine) else "instructions"
        verdicts = [list(r.get("findings") or []) for r in mine]
        own, told = told_once(verdicts, NOTE_WIDTH - len(f"  {len(mine)} {noun}: "))
        fine = [not found for found in verdicts]
        for r, mine_own, is_fine in zip(mine, own, fine, strict=True):
            cut = source_width if width is None else min(source_width, width - 4 - len(location(r)))
            source = r["source"] if len(r["source"]) <= cut else r["source"][: cut - 3] + "..."
            out.append(f"  {location(r)}  {source}")
            out += [f"      {say(f)}" for f in _once(mine_own)]
            if is_fine and sum(fine) < REPEATED:
                out.append("      fine")
        for t in told:
            out.append(f"  {len(t.rows)} {noun}: {t.sentence}")
            if t.numbers_vary:  # words alone (loads, stores) the table's op column says
                out += [f"    {location(mine[i])}: {values}" for i, values, _ in t.per_row()]
        if sum(fine) >= REPEATED:
            out.append(f"  {sum(fine)} {noun}: fine")
        out.append("")
    out.append(LINES_LEGEND)
    return fit("\n".join(out).rstrip(), width and min(width, NOTE_WIDTH))


LINES_LEGEND = (
    "inst: warp instructions executed; requests: L1 tag requests (a warp's access of one instruction); "
    "sectors: 32-byte sectors moved; ideal: the sectors each access's distinct bytes would fill if packed "
    "(ncu's ideal sectors; repeated requests of the same bytes count as ideal); excess: sectors beyond "
    "ideal, plus ideal sectors beyond the kernel's minimum (the same bytes requested again); moved: "
    "sectors x 32 B; share: of the kernel's bytes.")


def range_label(name: str) -> str:
    """An NVTX range as people name it: 'softmax_naive 1048576x2 fp32 num_warps=4', 'aten.addmm.default
    call 14', 'region attn call 3'; a range memtraffic did not name, as it is."""
    parts = measured_range(name).split("|")
    if len(parts) < 2 or parts[0] != "mt":
        return name
    if parts[1] in ("op", "triton") and len(parts) >= 4:
        return f"{parts[3]} call {parts[2]}"
    if parts[1] == "region" and len(parts) >= 4:
        return f"region {parts[2]} call {parts[-1]}"
    return " ".join(p for p in parts[1:] if p)


def render_lines(rows: Sequence[LineRow], fmt: str, width: int | None = None) -> str:
    records = [{**r, "findings": to_dicts(r.get("findings") or [])} for r in rows]
    return formats.render(fmt, records, lambda: lines_table(rows, width=width))
