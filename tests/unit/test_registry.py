"""One process-wide registry for every host adapter, one threshold concept, one keyword for the engine, and a
package surface the adapters can live on (complete ``__all__``, no private imports)."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import os
import threading
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")
os.environ.setdefault("DEEPEVAL_NO_INSPECT_PROMPT", "1")
os.environ.setdefault("DEEPEVAL_DISABLE_DOTENV", "1")

import grapheval_plugins  # noqa: E402
import grapheval_plugins.models as models  # noqa: E402
from grapheval_plugins import GraphEval, InputError, MissingDependencyError, registry  # noqa: E402
from grapheval_plugins.aggregate import threshold_for_min_score  # noqa: E402
from grapheval_plugins.testing import FunctionScorer, KeywordScorer, ScriptedChatModel  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
LLM = "py:grapheval_plugins.testing:naive_triples_chat_model"
SCORER = "py:grapheval_plugins.testing:KeywordScorer"
CONTEXT = "Marie Curie was born in Warsaw."
OUTPUT = "Marie Curie was born in Warsaw."

needs_hosts = pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("deepeval", "ragas")),
    reason="the deepeval and ragas extras are needed",
)


@pytest.fixture
def scorer_loads(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every scorer load (a real resolution of the spec), counted."""
    real = models.resolve_scorer
    loads: list[Any] = []
    lock = threading.Lock()

    def counting(spec: Any = None, **options: Any) -> Any:
        if isinstance(spec, str):
            with lock:
                loads.append(spec)
        return real(spec, **options)

    monkeypatch.setattr(models, "resolve_scorer", counting)
    return loads


# --------------------------------------------------------------------------- one registry for the three hosts
@needs_hosts
def test_a_deepeval_metric_a_ragas_metric_and_a_runnable_over_the_same_specs_load_one_scorer(
    scorer_loads: list[Any],
) -> None:
    from deepeval.metrics.utils import copy_metrics
    from deepeval.test_case import LLMTestCase
    from ragas import SingleTurnSample

    from grapheval_plugins.integrations.deepeval import GraphEvalMetric
    from grapheval_plugins.integrations.langchain import GraphEvalRunnable
    from grapheval_plugins.integrations.ragas import GraphEvalFaithfulness, GraphEvalRagasMetric

    deepeval_metric = GraphEvalMetric(llm=LLM, scorer=SCORER)
    strict_metric = GraphEvalMetric(threshold=0.9, llm=LLM, scorer=SCORER)  # another threshold, same models
    ragas_metric = GraphEvalFaithfulness(llm=LLM, scorer=SCORER)
    collections_metric = GraphEvalRagasMetric(llm=LLM, scorer=SCORER)
    runnable = GraphEvalRunnable(llm=LLM, scorer=SCORER)
    assert scorer_loads == []  # nothing loads when adapters are built

    engine = runnable.grapheval
    assert deepeval_metric.engine is engine
    assert ragas_metric.current_engine() is engine and collections_metric.current_engine() is engine
    assert all(copy.engine is engine for copy in copy_metrics([deepeval_metric, deepeval_metric]))

    case = LLMTestCase(input="Where was she born?", actual_output=OUTPUT, retrieval_context=[CONTEXT])
    assert deepeval_metric.measure(case, _show_indicator=False) == 1.0
    assert strict_metric.measure(case, _show_indicator=False) == 1.0
    assert ragas_metric.single_turn_score(SingleTurnSample(response=OUTPUT, retrieved_contexts=[CONTEXT])) == 1.0
    assert collections_metric.score(response=OUTPUT, retrieved_contexts=[CONTEXT]).value == 1.0
    assert runnable.invoke({"context": CONTEXT, "answer": OUTPUT})["grapheval"].hallucinated is False

    assert scorer_loads == [SCORER]  # one load for all five
    assert strict_metric.engine.scorer is engine.scorer and strict_metric.engine.llm is engine.llm


def test_shared_engine_keys_specs_by_value_and_objects_by_identity() -> None:
    assert GraphEval.shared(LLM, "hhem") is registry.shared_engine(LLM, "hhem:vectara/hallucination_evaluation_model")
    assert GraphEval.shared(LLM, "hhem") is not GraphEval.shared(LLM, "hhem", mode="raw")
    scorer = KeywordScorer()
    one = GraphEval.shared(LLM, scorer)
    assert GraphEval.shared(LLM, scorer) is one and GraphEval.shared(LLM, KeywordScorer()) is not one
    strict = GraphEval.shared(LLM, scorer, hallucination_threshold=0.2)
    assert strict is not one and strict.hallucination_threshold == 0.2 and one.hallucination_threshold == 0.5
    assert strict.scorer is one.scorer is scorer
    registry.clear_shared()
    assert GraphEval.shared(LLM, "hhem") is not None  # rebuilt after a clear


