"""`memtraffic lines` on the committed H100 runs with per-line counters, against ncu's own export.

The reports and the CSVs beside them (gzip'd) come from scripts/make_source_reports.sh (H100 80GB HBM3,
ncu 2025.3.1, 2026-11-23): ncu_source.csv.gz is `ncu --import R --page source --print-source cuda,sass
--csv` (a row per source line, summed over its instructions), ncu_sass.csv.gz the same page per instruction.
No number is typed in here: every expected value is read from those files or the run's plan.json.
"""

from __future__ import annotations

import csv
import gzip
import html
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memtraffic.analysis.analyze import analyze_path
from memtraffic.analysis.findings import say, to_dicts
from memtraffic.analysis.lines import COLUMNS, SECTOR, asked_for, line_findings, read_lines
from memtraffic.cli import app
from memtraffic.runfolder.paths import portable_path
from memtraffic.views.html_report import build_report
from memtraffic.vocab.errors import ReportError

REPO = Path(__file__).resolve().parents[2]
H100 = REPO / "reports" / "h100"
SEED = H100 / "source_seed_1048576x2_fp32"
COLUMN = H100 / "source_column_4096x4096_fp32"
PLAIN = H100 / "plain_ncu_triton_source"
NO_SOURCE = H100 / "seed_1048576x2_fp32"  # measured without --source

# ncu's column names for the counters `lines` reports, and the row key of each
NCU_COLUMNS = {
    "Instructions Executed": "inst_executed",
    "L1 Tag Requests Global": "requests",
    "L2 Theoretical Sectors Global": "sectors",
    "L2 Theoretical Sectors Global Ideal": "ideal_sectors",
    "L2 Theoretical Sectors Global Excessive": "ncu_excessive_sectors",
}


def _number(text: str) -> int:
    return 0 if text in ("", "-") else int(text)


def ncu_source_lines(path: Path) -> dict[tuple[str, str, int], dict[str, int]]:
    """(function, file, line) -> counters, for the lines of ncu's source page that touch global memory."""
    out: dict[tuple[str, str, int], dict[str, int]] = {}
    header: list[str] = []
    function = file = ""
    with gzip.open(path, "rt", newline="") as f:
        rows = list(csv.reader(f))
    for row in rows:
        if not row:
            continue
        if row[0] == "File Path":
            file = row[1]
        elif row[0] == "Function Name":
            function = row[1]
        elif row[0] == "Line No":
            header = row
        elif row[0].isdigit():  # a source line; its SASS rows follow with an empty line number
            # The counters are the row's last cells: ncu does not escape quotes in the source text, so a
            # line such as `float("-inf")` splits into more cells than the header has.
            cells = dict(zip(header[2:], row[len(row) - len(header) + 2:], strict=True))
            counts = {key: _number(cells[name]) for name, key in NCU_COLUMNS.items()}
            if counts["sectors"] or counts["requests"]:
                out[(function, file, int(row[0]))] = counts
    return out


def ncu_sass_rows(path: Path, kernel: str) -> dict[str, dict[str, int]]:
    """PC -> counters, for the memory instructions of one kernel on ncu's per-instruction page."""
    out: dict[str, dict[str, int]] = {}
    header: list[str] = []
    current = ""
    with gzip.open(path, "rt", newline="") as f:
        rows = list(csv.reader(f))
    for row in rows:
        if not row:
            continue
        if row[0] == "Kernel Name":
            current = row[1]
        elif row[0] == "Address":
            header = row
        elif current.startswith(kernel) and row[0].startswith("0x"):
            cells = dict(zip(header, row, strict=True))
            counts = {key: _number(cells[name]) for name, key in NCU_COLUMNS.items()}
            if counts["sectors"] or counts["requests"]:
                out[row[0]] = counts
    return out


def _counts(row: dict) -> dict[str, int]:
    return {key: row[key] for key in NCU_COLUMNS.values()}


@pytest.fixture(scope="module")
def seed() -> list[dict]:
    return read_lines(SEED)


@pytest.fixture(scope="module")
def column() -> list[dict]:
    return read_lines(COLUMN)


def _plan_minimum(run: Path, variant: str) -> tuple[int, int]:
    configs = json.loads((run / "plan.json").read_text())["configs"]
    config = next(c for c in configs if c["variant"] == variant)
    return config["min_read_bytes"], config["min_write_bytes"]


