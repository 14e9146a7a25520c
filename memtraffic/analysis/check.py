"""`memtraffic check RUN --expect FILE`: a run held to expectations written in a small TOML file.

    baseline = "runs/before"          # optional, for no_worse_than; relative to this file

    [[expect]]
    match = "softmax_tiled"           # regex, searched in each row's name, NVTX range and kernel names
    by = "range"                      # range (default), op or kernel: analyze's --group-by
    max_bytes = { l1_ld = "8.4MB", dram = "17MB" }      # per level, sizes as --min-bytes takes them
    min_efficiency = { l1_ld = 0.95, dram_rd = 0.95 }   # minimum bytes / measured bytes, per level
    max_time = "20us"                 # ncu's kernel time (ns, us, ms, s; a bare number is ns)
    no_worse_than = "5%"              # than the baseline's matching row (see below)

    [floor]                           # optional: the whole run against its floor (memtraffic floor)
    max_recoverable = "300us"         # time above the floor, summed over every op
    max_over_fused = 25               # measured DRAM bytes / the fused minimum of the traced region

Every row the regex matches is held to every limit of its [[expect]] table; each (row, limit) is one
check. A run that lacks what its plan lists (a report cut short or missing, a config that failed: see
memtraffic.analysis.analyze.gaps) never passes: each gap is a failed check of its own. Levels for
max_bytes: l1_ld, l1_st, l1, l2_rd, l2_wr, l2, dram_rd, dram_wr, dram (l1 = ld + st, l2 and dram =
read + write); for min_efficiency: l1_ld, l1_st, l2, dram, dram_rd, dram_wr.
no_worse_than matches each row to the baseline as `memtraffic diff` does and allows each of L1 loads,
L1 stores, L2 reads, L2 writes, DRAM reads and time to exceed the baseline's by at most that fraction;
DRAM writes are left out (they vary run to run with L2 write-back), and the fraction is the only
allowance for ncu's timing noise. A regex that matches no row, an unknown key or a malformed value is
a UsageError naming the file and key; a limit on a value the run lacks (no minimum, so no efficiency)
fails its check.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from memtraffic.analysis.diff import (
    RowKey,
    Side,
    check_devices,
    load_side,
    pair_keys,
    parse_fraction,
    pct,
    relative,
    row_label,
)
from memtraffic.vocab.errors import UsageError
from memtraffic.vocab.files import read_toml
from memtraffic.vocab.grouping import GROUPINGS, Grouping
from memtraffic.vocab.units import LIMIT, compile_regex, fmt_bytes, fmt_eff, fmt_time, parse_size

BYTES = {"l1_ld": ("l1_ld_bytes",), "l1_st": ("l1_st_bytes",), "l1": ("l1_ld_bytes", "l1_st_bytes"),
         "l2_rd": ("l2_rd_bytes",), "l2_wr": ("l2_wr_bytes",), "l2": ("l2_rd_bytes", "l2_wr_bytes"),
         "dram_rd": ("dram_rd_bytes",), "dram_wr": ("dram_wr_bytes",),
         "dram": ("dram_rd_bytes", "dram_wr_bytes")}
EFFICIENCY = {"l1_ld": "eff_l1_ld", "l1_st": "eff_l1_st", "l2": "eff_l2", "dram": "eff_dram",
              "dram_rd": "eff_dram_rd", "dram_wr": "eff_dram_wr"}
# What no_worse_than compares (DRAM writes vary run to run: output can stay in L2 past a kernel's end).
NO_WORSE = {"l1_ld_bytes": "L1 loads", "l1_st_bytes": "L1 stores", "l2_rd_bytes": "L2 reads",
            "l2_wr_bytes": "L2 writes", "dram_rd_bytes": "DRAM reads", "time_ns": "time"}
KEYS = ("match", "by", "max_bytes", "min_efficiency", "max_time", "no_worse_than")
LIMITS = KEYS[2:]

_TIME = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(ns|us|µs|ms|s)?\s*$", re.IGNORECASE)
_NS = {"ns": 1, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9}


@dataclass
class Expectation:
    """One [[expect]] table: a regex over rows and the limits every matching row must hold."""

    where: str  # 'FILE [[expect]] #N', for messages
    match: str
    pattern: re.Pattern[str]
    by: Grouping = "range"
    max_bytes: dict[str, float] = field(default_factory=dict)
    min_efficiency: dict[str, float] = field(default_factory=dict)
    max_time_ns: float | None = None
    no_worse_than: float | None = None


@dataclass
class FloorLimits:
    """The [floor] table: limits on the whole run's recoverable time and DRAM bytes over its fused minimum."""

    where: str
    max_recoverable_ns: float | None = None
    max_over_fused: float | None = None