def test_every_engine_resolves_a_scorer_spec_once_per_process(scorer_loads: list[Any]) -> None:
    first, second = GraphEval(scorer=SCORER, mode="raw"), GraphEval(scorer=SCORER, mode="raw", cache=False)
    assert first.scorer is second.scorer and scorer_loads == [SCORER]
    assert registry.shared_scorer(SCORER) is first.scorer


def test_concurrent_first_requests_load_a_scorer_once(monkeypatch: pytest.MonkeyPatch) -> None:
    loads: list[str] = []
    gate = threading.Event()

    def slow(spec: Any = None, **_: Any) -> KeywordScorer:
        loads.append(spec)
        gate.wait(1.0)
        return KeywordScorer()

    monkeypatch.setattr(models, "resolve_scorer", slow)
    got: list[Any] = []
    threads = [threading.Thread(target=lambda: got.append(registry.shared_scorer("slow:x"))) for _ in range(4)]
    for t in threads:
        t.start()
    gate.set()
    for t in threads:
        t.join()
    assert loads == ["slow:x"] and len({id(s) for s in got}) == 1


def test_engine_options_is_the_one_validation_of_shared_options() -> None:
    engine = GraphEval(scorer=KeywordScorer())
    with pytest.raises(InputError, match="not both") as info:
        registry.engine_options(engine, llm="local:x")
    assert info.value.field == "grapheval"
    with pytest.raises(InputError, match="expected a GraphEval") as info:
        registry.engine_options("local:x")
    with pytest.raises(InputError, match="engine's mode") as info:
        registry.engine_options(engine, mode="raw", fields={"mode": "check_mode"})
    assert info.value.field == "check_mode"
    with pytest.raises(InputError, match=r"\[0, 1\]") as info:
        registry.engine_options(hallucination_threshold=2, fields={"hallucination_threshold": "threshold"})
    assert info.value.field == "threshold"
    view = registry.engine_options(engine, hallucination_threshold=0.3).engine()
    assert view is not engine and view.hallucination_threshold == 0.3 and view.scorer is engine.scorer
    assert engine.hallucination_threshold == 0.5  # the shared engine itself is unchanged


# --------------------------------------------------------------------------- one threshold concept
def test_graph_eval_names_its_threshold_and_keeps_the_short_name_as_a_deprecated_alias() -> None:
    engine = GraphEval(hallucination_threshold=0.3)
    with pytest.warns(DeprecationWarning, match="hallucination_threshold"):
        assert engine.threshold == 0.3
    with pytest.warns(DeprecationWarning, match="hallucination_threshold="):
        assert GraphEval(threshold=0.3).hallucination_threshold == 0.3
    assert GraphEval().hallucination_threshold == 0.5
    with pytest.raises(InputError, match="not both"), pytest.warns(DeprecationWarning):
        GraphEval(threshold=0.3, hallucination_threshold=0.4)
    with pytest.raises(InputError) as info:
        GraphEval(hallucination_threshold=1.5)
    assert info.value.field == "hallucination_threshold"


def test_a_view_at_another_threshold_shares_models_cache_and_decides_at_its_threshold() -> None:
    llm = ScriptedChatModel(responses=['<python>[["Tom", "lives in", "Oslo"]]</python>'])
    scorer = FunctionScorer(lambda premise, hypothesis: 0.7, name="seventy")  # P(unsupported) = 0.3
    engine = GraphEval(llm=llm, scorer=scorer)
    strict = engine.with_options(hallucination_threshold=0.2)
    assert engine.with_options(hallucination_threshold=0.2) is strict and strict.with_options() is strict
    assert strict.with_options(hallucination_threshold=0.5) is engine
    assert engine.evaluate("Tom lives in Bergen.", "Tom lives in Oslo.").hallucinated is False
    report = strict.evaluate("Tom lives in Bergen.", "Tom lives in Oslo.")
    assert report.hallucinated is True and report.threshold == 0.2
    assert report.extraction is not None and report.extraction.cached  # the view shares the knowledge-graph cache
    assert len(llm.calls) == 1 and strict.llm is engine.llm and strict.scorer is engine.scorer


def test_a_deepeval_minimum_score_becomes_the_complementary_hallucination_threshold() -> None:
    assert threshold_for_min_score(0.8) == 0.2 and threshold_for_min_score(0.5) == 0.5
    assert threshold_for_min_score(1.0) == 0.0 and threshold_for_min_score(0.0) == 1.0
    with pytest.raises(InputError):
        threshold_for_min_score(1.2)


TOM_CONTEXT = "Tom lives in Bergen."
TOM_OUTPUT = "Tom lives in Oslo."