@pytest.mark.parametrize("run", [SEED, COLUMN, PLAIN], ids=lambda p: p.name)
def test_per_line_counters_equal_ncus_source_page_exactly(run):
    # ncu names the file where the measuring machine compiled it; lines() names it relative
    expected = {(k, portable_path(f), line): counts
                for (k, f, line), counts in ncu_source_lines(run / "ncu_source.csv.gz").items()}
    mine = {(r["kernel"], r["file"], r["line"]): _counts(r) for r in read_lines(run) if r["file"]}
    assert expected  # the oracle is not empty
    assert mine == expected


def test_kernel_without_line_info_gets_sass_rows_equal_to_ncus_instruction_page(seed):
    torch_rows = [r for r in seed if r["kernel"] == "softmax_warp_forward"]
    assert torch_rows and all(r["file"] is None and r["line"] is None for r in torch_rows)
    assert all(any(op in r["source"] for op in ("LDG.", "STG.")) for r in torch_rows)
    expected = ncu_sass_rows(SEED / "ncu_sass.csv.gz", "void <unnamed>::softmax_warp_forward")
    assert {r["pc"]: _counts(r) for r in torch_rows} == expected


def ncu_thread_bytes(kernel: str) -> dict[str, int]:
    """PC -> ncu's predicated-on thread executions x access size, for one kernel's memory instructions."""
    out: dict[str, int] = {}
    header: list[str] = []
    current = ""
    with gzip.open(SEED / "ncu_sass.csv.gz", "rt", newline="") as f:
        for row in csv.reader(f):
            if row and row[0] == "Kernel Name":
                current = row[1]
            elif row and row[0] == "Address":
                header = row
            elif row and current.startswith(kernel) and row[0].startswith("0x"):
                cells = dict(zip(header, row, strict=True))
                if cells["Access Size"] not in ("", "-"):
                    out[row[0]] = int(cells["Predicated-On Thread Instructions Executed"]) * int(
                        cells["Access Size"]) // 8
    return out


def _kernel_counters(variant: str) -> dict:
    return analyze_path(SEED).set_index("variant").loc[variant].to_dict()


def test_naive_softmax_lines_give_analyzes_two_factors_and_their_product(seed):
    """Per line, ncu counts every thread (thread_inst_executed_true x 4 B: 536.87 MB on the load, 32 threads
    a warp reading 2 distinct floats); the bytes asked for are the kernel counter analyze reads
    (smsp__sass_data_bytes_mem_global_op_ld: 33.55 MB). The load is its kernel's only load line, so it
    takes the counter, and lines says what analyze says: 8 of every 32 bytes used, each byte requested
    4x, 16x the minimum moved."""
    naive = [r for r in seed if r["kernel"] == "_softmax_naive_kernel"]
    load = next(r for r in naive if r["operation"] == "load")
    store = next(r for r in naive if r["operation"] == "store")
    assert "tl.load(" in load["source"] and naive[0] is load  # the worst line comes first
    k = _kernel_counters("softmax_naive")
    ldg = ncu_thread_bytes("_softmax_naive_kernel")
    assert load["thread_bytes"] + store["thread_bytes"] == sum(ldg.values())  # ncu's per-instruction page
    assert load["thread_bytes"] == 16 * k["req_ld_bytes"]  # 32 threads a warp, 2 distinct addresses
    assert load["bytes_requested"] == k["req_ld_bytes"] and store["bytes_requested"] == k["req_st_bytes"]
    assert load["ncu_excessive_sectors"] == 0 and load["ideal_sectors"] == load["sectors"]  # ncu's view
    waste, repeats = load["findings"]
    assert (waste.rule, repeats.rule) == ("sector_waste", "redundant_requests")
    told = {f.rule: f for f in k["findings"]}  # analyze's findings of the same kernel
    assert waste.evidence["used_n"] == told["sector_waste"].evidence["used_n"] == 8
    assert waste.evidence["sector_eff"] == k["sector_eff_ld"] == 0.25
    assert repeats.evidence["requested_x"] == told["redundant_requests"].evidence["requested_x"] == 4.0
    assert repeats.evidence["l1_x"] == told["redundant_requests"].evidence["l1_x"] == 16.0
    assert repeats.evidence["sector_x"] * repeats.evidence["requested_x"] == repeats.evidence["l1_x"]
    assert load["verdict"] == ("loads use 8 of every 32-byte sector: adjacent threads should touch adjacent "
                               "addresses; each input byte requested 4x: warps or programs repeat it, or "
                               "the kernel makes passes")
    assert [f.rule for f in store["findings"]] == ["sector_waste"]  # stored once: no repeats
    assert load["excess_sectors"] == load["sectors"] - k["min_read_bytes"] // SECTOR


