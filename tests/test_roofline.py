"""roofline.py: what the figures show, recomputed here from the input table and ceilings."""

import math
import re
import shutil
import sys

import pytest
from results_fixture import CEILINGS, results, write_ceilings, write_run
from typer.testing import CliRunner

from memtraffic import roofline as rf
from memtraffic.cli import app
from memtraffic.exceptions import ReportError, UsageError
from memtraffic.units import fmt_bytes, fmt_rate, fmt_time

LEVEL_COLUMNS = {"l1": ("l1_ld_bytes", "l1_st_bytes"), "l2": ("l2_rd_bytes", "l2_wr_bytes"),
                 "dram": ("dram_rd_bytes", "dram_wr_bytes")}


def _roofs(fig):
    return [t for t in fig.data if t.meta and "roof" in t.meta]


def _points(fig):
    return {t.name: t for t in fig.data if t.meta and "config" in t.meta}


def test_axes_are_log_and_labelled_with_units():
    fig = rf.roofline_figure(results(), [CEILINGS])
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    assert "[FLOP/byte]" in fig.layout.xaxis.title.text and "model FLOPs" in fig.layout.xaxis.title.text
    assert "[FLOP/s]" in fig.layout.yaxis.title.text
    note = " ".join(a.text for a in fig.layout.annotations).replace("<br>", " ")
    assert "analytic model (model_flops)" in note
    assert "exp, tanh and other special-function (MUFU) work is not in the counters" in note


def test_roof_values_are_min_of_peak_and_bandwidth_times_intensity():
    fig = rf.roofline_figure(results(), [CEILINGS])
    roofs = _roofs(fig)
    # The table holds a bf16 matmul, so the bf16 tensor-core roof is drawn; no fp16 matmul, no fp16 roof.
    shown = {(t.meta["kind"], t.meta["roof"]) for t in roofs}
    assert shown == {
        ("measured", "dram_Bps"), ("measured", "l2_Bps"), ("measured", "fp32_flops"),
        ("measured", "bf16_tc_flops"),
        ("ncu_theoretical", "dram_Bps"), ("ncu_theoretical", "l2_Bps"), ("ncu_theoretical", "l1_Bps"),
        ("ncu_theoretical", "fp32_flops"),
    }
    cap = {"measured": max(CEILINGS["measured"]["fp32_flops"], CEILINGS["measured"]["bf16_tc_flops"]),
           "ncu_theoretical": CEILINGS["ncu_theoretical"]["fp32_flops"]}
    fastest = {"measured": CEILINGS["measured"]["l2_Bps"],
               "ncu_theoretical": CEILINGS["ncu_theoretical"]["l1_Bps"]}
    for t in roofs:
        kind, key = t.meta["kind"], t.meta["roof"]
        value = CEILINGS[kind][key]
        assert t.line.dash == ("solid" if kind == "measured" else "dash")
        assert len(t.x) > 20
        for x, y in zip(t.x, t.y, strict=True):
            want = min(cap[kind], value * x) if key.endswith("_Bps") else value
            assert y == pytest.approx(want, rel=1e-12)
        if not key.endswith("_Bps"):  # compute roofs start at their ridge with the fastest memory roof
            assert t.x[0] == pytest.approx(value / fastest[kind])
    # The ridge point lies exactly on the grid, so the corner is drawn sharp.
    dram = next(t for t in roofs if t.meta == {**t.meta, "kind": "measured", "roof": "dram_Bps"})
    assert any(x == pytest.approx(cap["measured"] / CEILINGS["measured"]["dram_Bps"]) for x in dram.x)


def test_points_placed_from_the_table():
    df = results()
    fig = rf.roofline_figure(df, [CEILINGS])
    points = _points(fig)
    labels = rf.config_labels(df)
    assert list(points) == labels
    assert labels[0] == "softmax_rows 1024x2 fp32 ROWS=1"  # as analyze names it: the parameters set by hand
    for label, r in zip(labels, df.to_dict("records"), strict=True):
        t = points[label]
        assert t.meta["levels"] == ["l1", "l2", "dram"]
        assert list(t.marker.symbol) == ["circle", "square", "diamond"]
        perf = r["model_flops"] / (r["time_ns"] * 1e-9)
        for lv, x, y in zip(t.meta["levels"], t.x, t.y, strict=True):
            a, b = LEVEL_COLUMNS[lv]
            assert x == pytest.approx(r["model_flops"] / (r[a] + r[b]))
            assert y == pytest.approx(perf)


