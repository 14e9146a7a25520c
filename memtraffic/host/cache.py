"""The user cache folder (cache_dir: $MEMTRAFFIC_CACHE, else the XDG cache) and the one warning, said once a
process, that it cannot be used (cache_unusable). What each cache file holds belongs to its reader: ncu's
metric lists (ncu.command), report tables (ncu.kernel_table), roofs (host.roofs_cache)."""

from __future__ import annotations

import os
from pathlib import Path

from memtraffic.vocab.errors import warn


def cache_dir() -> Path:
    """The user cache folder: $MEMTRAFFIC_CACHE, else $XDG_CACHE_HOME (or ~/.cache)/memtraffic."""
    root = os.environ.get("MEMTRAFFIC_CACHE")
    if root:
        return Path(root).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser() / "memtraffic"


_cache_said = False  # an unusable cache is said once a process, not once a file


def cache_unusable(reason: str) -> None:
    """One warning, the first time, that the user cache cannot be used (not writable, not a folder, full):
    what it would hold is read or measured again instead."""
    global _cache_said
    if not _cache_said:
        _cache_said = True
        warn(f"the cache folder {cache_dir()} cannot be used ({reason}): what it would keep is read again "
             "each time; set MEMTRAFFIC_CACHE to a folder you can write")