@dataclass
class Expectations:
    source: str
    items: list[Expectation]
    baseline: Path | None = None
    floor: FloorLimits | None = None


def parse_time(text: object, what: str) -> float:
    """'20us' -> 20000.0 ns; a bare number is ns. UsageError naming `what` otherwise (a negative, NaN or
    infinite limit included: a gate that no value can fail is no gate)."""
    if isinstance(text, int | float) and not isinstance(text, bool) and 0 <= text < math.inf:
        return float(text)
    match = _TIME.match(text) if isinstance(text, str) else None
    value = float(match.group(1)) * _NS[(match.group(2) or "ns").lower()] if match else math.inf
    if not value < math.inf:
        raise UsageError(f"{what} = {text!r}: write a time as 20us, 1.5ms or a number of ns")
    return value


def _size(value: object, what: str) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value < LIMIT:
        return float(value)
    if isinstance(value, str):
        try:
            return float(parse_size(value))
        except UsageError:
            pass
    raise UsageError(f"{what} = {value!r}: write bytes as 8388608, \"8.39MB\" or \"8MiB\"")


def _fraction(value: object, what: str) -> float:
    if isinstance(value, bool):
        raise UsageError(f"{what} = {value!r}: give a fraction such as \"5%\" or 0.05")
    return parse_fraction(value, what)


def _levels(value: object, known: Mapping[str, object], what: str) -> dict[str, object]:
    if not isinstance(value, dict) or not value:
        raise UsageError(f"{what} must be a table of levels, e.g. {what.rsplit(' ', 1)[-1]} = "
                         f"{{ {next(iter(known))} = ... }}")
    unknown = [k for k in value if k not in known]
    if unknown:
        raise UsageError(f"{what}.{unknown[0]}: unknown level (use {', '.join(known)})")
    return value


def expectation(table: Mapping[str, object], where: str) -> Expectation:
    """One expectation from its TOML table (or assert_traffic's arguments), every value checked."""
    unknown = [k for k in table if k not in KEYS]
    if unknown:
        raise UsageError(f"{where}: unknown key {unknown[0]!r} (use {', '.join(KEYS)})")
    text = table.get("match")
    if not isinstance(text, str) or not text:
        raise UsageError(f"{where}: 'match' (a regex over row names) is required, e.g. match = \"softmax\"")
    try:
        pattern = compile_regex(text)
    except re.error as err:
        raise UsageError(f"{where}: match = {text!r} is not a regular expression ({err})") from None
    by = next((g for g in GROUPINGS if g == table.get("by", "range")), None)
    if by is None:
        raise UsageError(f"{where}: by = {table['by']!r}: use one of {', '.join(GROUPINGS)}")
    if not any(k in table for k in LIMITS):
        raise UsageError(f"{where}: no limit given: add one of {', '.join(LIMITS)}")
    exp = Expectation(where, text, pattern, by)
    if "max_bytes" in table:
        levels = _levels(table["max_bytes"], BYTES, f"{where} max_bytes")
        exp.max_bytes = {k: _size(v, f"{where} max_bytes.{k}") for k, v in levels.items()}
    if "min_efficiency" in table:
        levels = _levels(table["min_efficiency"], EFFICIENCY, f"{where} min_efficiency")
        for k, v in levels.items():
            if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v < math.inf:
                raise UsageError(f"{where} min_efficiency.{k} = {v!r}: give a number such as 0.9")
            exp.min_efficiency[k] = float(v)
    if "max_time" in table:
        exp.max_time_ns = parse_time(table["max_time"], f"{where} max_time")
    if "no_worse_than" in table:
        exp.no_worse_than = _fraction(table["no_worse_than"], f"{where} no_worse_than")
    return exp


