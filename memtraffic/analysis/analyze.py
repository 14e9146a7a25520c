"""Per-level efficiency (minimum / measured), amplification, bandwidth and a one-line diagnosis.

Rows are NVTX ranges (a range with several kernels is summed and lists them) or kernel launches.
The minimum comes from the op model of the run's plan for memtraffic runs (or the trace of a traced
program), or from --min-bytes (total, or READ:WRITE for per-direction efficiencies; REGEX=... for the
ranges whose name matches) for reports captured by hand. Without a
minimum the efficiencies are NaN and the table still shows the bytes.

The table's columns are analysis.row.Row's, in its order (COLUMNS); a timing-only run's add TimingOnlyRow's.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any, SupportsInt, cast

import numpy as np
import pandas as pd

from memtraffic.analysis.findings import SECTOR_BYTES, Role, diagnose, not_results, ok, sentences, to_dicts
from memtraffic.analysis.outside import outside_kinds
from memtraffic.analysis.reuse import REUSES, add_reused
from memtraffic.analysis.row import ANALYZED, COLUMNS, Row, row_dicts
from memtraffic.analysis.time_notes import copy_seconds
from memtraffic.host.roofs_cache import find_roofs
from memtraffic.ncu.kernel_table import kernel_table
from memtraffic.ncu.metrics import LAUNCH_STATS, METRICS
from memtraffic.ncu.report import ADDITIVE_UNITS, RANGE_KERNEL, EmptyReportError
from memtraffic.runfolder.load import Run, load_run
from memtraffic.runfolder.paths import portable_path
from memtraffic.runfolder.records import DAMAGED, Config, Outcome, Plan, RunRecord, configs_of
from memtraffic.runfolder.results import read_results
from memtraffic.runfolder.timings import (
    KERNEL_TIMES_FILE,
    NCU_TIME,
    NO_KERNEL_TIME,
    TIMER,
    TIMER_PASS,
    is_timings,
    launch_times,
    range_times,
)
from memtraffic.vocab.errors import ReportError, UsageError, warn
from memtraffic.vocab.files import (
    csv_text,
    plain_records,
    require_file,
    write_bytes_atomic,
    write_json,
)
from memtraffic.vocab.finding import Subject
from memtraffic.vocab.grouping import Grouping, grouping
from memtraffic.vocab.launches import measured_range
from memtraffic.vocab.ops import format_shape
from memtraffic.vocab.units import compile_regex, parse_size

# Any one of these makes a report worth analyzing; time is always needed.
_TRAFFIC_ALIASES = ["l1_ld_bytes", "l1_st_bytes", "l2_rd_sectors", "l2_wr_sectors", "dram_rd_bytes",
                    "dram_wr_bytes", "l1_local_ld_bytes", "l1_local_st_bytes"]


def parse_min_bytes(text: str) -> tuple[float, float, float]:
    """'16MiB' -> (nan, nan, total); '8MiB:8MiB' -> (read, write, read + write). Sizes as units.parse_size."""
    if ":" in text:
        read_text, _, write_text = text.partition(":")
        if not read_text.strip() or not write_text.strip():
            raise UsageError(f"malformed --min-bytes {text!r}: write TOTAL or READ:WRITE, e.g. 8MiB:8MiB")
        read, write = parse_size(read_text), parse_size(write_text)
        read_write = (float(read), float(write), float(read + write))
    else:
        read_write = (math.nan, math.nan, float(parse_size(text)))
    if not read_write[2] > 0:  # efficiencies divide the minimum by what moved: a zero says nothing
        raise UsageError(f"--min-bytes {text!r} is no minimum: give the bytes the operation must move "
                         "(more than 0), e.g. 8MiB or 8MiB:8MiB")
    return read_write


MinRule = tuple[re.Pattern[str], tuple[float, float, float]]  # a range regex and its minimum


def parse_min_bytes_options(texts: Sequence[str]) -> tuple[tuple[float, float, float] | None, list[MinRule]]:
    """--min-bytes values -> (the global minimum or None, [(range regex, minimum)] in the order given).

    'TOTAL' or 'READ:WRITE' is the global form (at most one); 'REGEX=TOTAL' or 'REGEX=READ:WRITE' gives
    the rows whose range or kernel name matches REGEX (re.search) that minimum. Sizes never hold '=', so
    the last '=' splits.
    """
    overall: list[str] = []
    rules: list[MinRule] = []
    for text in texts:
        pattern, eq, size = text.rpartition("=")
        if not eq:
            overall.append(text)
            continue
        if not pattern or not size.strip():
            raise UsageError(f"malformed --min-bytes {text!r}: write REGEX=READ:WRITE or REGEX=TOTAL, "
                             "e.g. 'attention=8MiB:8MiB'")
        try:
            rules.append((compile_regex(pattern), parse_min_bytes(size)))
        except re.error as err:
            raise UsageError(f"--min-bytes {text!r}: {pattern!r} is not a regular expression ({err})"
                             ) from None
    if len(overall) > 1:
        given = " and ".join(map(repr, overall))
        raise UsageError(f"--min-bytes given twice without a range ({given}): give one global TOTAL or "
                         "READ:WRITE, and REGEX=READ:WRITE for particular ranges")
    return (parse_min_bytes(overall[0]) if overall else None), rules


def _apply_min_rules(df: pd.DataFrame, rules: Sequence[MinRule]) -> np.ndarray:
    """Each rule's minimum to the rows whose range or a kernel's name matches it (re.search) and no earlier
    rule; returns the rows set. A plain .ncu-rep has no ranges: its kernels' names are what a rule names."""
    taken = np.zeros(len(df), dtype=bool)
    kernels = [k if isinstance(k, list) else [] for k in df["kernels"]] if "kernels" in df else [[]] * len(df)
    for pattern, (read, write, total) in rules:
        hit = np.array([bool(pattern.search(r)) or any(pattern.search(str(k)) for k in ks)
                        for r, ks in zip(df["range"], kernels, strict=True)], dtype=bool)
        if not hit.any():
            names = sorted({r for r in df["range"] if r}) or sorted({str(k) for ks in kernels for k in ks})
            known = (f"the ranges and kernels are {', '.join(names[:5])}{', ...' if len(names) > 5 else ''}"
                     if names else "the report has no range or kernel: give the global TOTAL or READ:WRITE")
            raise UsageError(f"--min-bytes {pattern.pattern!r} matches no range or kernel: {known}")
        hit &= ~taken
        df.loc[hit, ["min_read_bytes", "min_write_bytes", "min_bytes"]] = (read, write, total)
        taken |= hit
    return taken


