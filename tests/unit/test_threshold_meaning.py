"""One threshold concept in the core, the host's own word only where the host defines it, the same behaviour in
every adapter given a shared engine, and no adapter able to change the shared engine's policy.

The scorer says P(unsupported) = 0.6 for every claim: an engine at 0.5 flags, a view at 0.7 does not.
"""

from __future__ import annotations

import pytest

from grapheval_plugins import GraphEval
from grapheval_plugins.testing import FunctionScorer, ScriptedChatModel

CONTEXT = "Marie Curie was born in Warsaw."
OUTPUT = "Marie Curie was born in Paris."


def _engine() -> GraphEval:
    llm = ScriptedChatModel(respond=lambda messages: '<python>[["Marie Curie", "born in", "Paris"]]</python>')
    return GraphEval(llm=llm, scorer=FunctionScorer(lambda premise, claim: 0.4), rule="paper")


def test_the_engine_threshold_is_read_only() -> None:
    engine = _engine()
    with pytest.raises(AttributeError, match=r"with_options\(hallucination_threshold=0.7\)"):
        engine.hallucination_threshold = 0.7  # type: ignore[misc]
    assert engine.hallucination_threshold == 0.5
    assert engine.evaluate(CONTEXT, OUTPUT).hallucinated is True
    assert engine.with_options(hallucination_threshold=0.7).evaluate(CONTEXT, OUTPUT).hallucinated is False


def test_langchain_adapts_a_given_engine_to_its_threshold() -> None:
    from grapheval_plugins.integrations.langchain import GraphEvalRunnable

    engine = _engine()
    lenient = GraphEvalRunnable(engine, hallucination_threshold=0.7, report_only=True)
    assert lenient.invoke({"answer": OUTPUT, "context": CONTEXT}).hallucinated is False
    assert GraphEvalRunnable(engine, report_only=True).invoke({"answer": OUTPUT, "context": CONTEXT}).hallucinated
    assert engine.hallucination_threshold == 0.5


def test_ragas_scores_have_no_threshold_and_binary_decides_at_the_engines() -> None:
    # docs/guides/ragas.md, "What the threshold means here": the continuous value depends on no threshold;
    # binary=True is the verdict at the engine's hallucination threshold.
    pytest.importorskip("ragas")
    from ragas import SingleTurnSample

    from grapheval_plugins.integrations.ragas import GraphEvalFaithfulness, GraphEvalRagasMetric

    engine = _engine()
    lenient = engine.with_options(hallucination_threshold=0.7)
    sample = SingleTurnSample(response=OUTPUT, retrieved_contexts=[CONTEXT])
    for e in (engine, lenient):
        assert GraphEvalFaithfulness(grapheval=e).single_turn_score(sample) == pytest.approx(0.4)
        assert GraphEvalRagasMetric(grapheval=e).score(response=OUTPUT, retrieved_contexts=[CONTEXT]).value == \
            pytest.approx(0.4)
    assert GraphEvalFaithfulness(grapheval=lenient, binary=True).single_turn_score(sample) == 1.0
    assert GraphEvalFaithfulness(grapheval=engine, binary=True).single_turn_score(sample) == 0.0
    metric = GraphEvalRagasMetric(grapheval=lenient, binary=True)
    assert metric.score(response=OUTPUT, retrieved_contexts=[CONTEXT]).value == 1.0
    # The metrics' own hallucination_threshold= (and threshold=) is deprecated, and still applies for one release.
    with pytest.warns(DeprecationWarning, match="hallucination_threshold"):
        old = GraphEvalFaithfulness(grapheval=engine, threshold=0.7, binary=True)
    assert old.hallucination_threshold == old.threshold == 0.7 and old.single_turn_score(sample) == 1.0
    with pytest.warns(DeprecationWarning, match="hallucination_threshold"):
        GraphEvalRagasMetric(grapheval=engine, hallucination_threshold=0.7, binary=True)
    assert engine.hallucination_threshold == 0.5


def test_deepeval_keeps_its_own_threshold_a_minimum_score() -> None:
    pytest.importorskip("deepeval")
    from deepeval.test_case import LLMTestCase

    from grapheval_plugins.integrations.deepeval import GraphEvalMetric

    engine = _engine()
    case = LLMTestCase(input="Where?", actual_output=OUTPUT, context=[CONTEXT])
    # DeepEval's threshold is a minimum score: 0.3 means "pass iff 1 − P(hallucination) >= 0.3", i.e. a
    # hallucination threshold of 0.7; the same view of the engine as the other adapters get.
    lenient = GraphEvalMetric(threshold=0.3, grapheval=engine)
    lenient.measure(case)
    assert lenient.is_successful() is True
    strict = GraphEvalMetric(threshold=0.5, grapheval=engine)
    strict.measure(case)
    assert strict.is_successful() is False
    assert engine.hallucination_threshold == 0.5


def test_the_cli_takes_the_core_name_and_the_old_one() -> None:
    import typer

    from grapheval_plugins.cli import app

    command = typer.main.get_command(app)
    for name in ("evaluate", "correct"):
        options = {opt for param in command.commands[name].params for opt in param.opts}  # type: ignore[attr-defined]
        assert {"--hallucination-threshold", "--threshold"} <= options, name
