"""The output-format registry: json and csv render any command's records alike, a command's --format
help and check come from it, and a new format is one entry."""

from __future__ import annotations

import json

import pytest

from memtraffic.views import formats
from memtraffic.views.formats import FOR_OBJECTS, FOR_ROWS, FORMATS, Format
from memtraffic.vocab.errors import UsageError

ROWS = [{"range": "a", "bytes": 8388608, "kernels": ["k1", "k2"]}, {"range": "b", "eff": None, "x": {"y": 1}}]


def test_json_and_csv_of_records():
    assert json.loads(formats.render("json", ROWS, str)) == ROWS
    assert formats.render("csv", ROWS, str).splitlines() == [
        "range,bytes,kernels,eff,x", 'a,8388608,"[""k1"", ""k2""]",,', 'b,,,,"{""y"": 1}"']
    assert formats.render("json", {"device": "H100"}, str) == '{\n  "device": "H100"\n}'  # one object


def test_table_is_the_commands_own_and_records_are_made_only_when_needed():
    def never():
        raise AssertionError("records made for a table")

    assert formats.render("table", never, lambda: "my table") == "my table"
    # a nested whole record for formats that keep it (json), flat rows for the others
    whole = [{"environment": {"gpu": "H100"}, "rows": ROWS}]
    assert json.loads(formats.render("json", ROWS, str, whole=whole)) == whole
    assert formats.render("csv", ROWS, str, whole=whole).startswith("range,bytes")


def test_a_command_offers_some_formats_and_refuses_the_others():
    assert FOR_ROWS == tuple(FORMATS) == ("table", "json", "csv")  # a new entry joins the commands of rows
    assert FOR_OBJECTS == ("table", "json")  # csv has no place for a nested object
    formats.check("csv", FOR_ROWS)
    with pytest.raises(UsageError, match=r"unknown format 'xml': use one of table, json, csv$"):
        formats.render("xml", ROWS, str)
    with pytest.raises(UsageError, match=r"unknown format 'csv': use one of table, json$"):
        formats.check("csv", FOR_OBJECTS)
    assert formats.help_text(FOR_OBJECTS) == "table (for people) or json (for scripts)."
    assert formats.help_text(FOR_ROWS, json="raw counts") == (
        "table (for people), json (raw counts) or csv (for scripts).")


def test_a_new_format_is_one_entry(monkeypatch):
    def markdown(records):
        keys = list(records[0])
        return "\n".join(["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys),
                          *("| " + " | ".join(str(r[k]) for k in keys) + " |" for r in records)])

    monkeypatch.setitem(FORMATS, "markdown", Format("markdown", "for notes", markdown))
    offered = tuple(FORMATS)  # what FOR_ROWS is once the entry is in the module
    formats.check("markdown", offered)
    assert formats.help_text(offered).endswith("csv (for scripts) or markdown (for notes).")
    assert formats.render("markdown", [{"a": 1}], str) == "| a |\n|---|\n| 1 |"
