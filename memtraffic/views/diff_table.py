"""`memtraffic diff` output: a block per matched row (A, B, change) and its verdict, for people; the flat
rows of memtraffic.analysis.diff for scripts (json, csv); the same blocks as HTML for `report --baseline`."""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Mapping

from memtraffic.analysis.diff import WRITES_NOTE, Diff, names_writes, pct, relative
from memtraffic.analysis.floor import Floor
from memtraffic.analysis.fusion import Match
from memtraffic.views import formats
from memtraffic.vocab.units import fmt_bytes, fmt_eff, fmt_time

Cell = tuple[str, Callable[[Mapping[str, object], str], float], str]  # header, value of a side, kind


def _get(*measures: str) -> Callable[[Mapping[str, object], str], float]:
    """The sum of these measures on side 'a' or 'b' (NaN when any is unknown)."""
    return lambda row, side: math.fsum(_f(row.get(f"{m}_{side}")) for m in measures)


def _f(x: object) -> float:
    return float(x) if isinstance(x, int | float) and x is not None else math.nan


_RANGE_CELLS: list[Cell] = [
    ("time", _get("time_ns"), "time"), ("L1 ld", _get("l1_ld_bytes"), "bytes"),
    ("L1 st", _get("l1_st_bytes"), "bytes"), ("L2 rd+wr", _get("l2_rd_bytes", "l2_wr_bytes"), "bytes"),
    ("DRAM rd", _get("dram_rd_bytes"), "bytes"), ("DRAM wr", _get("dram_wr_bytes"), "bytes"),
    ("eff L1 ld", _get("eff_l1_ld"), "eff"), ("eff L1 st", _get("eff_l1_st"), "eff"),
    ("eff L2", _get("eff_l2"), "eff"), ("eff DRAM rd", _get("eff_dram_rd"), "eff"),
]
_LINE_CELLS: list[Cell] = [
    ("bytes moved", _get("bytes_moved"), "bytes"), ("excess sectors", _get("excess_sectors"), "count"),
    ("sectors", _get("sectors"), "count"), ("ideal", _get("ideal_sectors"), "count"),
    ("requests", _get("requests"), "count"), ("inst", _get("inst_executed"), "count"),
]


def _cells(d: Diff) -> list[Cell]:
    return _LINE_CELLS if d.group_by == "line" else _RANGE_CELLS


def _value(x: float, kind: str) -> str:
    if math.isnan(x):
        return "-"
    formats: dict[str, Callable[[float], str]] = {"time": fmt_time, "bytes": fmt_bytes, "eff": fmt_eff}
    return formats[kind](x) if kind in formats else f"{x:.0f}"


def _change(row: Mapping[str, object], get: Callable[[Mapping[str, object], str], float], kind: str) -> str:
    a, b = get(row, "a"), get(row, "b")
    if math.isnan(a) or math.isnan(b):
        return "-"
    if kind == "eff":
        return "=" if round(a, 2) == round(b, 2) else f"{b - a:+.2f}"
    if a == b:
        return "="
    text = pct(relative(a, b))
    if kind == "time" and row.get("time_noise"):
        text += " ~"  # within the noise band: not a change
    return text


def header(d: Diff) -> str:
    devices = ", ".join(dict.fromkeys(d.a.devices + d.b.devices)) or "device unknown"
    text = f"{devices}; A = {d.a.name}, B = {d.b.name}; change = B vs A"
    if d.group_by != "line":
        text += f"; '~': time within the noise band (±{100 * d.time_tolerance:g}% or the runs' own spread)"
    if any(r["status"] == "both" and names_writes(r) for r in d.rows):
        text += f"; {WRITES_NOTE}"
    return text


def blocks(d: Diff) -> tuple[list[str], list[list[list[str]]]]:
    """(headers, a list of 3-line blocks (A, B, change) per matched row), for text and HTML alike."""
    cells = _cells(d)
    headers = ["", *[h for h, _, _ in cells]]
    out = []
    for row in d.rows:
        if row["status"] != "both":
            continue
        out.append([["  A", *[_value(get(row, "a"), kind) for _, get, kind in cells]],
                    ["  B", *[_value(get(row, "b"), kind) for _, get, kind in cells]],
                    ["  change", *[_change(row, get, kind) for _, get, kind in cells]]])
    return headers, out


