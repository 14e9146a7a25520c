"""Distinct-launch runs read back: repeats get their first call's counters, labelled reused; the premise
check compares the calls of one signature in an every-launch run.

Under `profile --distinct K` (memtraffic.vocab.launches) a repeated call ran in an `mt|rep|...` range that
ncu skipped; its trace record (a plan config) says `"repeat": true, "reuses": <first measured range>`.
`add_reused` copies that range's kernel rows onto the repeat, with the `reuses` column naming the source,
so every table, per-op sum and diff counts the repeat's bytes and time, and can say they were reused.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from memtraffic.runfolder.records import Plan, TracedConfig, VariedSignature, configs_of

REUSES = "reuses"  # kernel and analyzed tables' column: the range whose counters a row reuses ('' if none)


def repeats(plan: Plan | None) -> list[TracedConfig]:
    """The repeat configs of a plan (records of calls ncu skipped), in plan order."""
    return [c for c in configs_of(plan) if "kind" in c and c.get("repeat")]


def add_reused(kernels: pd.DataFrame, plan: Plan | None) -> pd.DataFrame:
    """The kernel table with a row per kernel of each repeat, copied from the range it reuses (same run),
    and the REUSES column ('' on measured rows). A repeat with kernels of its own in the report keeps
    them; one whose source has no kernel in the report (the program ended first, or it was never
    measured) gets no row: reuse_counts counts it."""
    kernels = kernels.assign(**{REUSES: ""})
    wanted = [(c["range"], source) for c in repeats(plan) if (source := c.get("reuses"))]
    if not wanted or kernels.empty:
        return kernels
    rows_of: dict[str, list[int]] = {}
    for i, rng in enumerate(kernels["range"]):
        rows_of.setdefault(rng, []).append(i)
    # A repeat ncu measured after all (a filter it did not apply) keeps its own counters.
    wanted = [(rng, source) for rng, source in wanted if rng not in rows_of]
    take: list[int] = []
    names: list[str] = []
    sources: list[str] = []
    for rng, source in wanted:
        for i in rows_of.get(source, []):
            take.append(i)
            names.append(rng)
            sources.append(source)
    if not take:
        return kernels
    copies: pd.DataFrame = kernels.iloc[take].assign(range=names, **{REUSES: sources})
    return pd.concat([kernels, copies], ignore_index=True)


@dataclass
class ReuseCounts:
    """How a run's kernel launches were measured: kernels of measured calls, kernels copied onto repeated
    calls (and how many calls), and repeated calls that could reuse nothing (never measured)."""

    measured_kernels: int
    reused_kernels: int
    reused_calls: int  # repeated calls that launched kernels: their first call's were copied
    unmeasured_calls: int = 0  # repeats whose signature was never measured (inside a skipped range)

    def line(self) -> str:
        """'measured 212 of 3336 kernel launches; 3124 repeats reuse their first call's counters (...)'."""
        total = self.measured_kernels + self.reused_kernels
        text = (f"measured {self.measured_kernels} of {total} kernel launches; {self.reused_kernels} repeats "
                f"reuse their first call's counters ({self.reused_calls} repeated calls)")
        if self.unmeasured_calls:
            text += (f"; {self.unmeasured_calls} repeated calls ran inside a skipped range with no measured "
                     "call of their own signature: not counted")
        return text


def reuse_counts(kernels: pd.DataFrame, plan: Plan | None) -> ReuseCounts | None:
    """Counts of a kernel table made by add_reused; None when the plan has no repeat (all measured).
    A repeat of a call that launched no kernel (a view) has nothing to reuse and is not counted."""
    calls = repeats(plan)
    if not calls:
        return None
    reused = kernels[REUSES].astype(bool) if REUSES in kernels else pd.Series(False, index=kernels.index)
    reused_calls = kernels.loc[reused, "range"].nunique() if len(kernels) else 0
    unmeasured = sum(1 for c in calls if not c.get("reuses"))
    return ReuseCounts(int((~reused).sum()), int(reused.sum()), int(reused_calls), unmeasured)


def table_reuse_line(table: pd.DataFrame) -> str | None:
    """reuse_counts' line from an analyzed per-range table (reports and saved tables have no plan at
    hand): kernel launches of measured rows and of reused rows; None when no row is reused."""
    if REUSES not in table or not table[REUSES].astype(bool).any():
        return None
    reused = table[REUSES].astype(bool)
    kernels = table["n_kernels"].fillna(0)
    return ReuseCounts(int(kernels[~reused].sum()), int(kernels[reused].sum()), int(reused.sum())).line()


# --- the premise check ------------------------------------------------------------------------------------

