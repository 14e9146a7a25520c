"""`memtraffic ops -- CMD`: run a program with its aten ops traced (no ncu) and tabulate their minimum.

Torch-free: the program traces itself through memtraffic/_inject/sitecustomize.py, which `tracer_env`
puts first on PYTHONPATH (`memtraffic profile --torch-ops` uses the same environment under ncu).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memtraffic.core.errors import MemtrafficError, UsageError
from memtraffic.core.tracefile import TORCH_MARK_ENV, TORCH_OPS_ENV, TRACE_ENV, TRACE_FROM, read_trace
from memtraffic.core.units import fmt_bytes
from memtraffic.views.tables import dump, text_table

INJECT_DIR = Path(__file__).resolve().parent.parent / "_inject"

# The keys of `memtraffic ops --format json|csv`, per traced call.
OPS_KEYS = ["seq", "pid", "kind", "range", "op", "shape", "dtype", "inputs", "outputs", "min_read_bytes",
            "min_write_bytes", "min_note", "model_flops", "intensity"]


def tracer_env(trace: Path, env: Mapping[str, str] | None = None,
               torch_mark: Path | None = None, mode: str = "1") -> dict[str, str]:
    """The environment in which a Python program traces its aten ops into `trace`.

    `torch_mark`: a file the program creates when it imports torch (tells "no torch" from "no op"),
    holding the tracer's warnings. `mode`: from when (memtraffic.core.tracefile.TRACE_FROM).
    """
    if mode not in TRACE_FROM:
        raise UsageError(f"unknown trace mode {mode!r}: use one of {', '.join(TRACE_FROM)}")
    out = dict(os.environ if env is None else env)
    out[TRACE_ENV] = str(trace)
    out[TORCH_OPS_ENV] = mode
    out["PYTHONPATH"] = os.pathsep.join([str(INJECT_DIR), *filter(None, [out.get("PYTHONPATH")])])
    if torch_mark is not None:
        out[TORCH_MARK_ENV] = str(torch_mark)
    return out


class CommandFailedError(MemtrafficError):
    """The traced command exited non-zero: `memtraffic ops` exits with the same code."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass
class TracedRun:
    records: list[dict[str, Any]]
    returncode: int
    imported_torch: bool
    warnings: list[str] = field(default_factory=list)


def tracer_warnings(mark: Path) -> list[str]:
    """The warnings the traced program's tracer left in its mark file (none if it never imported torch)."""
    return [line for line in mark.read_text().splitlines() if line.strip()] if mark.is_file() else []


def run_traced(cmd: Sequence[str], mode: str = "1") -> TracedRun:
    """Run `cmd` with its aten ops traced; its stdout goes to our stderr, so stdout stays the table."""
    if not cmd:
        raise UsageError("no command to trace: write `memtraffic ops -- python train.py ARGS`")
    if shutil.which(cmd[0]) is None:
        raise UsageError(f"command not found: {cmd[0]!r} is not on PATH or not an executable file")
    with tempfile.TemporaryDirectory(prefix="memtraffic-ops-") as tmp:
        trace, mark = Path(tmp) / "trace.jsonl", Path(tmp) / "torch-imported"
        proc = subprocess.run(list(cmd), env=tracer_env(trace, torch_mark=mark, mode=mode), stdout=2,
                              check=False)
        return TracedRun(read_trace(trace), proc.returncode, mark.exists(), tracer_warnings(mark))


def check_run(run: TracedRun, cmd: Sequence[str]) -> None:
    """Raise the error of a finished run, if any; the caller prints what was traced first."""
    shown = shlex.join(cmd)
    if run.returncode != 0:
        traced = "the ops traced before it ended are above" if run.records else "no op was traced"
        if run.returncode < 0:  # killed by a signal: exit as a shell would
            raise CommandFailedError(f"`{shown}` was killed by signal {-run.returncode}; {traced}",
                                     128 - run.returncode)
        raise CommandFailedError(f"`{shown}` exited with code {run.returncode}; {traced}", run.returncode)
    if not run.imported_torch and not run.records:
        raise MemtrafficError(f"`{shown}` never imported torch (or is not a Python program): `memtraffic "
                              "ops` traces PyTorch programs; mark other code with memtraffic.region(...)")
    if not run.records:
        raise MemtrafficError(f"`{shown}` imported torch but ran no aten op: nothing to show")


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


WORST_CALLS = 10  # calls the default table lists, most bytes first


def format_ops(records: Sequence[dict[str, Any]], fmt: str, all_calls: bool = False) -> str:
    """table: the calls (all of them in program order with `all_calls`, else the WORST_CALLS moving the
    most bytes), then per op type; json/csv: `ops_rows` (every call)."""
    if fmt != "table":
        return dump(ops_rows(records), fmt)

    def flops(x: float | None) -> str:
        return "-" if x is None else f"{x:.3g}"

    several = len({r["pid"] for r in records}) > 1
    shown = [r for r in records if not _moves_nothing(r)]
    heading = ""
    if not all_calls and len(shown) > WORST_CALLS:
        heading = (f"the {WORST_CALLS} calls moving the most bytes, of {len(shown)} (all of them: "
                   "--all-calls, or --format json):\n")
        shown = sorted(shown, key=lambda r: -(r["min_read_bytes"] + r["min_write_bytes"]))[:WORST_CALLS]
    body = [[f"{r['pid']}:{r['seq']}" if several else str(r["seq"]),
             r["op"] if r["kind"] == "op" else f"[region] {r['op']}",
             "x".join(map(str, r["shape"])), r["dtype"], fmt_bytes(r["min_read_bytes"]),
             fmt_bytes(r["min_write_bytes"]), flops(r["model_flops"]), flops(_intensity(r))] for r in shown]
    text = heading + text_table(["#", "op", "shape", "dtype", "min read", "min write", "FLOPs", "FLOP/B"],
                                body)
    notes = sorted({r["min_note"] for r in shown if r.get("min_note")})
    if notes:
        text += "\n\nminimums that are upper bounds: " + "; ".join(notes)
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
