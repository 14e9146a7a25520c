"""Plotly figures over the analyzed table: a hierarchical roofline and measured-vs-minimum traffic bars.

Roofline, one point per config and memory level: every point of a config has the same performance
(FLOPs / kernel time) and its own intensity (FLOPs / bytes moved at that level), so the distance
between a config's L1, L2 and DRAM points shows how much traffic each cache level absorbed.
FLOPs are the analytic model (`model_flops`), the same for every implementation of an op; the
hardware-counted FLOPs (`hw_flops`) are shown beside them in the hover when they were collected.
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from memtraffic.ceilings import BANDWIDTH_OF_LEVEL, KINDS, ROOFS
from memtraffic.exceptions import ReportError, UsageError
from memtraffic.units import fmt_bytes, fmt_rate, fmt_time

if TYPE_CHECKING:  # plotly is imported inside the functions: it is slow to import
    import plotly.graph_objects as go

LEVELS = ("l1", "l2", "dram")
LEVEL_LABEL = {"l1": "L1", "l2": "L2", "dram": "DRAM"}
LEVEL_BYTES = {
    "l1": ("l1_ld_bytes", "l1_st_bytes"),
    "l2": ("l2_rd_bytes", "l2_wr_bytes"),
    "dram": ("dram_rd_bytes", "dram_wr_bytes"),
}
LEVEL_PARTS = {"l1": "ld+st", "l2": "rd+wr", "dram": "rd+wr"}
LEVEL_EFF_COLUMN = {"l2": "eff_l2", "dram": "eff_dram"}  # analyze's own; L1 ld+st is combined here
LEVEL_SYMBOL = {"l1": "circle", "l2": "square", "dram": "diamond"}
LEVEL_COLOR = {"l1": "#2ca02c", "l2": "#ff7f0e", "dram": "#1f77b4"}
COMPUTE_COLOR = {"fp32_flops": "#444444", "bf16_tc_flops": "#9467bd", "fp16_tc_flops": "#8c564b"}
KIND_DASH = {"measured": "solid", "ncu_theoretical": "dash"}
# Config markers: plotly's Dark24 without the colours near the roofs' (blue, green, orange, greys, purple),
# so a config's points are never mistaken for a level's roof.
CONFIG_PALETTE = ("#E15F99", "#FB0D0D", "#DA16FF", "#750D86", "#511CFB", "#00A08B", "#FB00D1", "#B2828D",
                  "#862A16", "#620042", "#1616A7", "#DA60CA", "#6C4516", "#0D2A63", "#AF0038")

FLOPS_NOTE = (
    "FLOPs are the analytic model (model_flops), the same for every implementation of an op. "
    "Hardware-counted FLOPs (fadd + fmul + 2*ffma), shown in the hover when collected, cover FP32 "
    "add/mul/FMA instructions only: exp, tanh and other special-function (MUFU) work is not in the "
    "counters, and neither is tensor-core math."
)


# ----------------------------------------------------------------------------------------------------
# Data


def parse_levels(text: str) -> tuple[str, ...]:
    """'all' -> (l1, l2, dram); 'dram' -> (dram,); 'l2,dram' -> (l2, dram)."""
    if text.strip().lower() == "all":
        return LEVELS
    levels = tuple(p.strip().lower() for p in text.split(",") if p.strip())
    bad = [lv for lv in levels if lv not in LEVELS]
    if bad or not levels:
        raise UsageError(f"unknown level {', '.join(bad) or text!r}: use dram, l2, l1 or all")
    return tuple(lv for lv in LEVELS if lv in levels)


def _params_text(params: Any) -> str:
    if isinstance(params, str):
        try:
            params = json.loads(params)
        except json.JSONDecodeError:
            return params
    if isinstance(params, Mapping):
        return ",".join(f"{k}={v}" for k, v in params.items())
    return "" if params is None or (isinstance(params, float) and math.isnan(params)) else str(params)


def config_labels(df: pd.DataFrame) -> list[str]:
    """'variant shape dtype K=V' as analyze's table names rows (K=V: the parameters the user set, from the
    range name); all params, then the run, are appended only where rows still look alike. Rows without a
    variant (reports captured by hand) are named by their NVTX range."""
    base = []
    for r in df.to_dict("records"):
        if isinstance(r.get("variant"), str) and r["variant"]:
            parts = str(r.get("range") or "").split("|")
            explicit = parts[4] if len(parts) >= 5 else ""
            base.append(" ".join(p for p in (r["variant"], str(r.get("shape", "")), str(r.get("dtype", "")),
                                             explicit) if p))
        else:
            base.append(str(r.get("range") or "?"))
    if len(set(base)) < len(base) and "params" in df:
        params = [_params_text(x) for x in df["params"]]
        base = [b + (f" [{p}]" if p else "") for b, p in zip(base, params, strict=True)]
    if len(set(base)) < len(base) and "run" in df:
        base = [f"{b} ({run})" for b, run in zip(base, df["run"], strict=True)]
    if len(set(base)) < len(base):  # still ambiguous: number them so no point hides another's legend entry
        base = [f"{b} #{i}" for i, b in enumerate(base)]
    return base


def _require(df: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ReportError(
            f"the {what} needs {', '.join(missing)}, missing from the analyzed results: measure with the "
            "'roofline' metric set (time, traffic and FLOP counters) and analyze again"
        )


def _bad_rows(df: pd.DataFrame, labels: list[str], mask: pd.Series) -> str:
    names = [lab for lab, bad in zip(labels, mask, strict=True) if bad]
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def level_bytes(df: pd.DataFrame, level: str) -> pd.Series:
    a, b = LEVEL_BYTES[level]
    return df[a].astype(float) + df[b].astype(float)


def roofline_points(df: pd.DataFrame, levels: Sequence[str] = LEVELS) -> pd.DataFrame:
    """One row per config and level: intensity, FLOP/s, bytes, efficiency and the hover text.

    Raises ReportError when time or model FLOPs are missing. A level with zero bytes (all traffic
    absorbed above it) has no finite intensity: that point is left out and listed in attrs['notes'].
    """
    if df.empty:
        raise ReportError("the analyzed results hold no rows: nothing to plot")
    needed = ["variant", "shape", "dtype", "time_ns", "model_flops", "min_read_bytes", "min_write_bytes"]
    needed += [c for lv in levels for c in LEVEL_BYTES[lv]]
    _require(df, needed, "roofline")
    labels = config_labels(df)
    time_ns = pd.to_numeric(df["time_ns"], errors="coerce")
    flops = pd.to_numeric(df["model_flops"], errors="coerce")
    bad = ~(time_ns > 0)
    if bad.any():
        raise ReportError(f"no kernel time (time_ns) for {_bad_rows(df, labels, bad)}: the roofline needs "
                          "the 'time' metric (gpu__time_duration.sum)")
    bad = ~(flops > 0)
    if bad.any():
        raise ReportError(f"no analytic FLOP count (model_flops) for {_bad_rows(df, labels, bad)}: the "
                          "roofline needs the op model's FLOPs, known for memtraffic runs but not for "
                          "reports captured by hand")
    hw = pd.to_numeric(df["hw_flops"], errors="coerce") if "hw_flops" in df else pd.Series(math.nan, df.index)
    min_bytes = df["min_read_bytes"].astype(float) + df["min_write_bytes"].astype(float)
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    for level in levels:
        nbytes = level_bytes(df, level)
        eff = (pd.to_numeric(df[LEVEL_EFF_COLUMN[level]], errors="coerce").astype(float)
               if level in LEVEL_EFF_COLUMN and LEVEL_EFF_COLUMN[level] in df else min_bytes / nbytes)
        eff_ld, eff_st = (pd.to_numeric(df[c], errors="coerce").astype(float) if c in df
                          else pd.Series(math.nan, df.index) for c in ("eff_l1_ld", "eff_l1_st"))
        for i, idx in enumerate(df.index):
            b = nbytes[idx]
            if not (b > 0):
                notes.append(f"{labels[i]}: no {LEVEL_LABEL[level]} point ({fmt_bytes(b)} moved there)")
                continue
            t_s = time_ns[idx] * 1e-9
            row = {
                "label": labels[i], "variant": _text(df.at[idx, "variant"]), "shape": df.at[idx, "shape"],
                "dtype": df.at[idx, "dtype"], "op": df.at[idx, "op"] if "op" in df else "",
                "params": _params_text(df.at[idx, "params"]) if "params" in df else "",
                "level": level, "bytes": b, "min_bytes": min_bytes[idx], "efficiency": eff[idx],
                "eff_l1_ld": eff_ld[idx], "eff_l1_st": eff_st[idx],
                "time_ns": time_ns[idx], "flops": flops[idx], "hw_flops": hw[idx],
                "flops_per_s": flops[idx] / t_s, "hw_flops_per_s": hw[idx] / t_s,
                "intensity": flops[idx] / b, "bandwidth_Bps": b / t_s,
            }
            row["hover"] = point_hover(row)
            rows.append(row)
    out = pd.DataFrame(rows)
    if out.empty:
        raise ReportError("no level moved any bytes in these results: nothing to place on a roofline")
    out.attrs["notes"] = notes
    return out


def _text(x: Any) -> str:
    return x if isinstance(x, str) else ""


def _eff(x: Any) -> str:
    """Efficiencies as analyze's table prints them: two decimals, '-' when unknown."""
    return f"{float(x):.2f}" if x is not None and math.isfinite(float(x)) else "-"


