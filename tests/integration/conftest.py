"""Integration tests use the real local models: they are marked ``integration`` (to select or skip them) and
``isolated`` (each module runs in a child process, so a native crash fails a test instead of the run)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from child_isolation import MARKER

HERE = Path(__file__).resolve().parent
LOCAL_MODEL = "qwen2.5-coder-0.5b"
"""The real model the integration tests run (its weights come from the pinned ``weights-*`` packages)."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.resolve().is_relative_to(HERE):
            item.add_marker(pytest.mark.integration)
            item.add_marker(getattr(pytest.mark, MARKER))


def _data_dir() -> Path:
    """Where the benchmark files are, as ``benchmarks/harness.py`` finds them: ``$GRAPHEVAL_BENCH_DATA``, else
    ``shared/data/benchmarks`` beside the repository or inside it."""
    env = os.environ.get("GRAPHEVAL_BENCH_DATA")
    if env:
        return Path(env)
    root = HERE.parents[1]
    for candidate in (root.parent / "shared" / "data" / "benchmarks", root / "shared" / "data" / "benchmarks"):
        if candidate.is_dir():
            return candidate
    return root.parent / "shared" / "data" / "benchmarks"


@pytest.fixture(scope="session")
def model_path() -> Path:
    """The GGUF file of :data:`LOCAL_MODEL`, never from the hub."""
    from grapheval_plugins.local.weights import resolve_model_path

    return resolve_model_path(LOCAL_MODEL, hub=False, show_progress=False)


@pytest.fixture(scope="session")
def qags_c_rows() -> list[dict[str, str]]:
    """The first five rows (``context``, ``output``) of the QAGS-C dev set; empty where the data files are not
    there (a module then uses its own texts), except under CI, which checks them out: there it fails."""
    from shared_files import in_ci

    path = _data_dir() / "qags_c.jsonl"
    if not path.is_file():
        if in_ci():
            pytest.fail(f"{path} is missing: CI checks out the data sets beside the repository", pytrace=False)
        return []
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()[:5]]
    return [{"context": row["context"], "output": row["output"]} for row in rows]
