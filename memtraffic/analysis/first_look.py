"""What a first look (--metrics auto's one-pass set, ncu.metrics.FIRST_LOOK) leaves to the full set: the
configs `measure` measures again with FULL_LOOK in the same run (remeasure, by the rule of
ncu.metrics.SECOND_PASS_RULE: analysis.findings.needs_full_set)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memtraffic.analysis.findings import needs_full_set, ok
from memtraffic.analysis.row import row_dicts
from memtraffic.ncu.metrics import Remeasure

if TYPE_CHECKING:
    import pandas as pd


def remeasure(table: pd.DataFrame, kernels: pd.DataFrame) -> Remeasure | None:
    """The configs of a first look's analyzed table (and its launch table) that the full set must measure
    again, with their L1 efficiencies and launch counts; None when no config needs it."""
    low = table[needs_full_set(table)] if len(table) else table
    if not len(low):
        return None
    why = {r["range"]: (r["eff_l1_ld"] if ok(r["eff_l1_ld"]) else None,
                        r["eff_l1_st"] if ok(r["eff_l1_st"]) else None) for r in row_dicts(low)}
    launches = {str(r): int(n) for r, n in kernels.groupby("range").size().items()}
    return Remeasure(why, launches)
