"""One model, every stage: given a model and no scorer, every host extracts, judges and corrects with that one model
(models.scorer_for), and no local model is loaded; the offline local pair only when no model is given at all."""

from __future__ import annotations

import re
from typing import Any

import pytest

from grapheval_plugins import GraphEval, models
from grapheval_plugins.check.llm_judge import LLMJudge
from grapheval_plugins.messages import message_text
from grapheval_plugins.testing import KeywordScorer, ScriptedChatModel

CONTEXT = "Marie Curie was born in Warsaw. She won two Nobel Prizes."
OUTPUT = "Marie Curie, born in Warsaw, won three Nobel Prizes."
TRIPLES = '<python>[["Marie Curie", "born in", "Warsaw"], ["Marie Curie", "won", "three Nobel Prizes"]]</python>'
_CLAIM = re.compile(r"^(\d+)\. (.*)$", re.MULTILINE)


def answer(prompt: str) -> str:
    """One model's answers to every stage: the judge's numbered claims, the correction prompts, extraction."""
    if "fact-checker" in prompt:
        claims = _CLAIM.findall(prompt.split("Claims:", 1)[1])
        return "\n".join(f"{n}: contradicted 5" if "three" in claim else f"{n}: supported 95" for n, claim in claims)
    if "<old_triple>" in prompt:
        return "<context>Marie Curie won two Nobel Prizes.</context>"
    if "<triple>" in prompt:
        return '["Marie Curie", "won", "two Nobel Prizes"]'
    if "two Nobel" in prompt.rsplit("Context", 1)[-1] and "three" not in prompt.rsplit("Context", 1)[-1]:
        return '<python>[["Marie Curie", "won", "two Nobel Prizes"]]</python>'
    return TRIPLES


def stages(prompts: list[str]) -> set[str]:
    return {"judge" if "fact-checker" in p else "extract" for p in prompts}


def one_model() -> ScriptedChatModel:
    return ScriptedChatModel(respond=lambda messages: answer("\n".join(message_text(m) for m in messages)))


def prompts_of(llm: ScriptedChatModel) -> list[str]:
    return ["\n".join(message_text(m) for m in call) for call in llm.calls]


