"""The README's first lines are the contract with a new user and with CI: keep them in step. Its Quickstart
runs as written; it fits a screen's worth of reading, and every link in it and in docs/ leads somewhere."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _readme_commands() -> list[str]:
    block = README.split("```bash", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line and not line.startswith("#")]


def test_readme_opens_with_run_and_test_commands():
    assert README.splitlines()[2] == "```bash"
    run, test = _readme_commands()
    assert "memtraffic " in run and "pytest" in test
    # the main job installs the base only: no torch, no extra
    assert "torch" not in run and "pip install -q -e . &&" in run


def test_ci_runs_the_readme_test_command_verbatim_then_the_slow_tests():
    _, test = _readme_commands()
    ci_lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert test in ci_lines
    assert test.endswith('pytest -q -m "not slow"')
    assert ci_lines[ci_lines.index(test) + 1] == ".venv/bin/python -m pytest -q -m slow"


def test_readme_says_how_long_its_test_command_takes():
    """A measured figure, with its date and machine, in the comment above the command."""
    comment = README.split("```bash", 1)[1].splitlines()[3]
    assert comment.startswith("# Tests") and re.search(r"\d+ minutes", comment), comment
    assert re.search(r"20\d\d-\d\d-\d\d", comment) and "2 cores" in comment, comment


def test_readme_fits_250_lines_and_every_topic_has_its_page():
    assert len(README.splitlines()) <= 250
    for page in ("your-code", "op-rules", "comparing-runs", "sweeps", "gpus", "output-formats",
                 "how-it-works", "results", "notebooks"):
        assert f"(docs/{page}.md)" in README, page


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_leads_to_a_file(page):
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # links, not code
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if not re.match(r"[a-z]+:", target):
            assert (page.parent / target).exists(), f"{page.name}: {target}"


def _quickstart() -> list[str]:
    """The Quickstart's lines up to the GPU part (the CPU-runnable ones), as written."""
    block = README.split("## Quickstart", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    cpu = block.split("# On a machine with a CUDA GPU", 1)[0]
    return [line for line in cpu.splitlines() if line.strip()]


@pytest.mark.slow
def test_the_quickstart_runs_as_written(tmp_path):
    """Each CPU line of the Quickstart, verbatim, in a folder that looks like the clone after the README's
    two commands (its reports and examples, and the .venv these tests run in)."""
    lines = _quickstart()
    assert lines[0] == "source .venv/bin/activate" and len(lines) >= 8
    for name in ("reports", "examples"):
        (tmp_path / name).symlink_to(ROOT / name)
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))
    for line in lines[1:]:
        proc = subprocess.run(["bash", "-c", f"set -eo pipefail; {lines[0]}; {line}"], cwd=tmp_path,
                              capture_output=True, text=True, timeout=600, env={**os.environ})
        assert proc.returncode == 0, f"{line}\n{proc.stderr[-2000:]}"
        assert proc.stdout.strip(), line
    assert (tmp_path / "roof.html").is_file() and (tmp_path / "report.html").is_file()


# --- the measured tables, regenerated from the committed reports by scripts/readme_tables.py ----------------


def _tables():
    import importlib.util

    spec = importlib.util.spec_from_file_location("readme_tables", ROOT / "scripts" / "readme_tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _block(text: str, name: str) -> str:
    return text.split(f"<!-- table:{name} -->\n", 1)[1].split(f"<!-- /table:{name} -->", 1)[0]


def test_readme_tables_match_the_committed_reports():
    assert _tables().main(["--check"]) == 0, "README.md is stale: run python scripts/readme_tables.py"


def _copies(tmp_path) -> list[str]:
    """README.md and docs/*.md copied (docs/ kept a folder, for its '../' links): --readme arguments."""
    (tmp_path / "docs").mkdir()
    args = []
    for page in PAGES:
        copy = tmp_path / page.relative_to(ROOT)
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(page, copy)
        args += ["--readme", str(copy)]
    return args


@pytest.mark.slow
def test_check_fails_on_a_stale_table_and_a_rerun_fixes_it(tmp_path, capsys):
    tables = _tables()
    args = _copies(tmp_path)
    cases = [("seed", "README.md", "632.7 us"), ("profile", "docs/your-code.md", "180.5 us")]
    for name, page, stale in cases:
        text = (ROOT / page).read_text()
        block = _block(text, name)
        # softmax_naive's ncu time in the committed seed run (H100 80GB HBM3, ncu 2025.3.1, 2026-11-22);
        # the first op time of the committed torch model profile
        assert stale in block, (name, stale)
        copy = tmp_path / page
        copy.write_text(text.replace(block, block.replace(stale, "634 us")))
        assert tables.main(["--check", *args]) == 1
        assert f"{copy}: out of date ({name})" in capsys.readouterr().err
        assert "634 us" in copy.read_text()  # --check changes nothing
        assert tables.main(args) == 0
        assert copy.read_text() == text


def test_seed_table_labels_the_quoted_figures():
    tables = _tables()
    seed = _block(README, "seed")
    assert "2026-11-22" in seed and "ncu 2025.3.1" in seed and "NVIDIA H100 80GB HBM3" in seed
    assert f"{tables.PUBLISHED_SOURCE} (" in seed
    rows = [line for line in seed.splitlines() if line.startswith("| ")][2:]
    for (name, _, published), row in zip(tables.PUBLISHED, rows, strict=False):
        assert row.startswith(f"| {name} |") and row.endswith(f"| {published} |")
    assert "134.22 (16x)" in rows[1] and "8.39 (1x)" in rows[2]


def _reports(tmp_path, benches):
    """A reports folder with the real H100 runs and synthetic bench results (round made-up numbers)."""
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "h100").symlink_to(ROOT / "reports" / "h100")
    for folder, device, date in benches:
        row = {"variant": "softmax_tiled", "shape": "64x64", "dtype": "fp32", "status": "ok",
               "time_ns": 1000.0, "bw_Bps": 1e9, "frac_of_copy": 0.5, "speedup_vs_torch_softmax": 2.0}
        env = {"device": device, "date": date, "torch": "t", "triton": "tr"}
        result = {"environment": env, "rows": [row]}
        (reports / "bench" / folder).mkdir(parents=True)
        (reports / "bench" / folder / "results.json").write_text(json.dumps(result))
    return reports


