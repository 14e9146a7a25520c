"""`memtraffic floor` for people: the summary, the op types (a measure run's configs) by recoverable time, a
legend."""

from __future__ import annotations

import json

from memtraffic.analysis.floor import KINDS, Floor, legend, summary_lines, table_rows
from memtraffic.views.tables import LEGEND as TABLE_LEGEND
from memtraffic.views.tables import text_table

SHOWN = 0.01  # op types holding at least this share of the recoverable time get their reason's note


def render_floor(f: Floor, fmt: str = "table", width: int | None = None) -> str:
    """table: summary, one row per op type or a measure run's config (largest recoverable time first) and the
    legend; json: Floor's to_dict."""
    if fmt == "json":
        return json.dumps(f.to_dict(), indent=2)
    rows = table_rows(f)
    headers = ["op", "calls", "time", "floor", "recoverable", "share", "reason"]
    kinds = sorted({r.reason_kind for r in f.by_op if r.reason_kind in KINDS})
    shown_headers = ["config", *headers[1:]] if f.per_config else headers
    lines = [*summary_lines(f), "",
             text_table(shown_headers, [[r[h] for h in headers] for r in rows], width=width), ""]
    shown = [(r, row) for r, row in zip(rows, f.by_op, strict=True) if row.reason and row.share >= SHOWN]
    lines += [f"  {r['op']}: {r['why']}" for r, _ in shown]
    hidden = sum(1 for row in f.by_op if row.reason and row.share < SHOWN)
    if hidden:
        lines.append(f"  ({hidden} more {f.unit} under {SHOWN:.0%} of the recoverable time each: "
                     "--format json)")
    lines += ["", legend(f),
             "reasons: " + "; ".join(f"{k}: {KINDS[k]}" for k in kinds)]
    if f.left_out:  # the summary's line that sums the launches left out
        lines.append(TABLE_LEGEND["left out"])
    roof = f.roofs.get("dram_Bps")
    if not roof:
        lines.append(f"no measured roofs for {f.device or 'this device'}: every floor is 0 (measure them "
                     "with `memtraffic ceilings --refresh` on that GPU)")
    return "\n".join(lines)
