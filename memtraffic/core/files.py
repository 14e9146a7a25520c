"""The one JSON reader, the one JSON writer (atomic) and the one user cache folder."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from memtraffic.core.errors import ReportError


def read_json(path: Path, fix: str = "the file is damaged") -> Any:
    """The JSON in `path`; a ReportError in one line (what is wrong, then `fix`) when it is not JSON."""
    try:
        return json.loads(Path(path).read_text())
    except json.JSONDecodeError as err:
        raise ReportError(f"{path} is not valid JSON ({err.msg}, line {err.lineno}): {fix}") from None
    except UnicodeDecodeError:
        raise ReportError(f"{path} is not valid JSON (not text): {fix}") from None
    except OSError as err:
        raise ReportError(f"cannot read {path}: {err.strerror}") from None


def write_json(path: Path, data: Any, sort_keys: bool = False) -> Path:
    """Write `data` as indented JSON: to a temporary file beside `path`, then renamed over it, so a
    reader never sees half a file and an interrupted write leaves the old one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(data, indent=2, sort_keys=sort_keys) + "\n")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def cache_dir() -> Path:
    """The user cache folder: $MEMTRAFFIC_CACHE, else $XDG_CACHE_HOME (or ~/.cache)/memtraffic."""
    root = os.environ.get("MEMTRAFFIC_CACHE")
    if root:
        return Path(root).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser() / "memtraffic"
