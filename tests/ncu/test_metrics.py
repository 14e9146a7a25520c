"""The one table of metric sets: each set's aliases and its line, and every help text written from it."""

from __future__ import annotations

from typer.main import get_command

from memtraffic.cli import app
from memtraffic.cli.exits import Cli
from memtraffic.ncu.metrics import METRIC_SETS, METRICS, SETS, sets_help


def test_each_set_has_known_aliases_and_one_line():
    assert list(METRIC_SETS) == [s.name for s in SETS] == ["traffic", "bytes", "spills", "flops", "peaks",
                                                           "roofline"]
    for s in SETS:
        assert set(s.aliases) <= set(METRICS) and s.description and "\n" not in s.description
    assert METRIC_SETS["roofline"] == METRIC_SETS["traffic"] + METRIC_SETS["flops"][1:]


def _help(command: str, option: str) -> str:
    cmd = get_command(app)
    assert isinstance(cmd, Cli)
    [param] = [p for p in cmd.commands[command].params if option in getattr(p, "opts", [])]
    return str(getattr(param, "help", ""))


def test_the_help_texts_name_every_set_from_the_table():
    for command in ("measure", "profile"):
        text = _help(command, "--metrics")
        # the set names from the table; what each measures is 'memtraffic metrics'' (help one screen long)
        assert f"({', '.join(METRIC_SETS)}; 'memtraffic metrics' says what each measures)" in text
        assert "memtraffic/metrics.py" not in text and sets_help() not in text
    assert _help("metrics", "--set") == f"One metric set ({', '.join(METRIC_SETS)}); default: all."
