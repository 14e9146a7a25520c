"""roofline.py: what the figures show, recomputed here from the input table and roofs."""

import math
import re
import shutil
import struct
import sys

import pandas as pd
import pytest
from results_fixture import ROOFS_ENTRY, results, write_roofs, write_run
from typer.testing import CliRunner

from memtraffic.cli import app
from memtraffic.views import figure_files as figure_files
from memtraffic.views import roofline as rf
from memtraffic.views.figure_files import write_html, write_png
from memtraffic.views.traffic_chart import traffic_figure
from memtraffic.vocab.errors import ReportError, UsageError
from memtraffic.vocab.units import fmt_bytes, fmt_rate, fmt_time

LEVEL_COLUMNS = {"l1": ("l1_ld_bytes", "l1_st_bytes"), "l2": ("l2_rd_bytes", "l2_wr_bytes"),
                 "dram": ("dram_rd_bytes", "dram_wr_bytes")}


def _roofs(fig):
    return [t for t in fig.data if t.meta and "roof" in t.meta]


def _points(fig):
    """(variant, level) -> the trace of that variant's points in that level's panel."""
    return {(t.meta["variant"], t.meta["level"]): t for t in fig.data
            if t.meta and "level" in t.meta and "roof" not in t.meta}


def _legend(fig):
    return [t for t in fig.data if t.meta and t.meta.get("legend_only")]


def _panel_axes(fig):
    """level -> (xaxis, yaxis) layout objects, from the panels' point traces."""
    out = {}
    for t in fig.data:
        if t.meta and "level" in t.meta:
            x, y = t.xaxis or "x", t.yaxis or "y"
            out[t.meta["level"]] = (fig.layout[x.replace("x", "xaxis")], fig.layout[y.replace("y", "yaxis")])
    return out


def _point(fig, label, level):
    """(x, y, symbol, hover) of one config's point in one panel."""
    for t in _points(fig).values():
        if t.meta["level"] == level and label in t.meta["configs"]:
            i = t.meta["configs"].index(label)
            return t.x[i], t.y[i], t.marker.symbol[i], t.text[i]
    raise KeyError((label, level))


def _suite_table():
    """The fixture's rows renamed to suite variants, out of suite order, plus a second shape of one op."""
    df = results()
    df["variant"] = ["softmax_tiled", "softmax_naive", "matmul_torch"]
    df["range"] = [r.replace(old, new) for r, old, new in zip(
        df["range"], ["softmax_rows"] * 2 + ["torch_matmul"], df["variant"], strict=True)]
    small = df.iloc[[1]].assign(shape="64x2", range="mt|softmax_naive|64x2|fp32|")
    return pd.concat([df, small], ignore_index=True)


def test_axes_are_log_and_labelled_with_units():
    fig = rf.roofline_figure(results(), [ROOFS_ENTRY], levels=("dram",))
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    assert "[FLOP/byte]" in fig.layout.xaxis.title.text and "model FLOPs" in fig.layout.xaxis.title.text
    assert "[FLOP/s]" in fig.layout.yaxis.title.text
    note = " ".join(a.text for a in fig.layout.annotations).replace("<br>", " ")
    assert "analytic model (model_flops)" in note
    assert "exp, tanh and other special-function (MUFU) work is not in the counters" in note
    assert "solid = measured, dashed = ncu theoretical" in note


