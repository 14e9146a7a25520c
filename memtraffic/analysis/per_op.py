"""`analyze --group-by op`: one row per op type of a traced program (or region name), worst excess first.

Input: analyze's per-range table, where each `mt|op|...` range is one op call with its minimum from the
trace. Per op type: calls (those that launched kernels), kernels, time, bytes each level moved, the
minimum, the excess (measured minus minimum) per level, efficiency per level (summed minimum /
summed bytes), and the diagnosis of its worst call (lowest efficiency at any level) with that call's
range. Sorted by `excess_bytes`, the largest excess of the three levels: L1 shows repeated requests
that the caches absorb, L2/DRAM what reached memory; with TMA loads L1 reads ~0 and L2 carries it.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from memtraffic.analysis.analyze import ABOVE
from memtraffic.core.units import fmt_bytes, fmt_eff, fmt_time

OUTSIDE = "(outside any op or region)"  # kernels in no `mt|` range, or in a range the plan does not know

MEASURED = ["time_ns", "l1_ld_bytes", "l1_st_bytes", "l2_rd_bytes", "l2_wr_bytes", "dram_rd_bytes",
            "dram_wr_bytes"]
MINIMUM = ["min_read_bytes", "min_write_bytes", "min_bytes"]
COLUMNS = ["op", "calls", "n_kernels", *MEASURED, *MINIMUM, "excess_l1_bytes", "excess_l2_bytes",
           "excess_dram_bytes", "excess_bytes", "eff_l1_ld", "eff_l1_st", "eff_l2", "eff_dram", "eff_dram_rd",
           "diagnosis", "worst_range"]
_LEVELS = ("eff_l1_ld", "eff_l1_st", "eff_l2", "eff_dram")
_COUNTS = ("time_ns", "calls", "n_kernels")


def _ratio(num: float, den: float) -> float:
    return num / den if den > 0 and math.isfinite(num) else math.nan


def _worst(calls: pd.DataFrame) -> dict[str, Any]:
    """The call with the lowest efficiency at any level (NaN efficiencies ignored), else the first."""
    lowest = calls[list(_LEVELS)].min(axis=1, skipna=True)
    return calls.loc[lowest.idxmin()] if lowest.notna().any() else calls.iloc[0]


def summarize(table: pd.DataFrame) -> pd.DataFrame:
    """The per-op-type summary (COLUMNS) of an analyzed per-range table, largest excess first."""
    if table.empty:
        return pd.DataFrame(columns=COLUMNS)
    ops = table["op"].where(table["op"].astype(bool), OUTSIDE)
    rows = []
    for op, calls in table.groupby(ops, sort=False):
        s: dict[str, Any] = {"op": op, "calls": len(calls), "n_kernels": int(calls["n_kernels"].sum())}
        for column in MEASURED:
            s[column] = calls[column].sum(min_count=1)
        for column in MINIMUM:  # a call without a minimum leaves the op type without one
            s[column] = calls[column].sum() if calls[column].notna().all() else math.nan
        for level, moved in (("l1", s["l1_ld_bytes"] + s["l1_st_bytes"]),
                             ("l2", s["l2_rd_bytes"] + s["l2_wr_bytes"]),
                             ("dram", s["dram_rd_bytes"] + s["dram_wr_bytes"])):
            s[f"excess_{level}_bytes"] = moved - s["min_bytes"]
        excess = [s[f"excess_{level}_bytes"] for level in ("l1", "l2", "dram")]
        s["excess_bytes"] = max((e for e in excess if math.isfinite(e)), default=math.nan)
        s["eff_l1_ld"] = _ratio(s["min_read_bytes"], s["l1_ld_bytes"])
        s["eff_l1_st"] = _ratio(s["min_write_bytes"], s["l1_st_bytes"])
        s["eff_l2"] = _ratio(s["min_bytes"], s["l2_rd_bytes"] + s["l2_wr_bytes"])
        s["eff_dram"] = _ratio(s["min_bytes"], s["dram_rd_bytes"] + s["dram_wr_bytes"])
        s["eff_dram_rd"] = _ratio(s["min_read_bytes"], s["dram_rd_bytes"])
        worst = _worst(calls)
        s["diagnosis"], s["worst_range"] = worst["diagnosis"], worst["range"]
        above = [k for k in _LEVELS + ("eff_dram_rd",) if math.isfinite(s[k]) and s[k] > ABOVE]
        if above:  # the op type moved less than its minimum somewhere: show the call that explains it
            best = calls.loc[calls[above].max(axis=1).idxmax()]
            if best["range"] != worst["range"] and best["diagnosis"]:
                s["diagnosis"] = "; ".join(filter(None, [worst["diagnosis"], f"{best['diagnosis']} (call "
                                                                                 f"{best['range']})"]))
        rows.append(s)
    out = pd.DataFrame(rows, columns=COLUMNS)
    return out.sort_values("excess_bytes", ascending=False, na_position="last", kind="stable").reset_index(
        drop=True)


def to_records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """Plain JSON-able dicts: NaN -> None, whole byte counts and call counts -> int."""
    from memtraffic.analysis.analyze import to_records as plain

    return plain(df, {c for c in df.columns if c.endswith("_bytes") or c in _COUNTS})


WORST_CALLS = 10  # op calls `profile --torch-ops` prints by default, largest excess first


def render_op_calls(table: pd.DataFrame, n: int = WORST_CALLS) -> str:
    """A traced program's analysis that fits a terminal: the per-op-type summary, then the `n` calls
    with the largest excess (bytes beyond the minimum at the level with the most)."""
    from memtraffic.analysis.analyze import format_table as calls_table

    moved = pd.concat([table[f"{level}_rd_bytes"] + table[f"{level}_wr_bytes"] for level in ("l2", "dram")]
                      + [table["l1_ld_bytes"] + table["l1_st_bytes"]], axis=1)
    excess = moved.max(axis=1) - table["min_bytes"]
    worst = table.assign(_excess=excess).sort_values("_excess", ascending=False, na_position="last",
                                                     kind="stable").head(n).drop(columns="_excess")
    text = format_table(summarize(table))
    text += (f"\n\nthe {len(worst)} calls with the most excess, of {len(table)} (all: --all-calls; every "
             "call is in the run folder's results.csv):\n")
    return text + calls_table(worst)


def format_table(df: pd.DataFrame) -> str:
    """Readable units; each op type's worst call and its diagnosis listed below."""
    from memtraffic.views.tables import text_table

    if df.empty:
        return "(no rows)"
    per_direction = df["eff_dram_rd"].notna().any()
    headers = ["op", "calls", "kernels", "time", "L1 ld+st", "L2 rd+wr", "DRAM rd+wr", "minimum", "excess",
               "eff L1 ld", "eff L1 st", "eff L2", "eff DRAM rd" if per_direction else "eff DRAM"]
    # A level this GPU has no counter for reads n/a (no DRAM counter on unified memory).
    absent = {c for c in ("l1_ld_bytes", "l2_rd_bytes", "dram_rd_bytes") if df[c].isna().all()}

    def cell(level: str, text: str) -> str:
        return "n/a" if level in absent else text

    body = [[r["op"], str(r["calls"]), str(r["n_kernels"]), fmt_time(r["time_ns"]),
             cell("l1_ld_bytes", fmt_bytes(r["l1_ld_bytes"] + r["l1_st_bytes"])),
             cell("l2_rd_bytes", fmt_bytes(r["l2_rd_bytes"] + r["l2_wr_bytes"])),
             cell("dram_rd_bytes", fmt_bytes(r["dram_rd_bytes"] + r["dram_wr_bytes"])),
             fmt_bytes(r["min_bytes"]), fmt_bytes(r["excess_bytes"]),
             cell("l1_ld_bytes", fmt_eff(r["eff_l1_ld"])), cell("l1_ld_bytes", fmt_eff(r["eff_l1_st"])),
             cell("l2_rd_bytes", fmt_eff(r["eff_l2"])),
             cell("dram_rd_bytes", fmt_eff(r["eff_dram_rd"] if per_direction else r["eff_dram"]))]
            for r in df.to_dict("records")]
    notes = [f"  {r['op']}: {r['diagnosis']} (worst call {r['worst_range']})"
             for r in df.to_dict("records") if r["diagnosis"]]
    text = text_table(headers, body)
    text += "\n\nexcess: bytes beyond the minimum, at the level (L1, L2, DRAM) with the most"
    if notes:
        text += "\n\n" + "\n".join(notes)
    return text