def format_diff(d: Diff, width: int | None = None) -> str:
    """Per matched row, largest change first: its name, A, B and change lines, and its verdict; then the
    rows only in A and only in B, by name. With a `width`, the table is narrowed and the rest wrapped."""
    from memtraffic.views.tables import fit, text_table

    headers, body = blocks(d)
    matched = [r for r in d.rows if r["status"] == "both"]
    lines = [header(d), *floor_lines(d)]
    if matched:
        rows = [r for block in body for r in block]
        table = text_table(headers, rows, width, stack=False).splitlines()
        head = len(table) - len(rows)  # header lines (one or two) and the dash line
        lines += table[:head]
        for i, (row, block) in enumerate(zip(matched, body, strict=True)):
            lines.append(str(row["match"]))
            lines += table[head + 3 * i: head + 3 * i + len(block)]
            lines.append(f"  => {row['verdict']}")
    for status, side in (("only_in_a", d.a), ("only_in_b", d.b)):
        names = [str(r["match"]) for r in d.rows if r["status"] == status]
        if names:
            lines.append(f"only in {status[-1].upper()} ({side.name}, {len(names)}): {'; '.join(names)}")
    lines += fusion_lines(d)
    lines += [f"note: {n}" for n in d.notes]
    return fit("\n".join(lines), width)


def floor_lines(d: Diff) -> list[str]:
    """Both runs' time, floor and recoverable time (memtraffic floor), and the change of the recoverable."""
    a, b = d.floors
    if a is None or b is None:
        return []

    def side(name: str, f: Floor) -> str:
        if f.no_floor:
            return f"  {name}: GPU time {fmt_time(f.gpu_time_s * 1e9)}; {f.no_floor}"
        fused = f", fused minimum {fmt_bytes(f.fused_min_bytes)}" if f.fused_min_bytes is not None else ""
        return (f"  {name}: GPU time {fmt_time(f.gpu_time_s * 1e9)}, floor {fmt_time(f.floor_s * 1e9)}, "
                f"recoverable {fmt_time(f.recoverable_s * 1e9)}{fused}")

    lines = ["floor (memtraffic floor):", side("A", a), side("B", b)]
    without = [name for name, f in (("A", a), ("B", b)) if f.no_floor]
    if without:  # a recoverable time against no floor is no number: none is compared
        return [*lines, f"  recoverable times not compared: {' and '.join(without)} "
                f"{'has' if len(without) == 1 else 'have'} no floor"]
    return [*lines, f"  recoverable time B vs A: {pct(relative(a.recoverable_s, b.recoverable_s))}"]


# Measures that are whole counts: their A, B and change values are written as integers.
_WHOLE = {"time_ns", "l1_ld_bytes", "l1_st_bytes", "l2_rd_bytes", "l2_wr_bytes", "dram_rd_bytes",
          "dram_wr_bytes", "min_bytes", "excess_bytes", "n_kernels", "calls", "bytes_moved", "excess_sectors",
          "sectors", "ideal_sectors", "requests", "inst_executed"}


def records(d: Diff) -> list[dict[str, object]]:
    """The rows as plain JSON-able objects: NaN and infinite values -> None, whole byte counts -> int."""
    out = []
    for row in d.rows:
        clean: dict[str, object] = {}
        for key, value in row.items():
            if isinstance(value, float):
                if not math.isfinite(value):
                    value = None
                elif value.is_integer() and key.rsplit("_", 1)[0] in _WHOLE and not key.endswith("_rel"):
                    value = int(value)
            clean[key] = value
        out.append(clean)
    return out


SLOWER = 0.8  # a matched kernel set faster than this share of its group's fused floor is named


