"""Rewrite the measuring machine's absolute paths in run folders' text files as repository-relative ones,
so committed runs name no machine's folders: '<anything>/reports/h100/RUN/...' -> 'reports/h100/RUN/...'
and '<the checkout>/memtraffic/...' -> 'memtraffic/...'. Binary files (the .ncu-rep) are left as ncu wrote
them. Usage: python scripts/relative_paths.py RUN_FOLDER...
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

TEXT = {".json", ".csv", ".log", ".txt", ".jsonl"}
REPORTS = re.compile(r"(?:/[^\s\"',:]*)?/(reports/[\w.-]+/[\w.-]+)")  # an absolute path into reports/
CHECKOUT = re.compile(r"/[^\s\"',:]*?/((?:memtraffic|examples|scripts|kernels)/[\w./-]+)")


def relative(text: str) -> str:
    return CHECKOUT.sub(r"\1", REPORTS.sub(r"\1", text))


def main(folders: list[str]) -> int:
    for folder in map(Path, folders):
        for path in sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in TEXT):
            text = path.read_text(errors="surrogateescape")
            new = relative(text)
            if new != text:
                path.write_text(new, errors="surrogateescape")
                print(f"{path}: paths made relative")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
