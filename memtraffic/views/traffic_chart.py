"""The traffic chart: measured bytes over the minimum, per memory level and config, as bars on a log axis.

The roofline (memtraffic.views.roofline) places each config by FLOPs per byte; this chart answers the plainer
question of how many times the minimum each level moved. It shares the roofline's labels and order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import pandas as pd

from memtraffic.views.roofline import (
    LEVEL_BYTES,
    LEVEL_COLOR,
    LEVEL_LABEL,
    LEVEL_PARTS,
    LEVELS,
    config_labels,
    order_configs,
    require_columns,
    wrap_html,
)
from memtraffic.vocab.errors import ReportError
from memtraffic.vocab.units import fmt_bytes

if TYPE_CHECKING:  # plotly is imported inside the functions: it is slow to import
    import plotly.graph_objects as go


def traffic_figure(df: pd.DataFrame, levels: Sequence[str] = LEVELS, title: str | None = None) -> go.Figure:
    """Amplification per level (measured bytes / minimum bytes) per config, on a log axis, with the
    minimum as a line at 1. Ratios rather than bytes, so a 16 MB run reads beside a 4 GB one."""
    import plotly.graph_objects as go

    if df.empty:
        raise ReportError("the analyzed results hold no rows: nothing to plot")
    require_columns(df, ["variant", "shape", "dtype", "min_read_bytes", "min_write_bytes"], "traffic chart")
    present = [lv for lv in levels if all(c in df for c in LEVEL_BYTES[lv])]
    if not present:
        require_columns(df, LEVEL_BYTES[levels[0]], "traffic chart")
    df = order_configs(df)
    labels = config_labels(df)
    min_r, min_w = df["min_read_bytes"].astype(float), df["min_write_bytes"].astype(float)
    minimum = min_r + min_w
    fig = go.Figure()
    amps: list[float] = []
    zero: list[str] = []
    short_writes: list[str] = []
    for lv in present:
        a, b = LEVEL_BYTES[lv]
        da, db = a.split("_")[1], b.split("_")[1]  # ld/st, rd/wr
        part_a, part_b = df[a].astype(float), df[b].astype(float)
        total = part_a + part_b
        amp = total / minimum.where(minimum > 0)
        # Per direction too: a total can hide loads far above the minimum behind writes below it.
        amp_a, amp_b = part_a / min_r.where(min_r > 0), part_b / min_w.where(min_w > 0)
        y = [v if v > 0 else None for v in amp]  # 0 bytes has no place on a log axis
        amps += [v for v in y if v is not None]
        zero += [f"{LEVEL_LABEL[lv]} of {lab}" for lab, t in zip(labels, total, strict=True) if t == 0]
        fig.add_trace(go.Bar(
            x=labels, y=y, name=f"{LEVEL_LABEL[lv]} {LEVEL_PARTS[lv]}", marker_color=LEVEL_COLOR[lv],
            # Labels above the bars, but inside those below the minimum, clear of the line at 1.
            text=[_short_times(v) for v in amp], textangle=-90, insidetextanchor="end",
            textposition=["inside" if v < 1 else "outside" for v in amp],
            textfont={"size": 10}, constraintext="none", cliponaxis=False,
            hovertext=[
                f"<b>{lab}</b><br>{LEVEL_LABEL[lv]}: {fmt_bytes(t)} "
                f"({da} {fmt_bytes(x)}, {db} {fmt_bytes(w)})<br>{_times_text(v)} the minimum {fmt_bytes(m)} "
                f"(read {fmt_bytes(mr)}, write {fmt_bytes(mw)})"
                f"<br>{da} {_times_text(ra)}, {db} {_times_text(rb)} the minimum of that direction"
                for lab, t, x, w, v, m, mr, mw, ra, rb in zip(labels, total, part_a, part_b, amp, minimum,
                                                              min_r, min_w, amp_a, amp_b, strict=True)
            ],
            hoverinfo="text", meta={"level": lv, "amplification": list(amp)},
        ))
        if lv == "dram":
            short_writes = [lab for lab, w in zip(labels, amp_b, strict=True) if w < 0.9]
    y_lo = min([0.5, *amps]) / 2.5  # room for the labels inside bars below the minimum
    y_hi = max([2.0, *amps]) * 4  # room for the labels above the bars
    ticks = [m * 10**e for e in range(-3, 6) for m in (1, 2, 5) if y_lo <= m * 10**e <= y_hi]
    fig.add_shape(type="line", xref="paper", x0=0, x1=1, yref="y", y0=1, y1=1, name="minimum",
                  line={"color": "#222222", "width": 1.5, "dash": "dash"})
    fig.add_annotation(text="minimum", xref="paper", x=1, xanchor="left", yref="y", y=0, showarrow=False,
                       font={"size": 11, "color": "#222222"}, name="minimum")  # y: log10(1)
    runs = list(df["run"].astype(str)) if "run" in df else []
    if len(set(runs)) > 1:  # a dotted line and the run's name where each run's bars start
        for i, run in enumerate(runs):
            if i == 0 or run != runs[i - 1]:
                if i:
                    fig.add_shape(type="line", xref="x", x0=i - 0.5, x1=i - 0.5, yref="paper", y0=0, y1=1,
                                  line={"color": "#999999", "width": 1, "dash": "dot"}, name=f"run:{run}")
                fig.add_annotation(text=run, xref="x", x=i - 0.5, xanchor="left", yref="paper", y=1,
                                   yanchor="top", showarrow=False, font={"size": 10, "color": "#555555"},
                                   name=f"run:{run}")
    notes = []
    if short_writes:  # DRAM below 1x reads as "better than the minimum" without this
        notes.append(f"DRAM writes below the minimum ({_names(short_writes, labels)}): the output was still "
                     "in L2 when the kernel ended and reached DRAM later, outside the kernel's counters. "
                     "Hover a bar for reads and writes apart.")
    if zero:
        notes.append(f"No bar where the counters saw 0 bytes ({_names(zero, zero + [''])}).")
    width = max(760, 220 + len(labels) * (14 * len(present) + 16))
    # short lines: a report shows two of these charts side by side at half its width (a longer line is cut)
    note_text = "<br>".join(wrap_html(t, 70) for t in notes)
    note_px = 15 * (note_text.count("<br>") + 1) if notes else 0
    if notes:  # between the title and the legend, which sits right above the plot
        fig.add_annotation(text=note_text, xref="paper", yref="paper", x=0, y=1, yshift=30, showarrow=False,
                           align="left", xanchor="left", yanchor="bottom", name="notes",
                           font={"size": 11, "color": "#555555"})
    head = wrap_html(title or "Traffic amplification per level: measured / minimum bytes", (width - 80) // 10)
    title_px = 22 * head.count("<br>")
    fig.update_layout(
        title={"text": head, "yref": "container", "y": 1, "yanchor": "top", "pad": {"t": 15}},
        barmode="group", template="plotly_white", width=width, height=680 + note_px + title_px,
        margin={"t": 85 + note_px + title_px, "r": 120},
        xaxis={"title": {"text": "config (variant shape dtype), by run then suite order"}, "tickangle": -90},
        yaxis={"type": "log", "range": [math.log10(y_lo), math.log10(y_hi)], "tickvals": ticks,
               "ticktext": [f"{v:g}x" for v in ticks],
               "title": {"text": "measured / minimum bytes (log scale; bar labels: the ratio)"}},
        legend={"orientation": "h", "x": 1, "xanchor": "right", "y": 1.0, "yanchor": "bottom"},
        showlegend=True,  # also for one level: the legend names it
    )
    return fig


def _names(names: Sequence[str], of: Sequence[str]) -> str:
    if len(names) == len(of):
        return "every config"
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def _times_text(x: float) -> str:
    return f"{x:.2f}x" if x == x else "-"


def _short_times(x: float) -> str:
    """A bar label: '144x', '16x', '2.2x', '1x', '0.52x'."""
    if x != x:
        return "-"
    return f"{x:.0f}x" if x >= 9.5 else f"{x:.2g}x"


def same_scale(*figs: go.Figure) -> None:
    """Give traffic figures one y axis (the union of their ranges, the ticks within it), so bars of a
    baseline and a run compare by height."""
    ranges = [f.layout.yaxis.range for f in figs if f.layout.yaxis.range is not None]
    if len(ranges) < 2:
        return
    lo, hi = min(r[0] for r in ranges), max(r[1] for r in ranges)
    ticks = [m * 10**e for e in range(-3, 6) for m in (1, 2, 5) if 10**lo <= m * 10**e <= 10**hi]
    for f in figs:
        f.update_yaxes(range=[lo, hi], tickvals=ticks, ticktext=[f"{v:g}x" for v in ticks])