@pytest.fixture(autouse=True)
def no_local_models(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading a local model (chat or judge) fails the test."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"a local model was loaded: {args!r}")

    monkeypatch.setattr("grapheval_plugins.local.judge.load_judge_scorer", refuse)
    monkeypatch.setattr("grapheval_plugins.local.chat.load_local_chat_model", refuse)
    monkeypatch.setitem(models._LLM_FACTORIES, "local", f"{__name__}:_refuse_local")


def _refuse_local(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError(f"a local chat model was loaded: {args!r}")


def check_report(report: Any) -> None:
    assert report.ok, report.errors
    assert report.hallucinated
    assert [c.triple.as_list() for c in report.unsupported] == [["Marie Curie", "won", "three Nobel Prizes"]]


# --------------------------------------------------------------------------- the rule
def test_the_rule_in_one_function() -> None:
    llm = one_model()
    assert models.scorer_for(None, None) == models.DEFAULT_SCORER
    assert models.scorer_for("bedrock:anthropic.claude-3-haiku", None) == "judge:bedrock:anthropic.claude-3-haiku"
    assert models.scorer_for(llm, None) is llm
    assert models.scorer_for(llm, "hhem") == "hhem"


def test_no_model_at_all_is_the_offline_local_pair() -> None:
    assert GraphEval().describe(load=False) == "local:qwen2.5-coder-1.5b + judge:local:qwen2.5-coder-1.5b"
    assert GraphEval(mode="raw").describe(load=False) == "raw + judge:local:qwen2.5-coder-1.5b"


def test_a_model_spec_alone_judges_too() -> None:
    engine = GraphEval(llm="openai:gpt-4o-mini")
    assert engine.describe(load=False) == "openai:gpt-4o-mini + judge:openai:gpt-4o-mini"
    assert GraphEval(llm="openai:gpt-4o-mini", scorer="hhem").describe(load=False) == "openai:gpt-4o-mini + hhem"


def test_graph_eval_given_one_model_extracts_judges_and_corrects_with_it() -> None:
    from grapheval_plugins.correct import GraphCorrect

    llm = one_model()
    engine = GraphEval(llm=llm)
    assert isinstance(engine.scorer, LLMJudge) and engine.scorer.llm is llm
    assert engine.describe(load=False) == "scripted + judge:scripted"
    check_report(engine.evaluate(context=CONTEXT, output=OUTPUT))
    assert stages(prompts_of(llm)) == {"extract", "judge"}
    before = len(llm.calls)
    result = GraphCorrect(engine, rouge=False, strategy="paper").correct(context=CONTEXT, output=OUTPUT)
    assert "two Nobel Prizes" in result.corrected and "three" not in result.corrected
    assert len(llm.calls) > before  # the corrections (and their re-check) asked the same model


def test_raw_mode_judges_with_the_given_model() -> None:
    llm = one_model()
    report = GraphEval(llm=llm, mode="raw").evaluate(context=CONTEXT, output=OUTPUT)
    assert report.ok and report.hallucinated
    assert stages(prompts_of(llm)) == {"judge"}


def test_an_explicit_scorer_stays_one_argument_away() -> None:
    llm = one_model()
    engine = GraphEval(llm=llm, scorer=KeywordScorer())
    engine.evaluate(context=CONTEXT, output=OUTPUT)
    assert stages(prompts_of(llm)) == {"extract"}


def test_shared_engines_over_one_model_spec_and_over_the_local_judge_are_distinct() -> None:
    judged = GraphEval.shared("openai:gpt-4o-mini")
    local = GraphEval.shared("openai:gpt-4o-mini", models.DEFAULT_SCORER)
    assert judged is not local
    assert judged is GraphEval.shared("openai:gpt-4o-mini", "judge:openai:gpt-4o-mini")


# --------------------------------------------------------------------------- the hosts
def test_langchain_runnable_given_one_model() -> None:
    from grapheval_plugins.integrations.langchain import GraphEvalRunnable

    llm = one_model()
    out = GraphEvalRunnable(llm=llm).invoke({"context": CONTEXT, "answer": OUTPUT})
    check_report(out["grapheval"])
    assert stages(prompts_of(llm)) == {"extract", "judge"}


def _deepeval_model() -> Any:
    from deepeval.models import DeepEvalBaseLLM

    class OneDeepEvalModel(DeepEvalBaseLLM):
        def __init__(self) -> None:
            self.prompts: list[str] = []
            super().__init__("one-deepeval-model")

        def load_model(self, *args: Any, **kwargs: Any) -> Any:
            return self

        def generate(self, prompt: str, *args: Any, **kwargs: Any) -> tuple[str, float]:
            self.prompts.append(prompt)
            return answer(prompt), 0.0  # DeepEval's own models answer (text, cost)

        async def a_generate(self, prompt: str, *args: Any, **kwargs: Any) -> tuple[str, float]:
            return self.generate(prompt)

        def get_model_name(self, *args: Any, **kwargs: Any) -> str:
            return "one-deepeval-model"

    return OneDeepEvalModel()


def test_deepeval_metric_given_a_deepeval_model_uses_it_for_every_stage() -> None:
    from deepeval.test_case import LLMTestCase

    from grapheval_plugins.integrations.deepeval import GraphEvalMetric

    model = _deepeval_model()
    metric = GraphEvalMetric(model=model)
    assert metric.evaluation_model == "deepeval:one-deepeval-model + judge:deepeval:one-deepeval-model"
    score = metric.measure(LLMTestCase(input="q", actual_output=OUTPUT, context=[CONTEXT]))
    assert score < 0.5 and metric.success is False
    assert stages(model.prompts) == {"extract", "judge"}


def test_deepeval_metric_takes_a_deepeval_model_as_its_judge() -> None:
    from deepeval.test_case import LLMTestCase

    from grapheval_plugins.integrations.deepeval import GraphEvalMetric

    model, llm = _deepeval_model(), one_model()
    metric = GraphEvalMetric(llm=llm, scorer=model)
    metric.measure(LLMTestCase(input="q", actual_output=OUTPUT, context=[CONTEXT]))
    assert stages(prompts_of(llm)) == {"extract"} and stages(model.prompts) == {"judge"}


def test_deepeval_metric_given_a_chat_model_judges_with_it() -> None:
    from deepeval.test_case import LLMTestCase

    from grapheval_plugins.integrations.deepeval import GraphEvalMetric

    llm = one_model()
    GraphEvalMetric(llm=llm).measure(LLMTestCase(input="q", actual_output=OUTPUT, retrieval_context=[CONTEXT]))
    assert stages(prompts_of(llm)) == {"extract", "judge"}


@pytest.fixture
def ragas_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGAS_DO_NOT_TRACK", "true")


def test_ragas_metrics_given_one_model(ragas_env: None) -> None:
    from ragas import SingleTurnSample
    from ragas.llms import LangchainLLMWrapper

    from grapheval_plugins.integrations.ragas import GraphEvalFaithfulness, GraphEvalRagasMetric

    llm = one_model()
    value = GraphEvalFaithfulness(llm=llm).single_turn_score(
        SingleTurnSample(response=OUTPUT, retrieved_contexts=[CONTEXT]))
    assert value < 0.5
    assert stages(prompts_of(llm)) == {"extract", "judge"}
    wrapped = one_model()
    result = GraphEvalRagasMetric(llm=LangchainLLMWrapper(wrapped)).score(response=OUTPUT, retrieved_contexts=[CONTEXT])
    assert result.value < 0.5
    assert stages(prompts_of(wrapped)) == {"extract", "judge"}


def test_ragas_evaluate_llm_reaches_the_metric_that_takes_it(ragas_env: None) -> None:
    from ragas import EvaluationDataset, SingleTurnSample, evaluate

    from grapheval_plugins.integrations.ragas import GraphEvalFaithfulnessWithLLM

    llm = one_model()
    dataset = EvaluationDataset(samples=[SingleTurnSample(response=OUTPUT, retrieved_contexts=[CONTEXT])])
    metric = GraphEvalFaithfulnessWithLLM()
    result = evaluate(dataset, metrics=[metric], llm=llm, show_progress=False, raise_exceptions=True)
    assert result.to_pandas()[metric.name].tolist()[0] < 0.5
    assert stages(prompts_of(llm)) == {"extract", "judge"}
    assert metric.llm is None  # Ragas hands it back after the run


# --------------------------------------------------------------------------- the CLI and Ray
SINGLETON = one_model()


def singleton() -> ScriptedChatModel:
    return SINGLETON


def test_cli_llm_alone_judges_with_that_model(tmp_path: Any) -> None:
    import json

    from typer.testing import CliRunner

    from grapheval_plugins.cli import app

    SINGLETON.calls.clear()
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"id": "a", "context": CONTEXT, "output": OUTPUT}) + "\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(app, ["evaluate", str(rows), "-o", str(out), "--llm", f"py:{__name__}:singleton"])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text(encoding="utf-8").splitlines()[0])
    assert report["scorer"] == "judge:scripted" and report["hallucinated"] is True
    assert stages(prompts_of(SINGLETON)) == {"extract", "judge"}


