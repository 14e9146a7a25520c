"""Which calls ncu measures: the first K calls of each signature; the repeats reuse the first one's counters.

One small decision shared by every producer of `mt|` NVTX ranges (the aten-op tracer, memtraffic.region,
a Triton launch hook). Before pushing its range, a producer asks:

    decision = launches.decide(range_name, signature, always=value_dependent)
    push(decision.range); ...run the call...; pop(); launches.done(decision)
    add_decision(record, decision)            # into the call's trace record (memtraffic.runfolder.trace)

- `range_name` is the range it would push to be measured (`mt|op|<seq>|<overload>`, `mt|region|...`).
- `signature` is a hashable of plain values (str, int, float, bool, None, tuples of them) holding
  everything the call's traffic may depend on: for an op, its overload, each input's shape, strides,
  dtype, device, pointer alignment (data_ptr % 16: vectorized kernels fall back on misaligned data),
  which inputs share a storage, and its scalar arguments.
- `always`: the call is measured every time (a region not declared to repeat the same traffic).
- `value_dependent`: the call's traffic may depend on data values (gathers, scatters, sorts, unique,
  nonzero...): its signature's first V calls are measured (V from $MEMTRAFFIC_VALUE_CALLS, at least K;
  0 or unset: every call), so a decode loop's cache writes cost V replays, not one per token. Analysis
  compares those V calls (memtraffic.analysis.reuse.varied) and says when they differ.

The answer is expressed to ncu the same way for every producer: a measured call keeps its name, a
repeat pushes `mt|rep|<rest of the name>` (REPEAT_PREFIX), which `ncu --nvtx-exclude` (NVTX_EXCLUDE)
skips, so its kernels run at near-native speed and the program runs once. Its record says
`"repeat": true` and `"reuses": <range of the first measured call of its signature>`; analysis gives
the repeat that range's counters and labels it reused.

Nesting: a range opened while a repeat range is open on the same thread is a repeat too (it is part of
a repeated call; ncu's exclude filter skips every kernel under an excluded range, whichever of its
ranges is innermost). Its `reuses` is its own signature's first measured range, or None when its
signature was never measured (analysis names it as not measured). Every record carries `signature`,
a short digest of its signature, also when every launch is measured: the premise check groups an
every-launch run by it.

The setting comes from $MEMTRAFFIC_DISTINCT and $MEMTRAFFIC_VALUE_CALLS in the profiled program
(`memtraffic profile` sets them): "K" (a whole number >= 1) measures the first K calls of each signature;
unset or "0" measures every call. Torch-free: regions in JAX or CuPy programs use it too.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Hashable
from dataclasses import dataclass

DISTINCT_ENV = "MEMTRAFFIC_DISTINCT"  # "K": measure the first K calls of each signature; "0"/unset: all
VALUE_CALLS_ENV = "MEMTRAFFIC_VALUE_CALLS"  # "V": ... of a value-dependent op's signature; "0"/unset: all
# "range": ncu replays each measured range as one unit (memtraffic.collect.profile sets it): the op tracer
# then creates the CUDA context before its first range and pushes none around ops without a GPU argument.
REPLAY_ENV = "MEMTRAFFIC_REPLAY"
RANGE_PREFIX = "mt|"
REPEAT_PREFIX = "mt|rep|"
# ncu skips every kernel launched inside a repeat range (push/pop ranges end with '/' in ncu's syntax).
NVTX_EXCLUDE = r"regex:mt\|rep\|.*/"


def signature_digest(signature: Hashable) -> str:
    """A short stable digest of a signature (its repr hashed): the same across processes and runs."""
    return hashlib.sha1(repr(signature).encode()).hexdigest()[:16]


def repeat_range(range_name: str) -> str:
    """'mt|op|7|aten.mm.default' -> 'mt|rep|op|7|aten.mm.default' (ncu's exclude filter skips it)."""
    if not range_name.startswith(RANGE_PREFIX) or range_name.startswith(REPEAT_PREFIX):
        raise ValueError(f"{range_name!r} is not a measured memtraffic range ('mt|...')")
    return REPEAT_PREFIX + range_name[len(RANGE_PREFIX):]


def measured_range(range_name: str) -> str:
    """The name a range has when measured: 'mt|rep|op|7|x' -> 'mt|op|7|x' (others unchanged)."""
    if range_name.startswith(REPEAT_PREFIX):
        return RANGE_PREFIX + range_name[len(REPEAT_PREFIX):]
    return range_name


def is_repeat(range_name: str) -> bool:
    return range_name.startswith(REPEAT_PREFIX)


@dataclass(frozen=True)
class Decision:
    """What to push for one call, and what its trace record says about it."""

    range: str  # the NVTX range to push
    measured: bool
    signature: str  # signature_digest of the call's signature
    reuses: str | None = None  # a repeat: the range of its signature's first measured call (None: none)


def parse_distinct(text: str | None, name: str = DISTINCT_ENV) -> int:
    """$MEMTRAFFIC_DISTINCT (or $MEMTRAFFIC_VALUE_CALLS) -> K (0: every call measured). ValueError for
    anything else."""
    if text is None or text.strip() == "":
        return 0
    value = int(text)
    if value < 0:
        raise ValueError(f"{name}={text!r}: give a whole number >= 0")
    return value


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
