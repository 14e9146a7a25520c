"""Plain-text tables for people, JSON and CSV for scripts."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from typing import Any

from memtraffic.core.roofs import ROOFS, ceilings_rows
from memtraffic.core.units import fmt_bytes, fmt_rate


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
