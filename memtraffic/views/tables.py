"""Plain-text tables for people, JSON and CSV for scripts."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from typing import Any

from memtraffic.core.roofs import ROOFS, ceilings_rows
from memtraffic.core.units import fmt_bytes, fmt_rate, fmt_time


def text_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Left-aligned first column, right-aligned numbers, one space-padded line per row."""
    cells = [[str(c) for c in headers]] + [["-" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(r: list[str]) -> str:
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ).rstrip()

    out = [line(cells[0]), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in cells[1:]]
    return "\n".join(out)


def dump(rows: Sequence[dict[str, Any]], fmt: str) -> str:
    """json: a list of objects (stable keys, raw numbers in bytes/ns); csv: one header line then rows."""
    if fmt == "json":
        return json.dumps(list(rows), indent=2, default=str)
    buf = io.StringIO()
    keys: list[str] = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    writer = csv.DictWriter(buf, fieldnames=keys, lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow({k: (json.dumps(v) if isinstance(v, dict | list) else v) for k, v in r.items()})
    return buf.getvalue().rstrip("\n")


def render(rows: Sequence[dict[str, Any]], fmt: str, kind: str) -> str:
    if fmt != "table":
        return dump(rows, fmt)
    if kind == "list":
        return _list_table(rows)
    raise ValueError(f"no table layout for {kind!r}")


def _list_table(rows: Sequence[dict[str, Any]]) -> str:
    headers = [
        "variant",
        "op",
        "shape",
        "dtype",
        "min read",
        "min write",
        "pred read",
        "pred write",
        "pred/min",
        "FLOPs",
        "FLOP/B",
    ]
    body = []
    notes = []
    for r in rows:
        if not r["supported"]:
            body.append([r["name"], r["op"], r["shape"], r["dtype"]] + ["n/a"] * 7)
            notes.append(f"  {r['name']}: {r['reason']}")
            continue
        amp = (r["pred_read_bytes"] + r["pred_write_bytes"]) / (r["min_read_bytes"] + r["min_write_bytes"])
        body.append(
            [
                r["name"],
                r["op"],
                r["shape"],
                r["dtype"],
                fmt_bytes(r["min_read_bytes"]),
                fmt_bytes(r["min_write_bytes"]),
                fmt_bytes(r["pred_read_bytes"]),
                fmt_bytes(r["pred_write_bytes"]),
                f"{amp:.2f}x",
                f"{r['flops']:.3g}",
                f"{r['intensity']:.3g}",
            ]
        )
    text = text_table(headers, body)
    if notes:
        text += "\n\nnot applicable at this shape/dtype:\n" + "\n".join(notes)
    return text


def ceilings_table(entry: Mapping[str, Any]) -> str:
    """`memtraffic ceilings`: each roof measured beside ncu's theoretical peak, then how each was measured."""
    body = []
    for r in ceilings_rows(entry):
        body.append([r["label"], fmt_rate(r["measured"], r["unit"]),
                     fmt_rate(r["ncu_theoretical"], r["unit"]),
                     f"{100 * r['fraction']:.0f}%" if r["fraction"] else "-"])
    head = f"{entry['device']}" + (f", measured {entry['date']}" if entry.get("date") else "")
    text = head + "\n" + text_table(["roof", "measured", "ncu theoretical", "measured/theoretical"], body)
    methods = [f"  {ROOFS[k][0]}: {v}" for k, v in entry.get("method", {}).items() if k in ROOFS]
    if methods:
        text += "\n\nhow measured:\n" + "\n".join(methods)
    if entry.get("ncu_note"):
        text += f"\nncu theoretical: {entry['ncu_note']}"
    return text


def grid_count_table(rows: Sequence[dict[str, Any]]) -> str:
    """`list --count`: configs per variant (rows of measure.sweep.grid_counts), skipped ones, the total."""
    width = max(len(r["variant"]) for r in rows)
    lines = [f"{r['variant']:<{width}}  {r['configs']:>5} configs"
             + (f"  ({r['skipped']} skipped)" if r["skipped"] else "") for r in rows]
    configs, skipped = sum(r["configs"] for r in rows), sum(r["skipped"] for r in rows)
    total = f"{configs} configs in all" + (f" ({skipped} combinations skipped)" if skipped else "")
    return "\n".join([*lines, total])


def bench_table(result: dict[str, Any]) -> str:
    """The people's table: time, effective bandwidth, fraction of copy, speedups over torch."""
    headers = [
        "variant",
        "shape",
        "dtype",
        "time",
        "eff. bandwidth",
        "% of copy",
        "vs torch.softmax",
        "vs torch.compile",
    ]
    body = []
    for r in result["rows"]:
        if r["status"] != "ok":
            body.append([r["variant"], r["shape"], r["dtype"], r["status"], "-", "-", "-", "-"])
            continue
        vs = [r.get(f"speedup_vs_{b}") for b in ("torch_softmax", "torch_compiled")]
        body.append(
            [
                r["variant"],
                r["shape"],
                r["dtype"],
                fmt_time(r["time_ns"]),
                fmt_rate(r["bw_Bps"]),
                f"{100 * r['frac_of_copy']:.0f}%",
            ]
            + [f"{v:.2f}x" if v else "-" for v in vs]
        )
    env = result["environment"]
    head = f"{env['device']}, torch {env['torch']}, triton {env['triton']}, {env['date']}"
    return head + "\n" + text_table(headers, body)


# The keys of `memtraffic ops --format json|csv`, per traced call.
OPS_KEYS = ["seq", "pid", "kind", "range", "op", "shape", "dtype", "inputs", "outputs", "min_read_bytes",
            "min_write_bytes", "model_flops", "intensity"]


def _intensity(r: dict[str, Any]) -> float | None:
    total = r["min_read_bytes"] + r["min_write_bytes"]
    return r["model_flops"] / total if r["model_flops"] is not None and total > 0 else None


def ops_rows(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One plain object per traced call (OPS_KEYS), in program order."""
    return [{k: (_intensity(r) if k == "intensity" else r[k]) for k in OPS_KEYS} for r in records]


def summary(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per op type, most bytes first: calls, bytes, FLOPs (regions left out: their ops count already)."""
    by_op: dict[str, dict[str, Any]] = {}
    for r in records:
        if r["kind"] != "op":
            continue
        s = by_op.setdefault(r["op"], {"op": r["op"], "calls": 0, "min_read_bytes": 0, "min_write_bytes": 0,
                                       "model_flops": None})
        s["calls"] += 1
        s["min_read_bytes"] += r["min_read_bytes"]
        s["min_write_bytes"] += r["min_write_bytes"]
        if r["model_flops"] is not None:
            s["model_flops"] = (s["model_flops"] or 0) + r["model_flops"]
    rows = sorted(by_op.values(), key=lambda s: -(s["min_read_bytes"] + s["min_write_bytes"]))
    for s in rows:
        s["intensity"] = _intensity(s)
    return rows


def _moves_nothing(r: dict[str, Any]) -> bool:
    return r["min_read_bytes"] == 0 and r["min_write_bytes"] == 0 and not r["model_flops"]


def ops_table(records: Sequence[dict[str, Any]], fmt: str) -> str:
    """table: per call in program order, then per op type; json/csv: `ops_rows`."""
    if fmt != "table":
        return dump(ops_rows(records), fmt)

    def flops(x: float | None) -> str:
        return "-" if x is None else f"{x:.3g}"

    several = len({r["pid"] for r in records}) > 1
    shown = [r for r in records if not _moves_nothing(r)]
    body = [[f"{r['pid']}:{r['seq']}" if several else str(r["seq"]),
             r["op"] if r["kind"] == "op" else f"[region] {r['op']}",
             "x".join(map(str, r["shape"])), r["dtype"], fmt_bytes(r["min_read_bytes"]),
             fmt_bytes(r["min_write_bytes"]), flops(r["model_flops"]), flops(_intensity(r))] for r in shown]
    text = text_table(["#", "op", "shape", "dtype", "min read", "min write", "FLOPs", "FLOP/B"], body)
    idle = sorted({r["op"] for r in records if _moves_nothing(r)})
    if idle:
        count = sum(_moves_nothing(r) for r in records)
        text += (f"\n\n{count} calls moved no data (views, aliases, allocations), not shown: "
                 f"{', '.join(idle)}")
    rows = summary(records)
    if rows:
        body = [[s["op"], str(s["calls"]), fmt_bytes(s["min_read_bytes"]), fmt_bytes(s["min_write_bytes"]),
                 fmt_bytes(s["min_read_bytes"] + s["min_write_bytes"]), flops(s["model_flops"]),
                 flops(s["intensity"])] for s in rows if s["min_read_bytes"] + s["min_write_bytes"] > 0]
        total = sum(s["min_read_bytes"] + s["min_write_bytes"] for s in rows)
        text += "\n\nper op type, most bytes first (total minimum " + fmt_bytes(total) + "):\n"
        text += text_table(["op", "calls", "min read", "min write", "min total", "FLOPs", "FLOP/B"], body)
    return text