def point_hover(p: Mapping[str, Any]) -> str:
    """The hover text of one roofline point; the numbers are formatted as in the tables."""
    hw = p["hw_flops"]
    hw_line = (f"hardware FLOPs: {p['hw_flops']:.4g} = {fmt_rate(p['hw_flops_per_s'], 'FLOP/s')} "
               "(fadd+fmul+2*ffma; no exp/tanh)" if hw == hw else "hardware FLOPs: not collected")
    params = f" [{p['params']}]" if p.get("params") else ""
    if p["level"] == "l1":  # analyze's own per-direction numbers, as its table shows them
        eff = f"efficiency ld {_eff(p.get('eff_l1_ld'))} / st {_eff(p.get('eff_l1_st'))}"
    else:
        eff = f"efficiency {_eff(p['efficiency'])}"
    name = (f"<b>{p['variant']}</b> {p['shape']} {p['dtype']}{params}" if p["variant"]
            else f"<b>{p['label']}</b>")
    return "<br>".join([
        name,
        f"level: {LEVEL_LABEL[p['level']]} ({LEVEL_PARTS[p['level']]})",
        f"bytes: {fmt_bytes(p['bytes'])} (minimum {fmt_bytes(p['min_bytes'])}, {eff})",
        f"time: {fmt_time(p['time_ns'])}",
        f"model FLOPs: {p['flops']:.4g} = {fmt_rate(p['flops_per_s'], 'FLOP/s')}",
        hw_line,
        f"intensity: {p['intensity']:.3g} FLOP/byte",
        f"bandwidth at this level: {fmt_rate(p['bandwidth_Bps'])}",
    ])