def test_levels_are_side_by_side_panels_on_common_log_axes():
    fig = rf.roofline_figure(results(), [ROOFS_ENTRY])
    axes = _panel_axes(fig)
    assert list(axes) == ["l1", "l2", "dram"]
    domains = [axes[lv][0].domain for lv in ("l1", "l2", "dram")]
    assert all(a[1] <= b[0] for a, b in zip(domains, domains[1:], strict=False))  # left to right, no overlap
    for xaxis, yaxis in axes.values():
        assert xaxis.type == "log" and yaxis.type == "log"
        assert tuple(xaxis.range) == tuple(axes["l1"][0].range)  # one intensity scale for every level
        assert tuple(yaxis.range) == tuple(axes["l1"][1].range)
    for lv, name in (("l1", "L1"), ("l2", "L2"), ("dram", "DRAM")):
        assert f"model FLOPs / {name} bytes [FLOP/byte]" in axes[lv][0].title.text
    titles = [a.text for a in fig.layout.annotations]
    assert "<b>L2</b> (rd+wr)<br><span style='font-size:12px'>roofs: 5.00 TB/s ncu theoretical, " \
           "4.00 TB/s measured</span>" in titles
    assert any(t.startswith("<b>L1</b> (ld+st)") and "roof: 10.00 TB/s ncu theoretical" in t for t in titles)


def test_roof_values_are_min_of_peak_and_bandwidth_times_intensity():
    fig = rf.roofline_figure(results(), [ROOFS_ENTRY])
    roofs = _roofs(fig)
    # The table holds a bf16 matmul, so the bf16 tensor-core roof is drawn; no fp16 matmul, no fp16 roof.
    # Each panel draws its own level's memory roofs and every compute roof.
    compute = {("measured", "fp32_flops"), ("measured", "bf16_tc_flops"), ("ncu_theoretical", "fp32_flops")}
    shown = {(t.meta["level"], t.meta["kind"], t.meta["roof"]) for t in roofs}
    assert shown == {(lv, k, r) for lv in ("l1", "l2", "dram") for k, r in compute} | {
        ("dram", "measured", "dram_Bps"), ("dram", "ncu_theoretical", "dram_Bps"),
        ("l2", "measured", "l2_Bps"), ("l2", "ncu_theoretical", "l2_Bps"),
        ("l1", "ncu_theoretical", "l1_Bps"),
    }
    cap = {"measured": max(ROOFS_ENTRY["measured"]["fp32_flops"], ROOFS_ENTRY["measured"]["bf16_tc_flops"]),
           "ncu_theoretical": ROOFS_ENTRY["ncu_theoretical"]["fp32_flops"]}
    level_key = {"l1": "l1_Bps", "l2": "l2_Bps", "dram": "dram_Bps"}
    lo = _panel_axes(fig)["l1"][0].range[0]
    for t in roofs:
        kind, key, lv = t.meta["kind"], t.meta["roof"], t.meta["level"]
        value = ROOFS_ENTRY[kind][key]
        assert t.line.dash == ("solid" if kind == "measured" else "dash")
        assert len(t.x) > 20 and not t.showlegend  # roofs are labelled on the plot, not in the legend
        for x, y in zip(t.x, t.y, strict=True):
            want = min(cap[kind], value * x) if key.endswith("_Bps") else value
            assert y == pytest.approx(want, rel=1e-12)
        if not key.endswith("_Bps"):  # compute roofs start at their ridge with the panel's memory roof
            bw = ROOFS_ENTRY[kind].get(level_key[lv])
            assert math.log10(t.x[0]) == pytest.approx(math.log10(value / bw) if bw else lo)
    # The ridge point lies exactly on the grid, so the corner is drawn sharp.
    dram = next(t for t in roofs if (t.meta["level"], t.meta["kind"], t.meta["roof"])
                == ("dram", "measured", "dram_Bps"))
    assert any(x == pytest.approx(cap["measured"] / ROOFS_ENTRY["measured"]["dram_Bps"]) for x in dram.x)
    # Compute roofs are labelled once, in the first panel, just above their highest line.
    labels = {a.name: a for a in fig.layout.annotations if (a.name or "").startswith("roof_label:")}
    assert set(labels) == {"roof_label:fp32_flops", "roof_label:bf16_tc_flops"}
    fp32 = labels["roof_label:fp32_flops"]
    assert fp32.text == "FP32 FMA, CUDA cores<br>30.00 TFLOP/s ncu theoretical<br>20.00 TFLOP/s measured"
    assert fp32.y == pytest.approx(math.log10(3e13)) and fp32.yanchor == "bottom" and fp32.xref == "x"


