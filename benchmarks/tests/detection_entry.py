"""``benchmarks/detection.py`` with its result and cache folders moved under the folder given as the first
argument, so a test can run (and kill) it without touching the committed results."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import detection  # noqa: E402

if __name__ == "__main__":
    folder = Path(sys.argv.pop(1))
    detection.RESULTS = folder
    detection.CACHE = folder / ".cache"
    detection.app()
