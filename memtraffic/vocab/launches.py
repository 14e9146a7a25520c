"""Which calls ncu measures: the first K calls of each signature; the repeats reuse the first one's counters.

One small decision shared by every producer of `mt|` NVTX ranges (the aten-op tracer, memtraffic.region,
a Triton launch hook). Before pushing its range, a producer asks the process's state
(memtraffic.inprogram.distinct; this module holds the names and the records it answers with):

    decision = distinct.decide(range_name, signature, always=value_dependent)
    push(decision.range); ...run the call...; pop(); distinct.done(decision)
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
