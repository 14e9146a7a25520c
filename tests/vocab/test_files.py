"""The one JSON writer: whole files only, the mode a plain open() gives, no temporary file left behind."""

from __future__ import annotations

import json
import math
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memtraffic.vocab.files import read_json, write_json


def test_write_json_writes_a_whole_file_with_the_umask_mode(tmp_path):
    old = os.umask(0o022)
    try:
        path = write_json(tmp_path / "run.json", {"gpu": "x", "n": [1, 2]})
    finally:
        os.umask(old)
    assert read_json(path) == {"gpu": "x", "n": [1, 2]}
    assert json.loads(path.read_text()) == {"gpu": "x", "n": [1, 2]}
    assert path.stat().st_mode & 0o777 == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = write_json(tmp_path / "plan.json", {"configs": []})
    with pytest.raises(TypeError):
        write_json(path, {"bad": object()})
    assert read_json(path) == {"configs": []}
    assert [p.name for p in tmp_path.iterdir()] == ["plan.json"]


# Text without a lone CR: csv's minimal quoting with '\n' line ends leaves it unquoted, and readers take it
# for a line end (results.csv has always been written so; no measured field holds one).
_CELLS = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True), st.integers(-2**40, 2**40),
                   st.text(st.characters(blacklist_characters="\r"), max_size=3),
                   st.lists(st.integers(0, 3), max_size=2))


@given(st.lists(st.floats(allow_nan=True, allow_infinity=True, width=64), max_size=12), st.booleans())
def test_plain_records_of_a_float_column(values, whole):
    """NaN and infinities become None; in a count column (int_columns) whole values become ints (the
    column at once, or value by value where it holds a fraction or a float beyond 2**53); others stay."""
    import pandas as pd

    from memtraffic.vocab.files import plain_records

    got = [r["x"] for r in plain_records(pd.DataFrame({"x": pd.Series(values, dtype=float)}),
                                         ["x"] if whole else [])]
    for v, g in zip(values, got, strict=True):
        if not math.isfinite(v):
            assert g is None
        elif whole and v.is_integer():
            assert type(g) is int and g == v
        else:
            assert type(g) is float and g == v
    json.dumps(got, allow_nan=False)  # plain JSON


@given(st.lists(st.dictionaries(st.sampled_from("abcd"), _CELLS, max_size=4), max_size=6))
def test_csv_text_writes_every_key_in_order_of_first_appearance(rows):
    """One header (every key, first seen first), a line per row; missing keys empty, lists as JSON."""
    import csv
    import io

    from memtraffic.vocab.files import csv_text

    keys = list(dict.fromkeys(k for r in rows for k in r))
    if not keys:  # no column at all: nothing a reader could parse back
        return
    parsed = list(csv.reader(io.StringIO(csv_text(rows) + "\n", newline="")))
    assert parsed[0] == keys
    for r, line in zip(rows, parsed[1:], strict=True):
        assert line == ["" if r.get(k) is None else json.dumps(r[k]) if isinstance(r[k], list) else str(r[k])
                        for k in keys]