# ----------------------------------------------------------------------------------------------------
# Roofs


@dataclass(frozen=True)
class Roof:
    """A memory roof (bw set: y = min(cap, bw * x)) or a compute roof (peak set: y = peak from x_start)."""

    key: str
    kind: str  # measured | ncu_theoretical
    name: str
    bw: float | None = None
    cap: float | None = None  # memory roofs stop at the highest compute roof of their kind
    peak: float | None = None
    x_start: float | None = None  # compute roofs start at their ridge with the fastest memory roof

    def y(self, x: float) -> float:
        if self.bw is not None:
            return min(self.cap, self.bw * x) if self.cap is not None else self.bw * x
        return self.peak  # type: ignore[return-value]


def compute_roofs_for(points: pd.DataFrame) -> list[str]:
    """FP32 CUDA-core roof always; a tensor-core roof where a matmul of that dtype is plotted."""
    keys = ["fp32_flops"]
    mm = points[points["op"].astype(str).str.contains("matmul")] if "op" in points else points.iloc[0:0]
    for dtype, key in (("bf16", "bf16_tc_flops"), ("fp16", "fp16_tc_flops")):
        if (mm["dtype"] == dtype).any():
            keys.append(key)
    return keys


def build_roofs(entry: Mapping[str, Any] | None, levels: Sequence[str], compute_keys: Sequence[str],
                device_suffix: str = "") -> list[Roof]:
    roofs: list[Roof] = []
    if not entry:
        return roofs
    for kind, kind_label in KINDS.items():
        values = entry.get(kind) or {}
        peaks = {k: float(values[k]) for k in compute_keys if values.get(k)}
        bws = {lv: float(values[key]) for lv in levels if values.get(key := BANDWIDTH_OF_LEVEL[lv])}
        cap = max(peaks.values()) if peaks else None
        for lv, bw in bws.items():
            roofs.append(Roof(BANDWIDTH_OF_LEVEL[lv], kind, f"{LEVEL_LABEL[lv]} {fmt_rate(bw)} ({kind_label})"
                              f"{device_suffix}", bw=bw, cap=cap))
        bw_max = max(bws.values()) if bws else None
        for key, peak in peaks.items():
            roofs.append(Roof(key, kind, f"{ROOFS[key][0]} {fmt_rate(peak, 'FLOP/s')} ({kind_label})"
                              f"{device_suffix}", peak=peak, x_start=peak / bw_max if bw_max else None))
    return roofs


