"""`memtraffic list`: minimum vs predicted bytes per variant, as JSON, CSV and a table; bad input exits 2.

No kernel runs here: list only evaluates the models, so these tests are quick on any machine.
"""

from __future__ import annotations

import csv
import io
import json

import pytest
import torch
from typer.testing import CliRunner

from memtraffic.cli import app
from memtraffic.kernels import VARIANTS

MB8 = 8_388_608  # 1048576 x 2 fp32 elements, in bytes
SOFTMAX_OPS = ("softmax", "softmax_dim0")


def _invoke(*args: str):
    return CliRunner().invoke(app, ["list", *args])


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    res = _invoke("--shape", "1048576x2", "--format", "json")
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_json_lists_every_variant_once_in_suite_order(rows):
    assert [r["name"] for r in rows] == list(VARIANTS)


def test_json_every_softmax_variant_has_the_8mb_minimum(rows):
    softmax = [r for r in rows if r["op"] in SOFTMAX_OPS]
    expected = {"softmax_naive", "softmax_tiled", "softmax_online", "softmax_3pass", "torch_softmax",
                "torch_manual", "torch_compiled", "softmax_column_strided", "softmax_column_coalesced"}
    assert {r["name"] for r in softmax} >= expected
    for r in softmax:
        # a CUDA C++ variant (softmax_cluster) cannot run on a machine without a GPU
        assert r["supported"] or (VARIANTS[r["name"]].needs_cuda and not torch.cuda.is_available()), r
        if not r["supported"]:
            continue
        assert (r["min_read_bytes"], r["min_write_bytes"]) == (MB8, MB8), r["name"]
        assert r["pred_read_bytes"] >= r["min_read_bytes"] and r["pred_write_bytes"] >= r["min_write_bytes"]
        assert r["shape"] == "1048576x2" and r["dtype"] == "fp32"


def test_json_carries_the_models_predictions(rows):
    by_name = {r["name"]: r for r in rows}
    naive, tiled = by_name["softmax_naive"], by_name["softmax_tiled"]
    assert (naive["pred_read_bytes"], naive["pred_write_bytes"]) == (134_217_728, 33_554_432)
    assert naive["params"] == {"num_warps": 4}
    assert (tiled["pred_read_bytes"], tiled["pred_write_bytes"]) == (MB8, MB8)
    assert tiled["params"] == {"BLOCK_M": None, "num_warps": None}  # auto: null in JSON
    assert by_name["softmax_online"]["flops"] == 5 * 1048576 * 2


def test_json_marks_variants_of_another_rank_unsupported(rows):
    matmuls = [r for r in rows if r["op"] in ("matmul", "matmul_softmax")]
    assert matmuls and all(not r["supported"] and "MxNxK" in r["reason"] for r in matmuls)


def test_csv_has_a_header_and_one_line_per_variant():
    res = _invoke("--shape", "1048576x2", "--format", "csv")
    assert res.exit_code == 0, res.output
    table = list(csv.DictReader(io.StringIO(res.stdout)))
    assert [r["name"] for r in table] == list(VARIANTS)
    naive = next(r for r in table if r["name"] == "softmax_naive")
    assert int(naive["min_read_bytes"]) == MB8 and int(naive["pred_read_bytes"]) == 134_217_728


def test_table_shows_readable_bytes_and_notes():
    res = _invoke("--shape", "1048576x2", "--wide")
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[0].split()[:3] == ["variant", "op", "shape"]
    naive = next(line for line in lines if line.startswith("softmax_naive "))
    assert "8.39 MB" in naive and "134.22 MB" in naive and "33.55 MB" in naive
    tiled = next(line for line in lines if line.startswith("softmax_tiled "))
    assert "1.00x" in tiled
    assert "not applicable at this shape/dtype:" in res.stdout
    assert "matmul_triton" in res.stdout.split("not applicable")[1]


def test_default_shapes_and_other_dtypes():
    res = _invoke("--format", "json", "--dtype", "bf16")
    assert res.exit_code == 0, res.output
    by_name = {r["name"]: r for r in json.loads(res.stdout)}
    naive = by_name["softmax_naive"]
    assert naive["shape"] == "1048576x2" and naive["dtype"] == "bf16"
    assert naive["min_read_bytes"] == MB8 // 2
    assert by_name["softmax_column_coalesced"]["shape"] == "4096x4096"


def test_a_shape_too_long_for_one_tile_is_reported_not_fatal():
    res = _invoke("--shape", "64x100000", "--format", "json")
    assert res.exit_code == 0, res.output
    by_name = {r["name"]: r for r in json.loads(res.stdout)}
    naive = by_name["softmax_naive"]
    assert not naive["supported"] and "softmax_online" in naive["reason"]
    assert by_name["softmax_online"]["supported"]


@pytest.mark.parametrize("args,message", [
    (["--format", "xml"], "error: unknown format 'xml': use one of table, json, csv"),
    (["--shape", "1048576x"], "error: malformed shape '1048576x'"),
    (["--shape", "0x2"], "error: malformed shape '0x2'"),
    (["--shape", "axb"], "error: malformed shape 'axb'"),
    (["--dtype", "fp8"], "error: unsupported dtype 'fp8': use one of fp32, fp16, bf16"),
])
def test_bad_input_is_one_line_on_stderr_and_exit_2(args, message):
    res = _invoke(*args)
    assert res.exit_code == 2
    assert res.stdout == ""
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith(message)