def load_expectations(path: str | Path) -> Expectations:
    """The expectation file: an optional top-level `baseline` and one or more [[expect]] tables."""
    path = Path(path)
    data = read_toml(path, "expectation file")
    unknown = [k for k in data if k not in ("baseline", "expect", "floor")]
    if unknown:
        raise UsageError(f"{path}: unknown top-level key {unknown[0]!r} (use baseline, [floor] and "
                         "[[expect]] tables)")
    floor = _floor_limits(data["floor"], f"{path} [floor]") if "floor" in data else None
    tables = data.get("expect", [] if floor else None)
    if not isinstance(tables, list) or not (tables or floor) or not all(isinstance(t, dict) for t in tables):
        raise UsageError(f"{path}: no [[expect]] table: add one with a match regex and a limit, e.g. "
                         "[[expect]] / match = \"softmax\" / max_time = \"20us\"")
    baseline = data.get("baseline")
    if baseline is not None and not isinstance(baseline, str):
        raise UsageError(f"{path}: baseline = {baseline!r}: give the baseline run's path as a string")
    items = [expectation(t, f"{path} [[expect]] #{i}") for i, t in enumerate(tables, 1)]
    return Expectations(str(path), items, (path.parent / baseline) if baseline else None, floor)


FLOOR_KEYS = ("max_recoverable", "max_over_fused")


def _floor_limits(table: object, where: str) -> FloorLimits:
    if not isinstance(table, dict) or not table:
        raise UsageError(f"{where} must be a table with {' or '.join(FLOOR_KEYS)}, e.g. "
                         "[floor] / max_recoverable = \"300us\"")
    unknown = [k for k in table if k not in FLOOR_KEYS]
    if unknown:
        raise UsageError(f"{where}: unknown key {unknown[0]!r} (use {', '.join(FLOOR_KEYS)})")
    limits = FloorLimits(where)
    if "max_recoverable" in table:
        limits.max_recoverable_ns = parse_time(table["max_recoverable"], f"{where} max_recoverable")
    if "max_over_fused" in table:
        ratio = table["max_over_fused"]
        if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not 0 < ratio < math.inf:
            raise UsageError(f"{where} max_over_fused = {ratio!r}: give a ratio such as 25 (measured DRAM "
                             "bytes over the fused minimum)")
        limits.max_over_fused = float(ratio)
    return limits


def _check_floor(limits: FloorLimits, run: str | Path) -> list[CheckResult]:
    """The [floor] limits on the run's Floor (memtraffic.analysis.floor), one result each."""
    from memtraffic.analysis.floor import floor_run

    f = floor_run(run)
    exp = Expectation(limits.where, "", re.compile(""))
    if f.no_floor:  # a floor gate never passes on a run without a floor
        return [{"expectation": limits.where, "match": None, "row": "run", "check": "floor", "value": None,
                 "limit": None, "ok": False, "message": f"run: {f.no_floor} ({limits.where})"}]
    out = []
    if limits.max_recoverable_ns is not None:
        value = f.recoverable_s * 1e9
        out.append(_result(exp, "run", "floor.max_recoverable", value, limits.max_recoverable_ns,
                           value <= limits.max_recoverable_ns,
                           f"recoverable time {fmt_time(value)} above a floor of "
                           f"{fmt_time(f.floor_s * 1e9)}, limit {fmt_time(limits.max_recoverable_ns)}"))
    if limits.max_over_fused is not None:
        fused, dram = f.fused_min_bytes, f.dram_bytes
        known = bool(fused) and dram is not None
        value = dram / fused if dram is not None and fused else math.nan
        text = (f"DRAM {fmt_bytes(f.dram_bytes)} is {value:.2f}x the fused minimum "
                f"{fmt_bytes(f.fused_min_bytes)}" if known else
                f"measured DRAM over the fused minimum unknown (fused minimum {f.fused_note})")
        out.append(_result(exp, "run", "floor.max_over_fused", value, limits.max_over_fused,
                           bool(known) and value <= limits.max_over_fused,
                           f"{text}, at most {limits.max_over_fused:g}x allowed"))
    for r in out:  # a run-level check: no row regex to name
        r["match"] = None
        r["message"] = r["message"].replace(", match ''", "")
    return out


