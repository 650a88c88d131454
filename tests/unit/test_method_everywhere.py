"""The decision rule (``rule``) is carried by the shared engines, every adapter, Ray's engine spec and the CLI; its
old name ``method`` is a deprecated alias everywhere (warns, maps, and a conflict is an error)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from grapheval_plugins import GraphEval, InputError, registry
from grapheval_plugins.testing import KeywordScorer

SCORER = "py:grapheval_plugins.testing:KeywordScorer"
LLM = "py:grapheval_plugins.testing:naive_triples_chat_model"


def test_shared_engines_are_distinct_per_rule() -> None:
    hybrid = GraphEval.shared(LLM, SCORER)
    paper = GraphEval.shared(LLM, SCORER, rule="paper")
    assert (hybrid.rule.name, paper.rule.name) == ("hybrid", "paper")
    # no weights fitted for this scorer: the paper's rule decides both
    assert hybrid.decision_rule()[0].name == paper.decision_rule()[0].name == "paper"
    assert paper is not hybrid and paper is GraphEval.shared(LLM, SCORER, rule="paper")
    assert registry.shared_engine(LLM, SCORER, rule="paper") is paper
    with pytest.raises(InputError, match="rule"):
        GraphEval.shared(LLM, SCORER, rule="vote")


def test_engine_options_carry_and_check_the_rule() -> None:
    assert registry.engine_options(llm=LLM, scorer=SCORER, rule="paper").engine().rule.name == "paper"
    engine = GraphEval(scorer=KeywordScorer(), rule="paper")
    assert registry.engine_options(engine).engine().rule.name == "paper"
    with pytest.raises(InputError, match="engine's rule"):
        registry.engine_options(engine, rule="hybrid")
    with pytest.raises(InputError, match=r"registered decision rule \('hybrid', 'paper'"):
        registry.engine_options(rule="majority")


def _adapters() -> dict[str, Callable[..., GraphEval]]:
    """Each adapter (and engine factory) built with ``**options``, giving the engine it scores with."""
    from grapheval_plugins.integrations.langchain import GraphEvalRunnable

    out: dict[str, Callable[..., GraphEval]] = {
        "GraphEval": lambda **o: GraphEval(scorer=KeywordScorer(), **o),
        "GraphEval.shared": lambda **o: GraphEval.shared(LLM, SCORER, **o),
        "shared_engine": lambda **o: registry.shared_engine(LLM, SCORER, **o),
        "GraphEvalRunnable": lambda **o: GraphEvalRunnable(llm=LLM, scorer=SCORER, **o).grapheval,
    }
    try:
        from grapheval_plugins.integrations.deepeval import GraphEvalMetric
    except ImportError:  # pragma: no cover - the tests run with every extra
        pass
    else:
        out["GraphEvalMetric"] = lambda **o: GraphEvalMetric(llm=LLM, scorer=SCORER, **o).engine
    from grapheval_plugins.integrations.ragas import GraphEvalFaithfulness, GraphEvalRagasMetric

    out["GraphEvalFaithfulness"] = lambda **o: GraphEvalFaithfulness(llm=LLM, scorer=SCORER, **o).current_engine()
    out["GraphEvalRagasMetric"] = lambda **o: GraphEvalRagasMetric(llm=LLM, scorer=SCORER, **o).current_engine()
    return out


ADAPTERS = ["GraphEval", "GraphEval.shared", "shared_engine", "GraphEvalRunnable", "GraphEvalMetric",
            "GraphEvalFaithfulness", "GraphEvalRagasMetric"]


@pytest.mark.parametrize("name", ADAPTERS)
def test_every_adapter_can_choose_the_papers_rule(name: str) -> None:
    assert _adapters()[name](rule="paper").rule.name == "paper"


@pytest.mark.parametrize("name", ADAPTERS)
def test_method_is_a_deprecated_alias_of_rule(name: str) -> None:
    build = _adapters()[name]
    with pytest.warns(DeprecationWarning, match=r"method=.*deprecated.*rule="):
        assert build(method="paper").rule.name == "paper"
    with pytest.warns(DeprecationWarning), pytest.raises(InputError, match="not both"):
        build(rule="paper", method="hybrid")
    with pytest.warns(DeprecationWarning):  # the same rule under both names is no conflict
        assert build(rule="paper", method="paper").rule.name == "paper"


def test_an_unknown_rule_given_as_method_names_method() -> None:
    with pytest.warns(DeprecationWarning), pytest.raises(InputError, match="^method: must be a registered"):
        GraphEval(method="vote")


def test_the_engines_method_property_is_deprecated() -> None:
    engine = GraphEval(scorer="hhem")
    with pytest.warns(DeprecationWarning, match="decision_rule"):
        assert engine.method == engine.decision_rule()[0].name == "paper"
    assert "rule='hybrid'" in repr(engine)


def test_ray_engine_spec_carries_the_rule() -> None:
    from grapheval_plugins.integrations.ray import EngineSpec

    spec = EngineSpec(llm=LLM, scorer=SCORER, rule="paper", hallucination_threshold=0.3)
    engine = spec.engine(llm=spec.build_llm(), scorer=spec.build_scorer())
    assert (engine.rule.name, engine.hallucination_threshold) == ("paper", 0.3)
