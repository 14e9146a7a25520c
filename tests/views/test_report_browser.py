"""The HTML pages in a real browser: headless Chromium loads each page and every figure must have drawn,
with no script error, and side-by-side blocks must neither overlap nor be cut.

A probe script (this file's, put first in the page's <head> of a copy) records script errors, then after
load writes what it measured into the DOM, which `chromium --dump-dom` prints.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from memtraffic.views.html_report import write_report
from memtraffic.views.roofline import parse_levels

REPO = Path(__file__).resolve().parents[2]
SEED = REPO / "reports" / "h100" / "seed_1048576x2_fp32"
SUITE = REPO / "reports" / "h100" / "suite_1048576x2_fp32"
BROWSERS = ("chromium", "chromium-browser", "google-chrome")
CHROMIUM = next((p for n in BROWSERS if (p := shutil.which(n))), None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="needs a Chromium on PATH (apt-get install -y "
                                                         "chromium)")

PROBE = """
window.__errors = [];
window.addEventListener('error', e => window.__errors.push(String(e.message)));
window.addEventListener('load', () => setTimeout(() => {
  const box = el => { const r = el.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  const figures = [...document.querySelectorAll('div.fig')].map(f => {
    const plot = f.querySelector('.js-plotly-plot');
    const svg = f.querySelector('svg.main-svg');
    return {drawn: !!(plot && svg && plot.data && plot.data.length), box: box(f),
            svg_width: svg ? svg.getBoundingClientRect().width : 0,
            svg: svg ? box(svg) : null,
            notes: [...f.querySelectorAll('g.annotation')].map(box),
            legend: [...f.querySelectorAll('g.legend g.traces')].map(box)};
  });
  const heading = t => { let e = t; while (e && !/^H[23]$/.test(e.tagName)) e = e.previousElementSibling ||
                                                                             e.parentElement; return e; };
  const tables = [...document.querySelectorAll('table')].map(t => ({
    first: t.querySelector('th') ? t.querySelector('th').textContent : '',
    heading: heading(t) ? heading(t).textContent : ''}));
  const h2 = [...document.querySelectorAll('h2')].map(h => h.textContent);
  const pairs = [...document.querySelectorAll('.pair')].map(p => [...p.children].map(c => {
    const t = c.querySelector('table');
    return {box: box(c), table: t ? box(t) : null, scroll_width: c.scrollWidth, width: c.clientWidth};
  }));
  const out = document.createElement('pre');
  out.id = 'probe';
  out.textContent = JSON.stringify({errors: window.__errors, figures, pairs, tables, h2,
                                    page_width: document.documentElement.clientWidth,
                                    scroll_width: document.documentElement.scrollWidth});
  document.body.appendChild(out);
}, 300));
"""


def _probe(page: Path, width: int) -> dict:
    probed = page.with_name("probed-" + page.name)
    probed.write_text(page.read_text().replace("<head>", f"<head><script>{PROBE}</script>", 1))
    proc = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir="
                           + str(page.parent / "chromium"), f"--window-size={width},1000",
                           "--virtual-time-budget=10000", "--dump-dom", probed.as_uri()],
                          capture_output=True, text=True, timeout=180)
    found = re.search(r'<pre id="probe">(.*?)</pre>', proc.stdout, re.S)
    assert found, f"chromium wrote no probe result (exit {proc.returncode}): {proc.stderr[-1500:]}"
    return json.loads(found.group(1).replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">"))


def _overlap(a: list[float], b: list[float]) -> bool:
    return a[0] < b[2] - 1 and b[0] < a[2] - 1 and a[1] < b[3] - 1 and b[1] < a[3] - 1


def _inside(inner: list[float], outer: list[float]) -> bool:
    return (inner[0] >= outer[0] - 1 and inner[1] >= outer[1] - 1 and inner[2] <= outer[2] + 1
            and inner[3] <= outer[3] + 1)


@pytest.mark.parametrize("width", [1000, 2800])
def test_report_with_a_baseline_draws_every_figure_and_nothing_overlaps(tmp_path, width):
    page = write_report(SUITE, tmp_path / "report.html", baseline=SEED)
    got = _probe(page, width)
    assert got["errors"] == []
    assert got["h2"][0] == "How to read this page"
    # one run table (and the baseline's, under the comparison), each once
    run_tables = [t["heading"] for t in got["tables"] if t["first"] == "range"]
    assert run_tables == [f"baseline: {SEED.name}", "Measured traffic vs minimum"], got["tables"]
    # roofline, traffic, and the baseline's and this run's traffic side by side
    assert len(got["figures"]) == 4 and all(f["drawn"] for f in got["figures"]), got["figures"]
    (figures,) = got["pairs"]
    assert len(figures) == 2 and not _overlap(figures[0]["box"], figures[1]["box"]), figures
    for block in figures:  # nothing inside sticks out of its block (cut by its neighbour or the page)
        assert block["scroll_width"] <= block["width"] + 1, figures
    assert figures[0]["box"][1] == figures[1]["box"][1] and figures[0]["box"][2] < figures[1]["box"][0]
    for f in got["figures"]:
        assert f["svg_width"] <= f["box"][2] - f["box"][0] + 1
        # every note and every legend entry whole inside its figure: none cut at the figure's edge
        assert f["notes"] and all(_inside(n, f["svg"]) for n in f["notes"]), (f["notes"], f["svg"])
        assert f["legend"] and all(_inside(entry, f["svg"]) for entry in f["legend"]), f["legend"]
    assert got["scroll_width"] <= got["page_width"]


def test_roofline_page_draws_both_figures(tmp_path):
    from memtraffic.views.html_report import plot_runs

    (page,), _ = plot_runs([SUITE], parse_levels("dram,l2,l1"), out=tmp_path / "roof.html")
    got = _probe(page, 1400)
    assert got["errors"] == []
    assert len(got["figures"]) == 2 and all(f["drawn"] for f in got["figures"]), got["figures"]