def _div(num: pd.Series, den: pd.Series) -> pd.Series:
    """num / den, NaN where den is 0 or missing (no traffic measured is no efficiency), and where either is
    negative or infinite (a ratio of those would be a wrong number, not a finding)."""
    num = pd.to_numeric(num, errors="coerce").astype(float)
    den = pd.to_numeric(den, errors="coerce").astype(float)
    ratio: pd.Series = num.where((num >= 0) & (num < math.inf)) / den.where((den > 0) & (den < math.inf))
    return ratio


def _config_models(plan: Plan | None) -> dict[str, dict[str, Any]]:
    """range -> config with minimum, predicted bytes and FLOPs, as the plan recorded them.

    The op's minimum and FLOPs are recomputed from memtraffic.vocab.ops where the op is known (they need
    only shape and dtype name, no torch), so a corrected formula reaches old runs; a variant's predicted
    bytes are the plan's (recomputing them would import the kernels, torch and triton).
    """
    from memtraffic.vocab.ops import OPS

    if not plan:
        return {}
    out: dict[str, dict[str, Any]] = {}
    for config in plan.get("configs", []):
        entry = dict(config)
        op = OPS.get(config.get("op", "")) if config.get("kind", "variant") == "variant" else None
        if op is not None and config.get("dtype") and config.get("shape"):
            try:
                shape = tuple(config["shape"])
                minimum = op.minimum(shape, config["dtype"])
                entry.update(min_read_bytes=minimum.read, min_write_bytes=minimum.write,
                             model_flops=op.flops(shape))
            except Exception:  # a shape or dtype the model no longer takes: keep what the plan recorded
                pass
        out[config["range"]] = entry
    return out


def _check_metrics(kernels: pd.DataFrame, report: str) -> None:
    kernels = kernels.reindex(columns=list(dict.fromkeys([*kernels.columns, "time", *_TRAFFIC_ALIASES])))
    if kernels["time"].isna().all():
        raise ReportError(f"{report} lacks {METRICS['time'].ncu} (kernel time): profile with it "
                          "(`memtraffic measure` always collects it)")
    if kernels[_TRAFFIC_ALIASES].isna().all().all():
        names = ", ".join(METRICS[a].ncu for a in _TRAFFIC_ALIASES)
        raise ReportError(f"{report} lacks every traffic metric ({names}): profile with "
                          "`memtraffic measure --metrics traffic` or ncu --metrics with those names")


def kernel_times(kernels: pd.DataFrame, report: Path) -> pd.DataFrame:
    """The launches of an ncu report with each one's time source (runfolder.timings). A range-replayed
    launch (RANGE_KERNEL: one result for a whole range) never keeps ncu's range duration as its time: it
    takes its kernels' summed times from the kernel timer's pass beside the report (KERNEL_TIMES_FILE,
    written by `profile --replay range`), else no time at all."""
    ranged = (kernels["kernel"] == RANGE_KERNEL).to_numpy()
    kernels = kernels.assign(time_source=np.where(ranged, NO_KERNEL_TIME, NCU_TIME))
    if not ranged.any():
        return kernels
    times_file = report.parent / KERNEL_TIMES_FILE
    timed = range_times(times_file) if require_file(times_file, DAMAGED) else {}
    own = [timed.get(measured_range(r)) if is_ranged else None
           for r, is_ranged in zip(kernels["range"], ranged, strict=True)]
    kernels["time"] = [float(t) if t is not None else (math.nan if is_ranged else old)
                       for t, is_ranged, old in zip(own, ranged, kernels["time"], strict=True)]
    kernels.loc[[t is not None for t in own], "time_source"] = TIMER_PASS
    return kernels