L1_TOLERANCE = 0.01
DRAM_TOLERANCE = 0.03
# One kernel's DRAM reads vary by a few KiB from launch to launch whatever its size (its code, constants
# and the sectors around its data): on the H100's every-launch 64-layer MLP (reports/h100/launches_mlp64)
# the calls of each signature spread by at most 4 KiB, 0.5% of a 530 KB read but 30% of a 9 KB one.
DRAM_FLOOR_BYTES = 4096
# (column, relative tolerance, absolute floor); DRAM writes are shown, never judged: the output a kernel
# leaves in L2 is written back when something later evicts it (0 or all of it, run to run).
_CHECKED = (("l1_ld_bytes", L1_TOLERANCE, 0), ("l1_st_bytes", L1_TOLERANCE, 0),
            ("dram_rd_bytes", DRAM_TOLERANCE, DRAM_FLOOR_BYTES))
_SHOWN = ("dram_wr_bytes",)


def _finite(values: Sequence[float]) -> list[float]:
    return [v for v in values if isinstance(v, int | float) and math.isfinite(v)]


def _spread(values: Sequence[float]) -> float:
    """(max - min) / max of finite values; 0 for fewer than two or all zero."""
    finite = _finite(values)
    if len(finite) < 2 or max(finite) <= 0:
        return 0.0
    return (max(finite) - min(finite)) / max(finite)


def signature_groups(table: pd.DataFrame, plan: Plan | None) -> pd.DataFrame:
    """The premise check of distinct-launch profiling, on an every-launch run's per-range table: the calls
    of each signature (plan configs' `signature`) that ran more than once, with the spread of their
    counters ((max - min) / max) at L1 (ld, st) and DRAM (rd, wr), and `differs` where L1 spreads beyond
    1% or DRAM reads beyond 3% and DRAM_FLOOR_BYTES (DRAM writes are shown, not judged). Largest spread
    first."""
    signature = {c["range"]: signed for c in configs_of(plan)
                 if "kind" in c and (signed := c.get("signature"))}
    keyed = table[[r in signature for r in table["range"]]]
    rows = []
    for sig, calls in keyed.groupby([signature[r] for r in keyed["range"]], sort=False):
        if len(calls) < 2:
            continue
        first = calls.iloc[0]
        kernels = ", ".join(dict.fromkeys(k for ks in calls["kernels"] for k in ks))
        row: dict[str, object] = {"signature": sig, "op": first["op"], "shape": first["shape"],
                                  "dtype": first["dtype"], "calls": len(calls), "kernels": kernels}
        differs = []
        for column, tolerance, floor in _CHECKED:
            values = _finite(list(calls[column]))
            row[f"{column}_spread"] = s = _spread(values)
            if s > tolerance and max(values) - min(values) > floor:
                differs.append(column)
        for column in _SHOWN:
            row[f"{column}_spread"] = _spread(list(calls[column]))
        row["differs"] = ", ".join(differs)
        row["first_range"] = first["range"]
        rows.append(row)
    spreads = [f"{c}_spread" for c in [*(c for c, _, _ in _CHECKED), *_SHOWN]]
    columns = ["signature", "op", "shape", "dtype", "calls", "kernels", *spreads, "differs", "first_range"]
    out: pd.DataFrame = pd.DataFrame(rows, columns=columns)
    if out.empty:
        return out
    worst = out[[f"{c}_spread" for c, _, _ in _CHECKED]].max(axis=1)
    ranked: pd.DataFrame = (out.assign(_w=worst).sort_values("_w", ascending=False, kind="stable")
                            .drop(columns="_w").reset_index(drop=True))
    return ranked


def varied(table: pd.DataFrame, plan: Plan | None) -> list[VariedSignature]:
    """The premise check on a distinct-launch run's own measured calls: signatures measured more than once
    (a value-dependent op's first V calls, --distinct K > 1) whose counters differ beyond its tolerances.
    Their repeats reuse the first call, so a spread here is a spread the reused rows may carry too."""
    if table.empty or REUSES not in table or not plan:
        return []
    groups = signature_groups(table[~table[REUSES].astype(bool)], plan)
    return [{"op": str(g["op"]), "signature": str(g["signature"]), "calls": int(g["calls"]),
             "differs": str(g["differs"]), "l1_ld_bytes_spread": float(g["l1_ld_bytes_spread"]),
             "l1_st_bytes_spread": float(g["l1_st_bytes_spread"]),
             "dram_rd_bytes_spread": float(g["dram_rd_bytes_spread"])}
            for g in groups.to_dict("records") if g["differs"]]


def varied_line(found: Sequence[VariedSignature]) -> str | None:
    """One sentence for people: the worst signature whose measured calls differ, and how many more."""
    if not found:
        return None
    worst = found[0]
    column = worst["differs"].split(", ")[0]
    what = {"l1_ld_bytes": "L1 load bytes", "l1_st_bytes": "L1 store bytes",
            "dram_rd_bytes": "DRAM read bytes"}.get(column, column)
    spread = worst[f"{column}_spread"]  # type: ignore[literal-required]
    more = f" ({len(found) - 1} more signatures too)" if len(found) > 1 else ""
    return (f"{worst['op']} moved {spread:.1%} different {what} across its {worst['calls']} measured calls"
            f"{more}; repeats reuse the first: --value-calls 0 or --every-launch measures every call.")
