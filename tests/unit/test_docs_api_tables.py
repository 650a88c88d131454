"""The API reference renders the docstrings' reST simple tables as tables (scripts/griffe_docstrings.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("griffe", reason="the docs extra builds the API reference")

ROOT = Path(__file__).resolve().parents[2]


def _extension():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("griffe_docstrings", ROOT / "scripts" / "griffe_docstrings.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("griffe_docstrings", module)
    spec.loader.exec_module(module)
    return module


def test_a_simple_table_becomes_a_markdown_table() -> None:
    text = """Specs:

=======================  ===============================
``None``                 the default, :data:`DEFAULT_LLM`
a :class:`~pkg.Scorer`   used as is
``"judge:<spec>"``       an LLM judge over the model, e.g.
                         ``"judge:openai:gpt-4o-mini"``
=======================  ===============================

After."""
    lines = _extension().to_markdown(text).splitlines()
    assert "| ``None`` | the default, `DEFAULT_LLM` |" in lines
    assert "| a `Scorer` | used as is |" in lines  # a role shortened inside its own cell, not across the column
    assert '| ``"judge:<spec>"`` | an LLM judge over the model, e.g. ``"judge:openai:gpt-4o-mini"`` |' in lines
    assert not any(line.startswith("=") for line in lines)
    assert lines[-1] == "After."


def test_an_item_naming_several_parameters_becomes_one_per_name() -> None:
    text = "Thing.\n\nArgs:\n    a, b: the pair.\n        More.\n    c, d,\n        e: as for X.\n    f: plain.\n"
    lines = _extension().to_markdown(text).splitlines()
    assert lines[3:] == ["    a: the pair.", "        More.", "    b: as for `a`.", "    c: as for X.",
                         "    d: as for X.", "    e: as for X.", "    f: plain."]


def test_options_outside_the_signature_have_no_default_column() -> None:
    text = "Thing.\n\nArgs:\n    model: the model.\n    revision: a hub revision.\n        Pinned.\n\nReturns:\n    x"
    moved = _extension()._keyword_options_apart(text, {"model", "options"})
    assert moved.splitlines() == ["Thing.", "", "Args:", "    model: the model.", "", "Other Parameters:",
                                  "    revision: a hub revision.", "        Pinned.", "", "Returns:", "    x"]