# --- checking ---------------------------------------------------------------------------------------------


def _num(x: object) -> float:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) else math.nan


def _names(r: Mapping[str, object], label: str) -> list[str]:
    kernels = k if isinstance(k := r.get("kernels"), list) else []
    return [label, str(r.get("range") or ""), *map(str, kernels)]


def _plain(x: float, check: str) -> float | int | None:
    """NaN -> None; whole bytes and ns -> int (efficiencies and fractions stay floats)."""
    if math.isnan(x):
        return None
    whole = x.is_integer() and not check.startswith("min_efficiency") and check != "no_worse_than"
    return int(x) if whole else x


class CheckResult(TypedDict):
    """One (matched row, limit) of `check`: the value measured, the limit, whether it holds, a sentence;
    a cut run's gap is a failed 'whole_run' check of no expectation, match or row (None)."""

    expectation: str | None
    match: str | None
    row: str | None
    check: str
    value: float | int | None
    limit: float | int | None
    ok: bool
    message: str


def _result(exp: Expectation, label: str, check: str, value: float, limit: float, ok: bool,
            text: str) -> CheckResult:
    return {"expectation": exp.where, "match": exp.match, "row": label, "check": check,
            "value": _plain(value, check), "limit": _plain(limit, check), "ok": ok,
            "message": f"{label}: {text} ({exp.where}, match {exp.match!r})"}


def _check_row(exp: Expectation, r: Mapping[str, object], label: str,
               base: Mapping[str, object] | None, baseline_name: str) -> list[CheckResult]:
    out = []
    for level, limit in exp.max_bytes.items():
        value = math.fsum(_num(r.get(c)) for c in BYTES[level])
        ok = not math.isnan(value) and value <= limit
        shown = fmt_bytes(value) if not math.isnan(value) else "not measured"
        out.append(_result(exp, label, f"max_bytes.{level}", value, limit, ok,
                           f"{level} bytes {shown}, limit {fmt_bytes(limit)}"))
    for level, limit in exp.min_efficiency.items():
        value = _num(r.get(EFFICIENCY[level]))
        ok = not math.isnan(value) and value >= limit
        shown = fmt_eff(value) if not math.isnan(value) else "unknown (no minimum, or not measured)"
        out.append(_result(exp, label, f"min_efficiency.{level}", value, limit, ok,
                           f"{level} efficiency {shown}, at least {limit:g} expected"))
    if exp.max_time_ns is not None:
        value = _num(r.get("time_ns"))
        ok = not math.isnan(value) and value <= exp.max_time_ns
        out.append(_result(exp, label, "max_time", value, exp.max_time_ns, ok,
                           f"time {fmt_time(value)}, limit {fmt_time(exp.max_time_ns)}"))
    if exp.no_worse_than is not None:
        allowed = exp.no_worse_than
        if base is None:
            out.append(_result(exp, label, "no_worse_than", math.nan, allowed, False,
                               f"no matching row in the baseline {baseline_name}"))
        for column, name in NO_WORSE.items() if base is not None else {}.items():
            value, before = _num(r.get(column)), _num(base.get(column) if base is not None else None)
            if math.isnan(value) and math.isnan(before):
                continue  # neither run measured it
            limit = before * (1 + allowed)
            ok = not math.isnan(value) and not math.isnan(before) and value <= limit
            show = fmt_time if column == "time_ns" else fmt_bytes
            change = pct(relative(before, value))
            out.append(_result(exp, label, f"no_worse_than.{column}", value, limit, ok,
                               f"{name} {show(value)} vs {show(before)} in {baseline_name} ({change}, "
                               f"at most +{100 * allowed:g}% allowed)"))
    return out


