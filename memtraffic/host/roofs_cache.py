"""This machine's roofs: the user cache of roofs measured here (roofs.json in host.cache's folder; the
older ceilings.json while roofs.json is missing), and a device's roofs found there first, then among the
committed references (vocab.roofs.COMMITTED_DIR). memtraffic.probes.roof_probes writes the cache."""

from __future__ import annotations

import os
from pathlib import Path

from memtraffic.host.cache import cache_dir, cache_unusable
from memtraffic.vocab import roofs
from memtraffic.vocab.errors import ReportError, warn
from memtraffic.vocab.files import path_kind
from memtraffic.vocab.roofs import CACHE_ADVICE, RoofsEntry, check_entry, device_slug, read_roofs_json

OLD_CACHE_NAME = "ceilings.json"  # the cache's name before roofs.json: still read while roofs.json is missing


def cache_file() -> Path:
    """roofs.json in the user cache folder (host.cache.cache_dir): where roofs are cached."""
    return cache_dir() / "roofs.json"


def _cache_to_read() -> Path:
    """roofs.json, or the older ceilings.json beside it while roofs.json does not exist, so that roofs
    measured before the rename are not lost (probes.roof_probes.write_cache carries them into roofs.json)."""
    new, old = cache_file(), cache_dir() / OLD_CACHE_NAME
    return old if path_kind(new) == "missing" and path_kind(old) != "missing" else new


_SET_ASIDE: set[tuple[str, str]] = set()  # (cache file, device) already warned about


def read_cache(path: Path | None = None) -> dict[str, RoofsEntry]:
    """device name -> roofs entry; empty when there is no cache yet, or when it cannot be read (said once:
    host.cache.cache_unusable). An entry whose numbers are no roofs (entry_problem) is set aside with one
    warning: the committed roofs (reports/roofs/) stand in for it."""
    path = path or _cache_to_read()
    kind = path_kind(path)
    if kind == "missing":
        return {}
    if kind != "file" or not os.access(path, os.R_OK):
        cache_unusable(f"{path} is {'not readable' if kind == 'file' else kind}")
        return {}
    data = read_roofs_json(path)
    if not isinstance(data, dict):
        raise ReportError(f"{path} is not a roofs cache: delete it or re-run "
                          "'memtraffic roofs --refresh'")
    out: dict[str, RoofsEntry] = {}
    for dev, e in data.items():
        try:
            out[dev] = check_entry(e, path)
        except ReportError as err:
            if (str(path), dev) not in _SET_ASIDE:
                _SET_ASIDE.add((str(path), dev))
                warn(f"{err.args[0].removesuffix(CACHE_ADVICE)}: this cache entry is set aside (the "
                     f"committed roofs stand in, where there are any); {CACHE_ADVICE.removeprefix(': ')}")
    return out


def find_roofs(device: str, cache: Path | None = None,
                  committed: Path | None = None) -> RoofsEntry | None:
    """This device's roofs: the user cache first (measured on this machine), then committed ones."""
    # ncu's display name and torch's device name are the driver's same string; compare slugs anyway
    # so that spacing or case never hides a device's roofs.
    key = device_slug(device).lower()
    entry = next((e for dev, e in read_cache(cache).items() if device_slug(dev).lower() == key), None)
    if entry is not None:
        return entry
    folder = committed or roofs.COMMITTED_DIR  # read at the call: tests point it at their own folder
    paths = [p for p in folder.glob("*.json") if p.stem.lower() == key] if folder.is_dir() else []
    return check_entry(read_roofs_json(paths[0]), paths[0]) if paths else None
