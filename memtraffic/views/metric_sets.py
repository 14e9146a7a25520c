"""`memtraffic metrics`: what each metric set measures on a chip, and with which ncu names."""

from __future__ import annotations

from collections.abc import Sequence

from memtraffic.ncu.chips import SetRow
from memtraffic.ncu.metrics import SETS
from memtraffic.views import formats
from memtraffic.vocab.arch import CHIPS


def _heading(chip: str) -> str:
    info = CHIPS.get(chip)
    return f"{chip} ({info.arch}, {info.sm}: {info.gpus})" if info else chip


def _left_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Names, not numbers: every column left-aligned."""
    cells = [list(headers), *map(list, rows)]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join([lines[0], "  ".join("-" * w for w in widths), *lines[1:]])


def format_table(rows: Sequence[SetRow]) -> str:
    """Per chip: a heading, a table of set, alias and ncu name ('-': not measured), then the notes; last, a
    legend of the sets shown (their lines in memtraffic.ncu.metrics.SETS)."""
    blocks = []
    for chip in dict.fromkeys(r["chip"] for r in rows):
        mine = [r for r in rows if r["chip"] == chip]
        body = [[r["set"], r["alias"], "- (not measured)" if r["ncu"] is None else r["ncu"]] for r in mine]
        notes = list(dict.fromkeys(r["note"] for r in mine if r["note"]))
        text = _heading(chip) + "\n" + _left_table(["set", "alias", "ncu"], body)
        if notes:
            text += "\n\nnot measured on " + chip + ":\n" + "\n".join(f"  {n}" for n in notes)
        else:
            text += f"\n\nevery alias is measured on {chip}"
        blocks.append(text)
    shown = set(r["set"] for r in rows)
    blocks.append("sets:\n" + "\n".join(f"  {s.name}: {s.description}" for s in SETS if s.name in shown))
    return "\n\n".join(blocks)


def render(rows: Sequence[SetRow], fmt: str) -> str:
    return formats.render(fmt, rows, lambda: format_table(rows))