def _x_grid(lo: float, hi: float, extra: Sequence[float]) -> list[float]:
    n = 60
    grid = [lo * (hi / lo) ** (i / (n - 1)) for i in range(n)]
    return sorted(set(grid) | {x for x in extra if lo <= x <= hi})


# ----------------------------------------------------------------------------------------------------
# Figures


def roofline_figure(df: pd.DataFrame, ceilings: Sequence[Mapping[str, Any]] = (),
                    levels: Sequence[str] = LEVELS, title: str | None = None) -> go.Figure:
    """Log-log hierarchical roofline: roofs from each ceilings entry, one marker per config and level."""
    import plotly.graph_objects as go

    points = roofline_points(df, levels)
    compute_keys = compute_roofs_for(points)
    roofs: list[Roof] = []
    for entry in ceilings:
        suffix = f" - {entry['device']}" if len(ceilings) > 1 else ""
        roofs += build_roofs(entry, levels, compute_keys, suffix)

    ridges = [r.cap / r.bw for r in roofs if r.bw and r.cap] + [r.x_start for r in roofs if r.x_start]
    xs = list(points["intensity"]) + ridges
    lo, hi = min(xs) / 4, max(xs) * 4
    fig = go.Figure()
    for r in roofs:
        start = r.x_start if r.x_start and r.x_start > lo else lo
        x = _x_grid(start, hi, ridges)
        color = LEVEL_COLOR.get(next((lv for lv, k in BANDWIDTH_OF_LEVEL.items() if k == r.key), ""),
                                COMPUTE_COLOR.get(r.key, "#444444"))
        fig.add_trace(go.Scatter(
            x=x, y=[r.y(v) for v in x], mode="lines", name=r.name,
            line={"color": color, "dash": KIND_DASH[r.kind], "width": 2},
            hovertemplate=f"{r.name}<extra></extra>",
            meta={"roof": r.key, "kind": r.kind, "bw": r.bw, "cap": r.cap, "peak": r.peak},
        ))
    palette = CONFIG_PALETTE
    for i, (label, group) in enumerate(points.groupby("label", sort=False)):
        fig.add_trace(go.Scatter(
            x=list(group["intensity"]), y=list(group["flops_per_s"]), mode="lines+markers", name=label,
            marker={"symbol": [LEVEL_SYMBOL[lv] for lv in group["level"]], "size": 11,
                    "color": palette[i % len(palette)], "line": {"width": 1, "color": "white"}},
            line={"dash": "dot", "width": 1, "color": palette[i % len(palette)]},
            text=list(group["hover"]), hovertemplate="%{text}<extra></extra>",
            meta={"config": label, "levels": list(group["level"])},
        ))
    for lv in levels:  # legend entries explaining the marker shapes
        fig.add_trace(go.Scatter(
            x=[None], y=[None], mode="markers", name=f"{LEVEL_LABEL[lv]} point ({LEVEL_SYMBOL[lv]})",
            marker={"symbol": LEVEL_SYMBOL[lv], "size": 10, "color": "#888888"}, legendgroup="levels",
            meta={"legend_only": True},
        ))
    devices = sorted({str(d) for d in df["device"].dropna()}) if "device" in df else []
    head = title or ("Hierarchical roofline" + (f" - {', '.join(devices)}" if devices else ""))
    if not roofs:
        head += " (no ceilings known for this device: run 'memtraffic ceilings' on it)"
    fig.update_layout(
        title={"text": head},
        xaxis={"type": "log", "exponentformat": "SI",
               "title": {"text": "Arithmetic intensity [FLOP/byte] = model FLOPs / bytes at the level"}},
        yaxis={"type": "log", "exponentformat": "SI",
               "title": {"text": "Performance [FLOP/s] = model FLOPs / kernel time"}},
        legend={"font": {"size": 11}},
        template="plotly_white", height=700,
        margin={"b": 170},
    )
    # Below the x-axis title, in pixels from the plot area so it never overlaps or gets clipped.
    fig.add_annotation(text=_wrap("Roofs: solid = measured, dashed = ncu theoretical. " + FLOPS_NOTE, 130),
                       xref="paper", yref="paper", x=0, y=0, yshift=-70, showarrow=False, align="left",
                       xanchor="left", yanchor="top", font={"size": 11, "color": "#555555"})
    return fig