def test_points_placed_from_the_table():
    df = results()
    fig = rf.roofline_figure(df, [ROOFS_ENTRY])
    labels = rf.config_labels(df)
    assert labels[0] == "softmax_rows 1024x2 fp32 ROWS=1"  # as analyze names it: the parameters set by hand
    assert set(_points(fig)) == {(v, lv) for v in ("softmax_rows", "torch_matmul") for lv in rf.LEVELS}
    for label, r in zip(labels, df.to_dict("records"), strict=True):
        perf = r["model_flops"] / (r["time_ns"] * 1e-9)
        for lv, (a, b) in LEVEL_COLUMNS.items():
            x, y, _, _ = _point(fig, label, lv)
            assert x == pytest.approx(r["model_flops"] / (r[a] + r[b]))
            assert y == pytest.approx(perf)


def test_colour_is_the_variant_symbol_the_dtype_fill_the_shape():
    df = _suite_table()
    fig = rf.roofline_figure(df, [ROOFS_ENTRY])
    points = _points(fig)
    colors = {v: {points[(v, lv)].marker.color for lv in rf.LEVELS} for v, _ in points}
    assert all(len(c) == 1 for c in colors.values())  # one colour per variant, in every panel
    assert len({c.pop() for c in colors.values()}) == 3
    # The same variant keeps its colour whatever else is plotted.
    alone = rf.roofline_figure(df[df["variant"] == "matmul_torch"], [ROOFS_ENTRY])
    same = _points(alone)[("matmul_torch", "dram")].marker.color
    assert same == points[("matmul_torch", "dram")].marker.color
    labels = rf.config_labels(df)
    assert _point(fig, labels[0], "l1")[2] == "circle"  # fp32, softmax's largest shape: filled
    assert _point(fig, labels[2], "l2")[2] == "diamond"  # bf16 (matmul has one shape: filled)
    assert _point(fig, labels[3], "dram")[2] == "circle-open"  # softmax's smaller shape 64x2: open
    # The legend: the variants in suite order (kernels.VARIANTS), then the symbol and fill keys.
    legend = _legend(fig)
    assert [t.name for t in legend] == ["softmax_naive", "softmax_tiled", "matmul_torch", "fp32", "bf16",
                                        "filled: 1024x2, 64x64x64", "open: 64x2"]
    assert [t.legendgrouptitle.text for t in legend if t.legendgrouptitle.text] == [
        "symbol = dtype", "fill = shape (per op)"]
    assert fig.layout.legend.title.text == "colour = variant"
    for t in legend[:3]:  # a click on a variant's entry hides its points in every panel
        assert t.marker.color == points[(t.name, "l1")].marker.color
        assert {points[(t.name, lv)].legendgroup for lv in rf.LEVELS} == {t.legendgroup}
    assert not any(t.showlegend for t in points.values())
    # One shape per op: no fill keys.
    assert [t.name for t in _legend(rf.roofline_figure(results(), [ROOFS_ENTRY]))][2:] == ["fp32", "bf16"]


def test_variant_colours_are_far_from_the_roofs_grey():
    def rgb(c):
        return [int(c[i:i + 2], 16) for i in (1, 3, 5)]

    fig = rf.roofline_figure(_suite_table(), [ROOFS_ENTRY])
    roofs = {t.line.color for t in _roofs(fig)}
    assert roofs == {rf.ROOF_COLOR}
    markers = {t.marker.color for t in _points(fig).values()} | set(rf.VARIANT_PALETTE)
    assert min(math.dist(rgb(m), rgb(rf.ROOF_COLOR)) for m in markers) > 60
    assert len(set(rf.VARIANT_PALETTE)) == len(rf.VARIANT_PALETTE)


