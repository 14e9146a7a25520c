"""`python -m memtraffic`: the CLI, for a Python whose scripts are not on PATH (the %%memtraffic magic)."""

from memtraffic.cli import app

app(prog_name="memtraffic")
