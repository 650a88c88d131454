"""Load a script of the repository (an example, not a package module) as a module, by path. The benchmark scripts' tests
have their own loader (``benchmarks/tests/bench_scripts.py``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def load_script(relative_path: str, name: str) -> ModuleType:
    """Execute ``ROOT / relative_path`` as a module named ``name`` and return it."""
    spec = importlib.util.spec_from_file_location(name, ROOT / relative_path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