def own_times(kernels: pd.DataFrame, timers: Mapping[str, Path]) -> pd.DataFrame:
    """The kernel table with each kernel-replayed launch's time taken from the pass of the program without
    ncu beside its report (`timers`: report column value -> KERNEL_TIMES_FILE), where the pass ran the same
    kernels in its range (runfolder.timings.launch_times). Repeats (add_reused's copies) join the kernels of
    their own `mt|rep|` range, so each call keeps its own time; a launch the pass did not match keeps ncu's
    time and says so in time_source."""
    if not timers or kernels.empty:
        return kernels
    kernels = kernels.copy()
    for report, times_file in timers.items():
        mine = kernels.index[(kernels["report"] == report) & (kernels["time_source"] == NCU_TIME)]
        if not len(mine):
            continue
        own = launch_times(times_file, list(zip(kernels.loc[mine, "range"], kernels.loc[mine, "kernel"],
                                                strict=True)))
        joined = [i for i, t in zip(mine, own, strict=True) if t is not None]
        kernels.loc[joined, "time"] = [float(t) for t in own if t is not None]
        kernels.loc[joined, "time_source"] = TIMER_PASS
    return kernels


def _group(kernels: pd.DataFrame, group_by: Grouping) -> pd.DataFrame:
    """Sum the counts of each range's kernels (kernels without a range stay single rows)."""
    dims = [_dims(g, b) for g, b in zip(kernels["grid_size"], kernels["block_size"], strict=True)]
    if group_by == "kernel":
        out: pd.DataFrame = kernels.copy()
        out["kernels"] = [[k] for k in out["kernel"]]
        out["launch_dims"] = [[d] for d in dims]
        out["n_kernels"] = 1
        return out
    # Kernels outside any range stay one row each.
    # \x1f (unit separator), not NUL: pandas 2 hashes object strings as C strings, so "a\0b" == "a\0c".
    keys = [f"{run}\x1f{rng}" if rng else f"{run}\x1f#{launch} {name}" for run, rng, launch, name in
            zip(kernels["run"], kernels["range"], kernels["launch"], kernels["kernel"], strict=True)]
    kernels = kernels.assign(_key=keys)
    aliases = [a for a in METRICS if a in kernels]
    counts = [a for a in aliases if METRICS[a].unit in ADDITIVE_UNITS]
    grouped = kernels.groupby("_key", sort=False)
    # Vectorized: a Python function per group costs seconds for thousands of ranges. min_count=1 keeps a
    # metric no kernel of the range had NaN, not zero.
    summed = grouped[counts].sum(min_count=1)
    averaged = grouped[[a for a in aliases if a not in counts]].mean()
    kept = ["run", "range", "device", "report",
            *[c for c in (REUSES, "outside_kind", "time_source") if c in kernels]]
    first = grouped[kept].first()
    out = first.join(summed.join(averaged)[aliases])
    out["passes"] = grouped["passes"].max()
    # The launch of each range's longest kernel, and its achieved occupancy: what a time diagnosis names.
    launch = ["grid_size", "block_size", *LAUNCH_STATS, "warps_active_pct"]
    # Ranges whose kernels all lack a time have no longest kernel (pandas 3's idxmax raises on them).
    timed = kernels.dropna(subset=["time"]).groupby("_key", sort=False)["time"].idxmax()
    longest = kernels.reindex(columns=["_key", *launch]).loc[timed]
    out = out.drop(columns=[c for c in launch if c in out]).join(longest.set_index("_key"))
    names: dict[str, list[str]] = {}  # each range's kernels in launch order (faster than groupby lists)
    shapes: dict[str, list[str]] = {}
    for key, name, dim in zip(kernels["_key"], kernels["kernel"], dims, strict=True):
        names.setdefault(key, []).append(name)
        shapes.setdefault(key, []).append(dim)
    out["kernels"] = [names[key] for key in out.index]
    out["launch_dims"] = [shapes[key] for key in out.index]
    out["n_kernels"] = grouped["kernel"].size()
    grouped_out: pd.DataFrame = out.reset_index(drop=True)
    return grouped_out


def _dims(grid: object, block: object) -> str:
    """'8192x128': a launch's blocks and threads a block ('?' where the report lacks them)."""
    # int() takes nothing else
    if not isinstance(grid, SupportsInt | str) or not isinstance(block, SupportsInt | str):
        return "?"
    try:
        return f"{int(grid)}x{int(block)}"
    except (TypeError, ValueError):
        return "?"


