"""The record of what a run ran on: GPU, chip, driver, ncu and the Python stack's versions (host.machine's
environment() fills it in; run.json, bench results and roofs entries carry it)."""

from __future__ import annotations

from typing import TypedDict


class Environment(TypedDict, total=False):
    """What a run ran on (run.json's "environment"; bench results and roofs entries carry it too)."""

    gpu: str | None
    chip: str | None
    driver: str | None
    ncu: str | None
    ncu_version: str | None
    torch: str | None
    cuda: str | None
    triton: str | None
    python: str
    host: str