def _tom_world(messages: list[Any]) -> str:
    """Prompt A / B / C answers for the Tom sample (the corrected output extracts its own triple)."""
    text = str(messages[-1].content)
    if "<old_triple>" in text:  # prompt C: substitute
        return "<context>Tom lives in Bergen.</context>"
    if "<triple>" in text:  # prompt B: the corrected triple
        return '["Tom", "lives in", "Bergen"]'
    city = "Bergen" if "Tom lives in Bergen" in "\n".join(str(m.content) for m in messages) else "Oslo"
    return f'<python>[["Tom", "lives in", "{city}"]]</python>'


def _tom_scorer(p_unsupported_oslo: float) -> FunctionScorer:
    return FunctionScorer(lambda premise, hypothesis: 1.0 - p_unsupported_oslo if "Oslo" in hypothesis else 1.0,
                          name="tom")


@pytest.mark.skipif(importlib.util.find_spec("deepeval") is None, reason="deepeval extra")
@pytest.mark.parametrize("given_engine", [False, True])
def test_deepeval_threshold_reaches_the_engine_and_suggest_correction(given_engine: bool) -> None:
    pytest.importorskip("grapheval_plugins.correct")
    from deepeval.test_case import LLMTestCase

    from grapheval_plugins.integrations.deepeval import GraphEvalMetric

    llm, scorer = ScriptedChatModel(respond=_tom_world), _tom_scorer(0.3)  # score 0.7
    if given_engine:
        engine = GraphEval(llm=llm, scorer=scorer)
        metric = GraphEvalMetric(threshold=0.8, grapheval=engine, suggest_correction=True)
        assert metric.engine is engine and engine.hallucination_threshold == 0.5  # the caller's engine untouched
    else:
        metric = GraphEvalMetric(threshold=0.8, llm=llm, scorer=scorer, suggest_correction=True)
    case = LLMTestCase(input="Where does Tom live?", actual_output=TOM_OUTPUT, context=[TOM_CONTEXT])
    score = metric.measure(case, _show_indicator=False)
    assert score == pytest.approx(0.7) and metric.success is False
    assert "hallucination: 1 of 1 claim unsupported (score 0.700 < threshold 0.800" in metric.reason
    assert "suggested correction (passes the re-check): Tom lives in Bergen." in metric.reason
    # The paper's default threshold passes the same case, and nothing is corrected.
    default = GraphEvalMetric(llm=llm, scorer=scorer, suggest_correction=True)
    assert default.measure(case, _show_indicator=False) == pytest.approx(0.7) and default.success is True
    assert "suggested correction" not in default.reason


@pytest.mark.skipif(importlib.util.find_spec("deepeval") is None, reason="deepeval extra")
def test_deepeval_boundary_score_passes_and_is_not_flagged() -> None:
    from deepeval.test_case import LLMTestCase

    from grapheval_plugins.integrations.deepeval import GraphEvalMetric

    metric = GraphEvalMetric(threshold=0.8, llm=ScriptedChatModel(respond=_tom_world), scorer=_tom_scorer(0.2))
    case = LLMTestCase(input="q", actual_output=TOM_OUTPUT, context=[TOM_CONTEXT])
    assert metric.measure(case, _show_indicator=False) == pytest.approx(0.8)
    assert metric.success is True and metric.reason.startswith("faithful")


# --------------------------------------------------------------------------- one keyword; old names warn
@needs_hosts
def test_grapheval_is_the_keyword_everywhere_and_ragas_engine_is_a_deprecated_alias() -> None:
    from grapheval_plugins.integrations.deepeval import GraphEvalMetric
    from grapheval_plugins.integrations.langchain import GraphEvalRunnable
    from grapheval_plugins.integrations.ragas import GraphEvalFaithfulness, GraphEvalRagasMetric

    engine = GraphEval(llm=ScriptedChatModel(responses=["x"]), scorer=KeywordScorer())
    assert GraphEvalMetric(grapheval=engine).engine is engine
    assert GraphEvalRunnable(grapheval=engine).grapheval is engine
    assert GraphEvalFaithfulness(grapheval=engine).current_engine() is engine
    assert GraphEvalRagasMetric(grapheval=engine).current_engine() is engine
    with pytest.warns(DeprecationWarning, match="grapheval="):
        old = GraphEvalFaithfulness(engine=engine)
    assert old.grapheval is engine and old.engine is engine and old.current_engine() is engine
    with pytest.warns(DeprecationWarning, match="grapheval="):
        old_collections = GraphEvalRagasMetric(engine=engine)
    assert old_collections.grapheval is engine and old_collections.engine is engine
    with pytest.raises(InputError, match="not both"):
        GraphEvalRagasMetric(engine, engine=engine)


