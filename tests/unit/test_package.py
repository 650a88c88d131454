"""The package surface: light import, complete __all__, model specs, the CLI."""

from __future__ import annotations
import __future__

import importlib
import inspect
import json
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest
from shared_files import bench_data
from typer.testing import CliRunner

import grapheval_plugins
from grapheval_plugins import ModelLoadError, resolve_llm, resolve_scorer
from grapheval_plugins.cli import app
from grapheval_plugins.testing import KeywordScorer

HEAVY = ("torch", "transformers", "deepeval", "ragas", "llama_cpp", "langchain_aws", "rouge_score")


def test_import_grapheval_plugins_stays_light() -> None:
    code = (
        "import sys, grapheval_plugins, grapheval_plugins.check, grapheval_plugins.models, grapheval_plugins.cli;"
        f"print([m for m in {HEAVY!r} if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def _defined_public_names(module: types.ModuleType) -> set[str]:
    """What ``module`` makes public: its own public attributes (not submodules that became attributes on import,
    not ``from __future__`` features) and the names it loads lazily."""
    names = set()
    for name, value in vars(module).items():
        if name.startswith("_") and name != "__version__":
            continue
        if isinstance(value, types.ModuleType) and name not in module.__all__:
            continue
        if isinstance(value, __future__._Feature):
            continue
        names.add(name)
    return names | set(getattr(module, "_LAZY", {}))


def test_all_is_complete_and_sorted() -> None:
    # The model is httpx's tests/test_exported_members.py: __all__ lists exactly what the package offers.
    exported = grapheval_plugins.__all__
    assert exported == sorted(exported)
    assert len(set(exported)) == len(exported)
    assert set(exported) == _defined_public_names(grapheval_plugins)


@pytest.mark.parametrize("name", sorted(grapheval_plugins._MOVED))
def test_plumbing_left_all_but_still_imports(name: str) -> None:
    # Plumbing is not what users build with: it left __all__, lives in its own module, and for one release the old
    # top-level import still gives the same object.
    assert name not in grapheval_plugins.__all__
    home = importlib.import_module(grapheval_plugins._MOVED[name])
    expected = home if name == "registry" else getattr(home, name)
    assert getattr(grapheval_plugins, name) is expected


def test_all_names_resolve() -> None:
    # The tests run with every extra installed, so every name, lazy or not, must resolve here.
    missing = [name for name in grapheval_plugins.__all__ if not hasattr(grapheval_plugins, name)]
    assert missing == []


def _annotation_classes(func: object, namespace: dict[str, object]) -> set[type]:
    """The package's own classes named in ``func``'s parameter annotations (resolved in ``namespace``)."""
    found: set[type] = set()
    for param in inspect.signature(func).parameters.values():  # type: ignore[arg-type]
        text = param.annotation if isinstance(param.annotation, str) else getattr(param.annotation, "__name__", "")
        for dotted in re.findall(r"[A-Za-z_][\w.]*", str(text)):
            value: object = namespace.get(dotted.split(".")[0])
            for part in dotted.split(".")[1:]:
                value = getattr(value, part, None)
            if isinstance(value, type) and value.__module__.startswith("grapheval_plugins"):
                found.add(value)
    return found


@pytest.mark.parametrize("qualname", ["GraphEval", "GraphCorrect"])
def test_constructor_parameter_types_are_exported(qualname: str) -> None:
    # A user who writes GraphEval(retry=RetryPolicy(...)) imports RetryPolicy from the package itself.
    cls = getattr(grapheval_plugins, qualname)
    namespace = vars(sys.modules[cls.__module__])
    needed = _annotation_classes(cls.__init__, namespace)
    assert len(needed) >= 3, "few annotations were resolved: the check would pass vacuously"
    assert sorted(c.__name__ for c in needed if c.__name__ not in grapheval_plugins.__all__) == []
    assert all(getattr(grapheval_plugins, c.__name__) is c for c in needed)


def test_unknown_specs_are_clear_errors() -> None:
    with pytest.raises(ModelLoadError, match="unknown scorer spec"):
        resolve_scorer("nosuchprefix:thing")
    with pytest.raises(ModelLoadError, match="names no model"):
        resolve_llm("local:")
    with pytest.raises(ModelLoadError, match="cannot use int"):
        resolve_llm(3)
    with pytest.raises(ModelLoadError, match="cannot import"):
        resolve_scorer("py:grapheval_plugins.testing:NoSuchFactory")


def test_python_factory_specs() -> None:
    scorer = resolve_scorer("py:grapheval_plugins.testing:KeywordScorer")
    assert isinstance(scorer, KeywordScorer)
    llm = resolve_llm("py:grapheval_plugins.testing:naive_triples_chat_model")
    assert llm.model_label == "naive-triples"


FAKES = ["--llm", "py:grapheval_plugins.testing:naive_triples_chat_model",
         "--scorer", "py:grapheval_plugins.testing:KeywordScorer"]


def test_cli_evaluate_writes_a_report_per_row_reports_bad_lines_and_resumes(tmp_path: Path) -> None:
    rows = bench_data("qags_x.jsonl").read_text(encoding="utf-8").splitlines()[:3]
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join([*rows, "{not json", json.dumps({"id": "empty", "context": "", "output": "x"})]) + "\n")
    out = tmp_path / "out.jsonl"
    runner = CliRunner()
    result = runner.invoke(app, ["evaluate", str(src), "-o", str(out), *FAKES])
    assert result.exit_code == 0, result.output
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["id"] for r in lines] == ["qags_x-000", "qags_x-001", "qags_x-002", "empty"]
    assert all(r["ok"] for r in lines[:3]) and not lines[3]["ok"]
    assert all(r["claims"] and r["llm"] == "naive-triples" for r in lines[:3])
    assert "line 4: invalid JSON" in result.output
    again = runner.invoke(app, ["evaluate", str(src), "-o", str(out), *FAKES])
    assert again.exit_code == 0
    assert len(out.read_text().splitlines()) == 4  # resumed: nothing duplicated


def test_cli_csv_input_custom_fields_raw_mode(tmp_path: Path) -> None:
    src = tmp_path / "in.csv"
    src.write_text("doc,answer\n\"Paris is in France.\",\"Paris is in France.\"\n\"Oslo is in Norway.\",\"Oslo is in Spain.\"\n")
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(
        app, ["evaluate", str(src), "-o", str(out), "--mode", "raw", "--context-field", "doc", "--output-field",
              "answer", "--scorer", "py:grapheval_plugins.testing:KeywordScorer"],
    )
    assert result.exit_code == 0, result.output
    reports = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["hallucinated"] for r in reports] == [False, True]
    assert all(r["mode"] == "raw" and r["llm"] is None for r in reports)


def test_cli_reports_a_model_that_cannot_load_without_a_traceback(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"context": "c", "output": "o"}) + "\n")
    result = CliRunner().invoke(app, ["evaluate", str(src), "-o", str(tmp_path / "o.jsonl"), "--mode", "raw", "--scorer", "bogus:x"])
    assert result.exit_code == 2
    assert "unknown scorer spec" in result.output
