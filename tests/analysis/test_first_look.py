"""analysis.first_look: the configs a first look leaves to the full set (measure --metrics auto's second
pass), with their L1 efficiencies and launch counts."""

from __future__ import annotations

import pandas as pd

from memtraffic.analysis.first_look import remeasure
from memtraffic.ncu.metrics import SECOND_PASS_RULE

NAN = float("nan")
COLUMNS = ["range", "eff_l1_ld", "eff_l1_st", "l1_ld_bytes", "l1_st_bytes", "pred_read_bytes",
           "pred_write_bytes"]


def test_the_configs_below_good_l1_that_their_model_does_not_predict():
    table = pd.DataFrame([
        ("a", 1.0, 1.0, 100.0, 100.0, NAN, NAN),  # at the minimum
        ("b", 0.25, 1.0, 400.0, 100.0, NAN, NAN),  # loads 4x, no model: measured again
        ("c", 1.0, 0.5, 100.0, 200.0, NAN, 100.0),  # stores 2x, not as predicted
        ("d", 0.33, 1.0, 300.0, 100.0, 300.0, NAN),  # loads 3x, as its model predicts
        ("e", NAN, 0.5, NAN, 200.0, NAN, NAN),  # its loads unknown
    ], columns=COLUMNS)
    kernels = pd.DataFrame({"range": ["a", "b", "b", "c", "d", "e"]})
    again = remeasure(table, kernels)
    assert again is not None
    assert dict(again.why) == {"b": (0.25, 1.0), "c": (1.0, 0.5), "e": (None, 0.5)}
    assert dict(again.launches) == {"a": 1, "b": 2, "c": 1, "d": 1, "e": 1}
    assert again.rule == SECOND_PASS_RULE and "below 0.9" in again.rule


def test_none_when_every_config_is_explained_or_nothing_was_measured():
    table = pd.DataFrame([("a", 1.0, 1.0, 100.0, 100.0, NAN, NAN)], columns=COLUMNS)
    assert remeasure(table, pd.DataFrame({"range": ["a"]})) is None
    assert remeasure(pd.DataFrame(columns=COLUMNS), pd.DataFrame(columns=["range"])) is None