@needs_hosts
def test_renamed_and_moved_names_still_work_and_warn() -> None:
    import grapheval_plugins.integrations.deepeval as deepeval_adapter
    import grapheval_plugins.integrations.ragas as ragas_adapter

    with pytest.warns(DeprecationWarning, match="GraphEvalRagasMetric"):
        from grapheval_plugins.integrations.ragas import GraphEvalMetric
    assert GraphEvalMetric is ragas_adapter.GraphEvalRagasMetric is grapheval_plugins.GraphEvalRagasMetric
    assert grapheval_plugins.GraphEvalMetric is deepeval_adapter.GraphEvalMetric  # the DeepEval metric
    assert deepeval_adapter.GraphEvalMetric.__name__ != ragas_adapter.GraphEvalRagasMetric.__name__
    with pytest.warns(DeprecationWarning, match="GraphEval.shared"):
        engine = deepeval_adapter.shared_engine(LLM, SCORER)
    assert engine is GraphEval.shared(LLM, SCORER)
    with pytest.warns(DeprecationWarning, match="clear_shared"):
        deepeval_adapter.clear_shared_engines()
    assert GraphEval.shared(LLM, SCORER) is not engine


# --------------------------------------------------------------------------- the package surface
def _public_names(module: Any) -> set[str]:
    names = set()
    for name, value in vars(module).items():
        if name.startswith("_") or inspect.ismodule(value):
            continue
        if getattr(value, "__module__", "").startswith("typing"):
            continue
        if name in {"annotations", "importlib", "Any"}:
            continue
        names.add(name)
    return names


def test_all_is_complete() -> None:
    exported = set(grapheval_plugins.__all__)
    assert len(exported) == len(grapheval_plugins.__all__)  # no duplicates
    missing = _public_names(grapheval_plugins) - exported
    assert missing == set(), f"public names not in __all__: {sorted(missing)}"
    assert set(grapheval_plugins._LAZY) <= exported
    assert all(hasattr(grapheval_plugins, name) or name in grapheval_plugins._LAZY for name in exported)


_EXTRA_MODULES = {  # a lazily exported module -> the third-party modules its extra installs
    "grapheval_plugins.check.hf": ("torch", "transformers"),
    "grapheval_plugins.check.llm_judge": (),
    "grapheval_plugins.local": ("llama_cpp",),
    "grapheval_plugins.correct": (),
    "grapheval_plugins.integrations.langchain": (),
    "grapheval_plugins.integrations.deepeval": ("deepeval",),
    "grapheval_plugins.integrations.ragas": ("ragas",),
    "grapheval_plugins.integrations.langsmith": ("langsmith",),
}


@pytest.mark.parametrize("name", sorted(grapheval_plugins._LAZY))
def test_every_lazily_exported_name_imports_when_its_extra_is_installed(name: str) -> None:
    module = grapheval_plugins._LAZY[name]
    assert module in _EXTRA_MODULES, f"{module} needs an entry in _EXTRA_MODULES"
    installed = all(importlib.util.find_spec(dep) is not None for dep in _EXTRA_MODULES[module])
    if not installed:
        with pytest.raises(MissingDependencyError):  # a clear error naming the extra, not a bare ImportError
            getattr(grapheval_plugins, name)
        return
    value = getattr(grapheval_plugins, name)
    assert value is getattr(importlib.import_module(module), name)


def test_adapters_import_only_public_modules_of_the_package() -> None:
    internal = {"inputs"}  # modules the package does not document as API (their names are exported instead)
    # ... except the plumbing that left __all__, which is imported from its own module (grapheval_plugins._MOVED)
    homes = {(module.removeprefix("grapheval_plugins."), name) for name, module in grapheval_plugins._MOVED.items()}
    homes.add(("_imports", "require"))  # the missing-extra error every lazy import raises: plumbing, not engine state
    offenders = []
    for path in sorted((ROOT / "grapheval_plugins" / "integrations").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.level >= 2 or (node.module or "").startswith("grapheval")):
                parts = (node.module or "").split(".")
                if node.module and all((node.module, a.name) in homes for a in node.names):
                    continue
                private = [p for p in parts if p.startswith("_") or p in internal]
                private += [a.name for a in node.names if a.name.startswith("_")]
                if node.level >= 2 and not node.module:  # from .. import X: X must be exported
                    private += [a.name for a in node.names
                                if a.name not in grapheval_plugins.__all__ and a.name != "registry"]
                if private:
                    offenders.append(f"{path.name}:{node.lineno} {'.' * node.level}{node.module} {private}")
            elif isinstance(node, ast.Import):
                offenders += [f"{path.name}:{node.lineno} {a.name}" for a in node.names
                              if a.name.startswith("grapheval_plugins") and "._" in a.name]
    assert offenders == []
