"""Unit tests run with sockets disabled (Unix sockets stay allowed: asyncio's event loop needs a socketpair)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pytest_socket import disable_socket, enable_socket


@pytest.fixture(autouse=True)
def _fresh_registry() -> Iterator[None]:
    """Each test starts with no shared engines or scorers (a test's monkeypatched loaders stay in that test)."""
    from grapheval_plugins import registry

    registry.clear_shared()
    yield
    registry.clear_shared()


@pytest.fixture(autouse=True)
def _no_network() -> Iterator[None]:
    disable_socket(allow_unix_socket=True)
    yield
    enable_socket()