def _wrap(text: str, width: int) -> str:
    import textwrap

    return "<br>".join(textwrap.wrap(text, width))


def traffic_figure(df: pd.DataFrame, levels: Sequence[str] = LEVELS) -> go.Figure:
    """Grouped bars per config: the minimum bytes beside the bytes each level moved (read + write)."""
    import plotly.graph_objects as go

    if df.empty:
        raise ReportError("the analyzed results hold no rows: nothing to plot")
    _require(df, ["variant", "shape", "dtype", "min_read_bytes", "min_write_bytes"], "traffic chart")
    present = [lv for lv in levels if all(c in df for c in LEVEL_BYTES[lv])]
    if not present:
        _require(df, LEVEL_BYTES[levels[0]], "traffic chart")
    labels = config_labels(df)
    min_r, min_w = df["min_read_bytes"].astype(float), df["min_write_bytes"].astype(float)
    minimum = min_r + min_w
    fig = go.Figure()
    fig.add_trace(go.Bar(
        x=labels, y=list(minimum), name="minimum (read + write)", marker_color="#bbbbbb",
        text=["min"] * len(labels), textposition="outside",
        hovertext=[f"<b>{lab}</b><br>minimum: {fmt_bytes(m)} (read {fmt_bytes(r)}, write {fmt_bytes(w)})"
                   for lab, m, r, w in zip(labels, minimum, min_r, min_w, strict=True)],
        hoverinfo="text", meta={"level": "minimum"},
    ))
    short_writes: list[str] = []
    for lv in present:
        a, b = LEVEL_BYTES[lv]
        part_a, part_b = df[a].astype(float), df[b].astype(float)
        total = part_a + part_b
        amp = total / minimum
        # Per direction too: a total can hide loads far above the minimum behind writes below it.
        amp_a, amp_b = part_a / min_r.where(min_r > 0), part_b / min_w.where(min_w > 0)
        fig.add_trace(go.Bar(
            x=labels, y=list(total), name=f"{LEVEL_LABEL[lv]} {LEVEL_PARTS[lv]}",
            marker_color=LEVEL_COLOR[lv],
            text=[f"{v:.2f}x" if v == v else "-" for v in amp], textposition="outside",
            hovertext=[
                f"<b>{lab}</b><br>{LEVEL_LABEL[lv]}: {fmt_bytes(t)} ({a.split('_')[1]} {fmt_bytes(x)}, "
                f"{b.split('_')[1]} {fmt_bytes(y)})<br>{v:.2f}x the minimum {fmt_bytes(m)}"
                f"<br>{a.split('_')[1]} {_times_text(ra)}, {b.split('_')[1]} {_times_text(rb)} the minimum "
                "of that direction"
                for lab, t, x, y, v, m, ra, rb in zip(labels, total, part_a, part_b, amp, minimum, amp_a,
                                                      amp_b, strict=True)
            ],
            hoverinfo="text", meta={"level": lv},
        ))
        if lv == "dram":
            short_writes = [lab for lab, w in zip(labels, amp_b, strict=True) if w < 0.9]
    fig.update_layout(
        title={"text": "Bytes moved at each level vs the minimum (labels: times the minimum)"},
        barmode="group", template="plotly_white", height=520, yaxis_exponentformat="SI",
        xaxis={"title": {"text": "config (variant shape dtype)"}},
        yaxis={"title": {"text": "bytes moved, read + write [byte]"}},
    )
    if short_writes:  # DRAM below 1.00x reads as "better than the minimum" without this
        names = ("every config" if len(short_writes) == len(labels) else ", ".join(short_writes[:3])
                 + (f" and {len(short_writes) - 3} more" if len(short_writes) > 3 else ""))
        fig.add_annotation(
            text=_wrap(f"DRAM writes below the minimum ({names}): the output was still in L2 when the kernel "
                       "ended and reached DRAM later, outside the kernel's counters. Hover a bar for reads "
                       "and writes apart.", 150),
            xref="paper", yref="paper", x=0, y=1.0, yshift=8, showarrow=False, align="left", xanchor="left",
            yanchor="bottom", font={"size": 11, "color": "#555555"}, name="dram_writes_note")
    return fig


