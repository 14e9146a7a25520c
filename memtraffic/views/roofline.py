"""Plotly figures over the analyzed table: a hierarchical roofline and measured-vs-minimum traffic bars.

Roofline, one point per config and memory level, one panel per level side by side: every point of a
config has the same performance (FLOPs / kernel time) and its own intensity (FLOPs / bytes moved at
that level), so a config's shift between the L1, L2 and DRAM panels shows how much traffic each cache
level absorbed. Colour = variant, symbol = dtype, fill = shape. Traffic bars: measured / minimum
bytes per level, on a log axis, so small and large runs read side by side.
FLOPs are the analytic model (`model_flops`), the same for every implementation of an op; the
hardware-counted FLOPs (`hw_flops`) are shown beside them in the hover when they were collected.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

import pandas as pd

from memtraffic.vocab.configs import SHIPPED_VARIANTS
from memtraffic.vocab.errors import ReportError, UsageError
from memtraffic.vocab.roofs import BANDWIDTH_OF_LEVEL, KINDS, ROOFS, RoofsEntry
from memtraffic.vocab.units import fmt_bytes, fmt_eff, fmt_rate, fmt_time

if TYPE_CHECKING:  # plotly is imported inside the functions: it is slow to import
    import plotly.graph_objects as go



class Point(TypedDict):
    """One marker of the roofline: a row of the analyzed table at one memory level (points_frame's rows)."""

    label: str
    variant: str
    shape: object  # as the table has them
    dtype: object
    op: object
    params: str
    level: str
    bytes: float
    min_bytes: float
    efficiency: float
    eff_l1_ld: float
    eff_l1_st: float
    time_ns: float
    flops: float
    hw_flops: float
    flops_per_s: float
    hw_flops_per_s: float
    intensity: float
    bandwidth_Bps: float
    hover: str


LEVELS = ("l1", "l2", "dram")
LEVEL_LABEL = {"l1": "L1", "l2": "L2", "dram": "DRAM"}
LEVEL_BYTES = {
    "l1": ("l1_ld_bytes", "l1_st_bytes"),
    "l2": ("l2_rd_bytes", "l2_wr_bytes"),
    "dram": ("dram_rd_bytes", "dram_wr_bytes"),
}
LEVEL_PARTS = {"l1": "ld+st", "l2": "rd+wr", "dram": "rd+wr"}
LEVEL_EFF_COLUMN = {"l2": "eff_l2", "dram": "eff_dram"}  # analyze's own; L1 ld+st is combined here
LEVEL_COLOR = {"l1": "#2ca02c", "l2": "#ff7f0e", "dram": "#1f77b4"}
KIND_DASH = {"measured": "solid", "ncu_theoretical": "dash"}

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


def _params_text(params: object) -> str:
    if isinstance(params, str):
        text = params
        try:
            params = json.loads(text)
        except json.JSONDecodeError:
            return text
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


def require_columns(df: pd.DataFrame, columns: Sequence[str], what: str) -> None:
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
    require_columns(df, needed, "roofline")
    labels = config_labels(df)
    time_ns = pd.to_numeric(df["time_ns"], errors="coerce")
    flops = pd.to_numeric(df["model_flops"], errors="coerce")
    bad = ~(time_ns > 0)
    if bad.any():
        raise ReportError(f"no kernel time (time_ns) for {_bad_rows(df, labels, bad)}: the roofline needs "
                          "the 'time' metric (gpu__time_duration.sum)")
    bad = ~(flops > 0)
    if bad.all():
        raise ReportError(f"no analytic FLOP count (model_flops) for {_bad_rows(df, labels, bad)}: the "
                          "roofline needs the op model's FLOPs, known for memtraffic runs but not for "
                          "reports captured by hand")
    # A traced program mixes ops with FLOP formulas (matmuls) and without (elementwise ones): the latter
    # have no place on a roofline, and are named in the notes.
    skipped = [f"{labels[i]}: no model FLOPs, not drawn" for i, b in enumerate(bad) if b]
    keep = ~bad
    df, labels, time_ns, flops = df[keep], [x for x, k in zip(labels, keep, strict=True) if k], \
        time_ns[keep], flops[keep]
    hw = pd.to_numeric(df["hw_flops"], errors="coerce") if "hw_flops" in df else pd.Series(math.nan, df.index)
    min_bytes = df["min_read_bytes"].astype(float) + df["min_write_bytes"].astype(float)
    rows: list[Point] = []  # the points table's rows (a DataFrame below)
    notes: list[str] = skipped
    for level in levels:
        nbytes = level_bytes(df, level)
        if nbytes.isna().all():  # the GPU has no counter for this level (DRAM on unified memory)
            notes.append(f"{LEVEL_LABEL[level]}: not measured on this GPU, no points")
            continue
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
            row: Point = {
                "label": labels[i], "variant": _text(df.at[idx, "variant"]), "shape": df.at[idx, "shape"],
                "dtype": df.at[idx, "dtype"], "op": df.at[idx, "op"] if "op" in df else "",
                "params": _params_text(df.at[idx, "params"]) if "params" in df else "",
                "level": level, "bytes": b, "min_bytes": min_bytes[idx], "efficiency": eff[idx],
                "eff_l1_ld": eff_ld[idx], "eff_l1_st": eff_st[idx],
                "time_ns": time_ns[idx], "flops": flops[idx], "hw_flops": hw[idx],
                "flops_per_s": flops[idx] / t_s, "hw_flops_per_s": hw[idx] / t_s,
                "intensity": flops[idx] / b, "bandwidth_Bps": b / t_s, "hover": "",
            }
            row["hover"] = point_hover(row)
            rows.append(row)
    out: pd.DataFrame = pd.DataFrame(rows)
    if out.empty:
        if "timing_only" in df and df["timing_only"].eq(True).any():  # memtraffic.analysis.timing_only_table
            raise ReportError("a timing-only run has no per-level bytes to place on a roofline: `memtraffic "
                              "analyze` shows each row's bandwidth at the minimum and its fraction of the "
                              "copy roof")
        raise ReportError("no level moved any bytes in these results: nothing to place on a roofline")
    out.attrs["notes"] = notes
    return out


def _text(x: object) -> str:
    return x if isinstance(x, str) else ""


def point_hover(p: Point) -> str:
    """The hover text of one roofline point; the numbers are formatted as in the tables."""
    hw = p["hw_flops"]
    hw_line = (f"hardware FLOPs: {p['hw_flops']:.4g} = {fmt_rate(p['hw_flops_per_s'], 'FLOP/s')} "
               "(fadd+fmul+2*ffma; no exp/tanh)" if hw == hw else "hardware FLOPs: not collected")
    params = f" [{p['params']}]" if p.get("params") else ""
    if p["level"] == "l1":  # analyze's own per-direction numbers, as its table shows them
        eff = f"efficiency ld {fmt_eff(p.get('eff_l1_ld'))} / st {fmt_eff(p.get('eff_l1_st'))}"
    else:
        eff = f"efficiency {fmt_eff(p['efficiency'])}"
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
    suffix: str = ""  # " - device" when several devices' roofs share a figure

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
                              f"{device_suffix}", bw=bw, cap=cap, suffix=device_suffix))
        bw_max = max(bws.values()) if bws else None
        for key, peak in peaks.items():
            roofs.append(Roof(key, kind, f"{ROOFS[key][0]} {fmt_rate(peak, 'FLOP/s')} ({kind_label})"
                              f"{device_suffix}", peak=peak, x_start=peak / bw_max if bw_max else None,
                              suffix=device_suffix))
    return roofs