def test_labels_tell_alike_rows_apart():
    df = results().assign(range="mt|v|1024x2|fp32|")  # nobody set a parameter: all rows look alike
    df["variant"], df["shape"], df["dtype"] = "v", "1024x2", "fp32"
    assert rf.config_labels(df) == ["v 1024x2 fp32 [ROWS=1]", "v 1024x2 fp32 [ROWS=128]", "v 1024x2 fp32"]
    df["params"] = [{}] * 3
    assert rf.config_labels(df) == [f"v 1024x2 fp32 (run-a) #{i}" for i in range(3)]
    hand = results().assign(variant="", range=["a/", "b/", "c/"])  # reports captured by hand
    assert rf.config_labels(hand) == ["a/", "b/", "c/"]


def test_hover_shows_the_numbers():
    df = results()
    fig = rf.roofline_figure(df, [CEILINGS])
    wasteful, tight = df.iloc[0], df.iloc[1]
    t = _points(fig)["softmax_rows 1024x2 fp32 ROWS=1"]
    l1 = t.text[0]
    assert "<b>softmax_rows</b> 1024x2 fp32 [ROWS=1]" in l1
    assert fmt_bytes(wasteful.l1_ld_bytes + wasteful.l1_st_bytes) in l1
    assert f"efficiency ld {wasteful.eff_l1_ld:.2f} / st {wasteful.eff_l1_st:.2f}" in l1
    assert fmt_time(wasteful.time_ns) in l1
    assert fmt_rate(wasteful.model_flops / (wasteful.time_ns * 1e-9), "FLOP/s") in l1
    assert "hardware FLOPs: not collected" in l1
    dram = _points(fig)["softmax_rows 1024x2 fp32 ROWS=128"].text[2]
    assert f"efficiency {tight.eff_dram:.2f}" in dram and "DRAM" in dram
    assert fmt_rate(tight.hw_flops / (tight.time_ns * 1e-9), "FLOP/s") in dram and "no exp/tanh" in dram


def test_level_choice_limits_roofs_and_points():
    fig = rf.roofline_figure(results(), [CEILINGS], levels=rf.parse_levels("dram"))
    assert {t.meta["roof"] for t in _roofs(fig) if t.meta["roof"].endswith("_Bps")} == {"dram_Bps"}
    assert all(len(t.x) == 1 for t in _points(fig).values())
    assert rf.parse_levels("all") == ("l1", "l2", "dram")
    assert rf.parse_levels("dram,l1") == ("l1", "dram")
    with pytest.raises(UsageError, match="unknown level 'l3'"):
        rf.parse_levels("l3")


def test_no_ceilings_still_plots_points_and_says_so():
    fig = rf.roofline_figure(results(), [])
    assert not _roofs(fig) and len(_points(fig)) == 3
    assert "run 'memtraffic ceilings'" in fig.layout.title.text


def test_missing_time_or_flops_is_a_clear_error():
    with pytest.raises(ReportError, match="needs time_ns"):
        rf.roofline_figure(results().drop(columns=["time_ns"]), [CEILINGS])
    df = results()
    df.loc[2, "model_flops"] = math.nan
    with pytest.raises(ReportError, match=r"no analytic FLOP count \(model_flops\) for torch_matmul 64x64"):
        rf.roofline_figure(df, [CEILINGS])
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


def test_traffic_bars_compare_each_level_with_the_minimum():
    df = results()
    fig = rf.traffic_figure(df)
    assert [t.meta["level"] for t in fig.data] == ["minimum", "l1", "l2", "dram"]
    assert fig.layout.barmode == "group" and "[byte]" in fig.layout.yaxis.title.text
    minimum = df.min_read_bytes + df.min_write_bytes
    assert list(fig.data[0].y) == list(minimum)
    for t in fig.data[1:]:
        a, b = LEVEL_COLUMNS[t.meta["level"]]
        assert list(t.y) == list(df[a] + df[b])
        assert list(t.text) == [f"{v:.2f}x" for v in (df[a] + df[b]) / minimum]
    hover = fig.data[1].hovertext[0]
    assert fmt_bytes(df.l1_ld_bytes[0]) in hover and "10.00x the minimum" in hover
    # per direction: 131072 / 8192 loads, 32768 / 8192 stores
    assert "ld 16.00x, st 4.00x the minimum of that direction" in hover