def test_instruction_rows_whose_threads_repeat_no_address_take_their_thread_bytes(seed):
    """torch's kernel: its loads' thread bytes add up to the kernel counter, so no thread repeats another's
    address and each instruction's thread bytes are its bytes asked for: 16 of 32 bytes used, as analyze."""
    rows = [r for r in seed if r["kernel"] == "softmax_warp_forward"]
    k = _kernel_counters("torch_softmax")
    loads = [r for r in rows if r["operation"] == "load"]
    assert sum(r["thread_bytes"] for r in loads) == k["req_ld_bytes"]
    assert {r["pc"]: r["thread_bytes"] for r in rows} == ncu_thread_bytes(
        "void <unnamed>::softmax_warp_forward")
    for r in rows:
        assert r["bytes_requested"] == r["thread_bytes"]
        assert [f.rule for f in r["findings"]] == ["sector_waste"]
        direction = "ld" if r["operation"] == "load" else "st"
        assert r["findings"][0].evidence["used_n"] == 32 * k[f"sector_eff_{direction}"] == 16


def test_bytes_asked_for_unknown_where_lines_repeat_addresses_and_the_kernel_has_several():
    def line(op: str, thread: int) -> dict:
        return {"operation": op, "bytes_requested": thread}
    lines = [line("load", 512), line("load", 512), line("store", 64)]
    # loads: threads 1024 > the counter's 256 over two lines: no line's share is known; the store is alone
    assert asked_for(lines, {"load": 256.0, "store": 64.0}) == [None, None, 64]
    assert asked_for(lines, {"load": 1024.0, "store": 32.0}) == [512, 512, 32]
    assert asked_for(lines, {"load": None, "store": None}) == [None, None, None]


def test_a_line_without_bytes_asked_for_says_the_factors_are_not_told_apart():
    row = {"kernel": "k", "file": "k.py", "line": 3, "operation": "load", "sectors": 64, "ideal_sectors": 16,
           "min_bytes": 256, "bytes_requested": None, "thread_bytes": 4096, "local_bytes": 0}
    ideal, unsplit = line_findings(row)
    assert (ideal.rule, unsplit.rule) == ("line_ideal_waste", "line_unsplit")
    assert say(ideal) == "loads fill at most 8 of every 32-byte sector (ncu's ideal sectors)"
    assert say(unsplit) == "loads move 8x the minimum: per line, sector use and repeats are not told apart"
    assert "sector_x" not in unsplit.evidence and "requested_x" not in unsplit.evidence


def test_tiled_softmax_lines_are_fine_with_no_excess(seed):
    tiled = [r for r in seed if r["kernel"] == "_softmax_tiled_kernel"]
    min_read, min_write = _plan_minimum(SEED, "softmax_tiled")
    assert {r["operation"]: r["bytes_moved"] for r in tiled} == {"load": min_read, "store": min_write}
    assert all(r["verdict"] == "fine" and r["excess_sectors"] == 0 for r in tiled)


def test_strided_column_load_lines_are_sector_waste(column):
    strided = [r for r in column if r["kernel"] == "_softmax_column_strided_kernel"]
    loads = [r for r in strided if r["operation"] == "load"]
    assert loads
    for r in loads:
        assert r["ncu_excessive_sectors"] == r["sectors"] - r["ideal_sectors"] > 0
        used = SECTOR * r["ideal_sectors"] / r["sectors"]
        assert r["verdict"].startswith(f"loads use {used:.0f} of every 32-byte sector")
        assert [f.rule for f in r["findings"]] == ["sector_waste"]
        assert r["findings"][0].evidence["sector_x"] == r["sectors"] / r["ideal_sectors"]


