"""``detection.py run`` killed with SIGKILL at random rows and resumed writes the same rows as a run that was never
interrupted: none missing, none twice (timings aside). The run goes through ``detection_entry.py`` (result and cache
folders under the test's temporary folder), with the fakes of ``tests/reliability/fake_models.py``."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from kill_runs import killed_and_resumed

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
N_ROWS = 60


def command(rows: Path, out: Path) -> list[str]:
    return [sys.executable, str(HERE / "detection_entry.py"), str(out.parent / f"{out.stem}-files"), "run",
            str(rows), "--llm", "py:fake_models:slow_llm", "--scorer", "py:fake_models:keyword_scorer",
            "--out", str(out)]


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests" / "reliability")])}


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
def test_killed_and_resumed_detection_run_equals_an_uninterrupted_one(tmp_path: Path) -> None:
    got, want = killed_and_resumed(command, tmp_path, N_ROWS, env())
    ids = [r["id"] for r in got]
    # none missing or twice; the benchmark keeps its own (seeded) run order, so the files are equal as written
    assert sorted(ids) == sorted(f"r{i}" for i in range(N_ROWS)) and len(set(ids)) == N_ROWS
    assert got == want