def test_figure_size_follows_panels_and_legend():
    df = results()
    one = rf.roofline_figure(df, [ROOFS_ENTRY], levels=("dram",))
    three = rf.roofline_figure(df, [ROOFS_ENTRY])
    assert three.layout.width > one.layout.width + 600
    many = pd.concat([df.iloc[[0]].assign(variant=f"v{i}", range=f"v{i}") for i in range(40)],
                     ignore_index=True)
    tall = rf.roofline_figure(many, [ROOFS_ENTRY])
    assert len(_legend(tall)) == 41 and tall.layout.height >= 21 * 41 + 200
    assert len({t.marker.color for t in _legend(tall)[:40]}) >= 20  # colours cycle past the palette


def test_hover_shows_the_numbers():
    df = results()
    fig = rf.roofline_figure(df, [ROOFS_ENTRY])
    wasteful, tight = df.iloc[0], df.iloc[1]
    l1 = _point(fig, "softmax_rows 1024x2 fp32 ROWS=1", "l1")[3]
    assert "<b>softmax_rows</b> 1024x2 fp32 [ROWS=1]" in l1
    assert fmt_bytes(wasteful.l1_ld_bytes + wasteful.l1_st_bytes) in l1
    assert f"efficiency ld {wasteful.eff_l1_ld:.2f} / st {wasteful.eff_l1_st:.2f}" in l1
    assert fmt_time(wasteful.time_ns) in l1
    assert fmt_rate(wasteful.model_flops / (wasteful.time_ns * 1e-9), "FLOP/s") in l1
    assert "hardware FLOPs: not collected" in l1
    dram = _point(fig, "softmax_rows 1024x2 fp32 ROWS=128", "dram")[3]
    assert f"efficiency {tight.eff_dram:.2f}" in dram and "DRAM" in dram
    assert fmt_rate(tight.hw_flops / (tight.time_ns * 1e-9), "FLOP/s") in dram and "no exp/tanh" in dram


def test_level_choice_limits_roofs_and_points():
    fig = rf.roofline_figure(results(), [ROOFS_ENTRY], levels=rf.parse_levels("dram"))
    assert {t.meta["roof"] for t in _roofs(fig) if t.meta["roof"].endswith("_Bps")} == {"dram_Bps"}
    assert {lv for _, lv in _points(fig)} == {"dram"} and list(_panel_axes(fig)) == ["dram"]
    assert rf.parse_levels("all") == ("l1", "l2", "dram")
    assert rf.parse_levels("dram,l1") == ("l1", "dram")
    with pytest.raises(UsageError, match="unknown level 'l3'"):
        rf.parse_levels("l3")


def test_no_roofs_still_plots_points_and_says_so():
    fig = rf.roofline_figure(results(), [])
    assert not _roofs(fig) and len(_points(fig)) == 2 * 3
    assert "run 'memtraffic roofs'" in fig.layout.title.text


def test_missing_time_or_flops_is_a_clear_error():
    with pytest.raises(ReportError, match="needs time_ns"):
        rf.roofline_figure(results().drop(columns=["time_ns"]), [ROOFS_ENTRY])
    df = results()
    df["model_flops"] = math.nan
    with pytest.raises(ReportError, match=r"no analytic FLOP count \(model_flops\) for softmax_rows 1024x2"):
        rf.roofline_figure(df, [ROOFS_ENTRY])
    df = results()  # some rows without FLOPs (a traced program's elementwise ops): left out, named
    df.loc[2, "model_flops"] = math.nan
    pts = rf.roofline_points(df)
    assert len(pts) and not pts["label"].str.startswith("torch_matmul 64x64").any()
    assert any(n.startswith("torch_matmul 64x64") and "no model FLOPs" in n for n in pts.attrs["notes"])
    df = results()
    df.loc[0, "time_ns"] = None
    with pytest.raises(ReportError, match=r"no kernel time \(time_ns\) for softmax_rows 1024x2 fp32"):
        rf.roofline_points(df)


