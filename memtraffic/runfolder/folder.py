"""The run folder: a new folder per run (never overwritten), the runner's status file and, with
`measure --gpus`, the claims through which the runners share the plan's configs.

A run folder holds plan.json (what was asked, with minimums), run.json (how it went: every ncu argv,
the environment, per-config status), status.jsonl (the runner's progress), ncu.log and the reports.
"""

from __future__ import annotations

import itertools
import json
import os
import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TypedDict, cast

from memtraffic.runfolder.records import DAMAGED
from memtraffic.vocab.errors import UsageError
from memtraffic.vocab.files import refuse_nonempty, require_file

DEFAULT_RUNS_ROOT = Path("reports") / "runs"


def new_run_dir(variants: Sequence[str], out: Path | None = None, root: Path = DEFAULT_RUNS_ROOT,
                now: datetime | None = None) -> Path:
    """A fresh, empty folder for this run; an existing, non-empty --out is an error, never overwritten.
    A missing --out is made exclusively: of two runs starting with the same new --out, one is refused."""
    if out is not None:
        existed = out.is_dir()
        refuse_nonempty(out)
        try:
            out.mkdir(parents=True, exist_ok=existed)
        except FileExistsError:  # made by another run since the check
            refuse_nonempty(out)
            raise UsageError(f"{out} was just made by another process: choose a new --out folder") from None
        return out
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%SZ")
    label = re.sub(r"[^A-Za-z0-9_.-]", "_", variants[0] if variants else "run")
    if len(variants) > 1:
        label += f"+{len(variants) - 1}"
    root.mkdir(parents=True, exist_ok=True)
    for n in itertools.count(1):
        path = root / (f"{stamp}_{label}" if n == 1 else f"{stamp}_{label}-{n}")
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue
    raise AssertionError("unreachable")


# --- status file (shared with the runner) -------------------------------------------------------------------


class StatusRecord(TypedDict, total=False):
    """One line of status.jsonl: the runner's 'ready' event (event, pid, process_started), or a config's
    record: 'start', then 'ok' (max_err, seconds, phases) or 'failed'/'not run' (error); t: when written."""

    id: int
    range: str | None
    status: str
    error: str | None
    max_err: float
    seconds: float
    phases: dict[str, float]
    event: str
    pid: int
    process_started: float | None
    t: float


def read_status(path: Path) -> dict[int, StatusRecord]:
    """Config id -> its last record in the runner's JSON-lines status file ('start' until it finishes)."""
    latest: dict[int, StatusRecord] = {}
    if not require_file(path, DAMAGED):
        return latest
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:  # a line cut short by a crash
            continue
        if isinstance(rec, dict) and isinstance(rec.get("id"), int) and not isinstance(rec["id"], bool):
            latest[rec["id"]] = cast(StatusRecord, rec)  # the runner's line (readers use .get)
    return latest


def append_status(path: Path, record: Mapping[str, object]) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(dict(record)) + "\n")


# --- claims (measure --gpus: one runner per GPU, each taking the next config nobody has taken) -------------


def claim(folder: Path, config_id: int, gpu: int) -> bool:
    """Take config `config_id` for GPU `gpu`: True for the one runner that creates its claim file
    (folder/ID, holding the GPU index), False for every other."""
    folder.mkdir(exist_ok=True)
    try:
        fd = os.open(folder / str(config_id), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(str(gpu))
    return True


def read_claims(folder: Path) -> dict[int, int | None]:
    """Config id -> the GPU that claimed it (None while its claim file is still being written)."""
    claims: dict[int, int | None] = {}
    for path in folder.iterdir() if folder.is_dir() else ():
        if path.name.isdigit():
            text = path.read_text(encoding="utf-8").strip()
            claims[int(path.name)] = int(text) if text.isdigit() else None
    return claims
