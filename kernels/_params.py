"""Checking a variant's tuning parameters: unknown names and bad values become one-line UsageErrors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from memtraffic.vocab.errors import UsageError

Rule = Callable[[Any], "str | None"]  # value -> None when fine, else what a good value looks like


def power_of_two(lo: int, hi: int) -> Rule:
    def rule(value: Any) -> str | None:
        ok = isinstance(value, int) and lo <= value <= hi and value & (value - 1) == 0
        return None if ok else f"must be a power of two from {lo} to {hi}"

    return rule


def int_range(lo: int, hi: int) -> Rule:
    def rule(value: Any) -> str | None:
        ok = isinstance(value, int) and lo <= value <= hi
        return None if ok else f"must be an integer from {lo} to {hi}"

    return rule


def one_of(*values: int) -> Rule:
    def rule(value: Any) -> str | None:
        ok = isinstance(value, int) and value in values
        return None if ok else f"must be one of {', '.join(map(str, values))}"

    return rule


def optional(rule: Rule) -> Rule:
    """A rule that also accepts None or 'auto' (the launcher then picks the value from the shape)."""

    def check(value: Any) -> str | None:
        if value is None or (isinstance(value, str) and value.strip().lower() in ("auto", "none")):
            return None
        why = rule(value)
        return None if why is None else f"{why} (or auto)"

    return check


def resolve(
    variant: str, defaults: dict[str, Any], given: dict[str, Any], rules: dict[str, Rule]
) -> dict[str, Any]:
    """defaults overridden by given, each value checked; integer strings (from a command line) become ints."""
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        takes = ", ".join(defaults) if defaults else "no parameters"
        raise UsageError(f"{variant} has no parameter {unknown[0]!r}: it takes {takes}")
    merged = {**defaults, **given}
    for key, value in merged.items():
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            value = merged[key] = int(value)
        if isinstance(value, bool):  # bool is an int subclass; True is no block size
            value = str(value)
        why = rules[key](value)
        if why is not None:
            raise UsageError(f"{variant}: {key}={value!r} is invalid: it {why}")
    return merged


def resolve_params(variant: str, defaults: dict[str, Any], given: dict[str, Any], rules: dict[str, Rule]
                   ) -> dict[str, Any]:
    """resolve, with 'auto'/'none' strings (from a command line) turned into None."""
    p = resolve(variant, defaults, given, rules)
    return {k: None if isinstance(v, str) else v for k, v in p.items()}


def params_check(variant: str, defaults: dict[str, Any], rules: dict[str, Rule]
                 ) -> Callable[[Any, Any, dict[str, Any]], str | None]:
    """A Variant.check for a variant that takes any shape: it only validates the parameters
    (a bad one raises UsageError, as from run and predicted)."""

    def check(shape: Any, dtype: Any, params: dict[str, Any]) -> str | None:
        resolve(variant, defaults, params, rules)
        return None

    return check
