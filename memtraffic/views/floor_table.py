"""`memtraffic floor` for people: the summary, the op types by recoverable time, a legend."""

from __future__ import annotations

import json

from memtraffic.analysis.floor import KINDS, LEGEND, Floor, summary_lines, table_rows
from memtraffic.views.tables import LEGEND as TABLE_LEGEND
from memtraffic.views.tables import NOTE_WIDTH, findings, fit, text_table

SHOWN = 0.01  # op types holding at least this share of the recoverable time get their reason's note


def render_floor(f: Floor, fmt: str = "table", width: int | None = None, explain: bool = False) -> str:
    """table: summary, one row per op type (largest recoverable time first) and the legend; json: Floor's
    to_dict."""
    if fmt == "json":
        return json.dumps(f.to_dict(), indent=2)
    rows = table_rows(f)
    headers = ["op", "calls", "time", "floor", "recoverable", "share", "reason"]
    kinds = sorted({r.reason_kind for r in f.by_op if r.reason_kind in KINDS})
    note_width = min(width or NOTE_WIDTH, NOTE_WIDTH)
    lines = [*summary_lines(f, note_width), "",
             text_table(headers, [[r[h] for h in headers] for r in rows], width=width), ""]
    shown = [(row.op, [row.reason]) for row in f.by_op if row.reason and row.share >= SHOWN]
    notes = findings(shown, explain=explain)
    hidden = sum(1 for row in f.by_op if row.reason and row.share < SHOWN)
    if hidden:
        notes.append(f"  ({hidden} more op types under {SHOWN:.0%} of the recoverable time each: "
                     "--format json)")
    under = [*notes, "", LEGEND, "reason, the kind holding most of an op type's recoverable time:",
             *[f"  {k}: {KINDS[k]}" for k in kinds]]
    if f.left_out:  # the summary's line that sums the launches left out
        under.append(TABLE_LEGEND["left out"])
    roof = f.roofs.get("dram_Bps")
    if not roof:
        under.append(f"no measured roofs for {f.device or 'this device'}: every floor is 0 (measure them "
                     "with `memtraffic ceilings --refresh` on that GPU)")
    return "\n".join(lines) + "\n" + fit("\n".join(under), None if width is None else note_width)