def check(run: str | Path, expectations: Expectations, baseline: str | Path | None = None
          ) -> list[CheckResult]:
    """Every (matched row, limit) as a result: expectation, match, row, check, value, limit, ok, message.

    UsageError when a regex matches no row of the run, or no_worse_than has no baseline."""
    baseline = Path(baseline) if baseline is not None else expectations.baseline
    sides: dict[str, Side] = {}
    bases: dict[str, dict[RowKey, Mapping[str, object]]] = {}
    results: list[CheckResult] = []
    for exp in expectations.items:
        if exp.by not in sides:
            sides[exp.by] = load_side(run, exp.by)
        side = sides[exp.by]
        if exp.no_worse_than is not None and exp.by not in bases:
            if baseline is None:
                raise UsageError(f"{exp.where}: no_worse_than needs a baseline: add baseline = \"RUN\" at "
                                 "the top of the file, or pass --baseline RUN")
            base_side = load_side(baseline, exp.by)
            check_devices(base_side, side, allow_mixed=False)
            by_key: dict[RowKey, Mapping[str, object]] = {}
            for k, r in zip(base_side.keys, base_side.rows, strict=True):
                by_key.setdefault(k, r)
            pairs = pair_keys(side, base_side)  # matched as `memtraffic diff` matches
            bases[exp.by] = {k: by_key[pairs[k]] for k in dict.fromkeys(side.keys) if k in pairs}
        hits = 0
        for key, r in zip(side.keys, side.rows, strict=True):
            label = row_label(r, exp.by)
            if not any(exp.pattern.search(n) for n in _names(r, label)):
                continue
            hits += 1
            base = bases.get(exp.by, {}).get(key)
            results += _check_row(exp, r, label, base, str(baseline))
        if not hits:
            names = [row_label(r, exp.by) for r in side.rows]
            listed = "; ".join(names[:5]) + ("; ..." if len(names) > 5 else "")
            raise UsageError(f"{exp.where}: match {exp.match!r} matches no row of {run} (by {exp.by}; its "
                             f"rows: {listed})")
    if expectations.floor is not None:
        results += _check_floor(expectations.floor, run)
        if not sides:  # only [floor]: a cut run still never passes
            sides["range"] = load_side(run, "range")
    for gap in dict.fromkeys(g for side in sides.values() for g in side.gaps):  # never a pass on a cut run
        results.append({"expectation": None, "match": None, "row": None, "check": "whole_run", "value": None,
                        "limit": None, "ok": False, "message": f"incomplete run {run}: {gap}"})
    return results


def failures(results: Sequence[CheckResult]) -> list[str]:
    """One line per failed check."""
    return [f"FAIL {r['message']}" for r in results if not r["ok"]]


def held(results: Sequence[CheckResult]) -> list[str]:
    """One line per row (per expectation) whose checks all hold: 'ok ROW: max_bytes l1_ld, l1_st; max_time
    (FILE [[expect]] #N)', the limits named as the file names them."""
    groups: dict[tuple[str | None, str | None], list[CheckResult]] = {}
    for r in results:
        groups.setdefault((r["expectation"], r["row"]), []).append(r)
    lines = []
    for (where, row), checks in groups.items():
        if not all(c["ok"] for c in checks):
            continue
        keys: dict[str, list[str]] = {}
        for c in checks:
            key, _, level = str(c["check"]).partition(".")
            keys.setdefault(key, []).append(level)
        named = "; ".join(" ".join([key, ", ".join(filter(None, levels))]).strip()
                          for key, levels in keys.items())
        lines.append(f"ok {row}: {named} ({where})")
    return lines