def test_traffic_bars_explain_dram_writes_below_the_minimum():
    df = results()  # row 1 wrote 0 DRAM bytes: its output stayed in L2
    notes = [a.text.replace("<br>", " ") for a in rf.traffic_figure(df).layout.annotations]
    assert len(notes) == 1 and "DRAM writes below the minimum (softmax_rows 1024x2 fp32 ROWS=128)" in notes[0]
    df.loc[1, "dram_wr_bytes"] = df.loc[1, "min_write_bytes"]
    assert not rf.traffic_figure(df).layout.annotations


def test_config_markers_are_far_from_every_roof_colour():
    def rgb(c):
        return [int(c[i:i + 2], 16) for i in (1, 3, 5)]

    fig = rf.roofline_figure(results(), [CEILINGS])
    roofs = {t.line.color for t in _roofs(fig)} | {*rf.LEVEL_COLOR.values(), *rf.COMPUTE_COLOR.values()}
    markers = {t.marker.color for t in _points(fig).values()} | set(rf.CONFIG_PALETTE)
    # Dark24's first blue (#2E91E5) sits 57 from the DRAM roof's #1f77b4: too close to tell apart
    assert min(math.dist(rgb(m), rgb(r)) for m in markers for r in roofs) > 60


def test_html_is_self_contained(tmp_path):
    df = results()
    figs = [rf.roofline_figure(df, [CEILINGS]), rf.traffic_figure(df)]
    path = rf.write_html(figs, tmp_path / "r.html", "t")
    page = path.read_text()
    assert not re.search(r"<script[^>]*\bsrc\s*=\s*[\"']?(https?:)?//", page)
    assert page.count("<script") >= 3 and len(page) > 1_000_000  # plotly.js itself is inline
    assert page.count('class="plotly-graph-div"') == 2


def test_png_export(tmp_path):
    fig = rf.traffic_figure(results())
    if shutil.which("chromium") is None:
        with pytest.raises(ReportError, match="Chromium"):
            rf.write_png(fig, tmp_path / "t.png")
        return
    path = rf.write_png(fig, tmp_path / "t.png", width=600, height=400)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000


def test_png_export_names_what_is_missing(tmp_path, monkeypatch):
    fig = rf.traffic_figure(results())

    def no_chrome(*args, **kwargs):  # what kaleido 1.x raises without a browser
        raise RuntimeError("\n\nKaleido requires Google Chrome to be installed.\n")

    monkeypatch.setattr(type(fig), "write_image", no_chrome)
    monkeypatch.setattr(rf.shutil, "which", lambda name: None)
    with pytest.raises(ReportError, match=r"Chromium or Chrome browser .* none was found: install Debian's"):
        rf.write_png(fig, tmp_path / "t.png")
    monkeypatch.setitem(sys.modules, "kaleido", None)  # import kaleido -> ImportError
    with pytest.raises(ReportError, match=r"needs the kaleido package \(pip install 'kaleido>=1'\)"):
        rf.write_png(fig, tmp_path / "t.png")


def test_cli_roofline_writes_html(tmp_path):
    run = write_run(tmp_path / "run-a")
    ceil = write_ceilings(tmp_path / "c.json")
    args = ["roofline", str(run), "--ceilings", str(ceil), "--out", str(tmp_path / "o.html")]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    page = (tmp_path / "o.html").read_text()
    # plotly writes '/' as \u002f inside its JSON
    assert "softmax_rows 1024x2 fp32 ROWS=1" in page and "DRAM 1.00 TB\\u002fs (measured)" in page
    res = CliRunner().invoke(app, ["roofline", str(run), "--level", "l3"])
    assert res.exit_code == 2 and "unknown level 'l3'" in res.output
    res = CliRunner().invoke(app, ["roofline", str(tmp_path / "nope")])
    assert res.exit_code == 1 and "does not exist" in res.output
