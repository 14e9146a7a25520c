"""The measure/skip state of the profiled process: which calls ncu measures (the first K calls of each
signature), asked by every producer of `mt|` NVTX ranges. The protocol, its names and its records
(Decision, the range prefixes, the environment variables) are memtraffic.vocab.launches. Torch-free:
regions in JAX or CuPy programs use it too.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Hashable

from memtraffic.vocab.launches import (
    DISTINCT_ENV,
    VALUE_CALLS_ENV,
    Decision,
    parse_distinct,
    repeat_range,
    signature_digest,
)


class Launches:
    """The measure/skip state of one process: K measured calls per signature (k=0: every call), V per
    value-dependent signature (value_calls=0: every call; never fewer than K)."""

    def __init__(self, k: int = 0, value_calls: int = 0) -> None:
        if k < 0 or value_calls < 0:
            raise ValueError(f"k={k}, value_calls={value_calls}: give whole numbers >= 0 (0 measures every "
                             "call)")
        self.k = k
        self.value_calls = value_calls
        self._seen: dict[str, tuple[str | None, int]] = {}  # digest -> (first measured range, measured)
        self._lock = threading.Lock()
        self._open = threading.local()  # per thread: how many repeat ranges are open
        self.measured = 0
        self.repeats = 0

    def decide(self, range_name: str, signature: Hashable, always: bool = False,
               value_dependent: bool = False) -> Decision:
        """Measure this call, or reuse its signature's first measured call? See the module doc."""
        digest = signature_digest(signature)
        inside_repeat = getattr(self._open, "repeats", 0) > 0
        limit = self.k
        if value_dependent:
            limit = 0 if self.value_calls == 0 else max(self.k, self.value_calls)
        with self._lock:
            first, count = self._seen.get(digest, (None, 0))
            measure = not inside_repeat and (self.k == 0 or always or limit == 0 or count < limit)
            if measure:
                self._seen[digest] = (first or range_name, count + 1)
                self.measured += 1
            else:
                self.repeats += 1
        if measure:
            return Decision(range_name, True, digest)
        self._open.repeats = getattr(self._open, "repeats", 0) + 1
        return Decision(repeat_range(range_name), False, digest, first)

    def done(self, decision: Decision) -> None:
        """The call's range was popped (call it for every decision, measured or not)."""
        if not decision.measured:
            self._open.repeats -= 1


_launches: Launches | None = None


def launches() -> Launches:
    """This process's state, set from $MEMTRAFFIC_DISTINCT and $MEMTRAFFIC_VALUE_CALLS on first use (a bad
    value: every call)."""
    global _launches
    if _launches is None:
        counts = []
        for name in (DISTINCT_ENV, VALUE_CALLS_ENV):
            try:
                counts.append(parse_distinct(os.environ.get(name), name))
            except ValueError:
                counts.append(0)  # every call: never wrong; `memtraffic profile` checks what it sets
        _launches = Launches(*counts)
    return _launches


def decide(range_name: str, signature: Hashable, always: bool = False,
           value_dependent: bool = False) -> Decision:
    """launches().decide: measure this call or reuse? (module doc)."""
    return launches().decide(range_name, signature, always, value_dependent)


def done(decision: Decision) -> None:
    """launches().done: the decision's range was popped."""
    launches().done(decision)


def reset(k: int | None = None, value_calls: int = 0) -> Launches:
    """A fresh state (tests, and a forked child); k None: read the environment again."""
    global _launches
    _launches = None if k is None else Launches(k, value_calls)
    return launches()
