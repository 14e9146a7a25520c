"""Launches that are not the program's work: which launches they are, and the one line that sums them.

In a run that traced the program's ops (`profile --torch-ops`: run.json `torch_ops`), every aten op the
program calls, every Triton launch and every region runs in its own `mt|` range, so a launch outside every
`mt|` range was made by none of the program's traced calls. Each such launch gets one kind, told apart by
the launches themselves:

- `autotuning`, `cache flush`: a run of consecutive launches of one report, each outside every `mt|` range
  and each either a launch of a kernel that the same report also launches inside a `mt|triton|` range or
  an int32 fill (`FillFunctor<int>`), with at least one of each, is autotuning: the kernel launches are
  its benchmark runs, the fills the cache flushes between them (Triton's do_bench and Inductor's
  benchmarker zero an int32 buffer larger than L2 before a timed run).
- `other`: any other launch outside every `mt|` range of a traced run.

Where the rule comes from: the committed timing-only run of a compiled training step
(reports/h100/timing_only_layernorm_mlp_adamw) has 1972 launches, 1901 outside every range, 27.31 ms of its
40.49 ms. 1548 of them form three such runs, each of one Inductor kernel and int32 fills (624, 624 and 300
launches; 474 runs and 1074 fills in all) that end right before that kernel's first launch in its range,
where memtraffic settles its autotuning (inprogram.triton_launches). The other 353 all run in the first
step, between the backward's last kernel and the compiled optimizer step's first: 18 float fills and
eager kernels (cat, abs, comparisons, nonzero, min/max, ceil) that no traced call launched.

A run that did not trace the program's ops (no --torch-ops, or a report without its run folder) runs the
program's own eager kernels outside every range too (reports/h100/profile_cupy_region: CuPy's kernels
beside its regions), so only autotuning is left out there; other launches stay rows.

The analyzed table keeps the rows it leaves out (`outside_program` true, `outside_kind` the kind), so JSON
and CSV hold every launch; readable tables and per-op summaries leave them out and say `left_out_line`.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from memtraffic.vocab.launches import measured_range
from memtraffic.vocab.units import fmt_time

AUTOTUNING, FLUSH, OTHER = "autotuning", "cache flush", "other"
KIND_WORDS = {AUTOTUNING: "autotuning", FLUSH: "flushes", OTHER: "other"}  # the line's words (LEGEND)
INT_FILL = "FillFunctor<int>"  # at::native's fill kernel of an int32 tensor (x.zero_(), x.fill_(n))
TRITON_RANGE = "mt|triton|"


def outside_kinds(kernels: pd.DataFrame, traced: bool) -> list[str]:
    """Each launch's kind (see the module doc), '' for the program's work, in the table's row order.
    `kernels`: one row per launch with report, launch (its order in the report), range, kernel and, where
    the report has it, kernel_full (the name with its template arguments)."""
    kinds = [""] * len(kernels)
    if not len(kernels):
        return kinds
    name = kernels["kernel"].fillna("")
    full = kernels["kernel_full"].fillna(name) if "kernel_full" in kernels else name
    table = pd.DataFrame({"report": kernels["report"].fillna("").astype(str).to_numpy(),
                          "launch": kernels["launch"].to_numpy(),
                          "range": kernels["range"].fillna("").to_numpy(),
                          "kernel": name.to_numpy(), "full": full.to_numpy()})
    for _, launches in table.groupby("report", sort=False):
        ordered = launches.sort_values("launch", kind="stable")
        ranged = [str(r).startswith("mt|") for r in ordered["range"]]
        triton = {k for r, k in zip(ordered["range"], ordered["kernel"], strict=True)
                  if measured_range(str(r)).startswith(TRITON_RANGE)}
        stretch: list[tuple[int, bool, bool]] = []  # (row position, a run, a fill): consecutive candidates
        for pos, inside, name, whole in zip(ordered.index, ranged, ordered["kernel"], ordered["full"],
                                            strict=True):
            fill = INT_FILL in str(whole)
            run = name in triton and not fill
            if not inside and (run or fill):
                stretch.append((int(pos), run, fill))
                continue
            _settle(stretch, traced, kinds)
            stretch = []
            if not inside:
                kinds[int(pos)] = OTHER if traced else ""
        _settle(stretch, traced, kinds)
    return kinds


def _settle(stretch: Sequence[tuple[int, bool, bool]], traced: bool, kinds: list[str]) -> None:
    """Kinds for a run of consecutive launches outside every range, each a benchmark run or a fill:
    autotuning with at least one of each, else other in a traced run, else '' (the program's own)."""
    tuning = any(run for _, run, _ in stretch) and any(fill for _, _, fill in stretch)
    for pos, run, _ in stretch:
        kinds[pos] = (AUTOTUNING if run else FLUSH) if tuning else OTHER if traced else ""


def left_out(table: pd.DataFrame) -> pd.Series:
    """Whether each row is left out of readable tables (`outside_program`; a table without it: none)."""
    if "outside_program" not in table:
        none: pd.Series = pd.Series(False, index=table.index)
        return none
    flags: pd.Series = table["outside_program"].map(lambda v: v is True or v == 1).astype(bool)
    return flags


def left_out_line(table: pd.DataFrame) -> str | None:
    """The one line that says the rows left out (launches, GPU time, count by kind), None when none is.
    Works on analyze's per-range or per-kernel table and on the per-op summary (n_kernels, time_ns and
    outside_kind per row)."""
    out = table[left_out(table)]
    if out.empty:
        return None
    launches = out["n_kernels"].fillna(0).astype(int)
    by_kind = launches.groupby(out["outside_kind"].fillna(OTHER).replace("", OTHER)).sum()
    line = (f"{int(launches.sum())} launches outside the program's ops left out "
            f"({fmt_time(float(out['time_ns'].fillna(0).sum()))})")
    kinds = [k for k in KIND_WORDS if by_kind.get(k, 0)]
    if kinds != [OTHER]:
        line += ": " + ", ".join(f"{int(by_kind[k])} {KIND_WORDS[k]}" for k in kinds)
    return line
