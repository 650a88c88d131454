"""GraphEvalMetric.evaluation_cost: the cost DeepEval's models return, or the tokens at the user's prices."""

from __future__ import annotations

import os
import re

os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")
os.environ.setdefault("DEEPEVAL_NO_INSPECT_PROMPT", "1")
os.environ.setdefault("DEEPEVAL_DISABLE_DOTENV", "1")

from collections.abc import Iterator  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402

pytest.importorskip("deepeval")

from deepeval import evaluate  # noqa: E402
from deepeval.evaluate.configs import DisplayConfig  # noqa: E402
from deepeval.models import DeepEvalBaseLLM  # noqa: E402
from deepeval.test_case import LLMTestCase  # noqa: E402
from pytest_socket import disable_socket, enable_socket  # noqa: E402
from test_usage import MeteredChatModel  # noqa: E402

from grapheval_plugins import registry  # noqa: E402
from grapheval_plugins.exceptions import InputError  # noqa: E402
from grapheval_plugins.integrations.deepeval import GraphEvalMetric  # noqa: E402
from grapheval_plugins.testing import KeywordScorer, ScriptedChatModel, keyword_support  # noqa: E402

FACTS = "Marie Curie was born in Warsaw. She won two Nobel Prizes."
GOOD = "Marie Curie was born in Warsaw."
BAD = "Marie Curie was born in Warsaw and won three Nobel Prizes."
CALL_COST = 0.00125


def answer(prompt: str) -> str:
    """Prompt A extracts; prompts B and C (GraphCorrect) answer with the fix."""
    if "<old_triple>" in prompt:
        return "<context>Marie Curie was born in Warsaw and won two Nobel Prizes.</context>"
    if "<triple>" in prompt:
        return '["Marie Curie", "won", "two Nobel Prizes"]'
    if "won three Nobel Prizes" in prompt:
        return '<python>[["Marie Curie", "born in", "Warsaw"], ["Marie Curie", "won", "three Nobel Prizes"]]</python>'
    if "won two Nobel Prizes" in prompt:
        return '<python>[["Marie Curie", "born in", "Warsaw"], ["Marie Curie", "won", "two Nobel Prizes"]]</python>'
    return '<python>[["Marie Curie", "born in", "Warsaw"]]</python>'


class NativeModel(DeepEvalBaseLLM):
    """Answers ``(text, cost)`` as DeepEval's own models do (``native=False``: the text alone, as custom ones)."""

    def __init__(self, native: bool = True) -> None:
        self.native = native
        self.prompts: list[str] = []
        super().__init__("native-fake")

    def load_model(self) -> NativeModel:
        return self

    def generate(self, prompt: str, *args: Any, **kwargs: Any) -> Any:
        self.prompts.append(prompt)
        return (answer(prompt), CALL_COST) if self.native else answer(prompt)

    async def a_generate(self, prompt: str, *args: Any, **kwargs: Any) -> Any:
        return self.generate(prompt)

    def get_model_name(self) -> str:
        return "native-fake"


def case(output: str, name: str = "") -> LLMTestCase:
    return LLMTestCase(input=name or "Tell me about Marie Curie.", actual_output=output, retrieval_context=[FACTS])


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    disable_socket(allow_unix_socket=True)
    monkeypatch.chdir(tmp_path)
    registry.clear_shared()
    yield
    registry.clear_shared()
    enable_socket()


def test_the_cost_deepevals_models_return_is_summed_per_test_case() -> None:
    model = NativeModel()
    metric = GraphEvalMetric(model=model, scorer=KeywordScorer())
    metric.measure(case(BAD), _show_indicator=False)
    assert metric.evaluation_cost == pytest.approx(CALL_COST)  # one extraction call
    result = evaluate([case(GOOD, "a"), case(BAD + " Twice.", "b")], [metric],
                      display_config=DisplayConfig(show_indicator=False, print_results=False))
    costs = [r.metrics_data[0].evaluation_cost for r in result.test_results]
    assert costs == pytest.approx([CALL_COST, CALL_COST])


