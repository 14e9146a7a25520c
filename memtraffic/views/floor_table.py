"""`memtraffic floor` for people: the summary, the op types (a measure run's configs) by recoverable time,
the fusion groups, a legend."""

from __future__ import annotations

import json
import textwrap

from memtraffic.analysis.floor import KINDS, Floor, legend, summary_lines, table_rows
from memtraffic.analysis.fusion import HOW_KINDS, TOP, Group, How, base
from memtraffic.views.tables import LEGEND as TABLE_LEGEND
from memtraffic.views.tables import NOTE_WIDTH, findings, fit, text_table
from memtraffic.vocab.units import fmt_bytes, fmt_time

SHOWN = 0.01  # op types holding at least this share of the recoverable time get their reason's note


def render_floor(f: Floor, fmt: str = "table", width: int | None = None, explain: bool = False) -> str:
    """table: summary, one row per op type or a measure run's config (largest recoverable time first) and the
    legend; json: Floor's to_dict. A run without a floor (Floor.no_floor) gets its summary alone."""
    if fmt == "json":
        return json.dumps(f.to_dict(), indent=2)
    if f.no_floor:
        return "\n".join(summary_lines(f))
    rows = table_rows(f)
    headers = ["op", "calls", "time", "floor", "recoverable", "share", "reason"]
    kinds = sorted({r.reason_kind for r in f.by_op if r.reason_kind in KINDS})
    shown_headers = ["config", *headers[1:]] if f.per_config else headers
    note_width = min(width or NOTE_WIDTH, NOTE_WIDTH)
    lines = [*summary_lines(f, note_width), "",
             text_table(shown_headers, [[r[h] for h in headers] for r in rows], width=width), ""]
    shown = [(row.name, [row.reason]) for row in f.by_op if row.reason and row.share >= SHOWN]
    notes = findings(shown, explain=explain, noun=f.unit)
    hidden = sum(1 for row in f.by_op if row.reason and row.share < SHOWN)
    if hidden:
        notes.append(f"  ({hidden} more {f.unit} under {SHOWN:.0%} of the recoverable time each: "
                     "--format json)")
    groups = group_lines(f)
    under = [*notes, "", *groups, *([""] if groups else []), legend(f),
             f"reason, the kind holding most of {'a config' if f.per_config else 'an op type'}'s recoverable "
             "time:", *[f"  {k}: {KINDS[k]}" for k in kinds]]
    if f.left_out:  # the summary's line that sums the launches left out
        under.append(TABLE_LEGEND["left out"])
    return "\n".join(lines) + "\n" + fit("\n".join(under), None if width is None else note_width)


def how_text(how: How) -> str:
    """The few words that say how to get a group's saving (analysis.fusion.HOW_KINDS), under 45
    characters."""
    epilogue = f", epilogue -{fmt_bytes(how.epilogue_bytes)}" if how.matmul and how.epilogue_bytes else ""
    return {
        "compile": f"compile -{fmt_bytes(how.saved_bytes)}{epilogue}",
        "fuse": f"one kernel -{fmt_bytes(how.saved_bytes)}{epilogue}",
        "recompute": f"recomputed later -{fmt_bytes(how.recomputed_bytes)}{epilogue}",
        "epilogue": f"a matmul epilogue -{fmt_bytes(how.epilogue_bytes)}",
        "graphs": f"CUDA graphs ({how.launches} launches)",
        "kernel": f"a faster kernel{epilogue}",
        "at floor": "at its fused floor",
    }.get(how.kind, how.kind)


def group_label(g: Group, width: int = 26) -> str:
    """'add+native_layer_norm': the group's op types in order, cut to `width` with '..'."""
    names = list(dict.fromkeys(base(op).removeprefix("aten.") for op in g.ops))
    text = "+".join(names)
    return text if len(text) <= width else text[:width - 2] + ".."


HOW_LEGEND = ("calls; time now -> at the fused floor (the fused minimum at the copy roof, FLOPs at their "
              "roof, one launch: a floor, not a promise); how, with the bytes it removes: ")


def group_lines(f: Floor, top: int = TOP) -> list[str]:
    """The fusion groups holding the largest savings, one line each (under 100 columns), and a legend
    (wrapped at 100); none for a run without groups."""
    fusion = f.fusion
    if not fusion.groups:  # why (no identities, no roofs) the summary has said: JSON's groups_note keeps it
        return []
    shown = [g for g in fusion.groups if g.saving_s > 0][:top]
    share = f" ({fusion.saving_s / f.gpu_time_s:.0%} of the GPU time)" if f.gpu_time_s > 0 else ""
    lines = [f"fusion groups: {len(fusion.groups)}, saving {fmt_time(fusion.saving_s * 1e9)} together"
             f"{share}; the top {len(shown)}:"]
    for g in shown:
        bound = "*" if g.bound_calls else "~" if g.recomputable_bytes else " "
        lines.append(f"  {group_label(g):<26} {g.calls:>3} {fmt_time(g.time_s * 1e9):>9} -> "
                     f"{fmt_time(g.fused_time_s * 1e9):>9}{bound} {how_text(g.how)}")
    kinds = sorted({g.how.kind for g in shown})
    legend = HOW_LEGEND + "; ".join(f"{k}: {HOW_KINDS[k]}" for k in kinds)
    if any(g.bound_calls for g in shown):
        legend += "; *: a call's minimum is a bound"
    if any(g.recomputable_bytes and not g.bound_calls for g in shown):
        legend += ("; ~: the floor leaves out what it writes for later calls that they could compute again "
                   "from what they keep")
    return lines + textwrap.wrap(legend, 100, initial_indent="  (", subsequent_indent="   ")
