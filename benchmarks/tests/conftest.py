"""The research scripts' tests (``benchmarks/``): run apart from the package's suite, in CI with
``.venv/bin/python -m pytest -q benchmarks/tests``. Offline: no model hub, no telemetry, sockets disabled (Unix
sockets stay allowed: asyncio's event loop needs a socketpair)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pytest_socket import disable_socket, enable_socket

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")
os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# ``shared_files`` (the read-only files beside the repository) is the package suite's helper; the research's tests use
# it too (the research depends on the product, never the other way round).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))


@pytest.fixture(autouse=True)
def _fresh_registry() -> Iterator[None]:
    """Each test starts with no shared engines or scorers."""
    from grapheval_plugins import registry

    registry.clear_shared()
    yield
    registry.clear_shared()


@pytest.fixture(autouse=True)
def _no_network() -> Iterator[None]:
    disable_socket(allow_unix_socket=True)
    yield
    enable_socket()