def _x_grid(lo: float, hi: float, extra: Sequence[float]) -> list[float]:
    n = 60
    grid = [lo * (hi / lo) ** (i / (n - 1)) for i in range(n)]
    return sorted(set(grid) | {x for x in extra if lo <= x <= hi})


# ----------------------------------------------------------------------------------------------------
# Figures: what encodes what

ROOF_COLOR = "#444444"  # roofs are grey and labelled on the plot, so colour is free for the variants
# One colour per variant, by its place in kernels.VARIANTS: a variant keeps its colour in every figure
# whatever else is plotted, and one op's variants (neighbours there) get clearly different hues.
VARIANT_PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",  # softmax rows
    "#7f7f7f", "#bcbd22",  # softmax columns
    "#17becf", "#6a3d9a", "#e7ba52", "#000000",  # gelu
    "#a6761d", "#e7298a",  # matmul
    "#1b9e77", "#08306b",  # matmul_softmax
    "#c49c94", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#dbdb8d",  # variants not in the suite
)
DTYPE_SYMBOL = {"fp32": "circle", "bf16": "diamond", "fp16": "square", "fp64": "triangle-up"}
OTHER_SYMBOLS = ("triangle-down", "pentagon", "star", "hexagon", "cross")
# Several shapes of one op in a figure: its largest shape filled, the next open, then open with a dot.
FILL_STYLES = (("", "filled"), ("-open", "open"), ("-open-dot", "open with a dot"))
ROOFLINE_NOTE = ("Roofs: solid = measured, dashed = ncu theoretical. Hover a point for its shape, dtype, "
                 "parameters, bytes, time, FLOP/s and efficiency. ")