def compute(rows: pd.DataFrame, plan: Plan | None = None,
            min_bytes: tuple[float, float, float] | None = None,
            min_rules: Sequence[MinRule] = ()) -> pd.DataFrame:
    """The analyzed table (COLUMNS: analysis.row.Row's columns) from grouped launch rows."""
    # A GPU without some level's counter (no DRAM counter on unified memory) has no column for it: NaN.
    df = rows.reindex(columns=list(dict.fromkeys([*rows.columns, *METRICS, REUSES])))
    df[REUSES] = df[REUSES].fillna("")
    df["outside_kind"] = [k if isinstance(k, str) else "" for k in df.get("outside_kind", [None] * len(df))]
    df["outside_program"] = df["outside_kind"] != ""
    if rows.get("status") is None:
        df["status"] = "ok"
    if rows.get("launch_dims") is None:
        df["launch_dims"] = [[] for _ in range(len(df))]
    models = _config_models(plan)
    cfgs = [models.get(r, {}) for r in df["range"]]
    df["variant"] = [c.get("variant", "") for c in cfgs]
    df["op"] = [c.get("op", "") for c in cfgs]
    df["shape"] = [format_shape(c["shape"]) if "shape" in c else "" for c in cfgs]
    df["dtype"] = [c.get("dtype", "") for c in cfgs]
    df["params"] = [dict(c.get("params", {})) for c in cfgs]
    for key in ("min_read_bytes", "min_write_bytes", "pred_read_bytes", "pred_write_bytes", "model_flops"):
        df[key] = [float(c[key]) if c.get(key) is not None else math.nan for c in cfgs]
    if min_bytes is not None:  # the user's minimum wins over the model's
        df["min_read_bytes"], df["min_write_bytes"], total = min_bytes
        df["min_bytes"] = total
    else:
        df["min_bytes"] = df["min_read_bytes"] + df["min_write_bytes"]
    named = _apply_min_rules(df, min_rules)  # a named range's minimum wins over both
    # Why a row's minimum may sit above what it moved: a bound the tracer recorded, a global --min-bytes
    # that every row of a report gets, one kernel of several in its range.
    bounds = [f"the minimum is an upper bound ({c['min_note']})" if c.get("min_note") else "" for c in cfgs]
    if min_bytes is not None and len(df) > 1:
        bounds = [b if taken else "the --min-bytes given applies to every row, this one's included: give "
                  "REGEX=SIZE for the kernels it describes" for b, taken in zip(bounds, named, strict=True)]
    roles = _split_range_minimum(df)

    df["time_ns"] = df["time"]
    # Local memory (spills): its own columns, and excess at L1 against the minimum (never compulsory).
    df["local_ld_bytes"] = df["l1_local_ld_bytes"]
    df["local_st_bytes"] = df["l1_local_st_bytes"]
    l1_ld = df["l1_ld_bytes"] + df["local_ld_bytes"].fillna(0)
    l1_st = df["l1_st_bytes"] + df["local_st_bytes"].fillna(0)
    # cp.async (LDGSTS) copies, the way pipelined kernels load: l1tex's op_ld bytes already count them (on
    # the H100 reference runs cuBLAS's fp32 gemm runs no LDG, yet its op_ld bytes equal its LDGSTS bytes),
    # while the SASS bytes requested by loads do not, so only the requested side adds them. A row with
    # neither (a merged run's rows measured with a set that requests none) keeps none: no sector efficiency.
    if "req_ldgsts_bytes" in df and df["req_ldgsts_bytes"].notna().any():
        df["req_ld_bytes"] = df["req_ld_bytes"].add(df["req_ldgsts_bytes"], fill_value=0)
    df["l2_rd_bytes"] = df["l2_rd_sectors"] * SECTOR_BYTES
    df["l2_wr_bytes"] = df["l2_wr_sectors"] * SECTOR_BYTES
    l2 = df["l2_rd_bytes"] + df["l2_wr_bytes"]
    dram = df["dram_rd_bytes"] + df["dram_wr_bytes"]
    df["eff_l1_ld"] = _div(df["min_read_bytes"], l1_ld)
    df["eff_l1_st"] = _div(df["min_write_bytes"], l1_st)
    df["eff_l2"] = _div(df["min_bytes"], l2)
    df["eff_dram"] = _div(df["min_bytes"], dram)
    df["eff_dram_rd"] = _div(df["min_read_bytes"], df["dram_rd_bytes"])
    df["eff_dram_wr"] = _div(df["min_write_bytes"], df["dram_wr_bytes"])
    for level in ("l1_ld", "l1_st", "l2", "dram"):
        df[f"amp_{level}"] = _div(pd.Series(1.0, index=df.index), df[f"eff_{level}"])
    df["sector_eff_ld"] = _div(df["req_ld_bytes"], df["l1_ld_bytes"])
    df["sector_eff_st"] = _div(df["req_st_bytes"], df["l1_st_bytes"])
    seconds = df["time_ns"] * 1e-9
    df["bw_min_Bps"] = _div(df["min_bytes"], seconds)
    df["bw_dram_Bps"] = _div(dram, seconds)
    df["hw_flops"] = df["fadd"] + df["fmul"] + 2 * df["ffma"]
    roofs = _measured_roofs(df["device"])
    # Once: a traced program's table has tens of thousands of rows (the columns made below are NaN here).
    records = row_dicts(df.reindex(columns=COLUMNS))
    df["time_vs_copy"] = times = [_time_vs_copy(r, roofs.get(r["device"])) for r in records]
    df["findings"] = found = [
        diagnose({**r, "time_vs_copy": t}, bound=b, role=role, roofs=roofs.get(r["device"]),
                 subject=subject_of(r))
        for r, t, b, role in zip(records, times, bounds, roles, strict=True)]
    df["diagnosis"] = [sentences(f) for f in found]
    # Efficiencies that are not results (findings.not_results): found above, then '-' and null, with why.
    df["no_efficiency"] = unshown = [not_results(r) for r in records]
    for key in {k for u in unshown for k in u}:
        df[key] = [math.nan if key in u else e for u, e in zip(unshown, df[key], strict=True)]
    for level in ("l1_ld", "l1_st", "l2", "dram"):
        df[f"amp_{level}"] = _div(pd.Series(1.0, index=df.index), df[f"eff_{level}"])

    # A timing-only run's kernels (and a report without launch statistics) have no launch columns: NaN.
    table: pd.DataFrame = df.reindex(columns=COLUMNS).reset_index(drop=True)
    return table


