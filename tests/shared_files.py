"""The read-only files beside the repository that some tests read: ``../shared`` (benchmark data sets, real
tokenizers), or ``$GRAPHEVAL_SHARED``; data sets also from ``$GRAPHEVAL_BENCH_DATA``, as ``benchmarks/harness.py``
finds them.

CI checks them out (``CI=true``): there a missing file fails the test that reads it, so a test cannot pass by
skipping. Elsewhere the test is skipped, and the reason names the missing file.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ["GRAPHEVAL_SHARED"]) if os.environ.get("GRAPHEVAL_SHARED") else ROOT.parent / "shared"


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def require(path: Path) -> Path:
    """``path`` when it exists; else the test fails under CI and is skipped elsewhere, naming the file."""
    if path.exists():
        return path
    message = f"{path} is missing (the read-only files beside the repository: ../shared or $GRAPHEVAL_SHARED)"
    if in_ci():
        pytest.fail(f"{message}; CI checks them out, so this test may not skip", pytrace=False)
    pytest.skip(f"{message}; CI fails here instead of skipping")


def shared_file(*parts: str) -> Path:
    """The file ``../shared/<parts>``, through :func:`require`."""
    return require(SHARED.joinpath(*parts))


def bench_data(name: str) -> Path:
    """A benchmark data set (``qags_c.jsonl`` …): ``$GRAPHEVAL_BENCH_DATA/<name>``, else ``../shared/data/benchmarks``
    (or ``shared/data/benchmarks`` inside the repository), through :func:`require`."""
    env = os.environ.get("GRAPHEVAL_BENCH_DATA")
    if env:
        return require(Path(env) / name)
    inside = ROOT / "shared" / "data" / "benchmarks" / name
    return inside if inside.is_file() else shared_file("data", "benchmarks", name)