def variant_order(names: Iterable[str]) -> list[str]:
    """The variants among names, in the suite's order (kernels.VARIANTS), then others as they come."""
    seen = list(dict.fromkeys(names))
    suite = SHIPPED_VARIANTS
    return [v for v in suite if v in seen] + [v for v in seen if v not in suite]


def variant_colors(names: Iterable[str]) -> dict[str, str]:
    """variant -> colour; a suite variant's colour does not depend on what else is plotted."""
    suite = SHIPPED_VARIANTS
    others = [v for v in dict.fromkeys(names) if v not in suite]
    index = {v: i for i, v in enumerate(suite)} | {v: len(suite) + i for i, v in enumerate(others)}
    return {v: VARIANT_PALETTE[index[v] % len(VARIANT_PALETTE)] for v in dict.fromkeys(names)}


def dtype_symbols(dtypes: Iterable[str]) -> dict[str, str]:
    seen = list(dict.fromkeys(str(d) for d in dtypes))
    others = iter(OTHER_SYMBOLS * (1 + len(seen) // len(OTHER_SYMBOLS)))
    return {d: DTYPE_SYMBOL.get(d) or next(others) for d in seen}


def _elements(shape: str) -> float:
    try:
        return math.prod(int(p) for p in str(shape).lower().split("x"))
    except ValueError:
        return math.nan


def shape_fills(points: pd.DataFrame) -> dict[tuple[str, str], int]:
    """(op, shape) -> index into FILL_STYLES: per op, its shapes from the largest down."""
    out: dict[tuple[str, str], int] = {}
    ops = points["op"].astype(str) if "op" in points else pd.Series("", points.index)
    for op in dict.fromkeys(ops):
        shapes = list(dict.fromkeys(points.loc[ops == op, "shape"].astype(str)))
        shapes.sort(key=lambda s: -_elements(s) if _elements(s) == _elements(s) else 0)
        for i, s in enumerate(shapes):
            out[(op, s)] = min(i, len(FILL_STYLES) - 1)
    return out


def order_configs(df: pd.DataFrame) -> pd.DataFrame:
    """Rows by run (as given), then variant in the suite's order; otherwise as they were."""
    runs = df["run"].astype(str) if "run" in df else pd.Series("", df.index)
    run_rank = {r: i for i, r in enumerate(dict.fromkeys(runs))}
    names = [v if isinstance(v, str) else "" for v in df["variant"]]
    var_rank = {v: i for i, v in enumerate(variant_order(names))}
    key = [(run_rank[r], var_rank[v], i) for i, (r, v) in enumerate(zip(runs, names, strict=True))]
    ordered: pd.DataFrame = df.iloc[sorted(range(len(df)), key=key.__getitem__)]
    return ordered


# ----------------------------------------------------------------------------------------------------
# Figures


def roofline_figure(df: pd.DataFrame, entries: Sequence[RoofsEntry] = (),
                    levels: Sequence[str] = LEVELS, title: str | None = None) -> go.Figure:
    """Log-log roofline, one panel per memory level side by side (shared axes), one marker per config.

    Colour = variant, marker symbol = dtype, fill = shape (when an op comes in several shapes).
    Panels rather than one plot with a symbol per level: the symbol is taken by the dtype, and a panel
    per level carries only its own memory roofs, so a config's shift between panels is the traffic
    the cache above absorbed.
    """
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    points = roofline_points(df, levels)
    points["series"] = [v or lab for v, lab in zip(points["variant"], points["label"], strict=True)]
    panels = [lv for lv in levels if (points["level"] == lv).any()]
    compute_keys = compute_roofs_for(points)
    roofs_of: dict[str, list[Roof]] = {lv: [] for lv in panels}
    for entry in entries:
        suffix = f" - {entry['device']}" if len(entries) > 1 else ""
        for lv in panels:
            roofs_of[lv] += build_roofs(entry, [lv], compute_keys, suffix)
    roofs = [r for lv in panels for r in roofs_of[lv]]

    ridges = [r.cap / r.bw for r in roofs if r.bw and r.cap] + [r.x_start for r in roofs if r.x_start]
    xs = list(points["intensity"]) + ridges
    lo, hi = min(xs) / 4, max(xs) * 4
    ys = list(points["flops_per_s"]) + [r.peak or r.cap for r in roofs if r.peak or r.cap]
    y_lo, y_hi = min(points["flops_per_s"]) / 3, max(ys) * 5

    n = len(panels)
    width = 380 + (820 if n == 1 else 500 * n)
    fig = make_subplots(rows=1, cols=n, shared_yaxes=True, horizontal_spacing=0.03 if n > 1 else 0.0,
                        subplot_titles=[panel_title(lv, roofs_of[lv]) for lv in panels])
    order = variant_order(points["series"])
    colors = variant_colors(order)
    symbols = dtype_symbols(points["dtype"])
    fills = shape_fills(points)
    ops = points["op"].astype(str) if "op" in points else pd.Series("", points.index)
    points["symbol"] = [symbols[str(d)] + FILL_STYLES[fills[(op, str(s))]][0]
                        for d, op, s in zip(points["dtype"], ops, points["shape"], strict=True)]

    for col, lv in enumerate(panels, 1):
        axis = "" if col == 1 else str(col)
        if col == 1:  # the compute roofs are the same in every panel: labelled once
            for label in compute_labels(roofs_of[lv], lo, axis):
                fig.add_annotation(label)
        for r in roofs_of[lv]:
            start = r.x_start if r.x_start and r.x_start > lo else lo
            x = _x_grid(start, hi, ridges)
            fig.add_trace(go.Scatter(
                x=x, y=[r.y(v) for v in x], mode="lines", name=r.name, showlegend=False,
                line={"color": ROOF_COLOR, "dash": KIND_DASH[r.kind], "width": 1.5},
                hovertemplate=f"{r.name}<extra></extra>",
                meta={"roof": r.key, "kind": r.kind, "level": lv, "bw": r.bw, "cap": r.cap, "peak": r.peak},
            ), row=1, col=col)
        here = points[points["level"] == lv]
        for series in order:
            g = here[here["series"] == series]
            if g.empty:
                continue
            fig.add_trace(go.Scatter(
                x=list(g["intensity"]), y=list(g["flops_per_s"]), mode="markers", name=series,
                legendgroup=series, showlegend=False,
                marker={"symbol": list(g["symbol"]), "size": 10, "color": colors[series], "opacity": 0.9,
                        "line": {"width": [2 if "open" in m else 0.5 for m in g["symbol"]],
                                 "color": [colors[series] if "open" in m else "white" for m in g["symbol"]]}},
                text=list(g["hover"]), hovertemplate="%{text}<extra></extra>",
                meta={"variant": series, "level": lv, "configs": list(g["label"])},
            ), row=1, col=col)

    # The legend: one entry per variant (a click hides it in every panel), then the symbol keys.
    def key(name: str, symbol: str, color: str, group: str, group_title: str | None,
            meta: Mapping[str, object]) -> None:
        fig.add_trace(go.Scatter(
            x=[None], y=[None], mode="markers", name=name, legendgroup=group,
            legendgrouptitle_text=group_title,
            marker={"symbol": symbol, "size": 10, "color": color}, meta={"legend_only": True, **meta},
        ), row=1, col=1)

    for series in order:
        key(series, "circle", colors[series], series, None, {"variant": series})
    for i, (dtype, symbol) in enumerate(symbols.items()):
        key(dtype, symbol, "#777777", "dtype", "symbol = dtype" if i == 0 else None, {"dtype": dtype})
    used = sorted(set(fills.values()))
    if used != [0]:  # an op in several shapes: say which fill is which shape
        for i, fill in enumerate(used):
            shapes = ", ".join(dict.fromkeys(s for (_, s), f in fills.items() if f == fill))
            key(f"{FILL_STYLES[fill][1]}: {shapes}", "circle" + FILL_STYLES[fill][0], "#777777", "shape",
                "fill = shape (per op)" if i == 0 else None, {"fill": fill})

    devices = sorted({str(d) for d in df["device"].dropna()}) if "device" in df else []
    head = title or ("Hierarchical roofline" + (f" - {', '.join(devices)}" if devices else ""))
    if not roofs:
        head += " (no roofs known for this device: run 'memtraffic roofs' on it)"
    for col, lv in enumerate(panels, 1):
        text = (f"Arithmetic intensity [FLOP/byte] = model FLOPs / {LEVEL_LABEL[lv]} bytes" if n == 1
                else f"model FLOPs / {LEVEL_LABEL[lv]} bytes [FLOP/byte]")
        fig.update_xaxes(type="log", exponentformat="SI", range=[math.log10(lo), math.log10(hi)],
                         title={"text": text}, row=1, col=col)
    fig.update_yaxes(type="log", exponentformat="SI", tickformat="~s",
                     range=[math.log10(y_lo), math.log10(y_hi)])
    fig.update_yaxes(title={"text": "Performance [FLOP/s] = model FLOPs / kernel time"}, row=1, col=1)
    legend_rows = len(order) + len(symbols) + (len(used) if used != [0] else 0) + 3
    height = max(780, 270 + 21 * legend_rows)
    fig.update_layout(
        title={"text": head}, template="plotly_white", width=width, height=height,
        legend={"font": {"size": 11}, "title": {"text": "colour = variant"}, "tracegroupgap": 3,
                "itemclick": "toggle"},
        margin={"b": 150, "t": 110},
    )
    # Below the x-axis titles, in pixels from the plot area so it never overlaps them or gets clipped;
    # lines short enough for a page narrower than the figure (a report fits figures to the window).
    fig.add_annotation(text=wrap_html(ROOFLINE_NOTE + FLOPS_NOTE, 100),
                       xref="paper", yref="paper", x=0, y=0, yshift=-65, showarrow=False, align="left",
                       xanchor="left", yanchor="top", font={"size": 11, "color": "#555555"})
    return fig


def panel_title(level: str, roofs: Sequence[Roof]) -> str:
    """'DRAM (rd+wr) - roofs: 3.35 TB/s ncu theoretical, 3.00 TB/s measured': a panel's memory roofs
    are named in its title, the fastest first (the lines are told apart by their dash)."""
    memory = sorted((r for r in roofs if r.bw), key=lambda r: -(r.bw or 0))
    head = f"<b>{LEVEL_LABEL[level]}</b> ({LEVEL_PARTS[level]})"
    if not memory:
        return head
    rates = ", ".join(f"{fmt_rate(r.bw)} {KINDS[r.kind]}{r.suffix}" for r in memory)
    return f"{head}<br><span style='font-size:12px'>roof{'s' if len(memory) > 1 else ''}: {rates}</span>"


def compute_labels(roofs: Sequence[Roof], lo: float, axis: str = "") -> list[dict[str, object]]:
    """One label (a plotly annotation) per compute roof key, at the panel's left edge just above its highest
    line: above a roof and left of the memory slope, no point can be (log axes: annotations take log10
    positions)."""
    out = []
    compute = [r for r in roofs if r.peak]
    for key in dict.fromkeys(r.key for r in compute):
        same = sorted((r for r in compute if r.key == key), key=lambda r: -(r.peak or 0))
        lines = [ROOFS[key][0]] + [f"{fmt_rate(r.peak, 'FLOP/s')} {KINDS[r.kind]}{r.suffix}" for r in same]
        out.append({"xref": f"x{axis}", "yref": f"y{axis}", "x": math.log10(lo),
                    "y": math.log10(same[0].peak),  # type: ignore[arg-type]
                    "xanchor": "left", "yanchor": "bottom", "yshift": 1, "align": "left", "showarrow": False,
                    "text": "<br>".join(lines), "font": {"size": 10, "color": ROOF_COLOR},
                    "name": f"roof_label:{key}"})
    return out


def wrap_html(text: str, width: int) -> str:
    import textwrap

    return "<br>".join(textwrap.wrap(text, width))
