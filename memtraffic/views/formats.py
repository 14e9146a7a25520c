"""The output formats, in one registry: format name -> what it is for and how it renders.

'table' is each command's own text for people (the command passes it in); every other format renders the
command's records (a list of plain objects, or one object) the same way for every command. A command
declares the formats it offers (FOR_ROWS, FOR_OBJECTS) and its --format help is written from here. A new
format is one Format in FORMATS (the commands of rows offer it from then on) and a test in
tests/views/test_formats.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from memtraffic.vocab.errors import UsageError
from memtraffic.vocab.files import csv_text

Records = Sequence[Mapping[str, object]] | Mapping[str, object]


def to_json(records: Records) -> str:
    """A list of objects (or one object), indented; stable keys, raw numbers in bytes/ns."""
    return json.dumps(records if isinstance(records, Mapping) else list(records), indent=2, default=str)


def to_csv(records: Records) -> str:
    """One header line (every key, in order of first appearance) then a line per object; lists and dicts
    as JSON text (the text of results.csv)."""
    return csv_text([records] if isinstance(records, Mapping) else records)


@dataclass(frozen=True)
class Format:
    name: str
    purpose: str  # what --help says it is for
    render: Callable[[Records], str] | None  # None: the command's own table
    nested: bool = False  # keeps nested objects whole (a command may then give its whole record)


FORMATS: dict[str, Format] = {f.name: f for f in [
    Format("table", "for people", None),
    Format("json", "for scripts", to_json, nested=True),
    Format("csv", "for scripts", to_csv),
]}

# What a command offers: every format when its records are rows (a new format joins them by its entry
# above); the table and the formats that keep nested objects when its record is one nested object or
# the command never offered flat rows.
FOR_ROWS = tuple(FORMATS)
FOR_OBJECTS = tuple(n for n, f in FORMATS.items() if f.render is None or f.nested)


def check(fmt: str, offered: Sequence[str]) -> None:
    """UsageError unless `fmt` is one of the formats this command offers."""
    if fmt not in offered:
        raise UsageError(f"unknown format {fmt!r}: use one of {', '.join(offered)}")


def render(fmt: str, records: Records | Callable[[], Records], table: Callable[[], str],
           whole: Records | None = None) -> str:
    """The output in `fmt`: the command's `table()` for 'table', else its records rendered by the registry
    (`records` may be a function, called only when a format needs them). `whole`: a record with nested
    parts (environment and rows) that formats keeping nested objects (json) print instead of `records`."""
    check(fmt, tuple(FORMATS))
    form = FORMATS[fmt]
    if form.render is None:
        return table()
    if whole is not None and form.nested:
        return form.render(whole)
    return form.render(records() if callable(records) else records)


def help_text(offered: Sequence[str], **notes: str) -> str:
    """The --format help of a command: each offered format with what it is for, or the command's own note
    of it ('table (readable units), json (...) or csv (same columns).')."""
    parts = [f"{name} ({notes.get(name) or FORMATS[name].purpose})" for name in offered]
    return (", ".join(parts[:-1]) + " or " + parts[-1] if len(parts) > 1 else parts[0]) + "."
