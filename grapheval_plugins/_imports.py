"""Lazy imports of optional dependencies with an install hint."""

from __future__ import annotations

import importlib
from types import ModuleType

from .exceptions import MissingDependencyError


def require(module: str, extra: str, purpose: str = "", package: str | None = None) -> ModuleType:
    """Import ``module`` or raise :class:`MissingDependencyError` naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(package or module.split(".")[0], extra, purpose) from exc
