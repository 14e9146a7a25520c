"""Findings as records: what a rule found, about what, with which numbers.

A `Finding` is data: the `rule` (a key of the registry, memtraffic.analysis.findings.RULES), its
`subject` (run, config, op call, kernel, source line), the memory `level` it concerns, its `evidence`
(named numbers, a few named words) and the time it holds. Analysis makes findings; their words come from
the registry's templates, filled here by `fill`: a name's ending says how its number is written (see
`fmt_value`): `_bytes` 8.39 MB, `_s` 632.7 us, `_x` a factor (4x), `_Bps` 26.52 GB/s, `_flops` FLOP/s,
`_frac` a share (80%), `_pct` a percentage already (45%), `_n` a count (1,024), `_eff` an efficiency
(0.25); words (str) as they are. Nothing reads the words back: code that needs to know what was found
looks at `rule` and `evidence`.

Imports nothing beyond the standard library and memtraffic.vocab.units: views and the reading side use it.
"""

from __future__ import annotations

import math
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, get_args

from memtraffic.vocab.units import fmt_bytes, fmt_rate, fmt_time

GOOD = 0.9  # an efficiency below this is a finding (and a factor above 1 / GOOD)
SECTOR_BYTES = 32  # the unit L1 and L2 move global memory in

Level = Literal["", "L1", "L1 ld", "L1 st", "L2", "DRAM", "DRAM rd", "DRAM wr", "local"]
LEVELS: tuple[Level, ...] = get_args(Level)
Evidence = Mapping[str, float | int | str]


@dataclass(frozen=True)
class Subject:
    """What a finding is about, as people name it (never an NVTX range id): the run, the config (a variant
    with its shape, dtype and parameters, e.g. 'softmax_naive 1048576x2 fp32 num_warps=4'), the op type
    and its call number in program order, the kernel, the source line ('softmax_rows.py:38', or an
    instruction address where the report has no line info). Empty fields are unknown or not relevant."""

    run: str = ""
    config: str = ""
    op: str = ""
    call: int | None = None
    kernel: str = ""
    line: str = ""

    def label(self) -> str:
        """The subject in a few words: 'aten.addmm call 14', 'softmax_rows.py:38', a config, a kernel."""
        if self.line:
            return self.line
        if self.op:
            return self.op + (f" call {self.call}" if self.call is not None else "")
        return self.config or self.kernel or self.run

    def to_dict(self) -> dict[str, str | int | None]:
        return {"run": self.run, "config": self.config, "op": self.op, "call": self.call,
                "kernel": self.kernel, "line": self.line}


@dataclass(frozen=True)
class Finding:
    """One thing a rule found (see the module). `time_s`: the seconds it holds (a floor's recoverable time,
    a row's time above a copy of its minimum), None where it holds no time of its own."""

    rule: str
    subject: Subject = field(default_factory=Subject)
    level: Level = ""
    evidence: Evidence = field(default_factory=dict, hash=False)
    time_s: float | None = None

    def to_dict(self) -> dict[str, object]:
        """The record as JSON has it (numbers that are not finite become None)."""
        return {"rule": self.rule, "subject": self.subject.to_dict(), "level": self.level,
                "evidence": {k: _plain(v) for k, v in self.evidence.items()}, "time_s": _plain(self.time_s)}




def fmt_factor(x: float) -> str:
    """A factor as every view writes it: '16x', '4x', '3.2x', '0.84x'."""
    if not math.isfinite(x):
        return "-"
    if x < 1:
        return f"{x:.2f}x"
    if x >= 10 or abs(x - round(x)) < 0.05 * x:
        return f"{x:.0f}x"
    return f"{x:.1f}x"


def fmt_value(name: str, value: float | int | str | None) -> str:
    """One evidence value written as its name's ending says (see the module)."""
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    if not math.isfinite(value):
        return "-"
    if name.endswith("_bytes"):
        return fmt_bytes(value)
    if name.endswith("_s"):
        return fmt_time(value * 1e9)
    if name.endswith("_x"):
        return fmt_factor(value)
    if name.endswith("_Bps"):
        return fmt_rate(value)
    if name.endswith("_flops"):
        return fmt_rate(value, "FLOP/s")
    if name.endswith("_frac"):
        return f"{value:.0%}"
    if name.endswith("_pct"):
        return f"{value:.0f}%"
    if name.endswith("_eff"):
        return f"{value:.2f}"
    if name.endswith("_n"):
        return f"{value:,.0f}" if float(value).is_integer() or abs(value) >= 10 else f"{value:.3g}"
    return f"{value:.3g}"


class _Missing(dict[str, str]):
    def __missing__(self, key: str) -> str:
        return "-"


def fill(template: str, evidence: Evidence) -> str:
    """A rule's template over a finding's evidence, each value written as its name says ('-' where a name
    is missing or its number unknown)."""
    values = _Missing({k: fmt_value(k, v) for k, v in evidence.items()})
    return string.Formatter().vformat(template, (), values)


def _plain(v: float | int | str | None) -> float | int | str | None:
    return None if isinstance(v, float) and not math.isfinite(v) else v
