"""Integration tests use the real local models: they are marked ``integration`` (to select or skip them) and
``isolated`` (each module runs in a child process, so a native crash fails a test instead of the run)."""

from __future__ import annotations

from pathlib import Path

import pytest
from child_isolation import MARKER

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.resolve().is_relative_to(HERE):
            item.add_marker(pytest.mark.integration)
            item.add_marker(getattr(pytest.mark, MARKER))
