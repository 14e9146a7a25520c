"""`memtraffic check` output: a line per failed check and a summary for people, one JSON object for CI."""

from __future__ import annotations

from collections.abc import Sequence

from memtraffic.analysis.check import CheckResult, failures, held
from memtraffic.views import formats


def summary(results: Sequence[CheckResult]) -> str:
    failed = sum(not r["ok"] for r in results)
    n = len({(r["expectation"], r["row"]) for r in results})
    rows = f"{n} row{'s' if n != 1 else ''}"
    if not failed:
        return f"all {len(results)} checks hold ({rows})"
    return f"{failed} of {len(results)} checks failed ({rows})"


def render(results: Sequence[CheckResult], fmt: str, run: str, source: str) -> str:
    """table: 'FAIL ...' per failed check, or when all hold 'ok ...' per row with the limits it held, then the
    summary; json: {run, expect, passed, failed, checks}."""
    def record() -> dict[str, object]:  # the json document
        failed = sum(not r["ok"] for r in results)
        return {"run": run, "expect": source, "ok": not failed, "passed": len(results) - failed,
                "failed": failed, "checks": list(results)}

    def table() -> str:
        named = failures(results) or held(results)
        return "\n".join([*named, summary(results)])

    return formats.render(fmt, record, table)
