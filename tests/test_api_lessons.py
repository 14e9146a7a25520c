"""The public names the lessons in notebooks/ use: each gives what the CLI or the model gives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import memtraffic
from memtraffic.cli import app
from memtraffic.vocab.errors import UsageError
from memtraffic.vocab.ops import OPS, parse_dtype, torch_dtype

REPO = Path(__file__).resolve().parent.parent
ROOFS_FILE = next((REPO / "reports" / "roofs").glob("*H100*.json"))


def test_every_public_name_resolves():
    for name in memtraffic.__all__:
        assert getattr(memtraffic, name) is not None, name


@pytest.mark.parametrize("op,shape,dtype", [("softmax", "1048576x2", "fp32"),
                                            ("matmul", (64, 32, 16), "bf16"), ("gelu", "7x9", "fp16")])
def test_minimum_is_the_ops_model(op, shape, dtype):
    got = memtraffic.minimum(op, shape, dtype)
    dims = tuple(int(s) for s in shape.split("x")) if isinstance(shape, str) else shape
    least = OPS[op].minimum(dims, parse_dtype(dtype))
    assert (got["read"], got["write"], got["flops"]) == (least.read, least.write, OPS[op].flops(dims))
    assert got["intensity"] == got["flops"] / (least.read + least.write)
    with pytest.raises(UsageError, match="unknown op 'softmx': use one of softmax, "):
        memtraffic.minimum("softmx", shape)


def test_roofs_from_a_file_and_by_device_name():
    entry = memtraffic.roofs(ROOFS_FILE)
    assert entry == json.loads(ROOFS_FILE.read_text())
    assert memtraffic.roofs(entry["device"])["measured"] == entry["measured"]
    assert memtraffic.ceilings is memtraffic.roofs  # the old name, kept
    with pytest.raises(UsageError, match="no roofs known for 'Voodoo 2'"):
        memtraffic.roofs("Voodoo 2")


def test_list_variants_is_memtraffic_list():
    shown = json.loads(CliRunner().invoke(app, ["list", "--shape", "1048576x2", "--format", "json"]).stdout)
    table = memtraffic.list_variants("1048576x2")
    assert table["name"].tolist() == [r["name"] for r in shown]
    assert table["pred_read_bytes"].tolist()[:2] == [r["pred_read_bytes"] for r in shown[:2]]


def test_predicted_is_the_variants_model_with_its_parameters():
    from memtraffic.kernels import VARIANTS

    v = VARIANTS["softmax_tiled"]
    want = v.predicted((1048576, 2), torch_dtype("fp32"), {**v.params, "BLOCK_M": 1})
    assert memtraffic.predicted("softmax_tiled", "1048576x2", params={"BLOCK_M": 1}) == {
        "read": want.read, "write": want.write}


def test_check_variant_runs_it_against_the_reference_and_refuses_what_it_cannot_take():
    assert memtraffic.check_variant("softmax_tiled", "33x2") < 1e-6
    with pytest.raises(UsageError, match="softmax_tiled .* takes a MxN shape, got 4x4x4"):
        memtraffic.check_variant("softmax_tiled", "4x4x4")


def test_show_in_plain_python_prints_text_tables_and_figure_titles(capsys):
    import pandas as pd

    memtraffic.show("**bold** words")
    memtraffic.show(pd.DataFrame({"a": [1]}))
    memtraffic.show(memtraffic.traffic(REPO / "reports" / "h100" / "seed_1048576x2_fp32"))
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "**bold** words" and out[1:3] == [" a", " 1"]
    assert out[3].startswith("[figure: ") and "Markdown object" not in "".join(out)


def test_a_figure_bundle_has_plotly_json_and_a_png_or_says_why_not():
    from memtraffic.views.notebook import figure_bundle

    fig = memtraffic.traffic(REPO / "reports" / "h100" / "seed_1048576x2_fp32")
    bundle = figure_bundle(fig)
    assert bundle["application/vnd.plotly.v1+json"]["data"] == json.loads(fig.to_json())["data"]
    if "image/png" in bundle:
        import base64

        assert base64.b64decode(bundle["image/png"])[:8] == b"\x89PNG\r\n\x1a\n"
    else:
        assert "no static image" in bundle["text/plain"] and "memtraffic[png]" in bundle["text/plain"]


def _notebook_variant_source() -> str:
    """The variant file notebook 03 writes (its VARIANT_SOURCE), read from the notebook's source."""
    import ast

    tree = ast.parse((REPO / "notebooks" / "03_measure_your_kernel.py").read_text())
    return next(n.value.value for n in tree.body if isinstance(n, ast.Assign)
                and getattr(n.targets[0], "id", "") == "VARIANT_SOURCE")


@pytest.mark.gpu
@pytest.mark.ncu
def test_measure_variants_measures_notebook_03s_variant_as_its_model_predicts(tmp_path):
    """On the GPU, what notebook 03's measuring cell does: its own softmax_pairs beside softmax_tiled."""
    variants = tmp_path / "my_variants.py"
    variants.write_text(_notebook_variant_source())
    result = memtraffic.measure_variants("softmax_pairs", "softmax_tiled", shape="1048576x2",
                                         variant_files=[variants], out=tmp_path / "run")
    rows = result.table.set_index("variant")
    pred = memtraffic.predicted(memtraffic.load_variants(variants)["softmax_pairs"], "1048576x2")
    assert rows.loc["softmax_pairs", "l1_ld_bytes"] == pytest.approx(pred["read"], rel=0.02)
    assert rows.loc["softmax_pairs", "l1_st_bytes"] == pytest.approx(pred["write"], rel=0.02)
    assert rows.loc["softmax_tiled", "eff_l1_ld"] == pytest.approx(1.0, abs=0.02)
