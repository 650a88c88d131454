"""Fault-injection, secrets, fuzzing and long-run tests: offline (sockets disabled, Unix sockets allowed)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from pytest_socket import disable_socket, enable_socket

# DeepEval reads these when it acts: set them before any test imports it.
os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")
os.environ.setdefault("DEEPEVAL_NO_INSPECT_PROMPT", "1")
os.environ.setdefault("DEEPEVAL_DISABLE_DOTENV", "1")
os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")


@pytest.fixture(autouse=True)
def _fresh_registry() -> Iterator[None]:
    from grapheval_plugins import registry

    registry.clear_shared()
    yield
    registry.clear_shared()


@pytest.fixture(autouse=True)
def _no_network() -> Iterator[None]:
    disable_socket(allow_unix_socket=True)
    yield
    enable_socket()
