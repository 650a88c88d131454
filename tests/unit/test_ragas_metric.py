"""The Ragas adapter: the legacy metric in ragas.evaluate(), the collections metric, batching, the llm passthrough,
the failure conventions, the import pin and the example. Offline: sockets are disabled (tests/unit/conftest.py)."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import logging
import math
from pathlib import Path

import pytest

if importlib.util.find_spec("ragas") is None:  # the extra is not installed: nothing to test
    pytest.skip("ragas is not installed (extra 'ragas')", allow_module_level=True)

import openai  # noqa: E402
import ragas  # noqa: E402  (must import: a broken ragas / langchain-community pair fails here, not skips)
from ragas import EvaluationDataset, SingleTurnSample, aevaluate, evaluate  # noqa: E402
from ragas.llms import LangchainLLMWrapper, llm_factory  # noqa: E402
from ragas.metrics.result import MetricResult  # noqa: E402

import grapheval_plugins.models as models  # noqa: E402
from grapheval_plugins import GraphEval, InputError  # noqa: E402
from grapheval_plugins.check import Scorer  # noqa: E402
from grapheval_plugins.integrations.ragas import (  # noqa: E402
    GraphEvalFaithfulness,
    GraphEvalMetric,
    GraphEvalRagasMetric,
)
from grapheval_plugins.testing import KeywordScorer, ScriptedChatModel, naive_triples_chat_model  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FACTS = "Marie Curie was born in Warsaw. She won two Nobel Prizes."
GOOD = "Marie Curie was born in Warsaw."
BAD = "Marie Curie won three Nobel Prizes."
BOOM = "This answer breaks the extractor."
TRIPLES = {GOOD: [["Marie Curie", "born in", "Warsaw"]], BAD: [["Marie Curie", "won", "three Nobel Prizes"]]}
BAD_SCORE = 1 - (1 - 0.5 * 5 / 6)  # KeywordScorer: 5 of the 6 content words of the triple occur in FACTS
NAME = "grapheval_faithfulness"


def _respond(messages) -> str:
    text = str(messages[-1].content)
    for response, triples in TRIPLES.items():
        if response in text:
            return "<python>" + json.dumps(triples) + "</python>"
    if BOOM in text:
        raise RuntimeError("the chat model is down")
    raise AssertionError(f"unexpected extraction request: {text[-200:]!r}")


def chat() -> ScriptedChatModel:
    return ScriptedChatModel(respond=_respond)


def engine(**kwargs) -> GraphEval:
    kwargs.setdefault("llm", chat())
    kwargs.setdefault("scorer", KeywordScorer())
    return GraphEval(max_retries=0, **kwargs)


def sample(response=GOOD, contexts=(FACTS,), user_input="Tell me about Marie Curie.") -> SingleTurnSample:
    return SingleTurnSample(
        user_input=user_input, response=response, retrieved_contexts=None if contexts is None else list(contexts)
    )


def scores(result) -> list[float]:
    return [row[NAME] for row in result.scores]


def is_nan(x: float) -> bool:
    return isinstance(x, float) and math.isnan(x)


# --------------------------------------------------------------------------- the import trap
def test_ragas_imports_and_the_extra_pins_langchain_community_below_0_4_2() -> None:
    from importlib.metadata import version

    from packaging.requirements import Requirement

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    assert ragas.__version__.startswith("0.4.")
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["ragas"]
    reqs = {Requirement(r).name: Requirement(r) for r in extra}
    assert "ragas" in reqs and "langchain-community" in reqs
    community = reqs["langchain-community"].specifier
    assert not community.contains("0.4.2") and community.contains("0.4.1")
    assert community.contains(version("langchain-community"))  # this environment honours the pin


def test_package_exports_the_metrics_lazily() -> None:
    import grapheval_plugins

    assert grapheval_plugins._LAZY["GraphEvalFaithfulness"] == "grapheval_plugins.integrations.ragas"
    assert grapheval_plugins.GraphEvalFaithfulness is GraphEvalFaithfulness
    assert grapheval_plugins.GraphEvalRagasMetric is GraphEvalMetric is GraphEvalRagasMetric
    assert {"GraphEvalFaithfulness", "GraphEvalRagasMetric"} <= set(grapheval_plugins.__all__)


# --------------------------------------------------------------------------- legacy API in ragas.evaluate()
def test_evaluate_over_a_mixed_dataset_scores_good_rows_and_gives_nan_with_a_logged_reason_for_bad_ones(
    caplog: pytest.LogCaptureFixture,
) -> None:
    dataset = EvaluationDataset(
        samples=[
            sample(GOOD),
            sample(BAD),
            sample(""),  # no response
            sample(BAD, contexts=[]),  # no contexts
            sample(BAD, contexts=None),  # contexts missing
            sample(BOOM),  # extraction fails
            sample(GOOD, user_input=None),  # user_input is optional
        ]
    )
    caplog.set_level(logging.WARNING, logger="grapheval_plugins.integrations.ragas")
    result = evaluate(dataset, metrics=[GraphEvalFaithfulness(engine=engine())], show_progress=False)
    got = scores(result)
    assert got[0] == 1.0 and got[6] == 1.0
    assert got[1] == pytest.approx(BAD_SCORE)
    assert all(is_nan(x) for x in got[2:6])
    logged = caplog.text
    assert "response: is empty" in logged
    assert "retrieved_contexts: is empty" in logged
    assert "retrieved_contexts: is missing" in logged
    assert "extract" in logged and "the chat model is down" in logged
    mean = (1.0 + BAD_SCORE + 1.0) / 3  # Ragas's mean skips NaN
    assert repr(result) == f"{{'{NAME}': {mean:.4f}}}"
    # The legacy API returns floats only; each sample's reason is in Ragas's traces.
    trace = result.traces[1][NAME]["grapheval"]["output"]
    assert trace["report"]["hallucinated"] is True
    assert trace["unsupported"][0]["triple"] == ["Marie Curie", "won", "three Nobel Prizes"]
    assert "three Nobel Prizes" in trace["reason"]


async def test_aevaluate_with_the_binary_verdict() -> None:
    dataset = EvaluationDataset(samples=[sample(GOOD), sample(BAD), sample("")])
    metric = GraphEvalFaithfulness(engine=engine(), binary=True)
    result = await aevaluate(dataset, metrics=[metric], show_progress=False)
    got = scores(result)
    assert got[:2] == [1.0, 0.0] and is_nan(got[2])
    assert metric.output_type.name == "BINARY"


def test_a_metric_with_a_mode_is_still_one_column_named_after_the_metric() -> None:
    # ragas.evaluate() renames the column of any metric with a `mode` attribute to "<name>(mode=...)".
    metric = GraphEvalFaithfulness(scorer=KeywordScorer(), llm=chat(), check_mode="raw", name="ge_raw")
    result = evaluate(EvaluationDataset(samples=[sample(GOOD)]), metrics=[metric], show_progress=False)
    assert list(result.scores[0]) == ["ge_raw"]
    assert metric.current_engine().mode == "raw"


# --------------------------------------------------------------------------- batching, models loaded once
def test_evaluate_batches_the_scorer_across_samples() -> None:
    scorer = KeywordScorer()
    llm = naive_triples_chat_model()
    metric = GraphEvalFaithfulness(engine=GraphEval(llm=llm, scorer=scorer, batch_wait_s=0.5))
    n = 12
    dataset = EvaluationDataset(samples=[sample(f"Fact{i} is stated in sample {i}.") for i in range(n)])
    result = evaluate(dataset, metrics=[metric], show_progress=False)
    assert len(scores(result)) == n
    assert len(llm.calls) == n  # one extraction call per sample
    assert len(scorer.batches) == 1  # one scorer pass for the whole dataset
    assert sum(len(b) for b in scorer.batches) == n


def test_models_are_resolved_once_across_samples_runs_and_copies(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[tuple[str, object]] = []

    def fake_llm(spec=None, **_):
        made.append(("llm", spec))
        return chat()

    def fake_scorer(spec=None, **_):
        made.append(("scorer", spec))
        return KeywordScorer()

    monkeypatch.setattr(models, "resolve_llm", fake_llm)
    monkeypatch.setattr(models, "resolve_scorer", fake_scorer)
    metric = GraphEvalFaithfulness(llm="fake:llm", scorer="fake:scorer")
    assert made == []  # nothing loads at construction
    dataset = EvaluationDataset(samples=[sample(GOOD), sample(BAD), sample(GOOD + " Again."), sample(BAD + " Again.")])
    evaluate(dataset, metrics=[metric], show_progress=False)
    evaluate(dataset, metrics=[metric], show_progress=False)
    copy = dataclasses.replace(metric, binary=True)  # a copy shares the engines
    assert scores(evaluate(dataset, metrics=[copy], show_progress=False))[:2] == [1.0, 0.0]
    assert made == [("llm", "fake:llm"), ("scorer", "fake:scorer")]
    other = dataclasses.replace(metric, scorer="fake:other")  # other settings: its own engine
    evaluate(EvaluationDataset(samples=[sample(GOOD)]), metrics=[other], show_progress=False)
    assert made[2:] == [("llm", "fake:llm"), ("scorer", "fake:other")]


# --------------------------------------------------------------------------- the metric's own models, not evaluate()'s
def test_the_legacy_metric_is_a_plain_single_turn_metric_without_frame_reading() -> None:
    import inspect

    from ragas.metrics.base import MetricWithLLM, SingleTurnMetric

    import grapheval_plugins.integrations.ragas as adapter

    metric = GraphEvalFaithfulness(scorer=KeywordScorer())
    assert isinstance(metric, SingleTurnMetric) and not isinstance(metric, MetricWithLLM)
    assert "_getframe" not in inspect.getsource(adapter)


def test_the_metric_extracts_with_its_own_llm_and_the_evaluate_llm_does_not_reach_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    resolved: list[object] = []
    def fake_scorer(spec=None, **_):
        if isinstance(spec, Scorer):  # as resolve_scorer: a scorer object is used as is
            return spec
        resolved.append(spec)
        return KeywordScorer()

    monkeypatch.setattr(models, "resolve_scorer", fake_scorer)
    own, other = chat(), chat()
    metric = GraphEvalFaithfulness(llm=own, scorer="fake:scorer")
    dataset = EvaluationDataset(samples=[sample(GOOD), sample(BAD)])
    assert scores(evaluate(dataset, metrics=[metric], llm=other, show_progress=False)) == [1.0, pytest.approx(BAD_SCORE)]
    assert len(own.calls) == 2 and other.calls == []
    assert metric.llm is own  # evaluate() leaves the metric as it was
    wrapped = chat()  # a Ragas wrapper given to the metric is unwrapped
    other_metric = GraphEvalFaithfulness(llm=LangchainLLMWrapper(wrapped), scorer="fake:scorer")
    evaluate(dataset, metrics=[other_metric], show_progress=False)
    assert len(wrapped.calls) == 2
    assert resolved == ["fake:scorer"]  # one scorer for both extraction models


def test_a_metric_with_its_own_engine_ignores_the_evaluate_llm() -> None:
    own, other = chat(), chat()
    metric = GraphEvalFaithfulness(engine=engine(llm=own))
    evaluate(EvaluationDataset(samples=[sample(GOOD)]), metrics=[metric], llm=other, show_progress=False)
    assert len(own.calls) == 1 and other.calls == []
    third = chat()  # a copy given another engine uses that one
    copy = dataclasses.replace(metric, engine=engine(llm=third))
    evaluate(EvaluationDataset(samples=[sample(BAD)]), metrics=[copy], llm=other, show_progress=False)
    assert len(third.calls) == 1 and len(own.calls) == 1 and other.calls == []


def test_evaluate_builds_no_openai_model_for_the_metric(monkeypatch: pytest.MonkeyPatch) -> None:
    specs: list[object] = []
    monkeypatch.setattr(models, "resolve_llm", lambda spec=None, **_: specs.append(spec) or chat())
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    metric = GraphEvalFaithfulness(scorer=KeywordScorer())
    dataset = EvaluationDataset(samples=[sample(GOOD), sample(BAD)])
    # Ragas builds its OpenAI default only for LLM metrics without a model: without a key, that would fail here.
    assert scores(evaluate(dataset, metrics=[metric], show_progress=False)) == [1.0, pytest.approx(BAD_SCORE)]
    assert specs == [None]  # None = grapheval_plugins.models.DEFAULT_LLM, the offline local model
    # An Instructor LLM given explicitly is the caller's choice: accepted (its structured output fills the triples;
    # see test_host_models.py), and no request is made before a sample is scored.
    instructor = llm_factory("gpt-4o-mini", client=openai.OpenAI(api_key="sk-not-a-real-key"))
    assert GraphEvalFaithfulness(llm=instructor, scorer=KeywordScorer()).current_engine().describe(load=False) == (
        "ragas:gpt-4o-mini + keyword-overlap"
    )
    assert GraphEvalMetric(llm=instructor).extraction_llm is instructor


def test_outside_evaluate_a_bare_metric_uses_the_engine_default_not_a_paid_api(monkeypatch: pytest.MonkeyPatch) -> None:
    specs: list[object] = []
    monkeypatch.setattr(models, "resolve_llm", lambda spec=None, **_: specs.append(spec) or chat())
    metric = GraphEvalFaithfulness(scorer=KeywordScorer())
    assert metric.single_turn_score(sample(BAD)) == pytest.approx(BAD_SCORE)
    assert specs == [None]  # None = grapheval_plugins.models.DEFAULT_LLM, the offline local model


def test_configuration_errors_are_clear() -> None:
    e = engine()
    with pytest.raises(InputError, match="not both"):
        GraphEvalFaithfulness(engine=e, llm=chat())
    with pytest.raises(InputError, match="not both"):
        GraphEvalFaithfulness(engine=e, scorer=KeywordScorer())
    with pytest.raises(InputError, match="engine's mode"):
        GraphEvalFaithfulness(engine=e, check_mode="raw")
    with pytest.raises(InputError, match="threshold"):
        GraphEvalFaithfulness(threshold=1.5)
    with pytest.raises(InputError, match="binary"):
        GraphEvalFaithfulness(binary="yes")
    with pytest.raises(InputError, match="engine"):
        GraphEvalFaithfulness(engine="local:qwen2.5-coder-0.5b")
    with pytest.raises(TypeError, match="positional"):
        GraphEvalFaithfulness(e)  # type: ignore[misc]
    with pytest.raises(TypeError, match="engine=GraphEval"):
        GraphEvalFaithfulness(llm=e)
    with pytest.raises(InputError, match="not both"):
        GraphEvalMetric(e, llm=chat())
    with pytest.raises(InputError, match="not both"):
        GraphEvalMetric(e, hallucination_threshold=0.7, threshold=0.6)


# --------------------------------------------------------------------------- new API: ragas.metrics.collections
def test_collections_metric_returns_the_unsupported_triples_in_the_reason() -> None:
    metric = GraphEvalMetric(engine())
    result = metric.score(response=BAD, retrieved_contexts=[FACTS], user_input="Prizes?")
    assert isinstance(result, MetricResult)
    assert result.value == pytest.approx(BAD_SCORE)
    assert "['Marie Curie', 'won', 'three Nobel Prizes']" in result.reason
    assert result.reason.startswith("hallucination")
    assert result.traces["output"]["hallucinated"] is True
    assert metric.score(response=GOOD, retrieved_contexts=FACTS).value == 1.0  # a plain string context works too
    binary = GraphEvalMetric(engine(), binary=True)
    assert binary.score(response=BAD, retrieved_contexts=[FACTS]).value == 0.0
    # Ragas reserves `llm` for its own LLM type: the extraction model lives elsewhere.
    assert not hasattr(GraphEvalMetric(llm=chat()), "llm")


async def test_collections_ascore_accepts_a_sample_dump_and_rejects_unknown_keywords() -> None:
    metric = GraphEvalMetric(engine())
    result = await metric.ascore(**sample(GOOD).model_dump())
    assert result.value == 1.0
    with pytest.raises(TypeError, match="retrieved_context"):
        await metric.ascore(response=GOOD, retrieved_context=[FACTS])


def test_collections_batch_score_is_one_engine_batch_and_bad_rows_get_nan_with_a_reason(
    caplog: pytest.LogCaptureFixture,
) -> None:
    scorer = KeywordScorer()
    metric = GraphEvalMetric(engine(scorer=scorer))
    rows = [
        {"response": GOOD, "retrieved_contexts": [FACTS]},
        {"response": BAD, "retrieved_contexts": [FACTS], "user_input": "q", "reference": "ignored"},
        {"response": None, "retrieved_contexts": [FACTS]},
        {"response": BAD},
        "not a dict",
        {"response": BAD, "retrieved_contexts": [FACTS], "bogus": 1},
        {"response": BOOM, "retrieved_contexts": [FACTS]},
        {"response": GOOD + " Again.", "retrieved_contexts": ["Marie Curie was born in Warsaw. Again."]},
    ]
    caplog.set_level(logging.WARNING, logger="grapheval_plugins.integrations.ragas")
    results = metric.batch_score(rows)
    values = [r.value for r in results]
    assert values[0] == 1.0 and values[1] == pytest.approx(BAD_SCORE) and values[7] == 1.0
    assert all(is_nan(v) for v in values[2:7])
    assert "response: is missing" in results[2].reason
    assert "retrieved_contexts: is missing" in results[3].reason
    assert "expected a dict" in results[4].reason
    assert "bogus" in results[5].reason
    assert results[6].reason.startswith("error: extract") and "the chat model is down" in results[6].reason
    assert len(scorer.batches) == 1 and sum(len(b) for b in scorer.batches) == 3
    assert caplog.text.count("NaN for a sample") == 5


async def test_collections_abatch_score_keeps_input_order() -> None:
    metric = GraphEvalMetric(engine())
    rows = [{"response": r, "retrieved_contexts": [FACTS]} for r in (BAD, GOOD, BAD)]
    values = [r.value for r in await metric.abatch_score(rows)]
    assert values == [pytest.approx(BAD_SCORE), 1.0, pytest.approx(BAD_SCORE)]


def test_collections_metric_unwraps_ragas_langchain_wrapper_and_is_not_accepted_by_evaluate() -> None:
    llm = chat()
    metric = GraphEvalMetric(llm=LangchainLLMWrapper(llm), scorer=KeywordScorer())
    assert metric.score(response=BAD, retrieved_contexts=[FACTS]).value == pytest.approx(BAD_SCORE)
    assert len(llm.calls) == 1
    with pytest.raises(TypeError):  # Ragas's evaluate() takes legacy metrics only
        evaluate(EvaluationDataset(samples=[sample(GOOD)]), metrics=[metric], show_progress=False)


# --------------------------------------------------------------------------- the example
def test_example_runs_offline_and_prints_ragas_result_table(capsys: pytest.CaptureFixture[str]) -> None:
    from repo_scripts import load_script

    module = load_script("examples/ragas/evaluate_dataset.py", "ragas_example")
    result = module.main([
        "--rows", "4", "--no-progress",
        "--llm", "py:grapheval_plugins.testing:naive_triples_chat_model",
        "--scorer", "py:grapheval_plugins.testing:KeywordScorer",
    ])
    got = scores(result)
    assert len(got) == 4 and got[0] == 1.0 and got[1] < 0.5  # eiffel-ok, eiffel-bad
    out = capsys.readouterr().out
    assert "{'grapheval_faithfulness':" in out
    for row_id in ("eiffel-ok", "eiffel-bad", "austen-bad", "mitochondria-ok"):
        assert row_id in out
    assert "hallucination (score" in out
