"""The decision rule (``method``) is carried by the shared engines, every adapter, Ray's engine spec and the CLI."""

from __future__ import annotations

import pytest

from grapheval_plugins import GraphEval, InputError, registry
from grapheval_plugins.testing import KeywordScorer

SCORER = "py:grapheval_plugins.testing:KeywordScorer"
LLM = "py:grapheval_plugins.testing:naive_triples_chat_model"


def test_shared_engines_are_distinct_per_rule() -> None:
    hybrid = GraphEval.shared(LLM, SCORER)
    paper = GraphEval.shared(LLM, SCORER, method="paper")
    assert (hybrid.rule.name, paper.rule.name) == ("hybrid", "paper")
    assert hybrid.method == paper.method == "paper"  # no weights fitted for this scorer: the paper's rule decides
    assert paper is not hybrid and paper is GraphEval.shared(LLM, SCORER, method="paper")
    assert registry.shared_engine(LLM, SCORER, method="paper") is paper
    with pytest.raises(InputError, match="method"):
        GraphEval.shared(LLM, SCORER, method="vote")  # type: ignore[arg-type]


def test_engine_options_carry_and_check_the_rule() -> None:
    assert registry.engine_options(llm=LLM, scorer=SCORER, method="paper").engine().method == "paper"
    engine = GraphEval(scorer=KeywordScorer(), method="paper")
    assert registry.engine_options(engine).engine().method == "paper"
    with pytest.raises(InputError, match="engine's method"):
        registry.engine_options(engine, method="hybrid")
    with pytest.raises(InputError, match=r"registered decision rule \('hybrid', 'paper'"):
        registry.engine_options(method="majority")


def test_every_adapter_can_choose_the_papers_rule() -> None:
    from grapheval_plugins.integrations.langchain import GraphEvalRunnable

    assert GraphEvalRunnable(llm=LLM, scorer=SCORER, method="paper").grapheval.method == "paper"
    pytest.importorskip("deepeval")
    from grapheval_plugins.integrations.deepeval import GraphEvalMetric

    assert GraphEvalMetric(llm=LLM, scorer=SCORER, method="paper").engine.method == "paper"
    pytest.importorskip("ragas")
    from grapheval_plugins.integrations.ragas import GraphEvalFaithfulness, GraphEvalRagasMetric

    assert GraphEvalFaithfulness(llm=LLM, scorer=SCORER, method="paper").current_engine().method == "paper"
    assert GraphEvalRagasMetric(llm=LLM, scorer=SCORER, method="paper").current_engine().method == "paper"


def test_ray_engine_spec_carries_the_rule() -> None:
    from grapheval_plugins.integrations.ray import EngineSpec

    spec = EngineSpec(llm=LLM, scorer=SCORER, method="paper", hallucination_threshold=0.3)
    engine = spec.engine(llm=spec.build_llm(), scorer=spec.build_scorer())
    assert (engine.method, engine.hallucination_threshold) == ("paper", 0.3)
