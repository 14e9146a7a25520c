"""report.py: one offline HTML page whose numbers are those `memtraffic analyze` prints."""

import html
import re

import pytest
from results_fixture import DEVICE, results, write_roofs, write_run
from typer.testing import CliRunner

from memtraffic.analysis import analyze
from memtraffic.cli import app
from memtraffic.views import html_report as report
from memtraffic.views import roofline as rf
from memtraffic.views.tables import results_table_rows
from memtraffic.vocab.errors import ReportError
from memtraffic.vocab.finding import Finding


@pytest.fixture
def run(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMTRAFFIC_CACHE", str(tmp_path / "cache"))  # no stray user roofs
    return write_run(tmp_path / "run-a")


def test_page_holds_environment_table_diagnoses_and_figures(run, tmp_path):
    page = report.build_report(run, write_roofs(tmp_path / "c.json"))
    text = html.unescape(page).replace("\xa0", " ")
    for key, value in [("environment.gpu", DEVICE), ("environment.torch", "9.9.9"),
                       ("environment.ncu_version", "2099.1.1"), ("configs", "1 ok"),
                       ("command", "memtraffic measure softmax_rows")]:
        assert f"<td>{key}</td><td>{value}</td>" in text
    # The table is analyze's own, cell for cell.
    headers, rows = results_table_rows(analyze.load_results(run))
    assert "".join(f"<th>{h}</th>" for h in headers) in text
    for row in rows:
        assert "<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" in text
    assert rows[0][0] == "softmax_rows 1024x2 fp32 ROWS=1"
    assert rf.config_labels(analyze.load_results(run)) == [r[0] for r in rows]  # figures name rows alike
    diag = "loads and stores use 8 of every 32 bytes per sector"  # a saved table's diagnosis, as it was
    assert f"<b>softmax_rows 1024x2 fp32 ROWS=1</b><ul><li>{diag}</li>" in text
    assert page.count('class="plotly-graph-div"') == 2
    assert "<h2>Hierarchical roofline</h2>" in page and "<h2>Traffic per level</h2>" in page
    assert "exp, tanh and other special-function (MUFU) work is not in the counters" in text
    assert f"roofs: {DEVICE} from" in text


def test_page_is_self_contained(run):
    page = report.build_report(run)
    assert not re.search(r"<(script|link|img)[^>]*\b(src|href)\s*=\s*[\"']?(https?:)?//", page)
    assert len(page) > 1_000_000  # plotly.js inline
    assert f"no roofs known for {DEVICE}" in page


def test_missing_flops_keeps_the_page_and_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMTRAFFIC_CACHE", str(tmp_path / "cache"))
    run = write_run(tmp_path / "run-b", results().assign(model_flops=float("nan")))  # as a hand-made report
    page = html.unescape(report.build_report(run)).replace("\xa0", " ")
    assert "not drawn: no analytic FLOP count (model_flops) for softmax_rows 1024x2 fp32 ROWS=1" in page
    assert page.count('class="plotly-graph-div"') == 1  # the traffic chart needs no FLOPs


def test_bad_run_folders(tmp_path):
    with pytest.raises(ReportError, match="does not exist"):
        report.build_report(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ReportError, match="no .ncu-rep file"):
        report.build_report(tmp_path / "empty")


def test_cli_report_writes_the_file(run, tmp_path, monkeypatch):
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    res = CliRunner().invoke(app, ["report", str(run)])
    assert res.exit_code == 0, res.output
    assert res.output.strip() == "wrote report-run-a.html"  # the current folder, not the run's
    assert (here / "report-run-a.html").is_file() and not (run / "report.html").exists()
    out = tmp_path / "sub" / "r.html"
    res = CliRunner().invoke(app, ["report", str(run), "--out", str(out)])
    assert res.exit_code == 0 and out.read_text().startswith("<!DOCTYPE html>")


def test_page_opens_with_results_and_ends_with_the_environment(run):
    page = report.build_report(run)
    headings = ("Measured traffic vs minimum", "Findings", "Hierarchical roofline", "Notes", "Environment")
    order = [page.index(f"<h2>{h}</h2>") for h in headings]
    assert order == sorted(order)


def test_a_large_run_is_summarized_not_listed(tmp_path, monkeypatch):
    """A traced program of 600 op calls: a table per op type and the 60 calls that took the most time."""
    import pandas as pd

    monkeypatch.setenv("MEMTRAFFIC_CACHE", str(tmp_path / "cache"))
    one = results().iloc[[0]]
    calls = []
    for i in range(600):
        op = ("aten.mm", "aten.add", "aten.gelu")[i % 3]
        calls.append(one.assign(range=f"mt|op|{i}|{op}.default", variant="", op=op, time_ns=float(1000 + i)))
    run = write_run(tmp_path / "big", pd.concat(calls, ignore_index=True))
    page = html.unescape(report.build_report(run)).replace("\xa0", " ")
    assert "<h2>Per op type</h2>" in page and "<td>aten.gelu</td><td>200</td>" in page
    assert "600 rows in all: the table lists the 60 that took the most time" in page
    assert "aten.gelu #599" in page and "aten.gelu #539" not in page
    small = html.unescape(report.build_report(write_run(tmp_path / "small", pd.concat(calls[:60]))))
    assert "rows in all" not in small
    assert len(page) < len(small) + 20_000  # ten times the calls, about the same page


def test_the_page_starts_with_the_floor_summary():
    from pathlib import Path

    from memtraffic.analysis.floor import floor_run, summary_lines

    run = Path(__file__).resolve().parents[2] / "reports" / "h100" / "floor_compiled_block"
    page = html.unescape(report.build_report(run)).replace("\xa0", " ")
    assert page.index("Time against the floor") < page.index("Measured traffic vs minimum")
    for line in summary_lines(floor_run(run), width=10**9):  # one paragraph each, never cut mid-sentence
        assert f"<p>{line.strip()}</p>" in page
    floor = page.split("<h2>Time against the floor</h2>")[1].split("<h2>")[0]
    assert "`" not in floor and "<code>memtraffic floor</code>" in floor  # no markup shown literally
    assert "<span class='note'>the instructions asked for" in page  # each finding's arithmetic under it


def test_a_finding_on_several_rows_is_said_once_with_its_count_and_each_rows_arithmetic():
    def wrote(dram: float) -> Finding:
        return Finding("dram_writes_below_minimum", level="DRAM wr", evidence={"dram_bytes": dram,
                                                                               "min_bytes": 4e6})

    def excess(x: float) -> Finding:
        return Finding("dram_excess", level="DRAM", evidence={"dram_x": x, "dram_bytes": x * 1e6,
                                                              "min_bytes": 1e6})

    rows = [[excess(2.0), wrote(1e6)], [wrote(2e6), excess(3.0)], [], [wrote(3e6)], [excess(1.5)],
            ["an old table's diagnosis"]]
    page = report.findings_html(["a", "b", "c", "d", "e", "f"], rows)
    said = "DRAM writes below the minimum: the output was still in L2 when the kernel ended"
    assert page.count(said) == 1 and f"<li><b>3 rows</b>: {said}<ul>" in page
    for name, why in (("a", "1.00 MB"), ("b", "2.00 MB"), ("d", "3.00 MB")):  # each row's arithmetic
        assert f"<li>{name}<br><span class='note'>DRAM wrote {why.replace(' MB', '&nbsp;MB')} for" in page
    # the numbers that differ: their range in the one sentence, each row's own under it
    assert page.count("DRAM moves") == 1 and "<li><b>3 rows</b>: DRAM moves 1.5-3x the minimum<ul>" in page
    assert "<li>b: 3x<br>" in page and "<li>e: 1.5x<br>" in page
    assert "<li><b>f</b><ul><li>an old table&#x27;s diagnosis</li></ul>" in page and "<b>c</b>" not in page
    assert report.findings_html(["a"], [[]]) == "<p>none</p>"
