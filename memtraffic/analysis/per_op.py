"""`analyze --group-by op`: one row per op type of a traced program (or region name), worst excess first.

Input: analyze's per-range table, where each `mt|op|...` range is one op call with its minimum from the
trace. Per op type: calls (those that launched kernels), of them reused (repeats that reuse their first
call's counters under profile --distinct), kernels, time, bytes each level moved, the
minimum, the excess (measured minus minimum) per level, efficiency per level (summed minimum /
summed bytes), and the diagnosis of its worst call (lowest efficiency at any level) with that call's
range. Sorted by `excess_bytes`, the largest excess of the three levels: L1 shows repeated requests
that the caches absorb, L2/DRAM what reached memory; with TMA loads L1 reads ~0 and L2 carries it.
Launches that are not the program's work (analysis.outside) come last, one row per kind, marked
`outside_program`: readable tables say them in one line instead.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from memtraffic.analysis.findings import RULES, needs_full_set, not_results, sentences, to_dicts
from memtraffic.analysis.outside import left_out
from memtraffic.vocab.files import plain_records
from memtraffic.vocab.units import ABOVE

OUTSIDE = "(outside any op or region)"  # kernels in no `mt|` range, or in a range the plan does not know

MEASURED = ["time_ns", "l1_ld_bytes", "l1_st_bytes", "l2_rd_bytes", "l2_wr_bytes", "dram_rd_bytes",
            "dram_wr_bytes"]
MINIMUM = ["min_read_bytes", "min_write_bytes", "min_bytes"]
COLUMNS = ["op", "calls", "reused", "n_kernels", *MEASURED, *MINIMUM, "excess_l1_bytes", "excess_l2_bytes",
           "excess_dram_bytes", "excess_bytes", "eff_l1_ld", "eff_l1_st", "eff_l2", "eff_dram", "eff_dram_rd",
           "diagnosis", "findings", "worst_range", "worst_call", "status", "outside_program", "outside_kind",
           "no_efficiency"]
# The rules that say a call moved less than its minimum somewhere (an op type's summary keeps them).
BELOW = {rule for rule in RULES if "below_minimum" in rule}
_LEVELS = ("eff_l1_ld", "eff_l1_st", "eff_l2", "eff_dram")
_COUNTS = ("time_ns", "calls", "reused", "n_kernels")


def _ratio(num: float, den: float) -> float:
    return num / den if den > 0 and math.isfinite(num) else math.nan


def _worst(calls: pd.DataFrame) -> pd.Series:
    """The call with the lowest efficiency at any level (NaN efficiencies ignored), else the first."""
    lowest = calls[list(_LEVELS)].min(axis=1, skipna=True)
    return calls.loc[lowest.idxmin()] if lowest.notna().any() else calls.iloc[0]


def summarize(table: pd.DataFrame) -> pd.DataFrame:
    """The per-op-type summary (COLUMNS) of an analyzed per-range table, largest excess first."""
    if table.empty:
        empty: pd.DataFrame = pd.DataFrame(columns=COLUMNS)
        return empty
    outside = left_out(table)
    kept = table[~outside]
    ops = kept["op"].where(kept["op"].astype(bool), OUTSIDE)
    rows = []
    for op, calls in kept.groupby(ops, sort=False):
        s: dict[str, Any] = {"op": op, "calls": len(calls), "n_kernels": int(calls["n_kernels"].sum()),
                             "reused": int(calls["reuses"].astype(bool).sum()) if "reuses" in calls else 0}
        for column in MEASURED:
            s[column] = calls[column].sum(min_count=1)
        for column in MINIMUM:  # a call without a minimum leaves the op type without one
            s[column] = calls[column].sum() if calls[column].notna().all() else math.nan
        for level, moved in (("l1", s["l1_ld_bytes"] + s["l1_st_bytes"]),
                             ("l2", s["l2_rd_bytes"] + s["l2_wr_bytes"]),
                             ("dram", s["dram_rd_bytes"] + s["dram_wr_bytes"])):
            s[f"excess_{level}_bytes"] = moved - s["min_bytes"]
        s["eff_l1_ld"] = _ratio(s["min_read_bytes"], s["l1_ld_bytes"])
        s["eff_l1_st"] = _ratio(s["min_write_bytes"], s["l1_st_bytes"])
        s["eff_l2"] = _ratio(s["min_bytes"], s["l2_rd_bytes"] + s["l2_wr_bytes"])
        s["eff_dram"] = _ratio(s["min_bytes"], s["dram_rd_bytes"] + s["dram_wr_bytes"])
        s["eff_dram_rd"] = _ratio(s["min_read_bytes"], s["dram_rd_bytes"])
        flops = calls["model_flops"].sum(min_count=1) if "model_flops" in calls else math.nan
        s["no_efficiency"] = unshown = not_results({**s, "model_flops": flops})
        for key in unshown:  # not results (findings.not_results): '-' and null, with why
            s[key] = math.nan
        # A matmul's L1 re-reads are its algorithm, not excess: its largest excess is at L2 or DRAM.
        levels = ("l2", "dram") if unshown.get("eff_l1_ld") == "tiles" else ("l1", "l2", "dram")
        excess = [s[f"excess_{level}_bytes"] for level in levels]
        s["excess_bytes"] = max((e for e in excess if math.isfinite(e)), default=math.nan)
        worst = _worst(calls)
        s["findings"], s["worst_range"] = list(worst["findings"]), worst["range"]
        s["worst_call"] = _call_name(worst)
        above = [k for k in _LEVELS + ("eff_dram_rd",) if math.isfinite(s[k]) and s[k] > ABOVE]
        if above:  # the op type moved less than its minimum somewhere: add the findings below the minimum
            # of the call that moved least, unless the worst call's say the same
            best = calls.loc[calls[above].max(axis=1).idxmax()]
            said = {f.rule for f in s["findings"]}
            s["findings"] += [f for f in best["findings"] if f.rule in BELOW and f.rule not in said]
        s["diagnosis"] = sentences(s["findings"])
        s["status"] = _status(calls)
        s["outside_program"], s["outside_kind"] = False, ""
        rows.append(s)
    out: pd.DataFrame = pd.DataFrame(rows, columns=COLUMNS).sort_values(
        "excess_bytes", ascending=False, na_position="last", kind="stable")
    if not outside.any():
        kept_only: pd.DataFrame = out.reset_index(drop=True)
        return kept_only
    left = _left_out_rows(table[outside])
    return pd.concat([out, left], ignore_index=True) if len(out) else left


def _call_name(call: pd.Series) -> str:
    """A call of its op type as people name it: 'call 14' (its findings' subject), else its range."""
    found = call.get("findings")
    subjects = [f.subject for f in found] if isinstance(found, list) else []
    if subjects and subjects[0].call is not None:
        return f"call {subjects[0].call}"
    return subjects[0].label() if subjects else str(call["range"])


def _left_out_rows(table: pd.DataFrame) -> pd.DataFrame:
    """One row per kind of the launches left out: their calls, kernels and time (no minimum)."""
    rows: list[dict[str, Any]] = [{"op": f"(not the program's ops: {kind})", "calls": len(calls), "reused": 0,
             "n_kernels": int(calls["n_kernels"].sum()), "diagnosis": "", "findings": [], "worst_range": "",
             "worst_call": "", "status": "ok", "no_efficiency": {},
             "outside_program": True, "outside_kind": kind,
             **{column: calls[column].sum(min_count=1) for column in MEASURED}}
            for kind, calls in table.groupby("outside_kind", sort=False)]
    left: pd.DataFrame = pd.DataFrame(rows, columns=COLUMNS)
    return left


def needs_full_look(table: pd.DataFrame, top: int = 8) -> list[str]:
    """The op types (at most `top`, largest L1 excess first) of an analyzed per-range table that need the
    full set (findings.needs_full_set, per op type), when the run lacks its counters. Empty when the run
    has them, or when no op type needs them."""
    if table.empty or "op" not in table or table.get("req_ld_bytes", pd.Series(dtype=float)).notna().any():
        return []
    summary = summarize(table)
    low = summary[needs_full_set(summary)]
    low = low[low["op"].str.startswith("aten.")]
    ranked = low.sort_values("excess_l1_bytes", ascending=False, kind="stable")
    return [str(op) for op in ranked["op"].head(top)]


def _status(calls: pd.DataFrame) -> str:
    """An op type's status: 'ok' when every call is (analyze.STATUSES), 'missing' when none was
    measured, else 'partial'."""
    found = set(calls["status"]) if "status" in calls else {"ok"}
    if found <= {"ok"}:
        return "ok"
    return "missing" if found <= {"missing", "failed"} else "partial"


def to_records(df: pd.DataFrame) -> list[dict[str, object]]:
    """Plain JSON-able dicts: NaN -> None, whole byte counts and call counts -> int, findings as records."""
    if "findings" in df:
        records = [to_dicts(f) if isinstance(f, list) else [] for f in df["findings"]]
        df = df.assign(findings=pd.Series(records, index=df.index, dtype=object))
    return plain_records(df, {c for c in df.columns if c.endswith("_bytes") or c in _COUNTS})