def test_missing_blocks_are_appended_and_bench_waits_for_a_run(tmp_path):
    tables = _tables()
    readme = tmp_path / "README.md"
    readme.write_text("# memtraffic\n")
    reports = _reports(tmp_path, [])
    assert tables.main(["--check", "--readme", str(readme), "--reports", str(reports)]) == 1
    assert tables.main(["--readme", str(readme), "--reports", str(reports)]) == 0
    text = readme.read_text()
    assert text.startswith("# memtraffic\n\n## Measured on the H100\n")
    assert text.index("table:seed") < text.index("table:suite") < text.index("table:bench")
    assert _block(text, "bench") == tables.NO_BENCH + "\n"
    assert "| softmax | softmax_tiled | bf16 | 1 |" in _block(text, "suite")
    assert tables.main(["--check", "--readme", str(readme), "--reports", str(reports)]) == 0


def test_bench_block_shows_the_newest_run(tmp_path):
    tables = _tables()
    readme = tmp_path / "README.md"
    readme.write_text("<!-- table:bench -->\nold\n<!-- /table:bench -->\n")
    reports = _reports(tmp_path, [("2030-01-02-GPU-A", "GPU A", "2030-01-02"),
                                  ("2030-03-04-GPU-B", "GPU B", "2030-03-04")])
    tables.main(["--readme", str(readme), "--reports", str(reports)])
    bench = _block(readme.read_text(), "bench")
    assert "GPU B, 2030-03-04" in bench and "GPU A" not in bench and "old" not in bench
    assert "| softmax_tiled | 64x64 | fp32 | 1.0 us | 1.00 GB/s | 50% | 2.00x | - |" in bench


def test_bench_block_takes_a_days_tenth_run_over_its_ninth(tmp_path):
    tables = _tables()
    reports = _reports(tmp_path, [("2030-01-02-gpu-r9", "GPU nine", "2030-01-02"),
                                  ("2030-01-02-gpu-r10", "GPU ten", "2030-01-02")])
    assert tables.newest_bench(reports).parent.name == "2030-01-02-gpu-r10"


def _window_pair(tmp_path) -> Path:
    """A reports folder whose h100/floor_window pair is two committed runs of one program: kernel replay
    (compiled_layernorm_mlp_adamw, 2 steps) and timing-only (timing_only_layernorm_mlp_adamw, 3 steps)."""
    reports = tmp_path / "reports"
    window = reports / "h100" / "floor_window"
    window.mkdir(parents=True)
    (window / "default").symlink_to(ROOT / "reports" / "h100" / "compiled_layernorm_mlp_adamw")
    (window / "timing_only").symlink_to(ROOT / "reports" / "h100" / "timing_only_layernorm_mlp_adamw")
    return reports


def test_the_floor_window_table_puts_each_modes_time_and_recoverable_time_side_by_side(tmp_path):
    tables = _tables()
    lines = tables.floor_window_output(_window_pair(tmp_path))
    assert lines[0].startswith(
        "`examples/floor_block.py` in its profiler window, profiled with `memtraffic profile --torch-ops "
        "--profile-from-start off` (`default`: default, `timing_only`: --timing-only); measured on NVIDIA "
        "H100 80GB HBM3, ncu 2025.3.1.0, 2026-11-25 ")
    assert lines[0].endswith("[reports/h100/floor_window/default](reports/h100/floor_window/default)):")
    table = [line for line in lines if line.startswith("| ")]
    assert table[0] == ("| op type | time: default | time: timing_only | default / timing_only | "
                        "recoverable: default | recoverable: timing_only |")
    assert table[-1] == "| all (GPU time) | 640.9 us | 13.18 ms | 0.05 | 85.1 us | 968.5 us |"
    assert "| `triton_red_fused_add_addmm_mse_loss_2` | 41.5 us | 39.2 us | 1.06 | 8.0 us | 0 ns |" in table
    # op types of at least 1% of either run's GPU time: aten.mm.out ran only in the timing-only run's window
    assert "| `aten.mm.out` | - | 10.14 ms | - | - | 662.8 us |" in table and len(table) == 2 + 14 + 1
    legend = lines[-1]
    assert "Op types whose default time agrees within 10% (or 3 us): with timing_only 5 of 14;" in legend
    assert "recoverable time against default: timing_only 883.4 us apart, 6.7% of its GPU time" in legend
    assert legend.endswith("default: ncu gpu__time_duration (kernel replay); timing_only: kernel timer "
                           "(CUPTI activity records).")


def test_the_floor_window_block_waits_for_its_pair(tmp_path):
    tables = _tables()
    text = (ROOT / "docs" / "floor.md").read_text()
    reports = tmp_path / "reports"
    reports.mkdir()
    assert tables.floor_window_output(reports) is None
    kept = tables.render(text, reports, "../", append=[])
    assert _block(kept, "floor_window") == _block(text, "floor_window")
    filled = tables.render(text, _window_pair(tmp_path / "pair"), "../", append=[])
    assert "| all (GPU time) | 640.9 us |" in _block(filled, "floor_window")
    assert "](../reports/h100/floor_window/default)" in _block(filled, "floor_window")
