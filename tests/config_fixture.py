"""Whole plan configs for tests that write a plan by hand: every key the schema requires (records.Config),
with the values a test names on top. Made-up values, not measurements."""

from __future__ import annotations

from memtraffic.runfolder.records import TracedConfig, VariantConfig


def variant_config(i: int = 0, **given: object) -> VariantConfig:
    """measure's config number i (variant 'v<i>', softmax 8x8 fp32), with `given` keys replaced."""
    config: VariantConfig = {
        "id": i, "range": f"mt|v{i}|8x8|fp32", "variant": f"v{i}", "op": "softmax", "shape": [8, 8],
        "dtype": "fp32", "params": {}, "explicit_params": {}, "min_read_bytes": 256, "min_write_bytes": 256,
        "pred_read_bytes": 256, "pred_write_bytes": 256, "model_flops": 320,
    }
    return {**config, **given}  # type: ignore[typeddict-item]


def traced_config(i: int = 0, **given: object) -> TracedConfig:
    """profile's config number i (an aten.add call on 8 fp32 values), with `given` keys replaced."""
    config: TracedConfig = {
        "id": i, "range": f"mt|op|{i}|aten.add.Tensor", "kind": "op", "seq": i, "pid": 1,
        "op": "aten.add.Tensor", "variant": "", "shape": [8], "dtype": "fp32", "params": {},
        "min_read_bytes": 64, "min_write_bytes": 32, "pred_read_bytes": None, "pred_write_bytes": None,
        "model_flops": 8,
    }
    return {**config, **given}  # type: ignore[typeddict-item]
