"""The one variant loader: users' files beside the suite, and every way a file can be wrong."""

from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner

from memtraffic.cli import app
from memtraffic.collect.planning import build_plan
from memtraffic.collect.variants import load_file, load_variants
from memtraffic.kernels import VARIANTS
from memtraffic.vocab.errors import UsageError
from memtraffic.vocab.variant import Variant

GOOD = """
import torch
from memtraffic.vocab.ops import OPS, Traffic, element_size
from memtraffic.vocab.variant import Variant

def predicted(shape, dtype, params):
    m, n = shape
    return Traffic(2 * m * n * element_size(dtype), m * n * element_size(dtype))

VARIANTS = {
    "my_softmax": Variant(name="my_softmax", op="softmax", description="torch.softmax, read twice",
                          run=lambda x: torch.softmax(x, dim=-1), predicted=predicted),
    "not_a_variant": 42,
}
"""


def _write(tmp_path, text, name="mine.py"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_user_file_joins_the_suite_and_broken_entries_are_reported(tmp_path):
    problems: list[str] = []
    variants = load_variants([_write(tmp_path, GOOD)], on_problem=problems.append)
    assert list(variants)[: len(VARIANTS)] == list(VARIANTS)  # the suite first, in its order
    assert isinstance(variants["my_softmax"], Variant) and "not_a_variant" not in variants
    assert len(problems) == 1
    assert "VARIANTS['not_a_variant'] is a int, not a memtraffic.vocab.variant.Variant" in problems[0]


def test_a_user_variant_is_planned_with_its_own_model(tmp_path):
    plan = build_plan(["my_softmax"], ["6x10"], ["bf16"], [], variant_files=[_write(tmp_path, GOOD)])
    (config,) = plan["configs"]
    assert (config["min_read_bytes"], config["min_write_bytes"]) == (120, 120)
    assert (config["pred_read_bytes"], config["pred_write_bytes"]) == (240, 120)
    assert config["range"] == "mt|my_softmax|6x10|bf16"


@pytest.mark.parametrize(("text", "message"), [
    (None, "no such file"),
    ("import no_such_module_here\n", "failed to import: ModuleNotFoundError: No module named"),
    ("x = 1\n", "defines no VARIANTS dict"),
    ("VARIANTS = {}\n", "has no usable variant in VARIANTS"),
    ("VARIANTS = {'a': 1}\n", "has no usable variant in VARIANTS"),
])
def test_bad_files_are_one_clear_usage_error(tmp_path, text, message):
    path = tmp_path / "bad.py" if text is None else _write(tmp_path, text, "bad.py")
    with pytest.raises(UsageError, match=message):
        load_file(path, on_problem=lambda line: None)


def test_a_user_variant_may_not_shadow_a_shipped_one(tmp_path):
    text = GOOD.replace("my_softmax", "torch_softmax")
    with pytest.raises(UsageError, match="variant 'torch_softmax' already exists"):
        load_variants([_write(tmp_path, text)], on_problem=lambda line: None)


def test_cli_list_with_variants_and_its_errors(tmp_path):
    runner = CliRunner()
    good = _write(tmp_path, GOOD)
    result = runner.invoke(app, ["list", "--variants", str(good), "--shape", "8x16", "--format", "json"])
    assert result.exit_code == 0, result.output
    rows = {r["name"]: r for r in json.loads(result.stdout)}
    assert rows["my_softmax"]["pred_read_bytes"] == 2 * 8 * 16 * 4
    assert "warning:" in result.stderr and "not_a_variant" in result.stderr
    missing = runner.invoke(app, ["list", "--variants", str(tmp_path / "nope.py")])
    assert missing.exit_code == 2
    assert missing.stderr.strip().splitlines() == [f"error: --variants {tmp_path / 'nope.py'}: no such file"]


def test_runner_survives_a_variant_file_that_no_longer_imports(tmp_path, capsys):
    from memtraffic.collect import runner
    from memtraffic.runfolder.folder import read_status

    good = _write(tmp_path, GOOD)
    plan = build_plan(["my_softmax", "torch_softmax"], ["4x8"], ["fp32"], [], variant_files=[good])
    # the file the runner is told to load is broken (edited since the plan was made)
    plan["variant_files"] = [str(_write(tmp_path, "raise RuntimeError('edited since')\n", "other.py"))]
    status = tmp_path / "status.jsonl"
    assert runner.run_plan(plan, status, device=torch.device("cpu")) == 0
    final = read_status(status)
    assert final[0]["status"] == "failed" and "unknown variant 'my_softmax'" in final[0]["error"]
    assert final[1]["status"] == "ok"  # the shipped variant still runs
    assert "cannot load variants: UsageError: --variants" in capsys.readouterr().err
