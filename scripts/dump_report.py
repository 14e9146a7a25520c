"""Every result of an .ncu-rep as JSON: its name, NVTX ranges and every metric (value as text).

    python scripts/dump_report.py REPORT.ncu-rep > dump.json

For looking at what ncu wrote (range replay's results beside kernel replay's:
scripts/gpu_range_replay_reports.sh); needs ncu_report (memtraffic.ncu.report finds it).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from memtraffic.ncu.report import _range_stack, load_ncu_report


def _text(value: object) -> str:
    try:
        return str(value)
    except Exception as err:  # noqa: BLE001 - a metric ncu_report cannot print is named, not fatal
        return f"<{type(err).__name__}>"


def dump(path: str) -> list[dict[str, object]]:
    with load_ncu_report(path) as report:
        return _dump(report)


def _dump(report: Any) -> list[dict[str, object]]:
    results = []
    for i in range(report.num_ranges()):
        rng = report.range_by_idx(i)
        for j in range(rng.num_actions()):
            action = rng.action_by_idx(j)
            metrics = {}
            for name in action.metric_names():
                metric = action.metric_by_name(name)
                metrics[name] = _text(metric.value()) if metric is not None else None
            results.append({"range_index": i, "action_index": j, "name": action.name(),
                            "nvtx": _range_stack(action), "metrics": metrics})
    return results


if __name__ == "__main__":
    json.dump(dump(sys.argv[1]), sys.stdout, indent=1)
