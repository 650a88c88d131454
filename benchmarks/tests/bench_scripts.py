"""Load a benchmark script (not a package module) as a module, by path, and the harness the scripts share."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"


def load_script(relative_path: str, name: str) -> ModuleType:
    """Execute ``ROOT / relative_path`` as a module named ``name`` and return it."""
    spec = importlib.util.spec_from_file_location(name, ROOT / relative_path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_harness() -> ModuleType:
    """The benchmark harness ``benchmarks/harness.py``, imported as ``harness`` the way the scripts import it
    (so a script loaded with :func:`load_script` and the test share one module)."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    import harness

    return harness
