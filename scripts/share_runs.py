"""Make committed run folders shareable (issue 43): every absolute path of the machine that measured them
(checkout, home and temp folders, the ncu and Python it ran) in run.json, plan.json, trace.jsonl (and the
*_run.json / *_plan.json copies some reports keep) and the report column of results.json/csv rewritten by
memtraffic.runfolder.paths's rules, which new runs' run.json and results follow when written. Numbers are
not touched: only strings that are absolute paths, and the host name. Run once from the repository root;
running it again changes nothing.

    .venv/bin/python scripts/share_runs.py [FOLDER ...]   # default: reports/
"""

from __future__ import annotations

import csv
import io
import json
import re
import sys
from pathlib import Path, PurePosixPath
from typing import Any

from memtraffic.runfolder.paths import portable, portable_path

NAMES = re.compile(r"(.+_)?(run|plan)\.json|trace\.jsonl|results\.(json|csv)|ncu\.log")
WORD = re.compile(r"[^\s'\"()]+")


def _strings(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [value] if isinstance(value, str) else []


def measured_in(folder: Path, record: Any) -> Path | None:
    """Where the run folder was when it was measured: the longest absolute path in the record that ends
    with the folder's name (its reports and plan were written there)."""
    found = None
    for text in _strings(record):
        for word in text.split():
            parts = PurePosixPath(word).parts
            if word.startswith("/") and folder.name in parts:
                candidate = Path(*parts[: len(parts) - parts[::-1].index(folder.name)])
                found = candidate if found is None or len(str(candidate)) > len(str(found)) else found
    return found


def share(path: Path) -> bool:
    """Rewrite one file in place; True when it changed."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".log":  # ncu.log: its command line and report lines, each absolute path made portable
        run_dir = measured_in(path.parent, text.split())
        new = WORD.sub(lambda m: portable_path(m.group(), run_dir), text)
        if new == text:
            return False
    elif path.suffix == ".csv":  # results.csv: only its report column, every other cell as written
        rows = list(csv.reader(io.StringIO(text)))
        if not rows or "report" not in rows[0]:
            return False
        col = rows[0].index("report")
        run_dir = measured_in(path.parent, [r[col] for r in rows[1:] if len(r) > col])
        new_rows = [rows[0]] + [[portable(c, run_dir) if i == col else c for i, c in enumerate(r)]
                                for r in rows[1:]]
        if new_rows == rows:
            return False
        out = io.StringIO()
        csv.writer(out, lineterminator="\n").writerows(new_rows)
        new = out.getvalue() + ("\n" if text.endswith("\n\n") else "")
    elif path.suffix == ".jsonl":
        records = [json.loads(line) for line in text.splitlines() if line.strip()]
        run_dir = measured_in(path.parent, records)
        new = "".join(json.dumps(portable(r, run_dir)) + "\n" for r in records)
        if [json.loads(line) for line in new.splitlines()] == records:
            return False
    else:
        record = json.loads(text)
        new_record = portable(record, measured_in(path.parent, record))
        if new_record == record:
            return False
        new = json.dumps(new_record, indent=2) + ("\n" if text.endswith("\n") else "")
    path.write_text(new, encoding="utf-8")
    return True


def main(folders: list[str]) -> None:
    changed = 0
    for folder in [Path(f) for f in folders or ["reports"]]:
        for path in sorted(p for p in folder.rglob("*") if p.is_file() and NAMES.fullmatch(p.name)):
            if share(path):
                changed += 1
                print(f"rewrote {path}")
    print(f"{changed} files rewritten")


if __name__ == "__main__":
    main(sys.argv[1:])
