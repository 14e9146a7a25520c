"""`memtraffic profile`'s progress while ncu runs: launches measured, repeats skipped, and an ETA.

The program runs once, so how many launches it will measure is known only from an earlier run of the
same command with the same settings (`earlier_run`: the newest finished one in the runs folder). With one,
progress reads "ncu: 120 of 212 expected kernel launches measured, ... about 34 s left", and a program
that ends before that many gets a clear line saying so; without one, the count and the cost per launch.
Repeats are counted from the program's trace (records with `"repeat": true`, memtraffic.vocab.launches),
read as it grows.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from memtraffic.runfolder.paths import portable


@dataclass(frozen=True)
class Expected:
    """What an earlier run of the same command measured."""

    run_dir: Path
    kernels: int


def earlier_run(folders: Sequence[Path], program: Sequence[str], settings: Mapping[str, object],
                exclude: Path | None = None) -> Expected | None:
    """The newest run folder directly in `folders` that profiled the same program with the same settings
    (run.json keys: distinct, metric_set, torch_ops...), finished with exit code 0 and measured kernels."""
    best: tuple[str, Expected] | None = None
    for folder in folders:
        if not folder.is_dir():
            continue
        for run_json in folder.glob("*/run.json"):
            if exclude is not None and run_json.parent.resolve() == exclude.resolve():
                continue
            try:
                run = json.loads(run_json.read_text())
            except (OSError, ValueError):
                continue
            if not _matches(run, program, settings):
                continue
            stamp = str(run.get("finished", ""))
            if best is None or stamp > best[0]:
                best = (stamp, Expected(run_json.parent, run["kernels_profiled"]))
    return None if best is None else best[1]


def _matches(run: object, program: Sequence[str], settings: Mapping[str, object]) -> bool:
    """A finished profile of this program with these settings, exit code 0, kernels measured."""
    typed = portable(list(program), cwd=Path.cwd())  # as run.json records it
    if not isinstance(run, dict) or run.get("kind") != "profile" or run.get("program") not in (
            list(program), typed):
        return False
    kernels = run.get("kernels_profiled")
    return (all(run.get(k) == v for k, v in settings.items()) and run.get("returncode") == 0
            and not run.get("interrupted") and isinstance(kernels, int) and kernels > 0)


def _duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    return f"{seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"{seconds} s"


def progress_text(measured: int, repeats: int, elapsed_s: float, expected: int | None = None,
                  per_launch_s: float | None = None) -> str:
    """One progress line (see the module doc); `repeats`: calls skipped so far (0 omits them);
    `per_launch_s`: the cost of a launch once launches are being measured (default: elapsed / measured, which
    counts the program's start-up in)."""
    skipped = f", {repeats} repeated calls skipped" if repeats else ""
    per = per_launch_s if per_launch_s is not None else elapsed_s / measured if measured else None
    if expected:
        text = f"ncu: {measured} of {expected} expected kernel launches measured{skipped}"
        if per is not None and 0 < measured < expected:
            text += f"; {_duration(elapsed_s)} so far, about {_duration(per * (expected - measured))} left"
        return text
    cost = f" ({per:.2f} s a launch)" if per is not None else ""
    return f"ncu: {measured} kernel launch{'' if measured == 1 else 'es'} measured{skipped}{cost}"


def end_text(measured: int, expected: Expected | None) -> str | None:
    """A line when the program measured fewer launches than the earlier run it was expected to match."""
    if expected is None or measured >= expected.kernels:
        return None
    return (f"the program ended after {measured} of the {expected.kernels} kernel launches expected (as "
            f"measured by {expected.run_dir}): it stopped early, or ran differently this time")


class TraceProgress:
    """Counts the trace's repeats as the file grows, and formats progress_text for run_ncu."""

    def __init__(self, trace: Path, expected: Expected | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.trace = trace
        self.expected = expected
        self.repeats = 0
        self._offset = 0
        self._clock = clock
        self._start = clock()
        self._first: tuple[int, float] | None = None  # (launches, time) when launches were first seen

    def _read(self) -> None:
        try:
            with open(self.trace, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except OSError:
            return
        whole = data[: data.rfind(b"\n") + 1]  # a line still being written is read next time
        self._offset += len(whole)
        self.repeats += whole.count(b'"repeat": true')

    def line(self, measured: int) -> str:
        """The progress line; a launch's cost is timed from the first launch seen, so the program's start-up
        (imports, ncu attaching) does not stretch the estimate."""
        self._read()
        now = self._clock()
        if measured and self._first is None:
            self._first = (measured, now)
        per = None
        if self._first is not None and measured > self._first[0]:
            per = (now - self._first[1]) / (measured - self._first[0])
        return progress_text(measured, self.repeats, now - self._start,
                             self.expected.kernels if self.expected else None, per)
