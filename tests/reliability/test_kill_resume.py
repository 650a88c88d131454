"""``grapheval evaluate`` killed with SIGKILL at random points and resumed writes the same file as a run that was
never interrupted: no duplicate, no missing row (timings aside)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
N_ROWS = 60


def command(rows: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "grapheval_plugins.cli", "evaluate", str(rows), "-o", str(out),
            "--llm", "py:fake_models:slow_llm", "--scorer", "py:fake_models:keyword_scorer", "--batch-rows", "3"]


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(HERE)])}


def comparable(path: Path) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    for row in rows:
        row.pop("timings", None)
    return rows


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
def test_killed_and_resumed_run_equals_an_uninterrupted_one(tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(
        json.dumps({"id": f"r{i}", "context": f"Item {i} is kept in box {i % 7}.",
                    "output": f"Item {i} is kept in box {(i * 3) % 7}. It was put there on day {i}."}) + "\n"
        for i in range(N_ROWS)), encoding="utf-8")
    reference = tmp_path / "reference.jsonl"
    subprocess.run(command(rows, reference), env=env(), check=True, capture_output=True, timeout=120)

    out = tmp_path / "out.jsonl"
    rng = random.Random(19)
    kills = 0
    for _ in range(3):
        target = rng.randint(3, N_ROWS - 10)
        proc = subprocess.Popen(command(rows, out), env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            done = len(out.read_bytes().splitlines()) if out.exists() else 0
            if done >= target:
                os.kill(proc.pid, signal.SIGKILL)
                kills += 1
                break
            time.sleep(0.005)
        proc.wait(timeout=30)
    assert kills >= 1, "no run was killed mid-way"
    subprocess.run(command(rows, out), env=env(), check=True, capture_output=True, timeout=120)
    got, want = comparable(out), comparable(reference)
    assert [r["id"] for r in got] == [f"r{i}" for i in range(N_ROWS)]  # none missing, none twice, in order
    assert got == want