def test_coalesced_column_kernels_are_fine(column):
    coalesced = [r for r in column if r["range"].startswith("mt|softmax_column_coalesced")]
    assert {r["kernel"] for r in coalesced} == {"_column_stats_kernel", "_column_normalize_kernel"}
    assert all(r["verdict"] == "fine" for r in coalesced)


def test_rows_are_sorted_by_excess_and_shares_add_up(seed, column):
    for rows in (seed, column):
        for launch in {r["launch"] for r in rows}:
            mine = [r for r in rows if r["launch"] == launch]
            excess = [r["excess_sectors"] for r in mine]
            assert excess == sorted(excess, reverse=True)
            assert sum(r["share"] for r in mine) == pytest.approx(1.0)
            assert all(r["bytes_moved"] == r["sectors"] * SECTOR for r in mine)


def test_plain_ncu_report_without_ranges_bounds_sector_waste_only():
    rows = read_lines(PLAIN)
    assert {r["kernel"] for r in rows} == {"strided_copy", "contiguous_copy"}
    assert all(r["range"] == "" and r["min_bytes"] is None for r in rows)
    strided_load = next(r for r in rows if r["kernel"] == "strided_copy" and r["operation"] == "load")
    # plain SourceCounters: no kernel counter of the bytes asked for, so only ncu's ideal sectors' bound
    assert strided_load["bytes_requested"] is None
    assert [f.rule for f in strided_load["findings"]] == ["line_ideal_waste"]
    assert strided_load["findings"][0].evidence["used_n"] == round(
        SECTOR * strided_load["ideal_sectors"] / strided_load["sectors"])
    assert all(r["verdict"] == "fine" for r in rows if r["kernel"] == "contiguous_copy")


def test_analyze_diagnosis_names_the_worst_line_when_the_report_has_source(seed):
    table = analyze_path(SEED).set_index("variant")
    load = next(r for r in seed if r["kernel"] == "_softmax_naive_kernel")
    where = f"{Path(load['file']).name}:{load['line']}"
    worst = table.loc["softmax_naive", "findings"][-1]
    assert worst.rule == "worst_line" and worst.subject.line == where
    assert say(worst) == (f"worst line {where}: sector waste + redundant, {load['share']:.0%} of its "
                          "kernel's bytes")
    torch_worst = next(r for r in seed if r["kernel"] == "softmax_warp_forward")
    assert table.loc["torch_softmax", "findings"][-1].subject.line == f"{torch_worst['pc']} (LDG.E)"
    # efficient: only the DRAM writes L2 still held are said, and no worst line is named
    assert [f.rule for f in table.loc["softmax_tiled", "findings"]] in ([], ["dram_writes_below_minimum"])


def test_html_report_shows_each_kernels_lines_with_traffic_bars(seed, monkeypatch, tmp_path):
    monkeypatch.setenv("MEMTRAFFIC_CACHE", str(tmp_path))  # no stray user roofs
    page = build_report(SEED, next((REPO / "reports" / "roofs").glob("*H100*.json")))
    section = page[page.index("<h2>Source lines</h2>"):]
    assert [h.split(" [")[0] for h in re.findall(r"<h3>([^<]*)</h3>", section)] == list(
        dict.fromkeys(r["kernel"] for r in seed))
    naive = [r for r in seed if r["kernel"] == "_softmax_naive_kernel"]
    widest = max(r["bytes_moved"] for r in naive)
    load = naive[0]
    need = 100 * (load["bytes_moved"] - load["excess_sectors"] * SECTOR) / widest
    excess = 100 * load["excess_sectors"] * SECTOR / widest
    assert (f"<span class='need' style='width:{need:.1f}%'></span>"
            f"<span class='excess' style='width:{excess:.1f}%'></span>") in section
    assert html.escape(load["source"]) in section and html.escape(load["verdict"]) in section


def test_report_without_source_counters_says_how_to_capture_one():
    with pytest.raises(ReportError, match=r"memtraffic measure --source.*--section SourceCounters"):
        read_lines(NO_SOURCE)
    res = CliRunner().invoke(app, ["lines", str(NO_SOURCE)])
    assert res.exit_code == 1
    assert res.stdout == ""
    assert len(res.stderr.strip().splitlines()) == 1 and "has no per-line counters" in res.stderr


