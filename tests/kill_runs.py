"""A long run killed with SIGKILL at random rows, then resumed, against the same run never interrupted: the
procedure the kill/resume tests of the CLI (``tests/reliability``) and of the detection benchmark
(``benchmarks/tests``) share."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

Command = Callable[[Path, Path], list[str]]


def write_rows(path: Path, n_rows: int) -> Path:
    """``n_rows`` labelled rows, ids ``r0`` … (half of them with a wrong box)."""
    path.write_text("".join(
        json.dumps({"id": f"r{i}", "label": i % 2, "context": f"Item {i} is kept in box {i % 7}.",
                    "output": f"Item {i} is kept in box {(i * 3) % 7}. It was put there on day {i}."}) + "\n"
        for i in range(n_rows)), encoding="utf-8")
    return path


def _without_timings(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_timings(v) for k, v in value.items() if k not in ("timings", "seconds")}
    if isinstance(value, list):
        return [_without_timings(v) for v in value]
    return value


def comparable(path: Path) -> list[dict[str, Any]]:
    """The rows of a JSONL output, timings aside."""
    return [_without_timings(json.loads(line)) for line in path.read_text(encoding="utf-8").splitlines()]


def killed_and_resumed(command: Command, tmp_path: Path, n_rows: int, env: dict[str, str],
                       seed: int = 19) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(resumed, reference)``: the rows of a run killed (SIGKILL) at three random rows and resumed, and of the
    same run never interrupted, timings aside. Fails when no run could be killed mid-way."""
    rows = write_rows(tmp_path / "rows.jsonl", n_rows)
    reference = tmp_path / "reference.jsonl"
    subprocess.run(command(rows, reference), env=env, check=True, capture_output=True, timeout=180)

    out = tmp_path / "out.jsonl"
    rng = random.Random(seed)
    kills = 0
    for _ in range(3):
        target = rng.randint(3, n_rows - 10)
        proc = subprocess.Popen(command(rows, out), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 90
        while proc.poll() is None and time.monotonic() < deadline:
            done = len(out.read_bytes().splitlines()) if out.exists() else 0
            if done >= target:
                os.kill(proc.pid, signal.SIGKILL)
                kills += 1
                break
            time.sleep(0.005)
        proc.wait(timeout=30)
    assert kills >= 1, "no run was killed mid-way"
    subprocess.run(command(rows, out), env=env, check=True, capture_output=True, timeout=180)
    return comparable(out), comparable(reference)