def test_a_suggested_correction_adds_its_calls_to_the_cost() -> None:
    from grapheval_plugins.correct import GraphCorrect

    model = NativeModel()
    engine = GraphEvalMetric(model=model, scorer=KeywordScorer()).engine
    fixer = GraphCorrect(engine, strategy="paper", rouge=False)  # the paper's method: prompts B and C
    metric = GraphEvalMetric(model=model, scorer=KeywordScorer(), suggest_correction=fixer)
    metric.measure(case(BAD), _show_indicator=False)
    assert "suggested correction (passes the re-check)" in metric.reason
    assert len(model.prompts) >= 3  # extraction, correction, re-check
    assert metric.evaluation_cost == pytest.approx(CALL_COST * len(model.prompts))


def test_prices_price_the_tokens_of_a_model_that_reports_usage() -> None:
    llm = MeteredChatModel(respond=lambda messages: answer(str(messages[-1].content)))
    metric = GraphEvalMetric(llm=llm, scorer=KeywordScorer(), prices={"input": 2.0, "output": 8.0})
    metric.measure(case(BAD), _show_indicator=False)
    report_tokens = sum(len(str(m.content)) for m in llm.calls[0]), len(answer(str(llm.calls[0][-1].content)))
    assert metric.evaluation_cost == pytest.approx((report_tokens[0] * 2.0 + report_tokens[1] * 8.0) / 1e6)
    assert GraphEvalMetric(llm=llm, scorer=KeywordScorer()).evaluation_cost is None


@pytest.mark.parametrize("llm", [None, "text-only"])
def test_the_cost_is_none_when_neither_a_cost_nor_token_counts_are_known(llm: str | None) -> None:
    if llm is None:  # a LangChain model without usage_metadata, no prices
        metric = GraphEvalMetric(llm=ScriptedChatModel(respond=lambda m: answer(str(m[-1].content))),
                                 scorer=KeywordScorer(), prices={"input": 1.0, "output": 1.0})
    else:  # a custom DeepEval model returning text only: no cost, no tokens
        metric = GraphEvalMetric(model=NativeModel(native=False), scorer=KeywordScorer())
    metric.measure(case(BAD), _show_indicator=False)
    assert metric.evaluation_cost is None


def test_prices_are_checked() -> None:
    with pytest.raises(InputError, match="prices"):
        GraphEvalMetric(scorer=KeywordScorer(), prices={"input": 1.0})


class RawRefusingModel(NativeModel):
    """Has DeepEval's ``generate_raw_response`` but refuses it (as ``GPTModel`` does for a model without
    log-probabilities, or a model class without the method: ``AttributeError``); judges by keywords."""

    def __init__(self) -> None:
        self.raw_calls = 0
        super().__init__()

    def generate(self, prompt: str, *args: Any, **kwargs: Any) -> Any:
        if "\nClaims:\n" not in prompt:
            return super().generate(prompt)
        self.prompts.append(prompt)
        claims = re.findall(r"^(\d+)\. (.*)$", prompt.split("\nClaims:\n")[1].split("\n\n")[0], re.M)
        return "\n".join(f"{n}: {'supported 90' if keyword_support(FACTS, c) == 1.0 else 'unknown 20'}"
                         for n, c in claims), CALL_COST

    def generate_raw_response(self, prompt: str, top_logprobs: int = 5) -> Any:
        self.raw_calls += 1
        raise AttributeError("log_probs unsupported.")

    async def a_generate_raw_response(self, prompt: str, top_logprobs: int = 5) -> Any:
        return self.generate_raw_response(prompt, top_logprobs)


def test_a_deepeval_model_refusing_log_probabilities_judges_with_its_stated_probability() -> None:
    """The one model extracts and judges; its refused ``generate_raw_response`` is tried once, then plain answers."""
    model = RawRefusingModel()
    metric = GraphEvalMetric(model=model, rule="paper")
    assert metric.measure(case(BAD), _show_indicator=False) == pytest.approx(0.2)  # "unknown 20": P(supported)
    assert metric.measure(case(GOOD, "good"), _show_indicator=False) == pytest.approx(0.9)
    assert model.raw_calls == 1 and sum("\nClaims:\n" in p for p in model.prompts) == 2
