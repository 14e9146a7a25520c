"""Every command's help in an 80-column terminal: no line wider, at most 90 lines, no type placeholder
(`<str>`), examples before the options, and profile's usage naming the program after `--`
(memtraffic/cli/help_text.py)."""

from __future__ import annotations

import re

import pytest
import typer.main
from typer.testing import CliRunner

from memtraffic.cli import app
from memtraffic.cli.help_text import examples_first

COMMANDS = sorted(name for name, c in typer.main.get_command(app).commands.items() if not c.hidden)
PLACEHOLDER = re.compile(r"<(bool|str|int|float|path|list\[\w+\])>")


def help_text(*args: str) -> str:
    result = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": "80"}, terminal_width=80)
    assert result.exit_code == 0, result.output
    return result.output


def test_every_command_is_checked():
    assert {"profile", "measure", "analyze", "ops", "list", "diff"} <= set(COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_help_fits_80_columns_and_90_lines_with_examples_first_and_no_type_placeholders(command):
    text = help_text(command)
    assert not [line for line in text.splitlines() if len(line) > 80]
    assert len(text.splitlines()) <= 90
    assert not PLACEHOLDER.findall(text), PLACEHOLDER.findall(text)
    assert text.index("Examples:") < text.index("Options:")
    first = text.split("Examples:", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    assert first and all(line.startswith(f"    memtraffic {command}") or line.startswith("    #")
                         for line in first), first  # each example on its own line, as written


def test_profile_usage_shows_the_program_after_dashes():
    text = help_text("profile")
    assert text.splitlines()[0] == "Usage: memtraffic profile [OPTIONS] -- CMD [ARGS]..."
    assert "--kernel-name REGEX" in text and "--launch-count N" in text and "--out PATH" in text


def test_ops_usage_and_a_required_argument_as_click_writes_them():
    assert help_text("ops").splitlines()[0] == "Usage: memtraffic ops [OPTIONS] -- CMD [ARGS]..."
    assert help_text("diff").splitlines()[0] == "Usage: memtraffic diff [OPTIONS] RUN_A RUN_B"


def test_old_names_still_run_but_are_not_shown():
    assert "ceilings" not in help_text() and "ceilings" not in COMMANDS
    assert help_text("ceilings").splitlines()[0] == "Usage: memtraffic ceilings [OPTIONS]"
    assert "memtraffic roofs --refresh" in help_text("ceilings")  # roofs' own help
    for command in ("roofline", "report"):
        text = help_text(command)
        assert "--roofs-file FILE" in text and "--ceilings" not in text


def test_the_top_level_help_fits_80_columns():
    assert not [line for line in help_text().splitlines() if len(line) > 80]


def test_examples_move_right_under_the_summary_and_keep_their_lines():
    doc = "Summary.\n\nLong text.\n\nExamples:\n  memtraffic x a\n  memtraffic x b"
    assert examples_first(doc) == (
        "Summary.\n\n\b\nExamples:\n  memtraffic x a\n  memtraffic x b\n\nLong text.")
    assert examples_first("Only a summary.") == "Only a summary."
    once = examples_first(doc)
    assert examples_first(once) == once
