"""The `memtraffic` command (pyproject's [project.scripts] names memtraffic.cli:app): the app in app.py."""

from memtraffic.cli.app import app

__all__ = ["app"]
