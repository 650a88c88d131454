"""The package version, in one place: the build reads it (``pyproject.toml``), the package re-exports it."""

__version__ = "0.1.0"