def fusion_lines(d: Diff) -> list[str]:
    """A's fusion groups that B's Inductor kernels matched (analysis.fusion.match): per group (or groups
    one kernel fused across, together), its time in A, its predicted fused floor, the kernels' time in B
    and the share of the saving they reached; then its kernels; then the groups no kernel matched."""
    eager_floor = d.floors[0]
    if not d.fusion or eager_floor is None:  # (fusion is matched only where both runs have a floor)
        return []
    from memtraffic.views.floor_table import group_label

    groups: dict[int, list[Match]] = {}
    for m in d.fusion:
        groups.setdefault(m.group, []).append(m)
    eager = eager_floor.fusion.groups
    matched = {i for m in d.fusion for i in m.groups}
    lines = [f"fusion: {len(d.fusion)} Inductor kernels of B beside the {len(matched)} groups of A whose ops "
             "they fused (memtraffic floor A)"]
    for _, ms in sorted(groups.items(), key=lambda im: -eager[im[0]].saving_s):
        m = ms[0]
        reached = m.reached
        whose = "their" if len(m.groups) > 1 else "this group's"
        said = ("nothing to save: at its fused floor" if reached is None
                else f"slower than A: none of {whose} saving" if reached < 0
                else f"reached {reached:.0%} of {whose} saving")
        label = " with ".join(group_label(eager[j], 40) for j in m.groups)
        lines.append(f"  {label}: A {fmt_time(m.group_time_s * 1e9)}, fused floor "
                     f"{fmt_time(m.fused_time_s * 1e9)}; B {fmt_time(m.group_kernels_time_s * 1e9)} in "
                     f"{len(ms)} kernel{'s' if len(ms) > 1 else ''}: {said}")
        if len(m.groups) > 1:
            lines.append(f"    one kernel fused across these {len(m.groups)} groups: compared together")
        if m.group_kernels_time_s < SLOWER * m.fused_time_s:
            lines.append(f"    under {SLOWER:.0%} of the floor: B's kernels move at least "
                         f"{fmt_bytes(m.group_kernels_min_bytes)}, the group "
                         f"{fmt_bytes(m.group_fused_min_bytes)}: they keep or recompute other tensors than A "
                         "(a different boundary)")
        lines += [f"    {k.kernel}: {fmt_time(k.time_s * 1e9)}" for k in ms]
    alone = [group_label(g, 40) for j, g in enumerate(eager) if j not in matched]
    if alone:
        lines.append(f"  no kernel of B of their own ({len(alone)}; their work may sit in a kernel matched "
                     f"to another group): {', '.join(alone)}")
    return lines


def render(d: Diff, fmt: str, width: int | None = None) -> str:
    """`memtraffic diff`'s output in `fmt`: the blocks for people, or the flat rows (records); json holds
    them as `rows` beside `fusion`, one entry per matched Inductor kernel."""
    whole = {"rows": records(d), "fusion": [m.to_dict() for m in d.fusion]} if fmt == "json" else None
    return formats.render(fmt, lambda: records(d), lambda: format_diff(d, width), whole)


def html_section(d: Diff) -> str:
    """The diff as HTML: a table with A, B and change rows per matched config, verdicts, and the rest."""
    headers, body = blocks(d)
    matched = [r for r in d.rows if r["status"] == "both"]
    head = "".join(f"<th>{html.escape(h)}</th>" for h in ["config", *headers[1:]])
    rows = []
    for row, block in zip(matched, body, strict=True):
        name = html.escape(str(row["match"]))
        verdict = html.escape(str(row["verdict"]))
        rows.append(f"<tr><td colspan='{len(headers)}'><b>{name}</b>: {verdict}</td></tr>")
        rows += ["<tr>" + "".join(f"<td>{html.escape(c.strip())}</td>" for c in line) + "</tr>"
                 for line in block]
    parts = [f"<p class='note'>{html.escape(header(d))}</p>"]
    if rows:
        parts.append(f"<table class='data'><thead><tr>{head}</tr></thead>"
                     f"<tbody>{''.join(rows)}</tbody></table>")
    for status, side in (("only_in_a", d.a), ("only_in_b", d.b)):
        names = [html.escape(str(r["match"])) for r in d.rows if r["status"] == status]
        if names:
            who = f"only in {status[-1].upper()} ({html.escape(side.name)})"
            parts.append(f"<p>{who}: {'; '.join(names)}</p>")
    fusion = fusion_lines(d)
    if fusion:
        parts.append(f"<pre>{html.escape(chr(10).join(fusion))}</pre>")
    parts += [f"<p class='note'>{html.escape(n)}</p>" for n in d.notes]
    return "".join(parts)