def test_level_without_bytes_is_left_out_with_a_note():
    df = results()
    df.loc[1, ["dram_rd_bytes", "dram_wr_bytes"]] = 0
    pts = rf.roofline_points(df)
    assert len(pts) == 3 * 3 - 1
    assert pts.attrs["notes"] == ["softmax_rows 1024x2 fp32 ROWS=128: no DRAM point (0 B moved there)"]


def test_traffic_bars_are_amplification_on_a_log_axis():
    df = results()
    fig = traffic_figure(df)
    assert [t.meta["level"] for t in fig.data] == ["l1", "l2", "dram"]
    assert fig.layout.barmode == "group" and fig.layout.yaxis.type == "log"
    minimum = df.min_read_bytes + df.min_write_bytes
    labels = rf.config_labels(df)
    for t in fig.data:
        a, b = LEVEL_COLUMNS[t.meta["level"]]
        assert list(t.x) == labels
        want = list((df[a] + df[b]) / minimum)
        assert list(t.y) == pytest.approx(want)  # measured / minimum, from the table
        assert list(t.meta["amplification"]) == pytest.approx(want)
    assert list(fig.data[0].y) == pytest.approx([10.0, 1.0, 3.0])
    assert list(fig.data[0].text) == ["10x", "1x", "3x"]
    dram = fig.data[2]  # row 1 wrote nothing to DRAM: 0.5x, labelled inside its bar, clear of the line at 1
    assert list(dram.text) == ["1x", "0.5x", "1x"]
    assert list(dram.textposition) == ["outside", "inside", "outside"]
    hover = fig.data[0].hovertext[0]
    assert fmt_bytes(df.l1_ld_bytes[0]) in hover and "10.00x the minimum" in hover
    assert "ld 16.00x, st 4.00x the minimum of that direction" in hover
    # The minimum: a dashed line at 1 across the plot, labelled.
    line = next(s for s in fig.layout.shapes if s.name == "minimum")
    assert (line.type, line.yref, line.y0, line.y1) == ("line", "y", 1, 1)
    assert (line.xref, line.x0, line.x1, line.line.dash) == ("paper", 0, 1, "dash")
    label = next(a for a in fig.layout.annotations if a.name == "minimum")
    assert label.text == "minimum" and label.y == 0  # log axis: annotations take log10(1)
    lo, hi = fig.layout.yaxis.range
    assert 10**lo < 1 < 10 * 10**lo and 10**hi > 10  # the line and the tallest bar fit


def test_traffic_bars_order_notes_and_size():
    df = _suite_table().assign(run=["run-b", "run-a", "run-a", "run-b"])
    df.loc[2, ["l1_ld_bytes", "l1_st_bytes"]] = 0  # e.g. TMA loads that skip the L1 counters
    fig = traffic_figure(df)
    labels = list(fig.data[0].x)
    # By run as given (run-b first), then the suite's variant order.
    assert labels == ["softmax_naive 64x2 fp32", "softmax_tiled 1024x2 fp32 ROWS=1",
                      "softmax_naive 1024x2 fp32 ROWS=128", "matmul_torch 64x64x64 bf16"]
    assert fig.data[0].y[3] is None and fig.data[0].text[3] == "0x"  # 0 bytes: no bar on a log axis
    notes = next(a for a in fig.layout.annotations if a.name == "notes").text.replace("<br>", " ")
    # The fixture's ROWS=128 row (and its 64x2 copy) wrote nothing to DRAM: the output stayed in L2.
    assert ("DRAM writes below the minimum (softmax_naive 64x2 fp32, softmax_naive 1024x2 fp32 ROWS=128)"
            in notes)
    assert "0 bytes (L1 of matmul_torch 64x64x64 bf16)" in notes
    df.loc[[1, 3], "dram_wr_bytes"] = df.loc[[1, 3], "min_write_bytes"]
    df.loc[2, ["l1_ld_bytes", "l1_st_bytes"]] = 1.0
    assert not [a for a in traffic_figure(df).layout.annotations if a.name == "notes"]
    runs = [a.text for a in fig.layout.annotations if (a.name or "").startswith("run:")]
    assert runs == ["run-b", "run-a"]
    assert [s.x0 for s in fig.layout.shapes if (s.name or "").startswith("run:")] == [1.5]
    many = pd.concat([df] * 10, ignore_index=True).assign(range=[f"r{i}" for i in range(40)])
    wide = traffic_figure(many)
    assert wide.layout.width > fig.layout.width + 1000  # bars keep their width: the figure grows
    only_dram = traffic_figure(df, levels=("dram",))
    assert [t.meta["level"] for t in only_dram.data] == ["dram"]
    assert only_dram.layout.showlegend and only_dram.data[0].name == "DRAM rd+wr"


