"""Readable units, and parsing of what the user types: sizes ('8MB', '8MiB', '8388608'), regexes."""

from __future__ import annotations

import math
import numbers
import re
import textwrap

from memtraffic.vocab.errors import UsageError

_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*((?:[kmgt]i?)?)b?\s*$", re.IGNORECASE)
LIMIT = 2**63  # sizes, counts and dimensions are below it: what an int64 (torch, ncu, JSON readers) holds
# The most one op (one measured range) can need to read or write: above any GPU's memory (the largest hold a
# few hundred GB), so a minimum past it in a plan, trace or results table is a damaged file, not a program.
OP_BYTES_LIMIT = 10**12
_FACTORS = {
    "": 1,
    "k": 10**3,
    "m": 10**6,
    "g": 10**9,
    "t": 10**12,
    "ki": 2**10,
    "mi": 2**20,
    "gi": 2**30,
    "ti": 2**40,
}


ABOVE = 1.05  # efficiencies above this (measured below the minimum) get a reason in the analysis

def parse_size(text: str) -> int:
    """'8388608' -> 8388608, '8MB' -> 8_000_000 (SI), '8MiB' -> 8_388_608 (binary). UsageError for anything
    else (a stray letter, a sign) and for a size of 2**63 bytes or more."""
    match = _SIZE.match(text)
    if not match:
        raise UsageError(f"malformed size {text!r}: write bytes as 8388608, 8.39MB or 8MiB")
    value = float(match.group(1)) * _FACTORS[match.group(2).lower()]
    if not value < LIMIT:  # '9' * 400 reads as infinity
        raise UsageError(f"size {text!r} is too large (2**63 bytes or more): write bytes as 8388608, 8.39MB "
                         "or 8MiB")
    return int(round(value))


def compile_regex(text: str) -> re.Pattern[str]:
    """re.compile, with every way a user's pattern can fail raised as re.error (which callers turn into one
    line): besides bad syntax, a repeat count too large ('a{4294967296}') or nesting too deep."""
    try:
        return re.compile(text)
    except re.error:
        raise
    except OverflowError as err:  # 'the repetition number is too large'
        raise re.error(str(err)) from None
    except RecursionError:
        raise re.error("nested too deeply") from None
    except (ValueError, MemoryError) as err:
        raise re.error(f"{type(err).__name__}: {err}") from None


def fmt_bytes(n: float | None) -> str:
    """Decimal (SI) units, as ncu prints them: 8388608 -> '8.39 MB'."""
    if n is None or n != n:
        return "-"
    for unit, factor in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(n) >= factor:
            return f"{n / factor:.2f} {unit}"
    return f"{n:.0f} B"


def fmt_time(ns: float | None) -> str:
    if ns is None or ns != ns:
        return "-"
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.1f} us"
    return f"{ns:.0f} ns"


def fmt_rate(per_second: float | None, unit: str = "B/s") -> str:
    if per_second is None or per_second != per_second:
        return "-"
    for prefix, factor in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(per_second) >= factor:
            return f"{per_second / factor:.2f} {prefix}{unit}"
    return f"{per_second:.1f} {unit}"


def fmt_eff(x: object) -> str:
    """An efficiency (minimum / measured bytes) as analyze's table and the roofline hover show it."""
    return f"{float(x):.2f}" if isinstance(x, numbers.Real) and math.isfinite(x) else "-"


# A number and the unit after it ('93.4 us', '2.16 GB'): wrapped text keeps them on one line.
NUMBER_UNIT = re.compile(r"(\d) (?=(?:[KMGT]?B(?:/s)?|[KMGT]?FLOP/s|ns|us|ms|s)\b)")


def wrap(text: str, width: int, indent: str = "    ") -> list[str]:
    """`text` wrapped to `width`, its continuation lines indented, never between a number and its unit."""
    held = NUMBER_UNIT.sub("\\1\u00a0", text)  # textwrap breaks at ASCII spaces only
    lines = textwrap.wrap(held, width, subsequent_indent=indent)
    return [line.replace("\u00a0", " ") for line in lines] or [""]
