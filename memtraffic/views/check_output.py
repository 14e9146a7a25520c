"""`memtraffic check` output: a line per failed check and a summary for people, one JSON object for CI."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from memtraffic.analysis.gate import failures


def summary(results: Sequence[Mapping[str, Any]]) -> str:
    failed = sum(not r["ok"] for r in results)
    n = len({(r["expectation"], r["row"]) for r in results})
    rows = f"{n} row{'s' if n != 1 else ''}"
    if not failed:
        return f"all {len(results)} checks hold ({rows})"
    return f"{failed} of {len(results)} checks failed ({rows})"


def render(results: Sequence[Mapping[str, Any]], fmt: str, run: str, source: str) -> str:
    """table: 'FAIL ...' per failed check, then the summary; json: {run, expect, passed, failed, checks}."""
    if fmt == "json":
        failed = sum(not r["ok"] for r in results)
        return json.dumps({"run": run, "expect": source, "ok": not failed, "passed": len(results) - failed,
                           "failed": failed, "checks": list(results)}, indent=2)
    return "\n".join([*failures(results), summary(results)])