def test_ray_engine_spec_scorer_follows_the_rule() -> None:
    from grapheval_plugins.integrations.ray import EngineSpec

    judge = EngineSpec(llm=singleton).build_scorer()
    assert isinstance(judge, LLMJudge) and judge.llm is SINGLETON
    assert isinstance(EngineSpec(llm=singleton, scorer=KeywordScorer()).build_scorer(), KeywordScorer)


def test_a_structured_output_model_extracts_and_judges_through_its_two_schemas() -> None:
    """A model that answers through a fixed schema (Ragas's Instructor LLMs) fills the triples to extract and the
    verdicts to judge: the judge's prompt is never forced into the triples' schema."""
    from grapheval_plugins.integrations.host_models import (
        JudgeAnswer,
        KnowledgeGraphAnswer,
        StructuredTriplesChatModel,
    )

    asked: list[str] = []

    async def structured(prompt: str, response_model: Any) -> Any:
        asked.append(response_model.__name__)
        if response_model is KnowledgeGraphAnswer:
            return response_model.model_validate({"triples": [["Marie Curie", "born in", "Vienna"]]}, strict=True)
        # what a small model writes in JSON mode, following the prompt's "<n>: <label> <0-100>" lines; Instructor
        # validates strictly
        return response_model.model_validate({"1": "contradicted", "probability 0-100": "5"}, strict=True)

    model = StructuredTriplesChatModel(acomplete=structured, label="instructor")
    assert models.scorer_for(model).response_model is JudgeAnswer
    assert models.scorer_for(model) is models.scorer_for(model)  # one judging form per model: engines share it
    report = GraphEval(llm=model, rule="paper").evaluate(CONTEXT, "Marie Curie was born in Vienna.")

    assert not report.errors, report.errors
    assert report.hallucinated is True
    assert report.claims[0].p_unsupported == pytest.approx(0.95)
    assert set(asked) == {"KnowledgeGraphAnswer", "JudgeAnswer"}
