"""Long runs killed with SIGKILL at random points and resumed write the same file as a run that was never
interrupted: no duplicate, no missing row (timings aside). For ``grapheval evaluate`` and ``grapheval correct``
(the detection benchmark's runs: ``benchmarks/tests/test_detection_resume.py``)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from kill_runs import comparable, killed_and_resumed

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
N_ROWS = 60
SCORER = "py:fake_models:keyword_scorer"


def cli(name: str, llm: str) -> Callable[[Path, Path], list[str]]:
    def command(rows: Path, out: Path) -> list[str]:
        return [sys.executable, "-m", "grapheval_plugins.cli", name, str(rows), "-o", str(out), "--llm", llm,
                "--scorer", SCORER, "--batch-rows", "3"]

    return command


COMMANDS = {
    "evaluate": cli("evaluate", "py:fake_models:slow_llm"),
    "correct": cli("correct", "py:fake_models:slow_correcting_llm"),
}


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(HERE)])}


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
@pytest.mark.parametrize("name", list(COMMANDS))
def test_killed_and_resumed_run_equals_an_uninterrupted_one(name: str, tmp_path: Path) -> None:
    command = COMMANDS[name]
    got, want = killed_and_resumed(command, tmp_path, N_ROWS, env())
    ids = [r["id"] for r in got]
    assert sorted(ids) == sorted(f"r{i}" for i in range(N_ROWS)) and len(set(ids)) == N_ROWS  # none missing or twice
    assert ids == [f"r{i}" for i in range(N_ROWS)]  # the input order
    assert got == want


# ------------------------------------------------------------------ many kills, torn writes, non-ASCII rows
FAST = ["--llm", "py:grapheval_plugins.testing:naive_triples_chat_model",
        "--scorer", "py:grapheval_plugins.testing:KeywordScorer", "--batch-rows", "2"]
WORDS = ["Ærøskøbing", "東京都", "Grüße", "Ελλάδα", "🙂🚀", "Zürich", "Ñandú", "Київ"]


def _non_ascii_rows(n: int) -> str:
    return "".join(json.dumps({"id": f"ř{i}", "context": f"{WORDS[i % 8]} {i} lies beside {WORDS[(i + 1) % 8]}.",
                               "output": f"{WORDS[i % 8]} {i} lies beside {WORDS[(i * 3) % 8]} 🙂."},
                              ensure_ascii=False) + "\n" for i in range(n))


def _snapshot(folder: Path, but: str) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.name != but}


def _torn_prefix(line: bytes, rng: random.Random) -> bytes:
    """A prefix of ``line`` as an interrupted write leaves it: mostly cut inside a multi-byte character."""
    inside = [i for i, b in enumerate(line) if 0x80 <= b <= 0xBF]  # continuation bytes: a cut before one is mid-character
    cut = rng.choice(inside) if inside and rng.random() < 0.75 else rng.randint(1, len(line) - 1)
    return line[:cut]


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
def test_random_kills_and_torn_writes_of_non_ascii_rows_lose_nothing_and_touch_no_other_file(tmp_path: Path) -> None:
    """SIGKILL at random times (many runs), and after half of them the tail of a write torn at a random byte
    (mostly inside a multi-byte character, as a crash can leave it): the resumed output equals an uninterrupted
    run's byte for byte (timings aside), and every other file of the folder is as it was, with no file added."""
    n = 120
    ref_dir, work = tmp_path / "reference", tmp_path / "work"
    ref_dir.mkdir()
    work.mkdir()
    for folder in (ref_dir, work):
        (folder / "rows.jsonl").write_text(_non_ascii_rows(n), encoding="utf-8")
    (work / "notes.txt").write_text("Ünrelated notes, no newline", encoding="utf-8")
    (work / "old-run.jsonl").write_bytes(b'{"id": "x", "v": "\xc3\xa9"}\n')

    def command(folder: Path) -> list[str]:
        return [sys.executable, "-m", "grapheval_plugins.cli", "evaluate", str(folder / "rows.jsonl"),
                "-o", str(folder / "out.jsonl"), *FAST]

    started = time.monotonic()
    subprocess.run(command(ref_dir), env=env(), check=True, capture_output=True, timeout=120)
    full = time.monotonic() - started
    reference = (ref_dir / "out.jsonl").read_bytes().splitlines(keepends=True)
    assert len(reference) == n

    out = work / "out.jsonl"
    before = _snapshot(work, "out.jsonl")
    rng = random.Random(43)
    kills = torn = 0
    for _ in range(12):
        have = out.read_bytes().count(b"\n") if out.exists() else 0
        target = min(n - 1, have + rng.randint(1, max(1, (n - have) // 3)))  # a random row of this run's share
        proc = subprocess.Popen(command(work), env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 4 * full + 10
        while proc.poll() is None and time.monotonic() < deadline:
            if out.exists() and out.read_bytes().count(b"\n") >= target:
                time.sleep(rng.uniform(0, 0.003))  # and a random moment after it
                os.kill(proc.pid, signal.SIGKILL)
                kills += 1
                break
            time.sleep(0.001)
        proc.wait(timeout=30)
        done = out.read_bytes() if out.exists() else b""
        assert done.endswith(b"\n") or not done  # a whole number of lines after each kill
        lines = done.count(b"\n")
        if lines < n and rng.random() < 0.5:  # the OS kept only part of the next write
            with out.open("ab") as fh:
                fh.write(_torn_prefix(reference[lines], rng))
            torn += 1
        assert _snapshot(work, "out.jsonl") == before
    assert kills >= 8 and torn >= 3, (kills, torn)
    subprocess.run(command(work), env=env(), check=True, capture_output=True, timeout=120)
    assert comparable(out) == comparable(ref_dir / "out.jsonl")
    assert [json.loads(line)["id"] for line in out.read_text(encoding="utf-8").splitlines()] == [
        f"ř{i}" for i in range(n)]
    assert _snapshot(work, "out.jsonl") == before  # the input and its neighbours: unchanged, nothing added


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
def test_a_killed_no_resume_run_leaves_the_old_output_as_it_was(tmp_path: Path) -> None:
    rows, out = tmp_path / "rows.jsonl", tmp_path / "out.jsonl"
    rows.write_text(_non_ascii_rows(60), encoding="utf-8")
    old = b'{"id": "old", "hallucinated": false, "v": "\xc3\xa9"}\n'
    out.write_bytes(old)
    command = [sys.executable, "-m", "grapheval_plugins.cli", "evaluate", str(rows), "-o", str(out), "--no-resume",
               *FAST, "--batch-rows", "1"]
    proc = subprocess.Popen(command, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    partial = tmp_path / ".out.jsonl.partial"
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline and not (partial.exists() and partial.stat().st_size):
        time.sleep(0.002)
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert partial.exists(), "the run was not caught while writing beside the output"
    assert out.read_bytes() == old  # the old output survives a killed --no-resume run
    subprocess.run(command, env=env(), check=True, capture_output=True, timeout=120)
    assert len(out.read_bytes().splitlines()) == 60 and not partial.exists()
