"""The package version, in the core so that every layer can name it (memtraffic.__version__ is this)."""

__version__ = "0.1.0"  # pyproject.toml carries the same
