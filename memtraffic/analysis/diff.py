"""`memtraffic diff A B`: two runs matched row by row, each level's bytes, time and efficiency side by side.

A is the before (a baseline), B the after; a change is B - A, relative to A. Each side is a run folder,
a .ncu-rep, or a saved table: a `results.json` of a run folder or the output of
`memtraffic analyze --format json` (rows per range; group-by op is summed from them, kernel and line
need the reports).

Rows are matched by what they measure, not by their NVTX range's spelling:
- configs of `memtraffic measure` (the plan): variant, op, shape, dtype and every parameter value, so a
  config given BLOCK_M=128 by hand matches one whose default is 128, and not one autotuned;
- op calls of `profile --torch-ops` and regions: the op (or region) name and its call order;
- other NVTX ranges: the range name and its order; kernels outside any range: kernel name and order;
- `--group-by kernel`: the row's range as above, then kernel name and its order in that range;
- `--group-by op`: the op type; `--group-by line`: the range, kernel, file name and line (or PC).
A config measured more than once in a run (`memtraffic merge` keeps both as RANGE and RANGE|#2) is one
row whose values are its first measurement and whose repeated times give the timing spread.

Byte counters are exact; ncu's kernel time is not. A time change counts as one only beyond the noise
band: the larger of `time_tolerance` (default 5%) and the spread (max - min) / median of the repeated
times either run carries. Each matched row gets a one-line verdict from the largest byte changes (1% or
more) and what the diagnosis columns say changed (sector waste, requests beyond the minimum, kernels),
naming the worst source line where the runs were measured with --source.

Where A is an eager run and B a compiled one of the same program, each Inductor kernel of B is set beside
the fusion group of A whose ops it fused (memtraffic.analysis.fusion.match): the group's predicted fused
floor against the kernels' measured time.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import SupportsFloat, SupportsIndex

import pandas as pd

from memtraffic.analysis.findings import sentences
from memtraffic.analysis.floor import Floor, floor_run
from memtraffic.analysis.fusion import Match, match
from memtraffic.analysis.lines import LineRow, read_lines
from memtraffic.analysis.row import frame_rows, row_dicts
from memtraffic.runfolder.records import RunRecord
from memtraffic.runfolder.results import read_results
from memtraffic.vocab.errors import MemtrafficError, ReportError, UsageError
from memtraffic.vocab.finding import GOOD, SECTOR_BYTES, Finding
from memtraffic.vocab.grouping import DiffGrouping, diff_grouping
from memtraffic.vocab.launches import measured_range

TIME_TOLERANCE = 0.05
BYTES_NOTE = 0.01  # byte changes below this fraction are in the columns but not named in the verdict

LEVEL_NAMES = {"l1_ld_bytes": "L1 loads", "l1_st_bytes": "L1 stores", "l2_rd_bytes": "L2 reads",
               "l2_wr_bytes": "L2 writes", "dram_rd_bytes": "DRAM reads", "dram_wr_bytes": "DRAM writes",
               "bytes_moved": "bytes moved", "excess_sectors": "excess sectors"}
_LEVELS = ["l1_ld_bytes", "l1_st_bytes", "l2_rd_bytes", "l2_wr_bytes", "dram_rd_bytes", "dram_wr_bytes"]
_EFFS = ["eff_l1_ld", "eff_l1_st", "eff_l2", "eff_dram", "eff_dram_rd"]
MEASURES = {  # what each grouping compares, in column order
    "range": ["time_ns", *_LEVELS, *_EFFS, "min_bytes", "n_kernels"],
    "kernel": ["time_ns", *_LEVELS, *_EFFS, "min_bytes"],
    "op": ["time_ns", *_LEVELS, *_EFFS, "min_bytes", "excess_bytes", "calls", "reused", "n_kernels"],
    "line": ["bytes_moved", "excess_sectors", "sectors", "ideal_sectors", "requests", "inst_executed"],
}
# A row's match key: its kind ('config', 'op', 'range', ...), the names and values that say what it measured,
# then call and launch orders (see _base_key and _Keys).
RowKey = tuple[str | int, ...]
Launches = tuple[str, ...]  # 'GRIDxBLOCK' per kernel
BYTE_MEASURES = {"range": _LEVELS, "kernel": _LEVELS, "op": _LEVELS,
                 "line": ["bytes_moved", "excess_sectors"]}


@dataclass
class Side:
    """One side of a diff: its rows (analyze's table, or `lines` rows), its name and the GPU it ran on."""

    path: Path
    name: str
    rows: Sequence[Mapping[str, object]]
    devices: list[str]
    keys: list[RowKey] = field(default_factory=list)
    gaps: list[str] = field(default_factory=list)  # what the run lacks of its plan (analyze.gaps)


@dataclass
class Diff:
    """Matched rows (largest change first), then rows only in A, then only in B; see diff()."""

    a: Side
    b: Side
    group_by: DiffGrouping
    time_tolerance: float
    rows: list[dict[str, object]]
    notes: list[str]
    floors: tuple[Floor | None, Floor | None] = (None, None)  # each side's floor (None: a saved table)
    fusion: list[Match] = field(default_factory=list)  # B's Inductor kernels beside A's fusion groups

    def frame(self) -> pd.DataFrame:
        frame: pd.DataFrame = pd.DataFrame(self.rows)
        return frame


# --- loading ------------------------------------------------------------------------------------------------


def _read_table_file(path: Path) -> list[dict[str, object]]:
    """A saved table: results.json or `analyze --format json` output (a list of row objects, each checked:
    runfolder.results); a damaged one is a usage error (exit 2): the user named it."""
    try:
        data = read_results(path, "give a run folder, a .ncu-rep, or the output of `memtraffic analyze "
                                  "--format json`")
    except ReportError as err:
        raise UsageError(str(err)) from None
    if not data:
        raise UsageError(f"{path} is not a saved table: expected a non-empty list of rows as "
                         "`memtraffic analyze --format json` prints")
    return data


def _frame_of_records(path: Path, records: list[dict[str, object]], group_by: DiffGrouping) -> pd.DataFrame:
    per_op = "calls" in records[0] and "range" not in records[0]
    if group_by in ("kernel", "line"):
        raise UsageError(f"--group-by {group_by} needs the reports: {path} is a saved table; give the run "
                         "folder or the .ncu-rep")
    if per_op and group_by != "op":
        raise UsageError(f"{path} holds rows per op type (`analyze --group-by op`): diff it with "
                         "--group-by op, or save the rows per range (`analyze --format json`)")
    df: pd.DataFrame = pd.DataFrame(records)
    need = ["op"] if per_op else ["range", "variant", "kernels"]
    missing = [c for c in need + _LEVELS if c not in df]
    if missing:
        raise UsageError(f"{path} lacks {', '.join(missing)}: save the table with "
                         "`memtraffic analyze --format json`")
    for column in MEASURES["op" if per_op else "range"]:
        if column in df:
            df[column] = pd.to_numeric(df[column], errors="coerce")
    if group_by == "op" and not per_op:
        from memtraffic.analysis.per_op import summarize

        df = summarize(df)
    return df


def _run_devices(run: RunRecord | None, table_devices: Sequence[str]) -> list[str]:
    """The GPU the run names (run.json environment.gpu), else the devices its reports name."""
    gpu = ((run or {}).get("environment") or {}).get("gpu")
    return [str(gpu)] if gpu else sorted({str(d) for d in table_devices if isinstance(d, str) and d})


def load_side(path: str | Path, group_by: DiffGrouping = "range") -> Side:
    """A run folder, .ncu-rep or saved JSON table -> its rows for this grouping, keyed for matching."""
    from memtraffic.analysis.analyze import analyze_run, gaps
    from memtraffic.runfolder.load import load_run

    path = Path(path)
    group_by = diff_grouping(group_by)  # a caller without the type checker may give any text
    if not path.exists():
        raise UsageError(f"{path}: no such run folder or file")
    if path.is_file() and path.suffix == ".json":
        df = _frame_of_records(path, _read_table_file(path), group_by)
        devices = sorted({str(d) for d in df.get("device", []) if isinstance(d, str) and d})
        side = Side(path, path.stem if path.name != "results.json" else path.parent.name,
                    frame_rows(df), devices)
        side.gaps = [f"{path}: {row_label(r, group_by)}: {r['status']}" for r in side.rows
                     if isinstance(r.get("status"), str) and r["status"] != "ok"]
    else:
        run = load_run(path)
        name = run.name
        table = analyze_run(run, group_by="range" if group_by == "line" else group_by)
        devices = _run_devices(run.meta, list(table["device"]) if "device" in table else [])
        if group_by == "line":
            ranges = {r["range"]: r for r in row_dicts(table) if r["range"]}
            lines = read_lines(path)
            keys = _line_keys(lines, ranges)
            named = [row_label(ranges[r["range"]], "range") if r["range"] in ranges else r["kernel"]
                     for r in lines]
            rows: list[dict[str, object]] = [{**r, "config": c, "where": k[-1]}  # range's row, its line
                                             for r, c, k in zip(lines, named, keys, strict=True)]
            return Side(path, name, rows, devices, keys, gaps(table))
        side = Side(path, name, row_dicts(table), devices, gaps=gaps(table))
    side.keys = _row_keys(side.rows, group_by)
    return side


# --- matching -----------------------------------------------------------------------------------------------


def _params_text(params: object) -> str:
    return json.dumps(params if isinstance(params, dict) else {}, sort_keys=True, default=str)


def _base_key(r: Mapping[str, object]) -> RowKey:
    """What a range measures, before its call order: a config, an op or region name, a range, a kernel."""
    if isinstance(variant := r.get("variant"), str) and variant:
        return ("config", variant, str(r.get("op", "")), str(r.get("shape", "")), str(r.get("dtype", "")),
                _params_text(r.get("params")))
    rng = measured_range(str(r.get("range") or ""))  # a repeat matches the same call measured
    parts = rng.split("|")
    if len(parts) >= 4 and parts[0] == "mt" and parts[1] == "op":
        return ("op", "|".join(parts[3:]))
    if len(parts) >= 4 and parts[0] == "mt" and parts[1] == "region":
        return ("region", "|".join(parts[2:-1]))
    if rng:
        return ("range", rng)
    kernels = r.get("kernels")
    return ("kernel", str(kernels[0]) if isinstance(kernels, list) and kernels else str(r.get("kernel", "?")))


class _Keys:
    """Keys in order of appearance: a config is one key however often it was measured; an op call,
    region, range or lone kernel gets its call number among those of the same name."""

    def __init__(self) -> None:
        self.ranges: dict[Hashable, RowKey] = {}
        self.calls: Counter[RowKey] = Counter()
        self.launches: dict[tuple[Hashable, Hashable], int] = {}
        self.kernels: Counter[tuple[Hashable, str]] = Counter()

    def of_range(self, ident: Hashable, r: Mapping[str, object]) -> RowKey:
        if ident not in self.ranges:
            base = _base_key(r)
            if base[0] != "config":
                base = (*base, self.calls[base])
                self.calls[base[:-1]] += 1
            self.ranges[ident] = base
        return self.ranges[ident]

    def of_kernel(self, ident: Hashable, kernel: str, launch: Hashable) -> int:
        """The kernel's order among the launches of that kernel in that range (repeats of a config
        restart it, so they fold onto the same key)."""
        if (ident, launch) not in self.launches:
            self.launches[(ident, launch)] = self.kernels[(ident, kernel)]
            self.kernels[(ident, kernel)] += 1
        return self.launches[(ident, launch)]


def _loose(key: RowKey) -> RowKey | None:
    """A config's key without its parameters (key[5]); None for other rows."""
    return (*key[:5], *key[6:]) if key and key[0] == "config" else None


def _launched(rows: Sequence[Mapping[str, object]], keys: Sequence[RowKey]) -> dict[RowKey, Launches]:
    """Each key's launches ('GRIDxBLOCK' per kernel, its first row's); () where the table has none."""
    out: dict[RowKey, Launches] = {}
    for r, k in zip(rows, keys, strict=True):
        dims = r.get("launch_dims")
        out.setdefault(k, tuple(dims) if isinstance(dims, list) and "?" not in dims else ())
    return out


def pair_keys(a: Side, b: Side) -> dict[RowKey, RowKey]:
    """Which key of A matches which of B: equal keys (variant, op, shape, dtype and every parameter value,
    defaults filled in); then, among the configs left, one of each run with the same variant, op, shape
    and dtype that launched the same grid and blocks (parameters spelled differently: a default written
    out on one side, an auto value the variant resolves at launch on the other); then one left alone in
    each run with the same variant, op, shape and dtype (a change of the parameter itself). The verdict
    of a row paired past the first step names the parameters and launches that differ."""
    pairs = {k: k for k in dict.fromkeys(a.keys) if k in set(b.keys)}
    launched_a, launched_b = _launched(a.rows, a.keys), _launched(b.rows, b.keys)
    for same_launch in (True, False):
        # grouped by the key without parameters, with its launches on the first try
        left_a: dict[RowKey | tuple[RowKey, Launches], list[RowKey]] = {}
        left_b: dict[RowKey | tuple[RowKey, Launches], list[RowKey]] = {}
        for keys, left, taken, launched in ((a.keys, left_a, set(pairs), launched_a),
                                            (b.keys, left_b, set(pairs.values()), launched_b)):
            for k in dict.fromkeys(keys):
                if k in taken or (loose := _loose(k)) is None:
                    continue
                if same_launch and not launched[k]:
                    continue
                left.setdefault((loose, launched[k]) if same_launch else loose, []).append(k)
        for group, ks in left_a.items():
            if len(ks) == 1 and len(left_b.get(group, [])) == 1:
                pairs[ks[0]] = left_b[group][0]
    return pairs


def _row_keys(rows: Sequence[Mapping[str, object]], group_by: DiffGrouping) -> list[RowKey]:
    if group_by == "op":
        return [("op type", str(r["op"])) for r in rows]
    keys = _Keys()
    out = []
    for i, r in enumerate(rows):
        ident = r.get("range") or ("#row", i)  # kernels outside any range are a row each
        key = keys.of_range(ident, r)
        if group_by == "kernel":
            kernel = str(_first_kernel(r))
            key = (*key, kernel, keys.of_kernel(ident, kernel, i))
        out.append(key)
    return out


def _line_keys(rows: Sequence[LineRow], ranges: Mapping[str, Mapping[str, object]]) -> list[RowKey]:
    """Lines by file name and line; instructions without line info by their order in the kernel (their
    PCs are addresses, different in every run)."""
    keys = _Keys()
    pcs: dict[int, list[int]] = {}
    for r in rows:
        if not r["file"]:
            pcs.setdefault(r["launch"], []).append(int(r["pc"] or "", 16))
    out = []
    for r in rows:
        ident = r["range"] or ("#launch", r["launch"])
        info = ranges.get(r["range"], {"range": r["range"], "kernels": [r["kernel"]]})
        key = keys.of_range(ident, info)
        out.append((*key, r["kernel"], keys.of_kernel(ident, r["kernel"], r["launch"]), _where(r, pcs)))
    return out


def _where(r: LineRow, pcs: Mapping[int, list[int]]) -> str:
    if r["file"]:
        return f"{Path(r['file']).name}:{r['line']}"
    order = sorted(pcs.get(r["launch"], [])).index(int(r["pc"] or "", 16))
    opcode = (r["source"].split() or ["?"])[0]
    if opcode.startswith("@") and len(r["source"].split()) > 1:
        opcode = r["source"].split()[1]
    return f"instruction {order} ({opcode})"


def row_label(r: Mapping[str, object], group_by: DiffGrouping) -> str:
    """The row's name as analyze (or lines) prints it."""
    from memtraffic.analysis.analyze import row_label as range_label

    if group_by == "op":
        return str(r["op"])
    if group_by == "line":
        return f"{r['config']} [{r['kernel']}] {r['where']}"
    label = range_label({**r, "range": r.get("range") or "", "kernels": r.get("kernels") or ["?"]})
    if group_by == "kernel" and r.get("variant"):
        label += f" [{_first_kernel(r)}]"
    return label


# --- comparing ----------------------------------------------------------------------------------------------


def _first_kernel(r: Mapping[str, object]) -> object:
    kernels = r.get("kernels")
    return kernels[0] if isinstance(kernels, list) and kernels else "?"


def _num(x: object) -> float:
    if not isinstance(x, str | bytes | SupportsFloat | SupportsIndex):  # what float() takes
        return math.nan
    try:
        value = float(x)
    except (TypeError, ValueError):
        return math.nan
    return value


def relative(a: float, b: float) -> float:
    """(b - a) / a; 0 when both are 0, inf when only a is 0, NaN when either is unknown."""
    if math.isnan(a) or math.isnan(b):
        return math.nan
    if a == 0:
        return 0.0 if b == 0 else math.inf
    return (b - a) / abs(a)


def spread(times: Sequence[float]) -> float:
    """(max - min) / median of repeated times; 0 for one measurement."""
    times = [t for t in times if not math.isnan(t)]
    if len(times) < 2:
        return 0.0
    mid = statistics.median(times)
    return (max(times) - min(times)) / mid if mid > 0 else 0.0


def pct(x: float) -> str:
    """A relative change: '-94%', '+0.4%', '+<0.1%', '16x' (from twice on), 'new' (from 0)."""
    if math.isinf(x):
        return "new" if x > 0 else "gone"
    if abs(x) < 0.0005:
        return "0%" if x == 0 else ("+<0.1%" if x > 0 else "-<0.1%")
    if x >= 1:
        return f"{1 + x:.3g}x"
    return f"{100 * x:+.0f}%" if abs(x) >= 0.095 else f"{100 * x:+.1f}%"


def _worst(findings: object) -> str | None:
    """The worst source line analyze's findings name (runs measured with --source), if any."""
    for f in findings if isinstance(findings, list) else []:
        if isinstance(f, Finding) and f.rule == "worst_line":
            return f.subject.line
        if isinstance(f, dict) and f.get("rule") == "worst_line":  # a row read back from results.json
            return str((f.get("subject") or {}).get("line") or "") or None
    return None


def _sector_notes(a: Mapping[str, object], b: Mapping[str, object]) -> list[Finding]:
    """Sector waste that went or came, per direction (one finding when loads and stores agree)."""
    moves: dict[str, tuple[str, dict[str, float | str]]] = {}
    for d, what in (("ld", "loads"), ("st", "stores")):
        sa, sb = _num(a.get(f"sector_eff_{d}")), _num(b.get(f"sector_eff_{d}"))
        if math.isnan(sa) or math.isnan(sb):
            continue
        numbers: dict[str, float | str] = {"a_eff": sa, "b_eff": sb}
        if sa < GOOD <= sb:
            moves[what] = ("diff_sector_gone", {**numbers, "used_n": round(SECTOR_BYTES * sa)})
        elif sb < GOOD <= sa:
            moves[what] = ("diff_sector_new", {**numbers, "used_n": round(SECTOR_BYTES * sb)})
        elif sa < GOOD and sb < GOOD and abs(sb - sa) > 0.1 * sa:
            moves[what] = ("diff_sector_changed", {**numbers, "a_used_n": round(SECTOR_BYTES * sa),
                                                   "b_used_n": round(SECTOR_BYTES * sb)})
    if len(moves) == 2 and moves["loads"][0] == moves["stores"][0] and \
            {k: v for k, v in moves["loads"][1].items() if k.endswith("_n")} == \
            {k: v for k, v in moves["stores"][1].items() if k.endswith("_n")}:
        rule, numbers = moves["loads"]
        return [Finding(rule, level="L1", evidence={**numbers, "what": "loads and stores"})]
    return [Finding(rule, level="L1 ld" if what == "loads" else "L1 st", evidence={**numbers, "what": what})
            for what, (rule, numbers) in moves.items()]


def _why(a: Mapping[str, object], b: Mapping[str, object]) -> list[Finding]:
    """What changed between the two rows, in the terms of analyze's findings."""
    notes = _sector_notes(a, b)
    for d, req, minimum in (("loads", "req_ld_bytes", "min_read_bytes"), ("stores", "req_st_bytes",
                                                                            "min_write_bytes")):
        ka = _num(a.get(req)) / _num(a.get(minimum)) if _num(a.get(minimum)) > 0 else math.nan
        kb = _num(b.get(req)) / _num(b.get(minimum)) if _num(b.get(minimum)) > 0 else math.nan
        if math.isnan(ka) or math.isnan(kb) or abs(kb - ka) <= 0.1 * ka or max(ka, kb) <= 1 / GOOD:
            continue
        notes.append(Finding("diff_requests_gone" if kb <= 1 / GOOD else "diff_requests",
                             level="L1 ld" if d == "loads" else "L1 st",
                             evidence={"what": d, "a_x": ka, "b_x": kb}))
    na, nb = _num(a.get("n_kernels")), _num(b.get("n_kernels"))
    if na == na and nb == nb and na != nb:
        notes.append(Finding("diff_kernels", evidence={"a_n": na, "b_n": nb}))
    fa, fb = a.get("findings"), b.get("findings")  # `lines` rows: what each line was judged
    if "verdict" in a and isinstance(fa, list) and isinstance(fb, list):
        ka_, kb_ = _line_kinds(fa), _line_kinds(fb)
        if ka_ != kb_:
            notes.append(Finding("diff_line_verdict", evidence={"a": ka_, "b": kb_}))
    if notes:  # where the runs name their worst source line, say which
        notes += [Finding("diff_worst_line", evidence={"side": side, "line": w})
                  for side, w in (("A", _worst(a.get("findings"))), ("B", _worst(b.get("findings")))) if w]
    return notes


def _line_kinds(found: Sequence[object]) -> str:
    from memtraffic.analysis.lines import KINDS

    return " + ".join(KINDS.get(f.rule, f.rule) for f in found if isinstance(f, Finding)) or "fine"


def _value(row: Mapping[str, object], key: str) -> float:
    """A measure of an output row (a float: NaN where unknown)."""
    value = row.get(key, math.nan)
    return float(value) if isinstance(value, int | float) else math.nan


def verdict(a: Mapping[str, object], b: Mapping[str, object], row: Mapping[str, object],
            group_by: DiffGrouping) -> str:
    """One line: the largest byte changes, why (from the diagnoses), and the time change against its noise.

    DRAM writes are named last and apart: written data can stay in L2 past a kernel's end, so they vary
    from run to run of the same kernel (on the committed H100 runs by up to 100% of a small output).
    """
    levels = [m for m in BYTE_MEASURES[group_by] if m != "dram_wr_bytes"]
    rels = {m: _value(row, f"{m}_rel") for m in levels}
    changes = [(m, rel) for m, rel in rels.items() if not math.isnan(rel) and abs(rel) >= BYTES_NOTE]
    changes.sort(key=lambda mc: -abs(mc[1]))
    if changes:
        head = ", ".join(f"{LEVEL_NAMES[m]} {pct(rel)}" for m, rel in changes[:2])
    else:
        same = all(_value(row, f"{m}_change") == 0 or math.isnan(_value(row, f"{m}_change")) for m in levels)
        head = "same bytes" if same else f"bytes within {100 * BYTES_NOTE:.0f}%"
        if all(math.isnan(_value(row, f"{m}_change")) for m in levels):  # timing-only runs count no bytes
            head = "no bytes measured"
    why = sentences(_why(a, b))
    time, noise = "", True
    if "time_ns_rel" in row and not math.isnan(_value(row, "time_ns_rel")):
        noise = bool(row["time_noise"])
        # '~': within the noise band, said once in the diff's header (views.diff_table.header)
        time = f"time {pct(_value(row, 'time_ns_rel'))}" + ("~" if noise else "")
    writes = _value(row, "dram_wr_bytes_rel")
    writes_note = f"DRAM writes {pct(writes)}" if names_writes(row) else ""  # why: said once (WRITES_NOTE)
    if not changes and not why and noise:
        return "; ".join(p for p in (f"no change: {head}" + (f", {time}" if time else ""), writes_note) if p)
    return "; ".join(p for p in (f"{head}: {why}" if why else head, time, writes_note) if p)


WRITES_NOTE = "DRAM writes: L2 write-back, varies run to run"  # said once under a diff that names them


def names_writes(row: Mapping[str, object]) -> bool:
    """The row's verdict names its DRAM writes' change (apart and last: see verdict)."""
    writes = row.get("dram_wr_bytes_rel", math.nan)
    return isinstance(writes, float) and not math.isnan(writes) and abs(writes) >= BYTES_NOTE


def _score(row: Mapping[str, object], group_by: DiffGrouping) -> float:
    """How large the row's change is: its largest relative byte change (DRAM writes aside, see verdict), or
    its time change beyond noise."""
    values = [abs(_value(row, f"{m}_rel")) for m in BYTE_MEASURES[group_by]
              if m != "dram_wr_bytes" and not math.isnan(_value(row, f"{m}_rel"))]
    if "time_ns_rel" in row and not row["time_noise"] and not math.isnan(_value(row, "time_ns_rel")):
        values.append(abs(_value(row, "time_ns_rel")))
    return max(values, default=0.0)


def check_devices(a: Side, b: Side, allow_mixed: bool) -> list[str]:
    if not a.devices or not b.devices or set(a.devices) == set(b.devices):
        return []
    where = f"A {a.path}: {', '.join(a.devices)}; B {b.path}: {', '.join(b.devices)}"
    if not allow_mixed:
        raise UsageError(f"the runs were measured on different GPUs ({where}): their counters do not "
                         "compare; pass --allow-mixed to diff them anyway")
    return [f"different GPUs ({where})"]


def compare(a: Side, b: Side, group_by: DiffGrouping = "range", time_tolerance: float = TIME_TOLERANCE,
            allow_mixed: bool = False) -> Diff:
    """Match two loaded sides; see the module docstring."""
    if not (0 <= time_tolerance < 10):
        raise UsageError(f"--time-tolerance {time_tolerance}: give a fraction such as 0.05 (5%)")
    notes = check_devices(a, b, allow_mixed)
    groups_a: dict[RowKey, list[Mapping[str, object]]] = {}
    groups_b: dict[RowKey, list[Mapping[str, object]]] = {}
    for rows, keys, groups in ((a.rows, a.keys, groups_a), (b.rows, b.keys, groups_b)):
        for r, k in zip(rows, keys, strict=True):
            groups.setdefault(k, []).append(r)
    pairs = pair_keys(a, b)
    paired_b = set(pairs.values())
    matched = [_row(rows, groups_b[pairs[k]], group_by, time_tolerance) for k, rows in groups_a.items()
               if k in pairs]
    matched.sort(key=lambda r: -_score(r, group_by))
    only_a = [_row(rows, [], group_by, time_tolerance) for k, rows in groups_a.items() if k not in pairs]
    only_b = [_row([], rows, group_by, time_tolerance) for k, rows in groups_b.items() if k not in paired_b]
    if not matched:
        notes.append("no row of A matches a row of B: are they runs of the same configs?")
    return Diff(a, b, group_by, time_tolerance, matched + only_a + only_b, notes)


def _row(rows_a: Sequence[Mapping[str, object]], rows_b: Sequence[Mapping[str, object]],
         group_by: DiffGrouping, time_tolerance: float) -> dict[str, object]:
    """One output row (the same keys for every status): each measure in A and B, change and relative."""
    ra, rb = (rows_a[0] if rows_a else {}), (rows_b[0] if rows_b else {})
    status = "both" if ra and rb else ("only_in_a" if ra else "only_in_b")
    row: dict[str, object] = {"match": row_label(ra or rb, group_by), "status": status,
                           "range_a": ra.get("range", ra.get("op")), "range_b": rb.get("range", rb.get("op"))}
    measures = MEASURES[group_by]
    for m in measures:
        va, vb = _num(ra.get(m)), _num(rb.get(m))
        row.update({f"{m}_a": va, f"{m}_b": vb, f"{m}_change": vb - va, f"{m}_rel": relative(va, vb)})
    if "time_ns" in measures:
        spread_a = spread([_num(r.get("time_ns")) for r in rows_a])
        spread_b = spread([_num(r.get("time_ns")) for r in rows_b])
        band = max(time_tolerance, spread_a, spread_b)
        rel = _value(row, "time_ns_rel")
        row.update(time_runs_a=len(rows_a), time_runs_b=len(rows_b), time_spread_a=spread_a,
                   time_spread_b=spread_b, time_band=band,
                   time_noise=None if math.isnan(rel) else bool(abs(rel) <= band))
    row["status_a"], row["status_b"] = (r.get("status", "ok") if r else None for r in (ra, rb))
    said = verdict(ra, rb, row, group_by) if status == "both" else f"only in {status[-1].upper()}"
    row["verdict"] = said
    row["findings"] = [f.to_dict() for f in _why(ra, rb)] if status == "both" else []
    notes = [f"{side} {st} (analyze: planned, not measured whole)" for side, st in
             (("A", row["status_a"]), ("B", row["status_b"])) if st not in (None, "ok")]
    if status == "both" and (changed := _params_change(ra, rb)):
        notes.append(f"parameters differ: {changed}")
    if notes:
        row["verdict"] = "; ".join([*notes, said])
    return row


def _params_change(a: Mapping[str, object], b: Mapping[str, object]) -> str:
    """'BLOCK_M 128 -> auto (launched 8192x128 -> 1024x128)': the parameters whose values differ between
    two rows of one config (None is 'auto': the variant picks at launch), and what each launched (grid x
    block per kernel); '' when the parameters agree."""
    pa, pb = (p if isinstance(p := r.get("params"), dict) else {} for r in (a, b))

    def shown(params: Mapping[str, object], key: str) -> str:
        return "unset" if key not in params else "auto" if params[key] is None else str(params[key])

    keys = list(dict.fromkeys([*pa, *pb]))
    text = ", ".join(f"{k} {shown(pa, k)} -> {shown(pb, k)}" for k in keys if shown(pa, k) != shown(pb, k))
    da, db = (", ".join(d) if isinstance(d := r.get("launch_dims"), list) else "" for r in (a, b))
    if text and da and db:
        text += f" (the same launch: {da})" if da == db else f" (launched {da} -> {db})"
    return text


def parse_fraction(text: object, what: str) -> float:
    """'5%' -> 0.05, '0.05' -> 0.05; a negative or malformed value is a UsageError naming `what`."""
    raw = str(text).strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise UsageError(f"{what} {text!r}: give a fraction such as 5% or 0.05")
    return value


def diff(a: str | Path, b: str | Path, group_by: DiffGrouping = "range",
         time_tolerance: float = TIME_TOLERANCE, allow_mixed: bool = False) -> Diff:
    """`memtraffic diff A B`: A (before) and B (after) loaded, matched and compared."""
    group_by = diff_grouping(group_by)  # a caller without the type checker may give any text
    d = compare(load_side(a, group_by), load_side(b, group_by), group_by, time_tolerance, allow_mixed)
    if group_by != "line":
        d.floors = (_floor(a), _floor(b))
        if d.floors[0] is not None and d.floors[1] is not None:
            d.fusion = match(d.floors[0].fusion, d.floors[1].fusion)
    return d


def _floor(path: str | Path) -> Floor | None:
    """The run's floor (analysis.floor), None for a saved JSON table or a run it cannot read."""
    if Path(path).suffix == ".json":
        return None
    try:
        return floor_run(path)
    except MemtrafficError:
        return None

