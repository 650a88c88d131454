"""Test-wide settings: no model hub, no telemetry; native model code runs in child processes.

Tests marked ``isolated`` run in a fresh child interpreter (``tests/child_isolation.py``): a segmentation fault in
llama.cpp or torch fails that test, with the signal and the last lines of output, and the run goes on to
pytest's summary. Every integration test is isolated (``tests/integration/conftest.py``), and so are the unit
modules listed in ``ISOLATED_MODULES``, which run real torch models.
"""

from __future__ import annotations

import os

import pytest
from child_isolation import MARKER, configure

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")
os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ISOLATED_MODULES = ("unit/test_hf_scorers.py", "unit/test_hf_model_kwargs.py")
"""Unit test modules (relative to ``tests/``) that run native model code (tiny torch models)."""


def pytest_configure(config: pytest.Config) -> None:
    configure(config)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    isolated = {os.path.join(here, *m.split("/")) for m in ISOLATED_MODULES}
    for item in items:
        if str(item.path) in isolated:
            item.add_marker(getattr(pytest.mark, MARKER))
