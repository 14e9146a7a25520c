"""`analyze --min-bytes REGEX=READ:WRITE` (repeatable) beside the global form, on the committed H100 seed
report as a user who ran ncu by hand would have it (no plan). Its L1 bytes (134217728, 8388608 and
16777216 loaded by the naive, tiled and torch ranges) are the report's, pinned in test_analyze.py.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memtraffic.analysis.analyze import analyze_path, parse_min_bytes_options
from memtraffic.cli import app
from memtraffic.vocab.errors import UsageError

SEED = Path(__file__).resolve().parents[2] / "reports" / "h100" / "seed_1048576x2_fp32"
MIB8 = 8 * 2**20  # softmax of 1048576x2 fp32 reads 8 MiB and writes 8 MiB (the op's minimum)
NAIVE = "mt|softmax_naive|1048576x2|fp32|num_warps=4"
TILED = "mt|softmax_tiled|1048576x2|fp32|BLOCK_M=128"
TORCH = "mt|torch_softmax|1048576x2|fp32"


@pytest.fixture
def bare(tmp_path):
    path = tmp_path / "mine.ncu-rep"
    shutil.copy(SEED / "profile.ncu-rep", path)
    return path


def _by_range(df) -> dict[str, dict]:
    return {r["range"]: r for r in df.to_dict("records")}


def test_parse_global_and_named_forms_in_order():
    overall, rules = parse_min_bytes_options(["16MiB", "soft.*naive=8MiB:8MiB", "torch=4MiB",
                                              "a=b=1KiB:2KiB"])
    assert math.isnan(overall[0]) and math.isnan(overall[1]) and overall[2] == 16 * 2**20
    assert [(p.pattern, m[2]) for p, m in rules] == [("soft.*naive", 2 * MIB8), ("torch", 4 * 2**20),
                                                     ("a=b", 3 * 2**10)]
    assert rules[0][1][:2] == (MIB8, MIB8) and math.isnan(rules[1][1][0])
    assert parse_min_bytes_options([]) == (None, [])


@pytest.mark.parametrize(("texts", "message"), [
    (["=8MiB:8MiB"], "malformed --min-bytes '=8MiB:8MiB': write REGEX=READ:WRITE or REGEX=TOTAL, "
                     "e.g. 'attention=8MiB:8MiB'"),
    (["attn="], "malformed --min-bytes 'attn=': write REGEX=READ:WRITE or REGEX=TOTAL, "
                "e.g. 'attention=8MiB:8MiB'"),
    (["attn(=8MiB"], "--min-bytes 'attn(=8MiB': 'attn(' is not a regular expression "
                     "(missing ), unterminated subpattern at position 4)"),
    (["attn=8MiB:"], "malformed --min-bytes '8MiB:': write TOTAL or READ:WRITE, e.g. 8MiB:8MiB"),
    (["attn=lots"], "malformed size 'lots': write bytes as 8388608, 8.39MB or 8MiB"),
    (["8MiB", "16MiB"], "--min-bytes given twice without a range ('8MiB' and '16MiB'): give one global "
                        "TOTAL or READ:WRITE, and REGEX=READ:WRITE for particular ranges"),
])
def test_malformed_values_are_one_usage_error(texts, message):
    with pytest.raises(UsageError, match=f"^{re.escape(message)}$"):
        parse_min_bytes_options(texts)


def test_named_ranges_get_their_minimum_first_match_wins_and_the_rest_the_global(bare):
    rules = [r"^mt\|softmax_=4MiB:4MiB", f"naive={MIB8}:{MIB8}", f"{2 * MIB8}:{2 * MIB8}"]
    rows = _by_range(analyze_path(bare, min_bytes=rules))
    assert rows[NAIVE]["min_read_bytes"] == rows[TILED]["min_read_bytes"] == 4 * 2**20  # the first rule
    assert rows[TILED]["eff_l1_ld"] == 0.5
    assert (rows[TORCH]["min_read_bytes"], rows[TORCH]["eff_l1_ld"]) == (2 * MIB8, 1.0)  # the global one
    rows = _by_range(analyze_path(bare, min_bytes=["naive=16MiB"]))
    assert rows[NAIVE]["min_bytes"] == 2 * MIB8 and math.isnan(rows[NAIVE]["eff_l1_ld"])
    assert math.isnan(rows[TILED]["min_bytes"])  # no rule, no global, no plan: no minimum


def test_pattern_matching_no_range_names_the_ranges(bare):
    res = CliRunner().invoke(app, ["analyze", str(bare), "--min-bytes", "attention=8MiB:8MiB"])
    assert res.exit_code == 2
    assert res.stderr == (f"error: --min-bytes 'attention' matches no range or kernel: the ranges and "
                          f"kernels are {NAIVE}, {TILED}, {TORCH}\n")


def test_a_plain_report_takes_a_minimum_per_kernel_name():
    """A plain `ncu -o` report has no ranges: REGEX names its kernels (the README's example)."""
    table = analyze_path("reports/h100/plain_ncu_torch_softmax", min_bytes=["softmax=8MiB:8MiB"])
    by_kernel = {r["kernels"][0]: r for r in table.to_dict("records")}
    assert by_kernel["softmax_warp_forward"]["min_bytes"] == 2 * MIB8
    assert math.isnan(by_kernel["distribution_elementwise_grid_stride_kernel"]["min_bytes"])
    assert by_kernel["softmax_warp_forward"]["eff_dram_rd"] == pytest.approx(1.0, abs=0.01)


def test_cli_takes_the_option_repeated(bare):
    res = CliRunner().invoke(app, ["analyze", str(bare), "--format", "json", "--min-bytes",
                                   "tiled=8MiB:8MiB", "--min-bytes", "torch_softmax=16MiB:16MiB"])
    assert res.exit_code == 0, res.output
    rows = {r["range"]: r for r in json.loads(res.stdout)}
    assert (rows[TILED]["eff_l1_ld"], rows[TORCH]["eff_l1_ld"]) == (1.0, 1.0)
    assert rows[NAIVE]["min_bytes"] is None