def _measured_roofs(devices: pd.Series) -> dict[str, dict[str, float]]:
    """device -> its measured roofs (the roofs entry's 'measured': copy bandwidth, FLOP rates, launch floor,
    DRAM latency), for the devices that have roofs (user cache, else reports/roofs/)."""
    out: dict[str, dict[str, float]] = {}
    for device in {d for d in devices if isinstance(d, str) and d}:
        try:
            entry = find_roofs(device)
        except (ReportError, UsageError):  # a damaged cache costs the time notes, not the table
            entry = None
        if entry is not None:
            out[device] = dict(entry.get("measured", {}))
    return out


def _time_vs_copy(r: Row, measured: Mapping[str, float] | None) -> float:
    """The row's time over a copy of its minimum at the measured copy roof (NaN when either is unknown)."""
    copy, time_ns = copy_seconds(r, measured or {}), r["time_ns"]
    return time_ns * 1e-9 / copy if copy and ok(time_ns) else math.nan


def _split_range_minimum(df: pd.DataFrame) -> list[Role | None]:
    """Rows of one range (kernels of a multi-kernel range, --group-by kernel): the range's minimum stays
    on its main kernel (the one moving the most L2 bytes, else the longest) and leaves the others (their
    minimum becomes NaN). Returns each row's role (None for a range's only row)."""
    roles: list[Role | None] = [None] * len(df)
    keyed = df[df["range"].astype(bool) & df["min_bytes"].notna()]
    keyed = keyed[keyed.duplicated(["run", "range"], keep=False)]  # ranges of one row have nothing to split
    for (_, _), rows in keyed.groupby(["run", "range"], sort=False):
        moved = rows["l2_rd_sectors"].fillna(0) + rows["l2_wr_sectors"].fillna(0)
        main = moved.idxmax() if moved.max() > 0 else rows["time"].fillna(0).idxmax()
        name = df.loc[main, "kernels"][0]
        for i in rows.index:
            pos = cast("int", df.index.get_loc(i))  # the index is unique: one position
            roles[pos] = Role(i == main, name, len(rows))
            if i != main:
                df.loc[i, ["min_read_bytes", "min_write_bytes", "min_bytes"]] = math.nan
    return roles


def _merged_ranges(plan: Plan | None) -> dict[tuple[str, str], str]:
    """(report name, NVTX range) -> plan range, for a config that `memtraffic merge` found measured in
    more than one run: its later measurements are 'RANGE|#2', ... in the reports of their own run."""
    return {(report, c["nvtx_range"]): c["range"] for c in configs_of(plan)
            if "nvtx_range" in c for report in c.get("reports", [])}


def _from_own_reports(kernels: pd.DataFrame, plan: Plan | None) -> pd.DataFrame:
    """The launches less those of a config found in a report it does not name: a config that names the
    reports holding it (plan.json's config 'reports': a merge's parts, the second pass of `measure
    --metrics auto`) takes its launches from those only, so a config measured twice never sums the two."""
    held = {c["range"]: set(c["reports"]) for c in configs_of(plan) if "reports" in c}
    if not held or not len(kernels):
        return kernels
    keep = [rng not in held or Path(str(report)).name in held[rng]
            for rng, report in zip(kernels["range"], kernels["report"], strict=True)]
    own: pd.DataFrame = kernels[keep].reset_index(drop=True)
    return own


