"""`python -m memtraffic.cli`: the CLI, as `python -m memtraffic` runs it (the repository's scripts call it
so)."""

from memtraffic.cli import app

app(prog_name="memtraffic")
