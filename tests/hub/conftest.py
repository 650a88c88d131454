"""Tests against the real weights on the model hub (marker ``hub``).

They run only when asked: ``HF_HUB_OFFLINE=0 pytest -m hub tests/hub`` on a machine with hub access (the test-wide
conftest sets ``HF_HUB_OFFLINE=1`` unless the variable is already set). They are skipped under CI (``CI`` set),
with ``HF_HUB_OFFLINE`` on, or when the hub cannot be reached. The downloads are large (HHEM 0.4 GB, MiniCheck
Flan-T5-Large 3 GB); TrueTeacher (T5-11B, 45 GB) also needs ``GRAPHEVAL_HUB_LARGE=1``.
"""

from __future__ import annotations

import os
import socket
from urllib.parse import urlparse

import pytest

_TRUE = {"1", "true", "yes", "on"}


def hub_skip_reason() -> str | None:
    """Why the hub tests cannot run here, or ``None`` when they can."""
    if os.environ.get("CI", "").strip().lower() in _TRUE:
        return "CI: the hub tests never run in CI"
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in _TRUE:
        return "HF_HUB_OFFLINE is on (run with HF_HUB_OFFLINE=0 to use the hub)"
    try:
        from huggingface_hub import constants
    except ImportError:
        return "huggingface_hub is not installed (extra 'hf')"
    url = urlparse(constants.ENDPOINT)
    try:
        with socket.create_connection((url.hostname or "", url.port or 443), timeout=5):
            pass
    except OSError as exc:
        return f"the hub is unreachable: {exc}"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    hub_items = [item for item in items if item.get_closest_marker("hub")]
    if not hub_items:
        return
    reason = hub_skip_reason()
    if reason is None:
        return
    for item in hub_items:
        item.add_marker(pytest.mark.skip(reason=reason))