def test_missing_path_and_junk_file_are_one_line_errors(tmp_path):
    res = CliRunner().invoke(app, ["lines", str(tmp_path / "nope.ncu-rep")])
    assert res.exit_code == 1 and "no such file" in res.stderr
    junk = tmp_path / "junk.ncu-rep"
    junk.write_bytes(b"not a report")
    with pytest.raises(ReportError):
        read_lines(junk)


def test_cli_json_has_the_documented_keys_and_kernel_filter_and_top():
    res = CliRunner().invoke(app, ["lines", str(SEED), "--format", "json", "--kernel", "naive|tiled",
                                   "--top", "1"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert [r["kernel"] for r in rows] == ["_softmax_naive_kernel", "_softmax_tiled_kernel"]
    assert all(list(r) == list(COLUMNS) for r in rows)
    required = {"kernel", "file", "line", "source", "inst_executed", "requests", "sectors", "ideal_sectors",
                "excess_sectors", "bytes_moved", "verdict"}
    assert required <= set(rows[0])
    assert rows == [{**r, "findings": to_dicts(r["findings"])} for r in read_lines(SEED, kernel="naive|tiled",
                                                                                   top=1)]


def test_cli_kernel_filter_matches_the_range_too():
    rows = read_lines(SEED, kernel=r"mt\|torch_softmax")
    assert {r["kernel"] for r in rows} == {"softmax_warp_forward"}


def test_cli_csv_and_table():
    res = CliRunner().invoke(app, ["lines", str(COLUMN), "--format", "csv", "--kernel", "strided"])
    assert res.exit_code == 0, res.output
    parsed = list(csv.DictReader(res.stdout.splitlines()))
    assert list(parsed[0]) == list(COLUMNS)
    assert [int(r["sectors"]) for r in parsed] == [r["sectors"] for r in read_lines(COLUMN, kernel="strided")]
    table = CliRunner().invoke(app, ["lines", str(SEED)])
    assert table.exit_code == 0
    assert table.stdout.count("\n== ") + table.stdout.startswith("== ") == 3
    assert "softmax_rows.py:" in table.stdout and "each input byte requested 4x" in table.stdout
    assert "mt|" not in table.stdout and "ideal:" in table.stdout and "excess:" in table.stdout


@pytest.mark.parametrize("args, message", [
    (["--kernel", "("], "is not a regular expression"),
    (["--kernel", "no_such_kernel"], "no kernel or range matches"),
    (["--top", "0"], "positive number"),
    (["--format", "xml"], "unknown format"),
])
def test_cli_bad_options_exit_2_with_one_line(args, message):
    res = CliRunner().invoke(app, ["lines", str(SEED), *args])
    assert res.exit_code == 2
    assert message in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_reading_lines_imports_neither_torch_nor_triton():
    code = ("import sys; from memtraffic.analysis.lines import read_lines; read_lines(sys.argv[1]); "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('torch', 'triton')]; assert not bad, bad")
    proc = subprocess.run([sys.executable, "-c", code, str(SEED)], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr


def test_source_files_are_named_relative_not_where_the_measuring_machine_kept_them():
    """The report holds the path the kernel was compiled from on the machine that measured it; lines()
    names it from the repository's folder on (runfolder/paths.py), as a reader's clone has it."""
    files = {r["file"] for r in read_lines(SEED) if r["file"]}
    assert files == {"kernels/softmax_rows.py"}
    assert (REPO / "kernels" / "softmax_rows.py").is_file()


def test_a_verdict_on_several_lines_of_a_kernel_is_said_once_with_its_count():
    res = CliRunner().invoke(app, ["lines", str(SEED), "--kernel", "torch"], env={"COLUMNS": "100"})
    assert res.exit_code == 0, res.output
    rows = read_lines(SEED, kernel="torch")
    sentences = [say(f) for r in rows for f in r["findings"]]  # the records keep every instruction's
    assert len(sentences) == len(rows) == 4 and len(set(sentences)) == 2  # loads, stores
    # one rule on four instructions, its words joined: its advice said once
    assert "  4 instructions: loads and stores use 16 of every 32-byte sector: " in res.stdout
    assert res.stdout.count("adjacent threads should touch") == 1
    assert max(len(line) for line in res.stdout.splitlines()) <= 100
    tiled = CliRunner().invoke(app, ["lines", str(SEED), "--kernel", "tiled"]).stdout
    assert tiled.count("fine") == 1 and "  2 lines: fine" in tiled