def test_html_is_self_contained(tmp_path):
    df = results()
    figs = [rf.roofline_figure(df, [ROOFS_ENTRY]), traffic_figure(df)]
    path = write_html(figs, tmp_path / "r.html", "t")
    page = path.read_text()
    assert not re.search(r"<script[^>]*\bsrc\s*=\s*[\"']?(https?:)?//", page)
    assert page.count("<script") >= 3 and len(page) > 1_000_000  # plotly.js itself is inline
    assert page.count('class="plotly-graph-div"') == 2


def test_png_export(tmp_path):
    fig = traffic_figure(results())
    if shutil.which("chromium") is None:
        with pytest.raises(ReportError, match="Chromium"):
            write_png(fig, tmp_path / "t.png")
        return
    path = write_png(fig, tmp_path / "t.png")
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000
    # The figure's own size, so that its legend and labels are not cut off.
    assert struct.unpack(">II", data[16:24]) == (fig.layout.width, fig.layout.height)


def test_png_export_names_what_is_missing(tmp_path, monkeypatch):
    fig = traffic_figure(results())

    def no_chrome(*args, **kwargs):  # what kaleido 1.x raises without a browser
        raise RuntimeError("\n\nKaleido requires Google Chrome to be installed.\n")

    monkeypatch.setattr(type(fig), "to_image", no_chrome)
    monkeypatch.setattr(figure_files.shutil, "which", lambda name: None)
    with pytest.raises(ReportError, match=r"Chromium or Chrome browser .* none was found: install Debian's"):
        write_png(fig, tmp_path / "t.png")
    monkeypatch.setitem(sys.modules, "kaleido", None)  # import kaleido -> ImportError
    with pytest.raises(ReportError, match=r"needs the kaleido package and a Chromium .*"
                                          r"pip install 'memtraffic\[png\]'"):
        write_png(fig, tmp_path / "t.png")


@pytest.mark.parametrize("option", ["--roofs-file", "--ceilings"])  # --ceilings: its old name, still read
def test_cli_roofline_writes_html(tmp_path, option):
    run = write_run(tmp_path / "run-a")
    ceil = write_roofs(tmp_path / "c.json")
    args = ["roofline", str(run), option, str(ceil), "--out", str(tmp_path / "o.html")]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    page = (tmp_path / "o.html").read_text()
    # plotly writes '/' as \u002f inside its JSON
    assert "softmax_rows 1024x2 fp32 ROWS=1" in page and "DRAM 1.00 TB\\u002fs (measured)" in page
    res = CliRunner().invoke(app, ["roofline", str(run), "--level", "l3"])
    assert res.exit_code == 2 and "unknown level 'l3'" in res.output
    res = CliRunner().invoke(app, ["roofline", str(tmp_path / "nope")])
    assert res.exit_code == 1 and "does not exist" in res.output