def analyze_reports(reports: Sequence[Path], plan: Plan | None = None, *,
                    min_bytes: tuple[float, float, float] | None = None, group_by: Grouping = "range",
                    run_name: str | None = None, min_rules: Sequence[MinRule] = (),
                    meta: RunRecord | None = None, notes: Sequence[str] = ()
                    ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(analyzed table, launch table) of the given reports. Empty tables when there are no reports.

    Planned configs meet found kernels here, once for every reader: each row has a `status` (STATUSES)
    and the table's `gaps` (see gaps()) name, one line each, what the plan lists that the reports lack
    (a report cut short, a report missing, a config that failed), a damaged launch, and `notes` (why the
    run is incomplete, from load_run). `meta` is run.json: per-config outcomes and launch counts."""
    group_by = grouping(group_by)  # a caller without the type checker may give any text
    frames = []
    empty: list[EmptyReportError] = []
    found_gaps: list[str] = list(notes)
    cut: list[str] = []  # reports that end in a damaged launch: their last found config may lack kernels
    renamed = _merged_ranges(plan)
    with_lines = []  # reports with per-line counters
    timed = False  # a timing-only run's timings.json: times, no counters (timing_only_table)
    timers: dict[str, Path] = {}  # report -> the kernel times of a pass without ncu beside it (own_times)
    for report in reports:
        if not require_file(Path(report), DAMAGED):  # a shard or part the run lists, not there
            found_gaps.append(f"{report}: a report of this run is missing (listed in run.json): the configs "
                              "it held are missing")
            continue
        if is_timings(report):
            from memtraffic.analysis.timing_only_table import timing_kernels

            kernels, timed = timing_kernels(Path(report)), True
            kernels.insert(0, "run", run_name or Path(report).parent.name)
            kernels["time_source"] = TIMER
            frames.append(kernels)
            continue
        try:
            read = kernel_table(report, allow_partial=True)
        except EmptyReportError as err:  # e.g. the attempt of a run whose runner died before profiling
            empty.append(err)
            continue
        kernels = read.kernels
        if read.damaged:
            shown = ", ".join(f"#{n}" for n in read.damaged)
            found_gaps.append(f"{report} is truncated or damaged: kernel launch {shown} has no name or "
                              "metrics (left out)")
            cut.append(str(report))
        if read.source_counters:
            with_lines.append(report)
        _check_metrics(kernels, str(report))
        kernels = kernel_times(kernels, Path(report))
        if (times_file := Path(report).parent / KERNEL_TIMES_FILE).is_file() and len(kernels):
            timers[str(kernels["report"].iloc[0])] = times_file
        if renamed:
            name = Path(report).name
            kernels["range"] = [renamed.get((name, r), r) for r in kernels["range"]]
        kernels.insert(0, "run", run_name or Path(report).name.removesuffix(".ncu-rep"))
        frames.append(kernels)
    planned = bool(plan and plan.get("configs"))
    if not frames and (not planned or not empty and not found_gaps):
        if empty:
            raise empty[0]
        table = pd.DataFrame(columns=COLUMNS)
        table.attrs["gaps"] = found_gaps
        return table, pd.DataFrame()
    # A report without a kernel beside whole ones is named as it would be alone (a report cut before its
    # first kernel is one); with none whole, every planned config is missing too.
    found_gaps += [str(e) for e in empty]
    kernels = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["run", "launch", "range", "kernel", "grid_size", "block_size", "device", "report", "passes",
                 *METRICS])
    kernels = _from_own_reports(kernels, plan)
    kernels["outside_kind"] = outside_kinds(kernels, traced=bool((meta or {}).get("torch_ops")))
    kernels = add_reused(kernels, plan)  # repeats get their first call's rows
    kernels = own_times(kernels, timers)  # ... and, where a pass without ncu timed them, their own time
    rows = _group(kernels, "kernel" if group_by == "kernel" else "range")
    rows["status"] = "ok"
    statuses, lost, reconcile_gaps = _planned_against_found(plan, meta, kernels, cut)
    found_gaps += reconcile_gaps
    rows.loc[rows["range"].isin(statuses), "status"] = [statuses[r] for r in rows["range"]
                                                        if r in statuses]
    if lost:
        lost_rows = pd.DataFrame({"run": run_name or "", "range": lost, "device": "", "report": "",
                                  "kernels": [[] for _ in lost], "launch_dims": [[] for _ in lost],
                                  "n_kernels": 0, "status": [statuses[r] for r in lost]})
        rows = pd.concat([rows, lost_rows], ignore_index=True)
    table = compute(rows, plan, min_bytes, min_rules)
    if timed:
        from memtraffic.analysis.timing_only_table import mark

        table = mark(table, [subject_of(r) for r in row_dicts(table)])
    if with_lines:
        table = _name_worst_lines(table, with_lines, plan)
    if plan and group_by != "kernel":  # plan order: a run of several GPUs has a report per GPU
        order = {c["range"]: i for i, c in enumerate(plan.get("configs", []))}
        rank = [order.get(r, len(order)) for r in table["range"]]
        table = table.iloc[sorted(range(len(table)), key=rank.__getitem__)].reset_index(drop=True)
    if group_by == "op":  # op calls are ranges: summarized per op type
        from memtraffic.analysis.per_op import summarize

        table = summarize(table)
    table.attrs["gaps"] = found_gaps
    return table, kernels


STATUSES = {
    "ok": "measured whole, as far as the run folder tells",
    "partial": "measured, but its report ends inside or right after it: kernels may be missing",
    "missing": "planned, no kernel in the reports (a report cut short or missing)",
    "failed": "planned, did not run to the end (run.json says why)",
}


def gaps(table: pd.DataFrame) -> list[str]:
    """What the analyzed table lacks of its run, one line each ([] when the run is whole)."""
    return list(table.attrs.get("gaps", []))


def _planned_against_found(plan: Plan | None, meta: RunRecord | None, kernels: pd.DataFrame,
                           cut: Sequence[str]) -> tuple[dict[str, str], list[str], list[str]]:
    """({range: status other than ok}, planned ranges with no kernel, one line per gap).

    measure's configs: each config of the plan with no kernel is 'failed' where run.json says it did not
    finish, else 'missing'; a found config whose launches are fewer than run.json recorded, or whose
    report ends right after it (the report has a damaged last launch, or the next config of its report
    is missing), is 'partial'. profile's op calls and regions: many launch no kernel at all, so only a cut
    is said: the last op call found is 'partial' and the calls traced after it are counted."""
    configs = configs_of(plan)
    if not configs:
        return {}, [], []
    outcomes: dict[str, Outcome] = {c["range"]: c for c in (meta or {}).get("configs", [])}
    counts = kernels.groupby("range").size().to_dict() if len(kernels) else {}
    last = {}  # report -> range of its last found launch
    if len(kernels):
        for report, launches in kernels.groupby("report", sort=False):
            last[str(report)] = launches.sort_values("launch")["range"].iloc[-1]
    status: dict[str, str] = {}
    lines: list[str] = []
    traced = [c for c in configs if c.get("kind", "variant") != "variant"]
    if traced:
        interrupted = bool((meta or {}).get("interrupted")) or bool((meta or {}).get("returncode")) or cut
        reached = [i for i, c in enumerate(configs) if c["range"] in counts]
        if interrupted and reached and reached[-1] + 1 < len(configs):
            end = configs[reached[-1]]["range"]
            status[end] = "partial"
            after = len(configs) - reached[-1] - 1
            lines.append(f"the report ends at {end}: the {after} op calls or regions traced after it have "
                         "no kernel in the report (any of them that launches kernels was not profiled)")
        return status, [], lines
    lost: list[str] = []
    for c in configs:
        rng = c["range"]
        outcome: Mapping[str, object] = outcomes.get(rng, {})
        found = counts.get(rng, 0)
        if not found:
            failed = outcome.get("status") not in (None, "ok")
            status[rng] = "failed" if failed else "missing"
            lost.append(rng)
            why = f" ({outcome.get('error') or outcome.get('status')})" if failed else ""
            lines.append(f"{rng}: {status[rng]}: planned, no kernel in the reports{why}")
            continue
        expected = outcome.get("kernels")
        if isinstance(expected, int) and found < expected:
            status[rng] = "partial"
            lines.append(f"{rng}: partial: {found} of its {expected} kernel launches are in the reports")
    for report, rng in last.items():  # the config a cut report ends in or right after
        if rng not in status and _cut_after(rng, configs, status, report in cut, outcomes):
            status[rng] = "partial"
            lines.append(f"{rng}: partial: its report ({report}) ends in or right after it, so some of its "
                         "kernel launches may be missing")
    return status, lost, lines


def _cut_after(rng: str, configs: Sequence[Config], status: dict[str, str], damaged: bool,
               outcomes: Mapping[str, Outcome]) -> bool:
    """Whether a report ending with config `rng` was cut there: it ends in a damaged launch, or the next
    config of the same report (same GPU, same part of a merge) is missing (not failed), and run.json does
    not record `rng`'s launch count."""
    if rng in outcomes and isinstance(outcomes[rng].get("kernels"), int):
        return False
    if damaged:
        return True
    at = next((i for i, c in enumerate(configs) if c["range"] == rng), None)
    if at is None:
        return False
    gpu, part = configs[at].get("gpu"), configs[at].get("part")
    after = [c for c in configs[at + 1:] if c.get("gpu") == gpu and c.get("part") == part]
    return bool(after) and status.get(after[0]["range"]) == "missing"


def _name_worst_lines(table: pd.DataFrame, reports: Sequence[Path],
                      plan: Plan | None) -> pd.DataFrame:
    """With per-line counters (measure --source), a diagnosis ends with the row's worst source line."""
    from memtraffic.analysis.lines import report_lines, worst_line, worst_line_finding

    lines, _ = report_lines(reports, plan)
    if not lines:
        return table
    found = []
    for r in row_dicts(table):
        mine = [x for x in lines if x["range"] == r["range"] and x["kernel"] in r["kernels"]]
        worst = worst_line(mine) if r["findings"] else None
        found.append([*r["findings"], worst_line_finding(worst, subject_of(r))] if worst else r["findings"])
    named: pd.DataFrame = table.assign(findings=pd.Series(found, index=table.index, dtype=object),
                                       diagnosis=[sentences(f) for f in found])
    return named


def analyze_path(path: str | Path | Run, min_bytes: str | Sequence[str] | None = None,
                 group_by: Grouping = "range") -> pd.DataFrame:
    """`memtraffic analyze`: a run folder or any .ncu-rep (or a run already loaded) -> the analyzed table.

    min_bytes: one or more --min-bytes values (see parse_min_bytes_options).
    """
    texts = [min_bytes] if isinstance(min_bytes, str) else list(min_bytes or [])
    overall, rules = parse_min_bytes_options(texts)
    run = path if isinstance(path, Run) else load_run(path)
    return analyze_run(run, min_bytes=overall, group_by=group_by, min_rules=rules)


def analyze_run(run: Run, *, min_bytes: tuple[float, float, float] | None = None,
                group_by: Grouping = "range", min_rules: Sequence[MinRule] = ()) -> pd.DataFrame:
    """The analyzed table of a loaded run (see analyze_reports); ReportError when it holds no report."""
    if not run.reports:
        raise ReportError(f"{run.path}: no .ncu-rep file in this folder")
    table, _ = analyze_reports(run.reports, run.plan, min_bytes=min_bytes, group_by=group_by,
                               run_name=run.name, min_rules=min_rules, meta=run.meta, notes=run.notes)
    return table


class PartialRunError(ReportError):
    """The run lacks what its plan lists (see gaps) and the user did not accept partial results."""


def require_whole(table: pd.DataFrame | Sequence[str], what: str, partial: bool = False,
                  echo: Callable[[str], None] | None = None) -> None:
    """Name each gap of the table (or each of these gap lines) on stderr ('warning: ...'); then, unless
    `partial`, PartialRunError: `what` (the run's path) is incomplete, pass --partial to accept it."""
    found = gaps(table) if isinstance(table, pd.DataFrame) else list(table)
    if not found:
        return
    echo = echo or warn
    for line in found:
        echo(line)
    if not partial:
        raise PartialRunError(f"{what} is incomplete ({len(found)} {'gap' if len(found) == 1 else 'gaps'} "
                              "named above): measure what is missing again (`memtraffic measure --rerun "
                              "RUN` measures a run's missing configs), or pass --partial to accept partial "
                              "results")


# --- output -------------------------------------------------------------------------------------------------

_COUNTS = ("time_ns", "fadd", "fmul", "ffma", "hw_flops", "model_flops", "n_kernels", "min_bytes", "passes")
_INT_COLUMNS = {c for c in ANALYZED if c.endswith("_bytes") or c in _COUNTS}


def to_records(df: pd.DataFrame, int_columns: Collection[str] = _INT_COLUMNS) -> list[dict[str, object]]:
    """Plain JSON-able dicts: NaN -> None, whole counts (int_columns) -> int, lists and dicts kept, each
    finding as its record (vocab.finding.Finding.to_dict) with its sentence."""
    if "findings" in df:
        records = [to_dicts(f) if isinstance(f, list) else [] for f in df["findings"]]
        df = df.assign(findings=pd.Series(records, index=df.index, dtype=object))
    return plain_records(df, int_columns)


def row_label(r: Mapping[str, object]) -> str:
    """A row's name for people: 'softmax_tiled 4096x4096 fp32 BLOCK_M=4', 'aten.mm #3 64x64 fp32', a range."""
    if r["variant"]:
        rng, shape, dtype = str(r["range"]), str(r["shape"] or ""), str(r["dtype"] or "")
        params = ",".join(f"{k}={v}" for k, v in _explicit(rng).items())
        text = " ".join(p for p in (str(r["variant"]), shape, dtype, params) if p)
        again = rng.rsplit("|", 1)[-1]
        if again.startswith("#"):  # a merge's second measurement of the same config
            text += f" {again}"
        return text
    parts = measured_range(str(r["range"] or "")).split("|")
    if len(parts) >= 4 and parts[0] == "mt" and parts[1] in ("op", "region", "triton") and r["op"]:
        # 'mt|op|<seq>|<overload>' / 'mt|triton|<seq>|<kernel>' / 'mt|region|<name>|<seq>': name, call
        # number, first input
        seq = parts[2] if parts[1] != "region" else parts[-1]
        name = f"region {r['op']}" if parts[1] == "region" else str(r["op"])
        reused = " (reused)" if r.get("reuses") else ""  # a repeat: its first call's counters
        shape, dtype = str(r["shape"] or ""), str(r["dtype"] or "")
        return " ".join(p for p in (f"{name} #{seq}", shape, dtype) if p) + reused
    if r["range"]:
        return str(r["range"])
    kernels = r["kernels"]
    return str(kernels[0] if isinstance(kernels, list) and kernels else "?")


def subject_of(r: Mapping[str, object]) -> Subject:
    """What a row's findings are about, as people name it: the config of a variant, or the op (or region,
    or Triton kernel) and its call number; the kernel where the row has one."""
    kernels = r.get("kernels")
    kernel = str(kernels[0]) if isinstance(kernels, list) and len(kernels) == 1 else ""
    run = str(r.get("run") or "")
    if r.get("variant"):
        return Subject(run=run, config=row_label(r), kernel=kernel)
    parts = measured_range(str(r.get("range") or "")).split("|")
    if len(parts) >= 4 and parts[0] == "mt" and parts[1] in ("op", "region", "triton") and r.get("op"):
        seq = parts[2] if parts[1] != "region" else parts[-1]
        name = f"region {r['op']}" if parts[1] == "region" else str(r["op"])
        return Subject(run=run, op=name, call=int(seq) if seq.isdigit() else None, kernel=kernel)
    return Subject(run=run, config=str(r.get("range") or ""), kernel=kernel)


def _explicit(rng: str) -> dict[str, str]:
    # The range name holds only the parameters the user set ("mt|v|shape|dtype|K=V,...").
    parts = rng.split("|")
    if len(parts) < 5:
        return {}
    return dict(p.split("=", 1) for p in parts[4].split(",") if "=" in p)


def kernel_list(names: Sequence[str]) -> str:
    """'a, 52 x b': each kernel name once, in order of first launch, with its count where above one."""
    counts: dict[str, int] = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    return ", ".join(name if n == 1 else f"{n} x {name}" for name, n in counts.items())


def load_results(run: str | Path | Run, partial: bool = False) -> pd.DataFrame:
    """The analyzed table of a run: from its reports (current models), else (no report there, or none
    readable) its folder's results.json. A run that lacks what its plan lists is PartialRunError unless
    `partial` (see require_whole)."""
    run = run if isinstance(run, Run) else load_run(run)
    saved = run.folder / "results.json" if run.folder is not None else None
    kept = saved is not None and saved.is_file()
    try:
        if kept and not any(r.is_file() for r in run.reports):  # reports left out to save room
            raise ReportError(f"{run.path}: no report of this run is there")
        table = analyze_run(run)
    except ReportError:
        if saved is None or not kept:
            raise
        saved_table: pd.DataFrame = pd.DataFrame(read_results(saved, DAMAGED))
        return saved_table
    require_whole(table, str(run.path), partial)
    return table


def save_results(df: pd.DataFrame, run_dir: Path) -> None:
    """results.json (list of objects, raw numbers) and results.csv beside the reports, each row's report
    named relative to the run folder (runfolder/paths.py: a run you can share)."""
    portable = functools.cache(lambda report: portable_path(report, run_dir, Path.cwd()))  # one per report
    records = [{**r, "report": portable(report)} if isinstance(report := r.get("report"), str) else r
               for r in to_records(df)]
    write_json(run_dir / "results.json", records, rows=True)
    write_bytes_atomic(run_dir / "results.csv", (csv_text(records) + "\n").encode())
