"""The README's first lines are the contract with a new user and with CI: keep them in step."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = text.split("```bash", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line and not line.startswith("#")]


def test_readme_opens_with_run_and_test_commands():
    assert (ROOT / "README.md").read_text().splitlines()[2] == "```bash"
    run, test = _readme_commands()
    assert "memtraffic " in run and "pytest" in test


def test_ci_runs_the_readme_test_command_verbatim():
    _, test = _readme_commands()
    ci_lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert test in ci_lines
