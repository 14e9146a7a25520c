"""memtraffic.vocab.configs: --param values and grids, range names, and calls into a variant's own code."""

from __future__ import annotations

import numbers

import pytest

from memtraffic.vocab.configs import ModelError, call_model, parse_param_value, parse_params, range_name
from memtraffic.vocab.errors import UsageError
from memtraffic.vocab.ops import Traffic


@pytest.mark.parametrize(("text", "value"), [("128", 128), ("0.5", 0.5), ("true", True), ("False", False),
                                             (" tiled ", "tiled"), ("1e3", 1000.0)])
def test_a_param_value_is_read_as_int_float_bool_or_text(text, value):
    found = parse_param_value(text)
    assert found == value and type(found) is type(value)


def test_params_collect_values_per_key_in_order_without_repeats():
    assert parse_params(["BLOCK_M=1,128", "num_warps=4", "BLOCK_M=128,64"]) == {"BLOCK_M": [1, 128, 64],
                                                                               "num_warps": [4]}


@pytest.mark.parametrize("item", ["BLOCK_M", "=4", "BLOCK_M=", " =1"])
def test_a_malformed_param_says_how_to_write_one(item):
    said = r"^malformed --param .*: write KEY=VALUE or KEY=V1,V2, e\.g\. BLOCK_M=128$"
    with pytest.raises(UsageError, match=said):
        parse_params([item])


def test_the_range_name_holds_the_explicit_params_only_when_there_are_some():
    assert range_name("softmax_tiled", (1048576, 2), "fp32", {"BLOCK_M": 128}) == \
        "mt|softmax_tiled|1048576x2|fp32|BLOCK_M=128"
    assert range_name("torch_softmax", (4, 8), "bf16", {}) == "mt|torch_softmax|4x8|bf16"


def test_call_model_returns_what_the_model_returns():
    assert call_model("op x", "minimum", lambda s: Traffic(s, 2 * s), 4, returns=Traffic) == Traffic(4, 8)
    assert call_model("op x", "flops", lambda s: 2.5, (1,), returns=numbers.Real) == 2.5


def test_a_model_that_raises_is_one_error_naming_the_call_and_its_line():
    def broken(shape: tuple[int, ...]) -> int:
        raise KeyError("BLOCK_N")

    with pytest.raises(ModelError) as err:
        call_model("variant mine", "predicted", broken, (4, 8))
    assert err.value.problem.startswith("variant mine: its predicted((4, 8)) raised KeyError: 'BLOCK_N' at ")
    assert err.value.problem.endswith(f"test_configs.py:{broken.__code__.co_firstlineno + 1}")
    assert str(err.value).endswith("; fix the variant (or leave it out)")


@pytest.mark.parametrize(("result", "returns", "said"), [
    (None, Traffic, "returned None, not a Traffic"),
    (True, numbers.Real, "returned True, not a number"),
    ("12", numbers.Real, "returned '12', not a number"),
])
def test_a_model_returning_the_wrong_kind_is_an_error(result, returns, said):
    with pytest.raises(ModelError, match=rf"^op x: its flops\(\(2,\)\) {said}; fix the variant"):
        call_model("op x", "flops", lambda s: result, (2,), returns=returns)