def _times_text(x: float) -> str:
    return f"{x:.2f}x" if x == x else "-"


# ----------------------------------------------------------------------------------------------------
# Output


def figures_html(figs: Sequence[go.Figure]) -> list[str]:
    """HTML fragments; the first carries plotly.js inline so the page works offline."""
    return [f.to_html(full_html=False, include_plotlyjs=(i == 0), config={"displaylogo": False})
            for i, f in enumerate(figs)]


def write_html(figs: Sequence[go.Figure], path: Path, title: str, notes: Sequence[str] = ()) -> Path:
    """A self-contained page holding the figures (no network needed to open it)."""
    import html

    body = "\n".join(f"<div class='fig'>{frag}</div>" for frag in figures_html(figs))
    note_html = "".join(f"<li>{html.escape(n)}</li>" for n in notes)
    page = (f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>{html.escape(title)}</title></head>"
            f"<body style='font-family:sans-serif;margin:1em 2em'>\n<h1>{html.escape(title)}</h1>\n{body}\n"
            + (f"<ul>{note_html}</ul>" if notes else "") + "</body></html>\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
    return path


def write_png(fig: go.Figure, path: Path, width: int = 1200, height: int = 700) -> Path:
    """Static PNG through kaleido 1.x, which drives a Chromium; say which piece is missing if it fails."""
    try:
        import kaleido  # noqa: F401
    except ImportError:
        raise ReportError("PNG export needs the kaleido package (pip install 'kaleido>=1') and a Chromium "
                          "browser (Debian: apt-get install chromium); HTML output works without them"
                          ) from None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.write_image(str(path), width=width, height=height, scale=1)
    except Exception as err:  # kaleido/choreographer raise plain RuntimeErrors
        text = " ".join(str(err).split())
        if "chrome" in text.lower() or "chromium" in text.lower() or "browser" in text.lower():
            names = ("chromium", "chromium-browser", "google-chrome")
            found = next((p for n in names if (p := shutil.which(n))), None)
            raise ReportError(
                "PNG export needs a Chromium or Chrome browser for kaleido and "
                + (f"the one at {found} failed to start" if found else "none was found")
                + ": install Debian's 'chromium' package (apt-get install -y chromium), or point "
                "BROWSER_PATH at one; HTML output works without it"
            ) from None
        raise ReportError(f"PNG export to {path} failed: {type(err).__name__}: {text[:300]}") from None
    return path
