"""The hosts' own model objects as extraction models: DeepEval's ``model=`` (a ``DeepEvalBaseLLM`` or a name DeepEval
resolves) and Ragas's LLMs (``LangchainLLMWrapper``, Instructor LLMs from ``llm_factory`` with structured output,
other ``BaseRagasLLM``). Real host classes; the provider behind them is scripted (no network)."""

from __future__ import annotations

import json
import os
import re
from typing import Any

import pytest

os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")
os.environ.setdefault("DEEPEVAL_NO_INSPECT_PROMPT", "1")
os.environ.setdefault("DEEPEVAL_DISABLE_DOTENV", "1")

from langchain_core.messages import AIMessage, HumanMessage  # noqa: E402

from grapheval_plugins import GraphEval, InputError  # noqa: E402
from grapheval_plugins.extract.prompts import KG_PROMPT  # noqa: E402
from grapheval_plugins.integrations.host_models import (  # noqa: E402
    KnowledgeGraphAnswer,
    PromptChatModel,
    StructuredTriplesChatModel,
    render_prompt,
)
from grapheval_plugins.testing import KeywordScorer  # noqa: E402

FACTS = "Marie Curie was born in Warsaw. She won two Nobel Prizes."
GOOD = "Marie Curie was born in Warsaw."
BAD = "Marie Curie won three Nobel Prizes."
TRIPLES = {GOOD: [["Marie Curie", "born in", "Warsaw"]], BAD: [["Marie Curie", "won", "three Nobel Prizes"]]}
BAD_SCORE = 0.5 * 5 / 6  # KeywordScorer: 5 of the 6 content words of the triple occur in FACTS


def triples_for(prompt: str) -> list[list[str]]:
    for output, triples in TRIPLES.items():
        if output in prompt:
            return triples
    raise AssertionError(f"unexpected prompt: {prompt[-200:]!r}")


# --------------------------------------------------------------------------- the two chat models
def test_render_prompt_keeps_prompt_a_and_quotes_a_previous_answer_on_retry() -> None:
    messages = [*KG_PROMPT.messages(GOOD), AIMessage("[oops"), HumanMessage("Answer again in <python> tags.")]
    prompt = render_prompt(messages)
    assert GOOD in prompt and "Your previous answer was:\n[oops" in prompt
    assert prompt.endswith("Answer again in <python> tags.")
    assert prompt.index(str(messages[0].content)[:40]) == 0  # the system text comes first


async def test_prompt_chat_model_works_sync_and_async_from_either_function() -> None:
    only_sync = PromptChatModel(complete=lambda p: "sync:" + p[-3:], label="s")
    assert (await only_sync.ainvoke("abc")).content == "sync:abc"

    async def agen(prompt: str) -> str:
        return "async:" + prompt[-3:]

    only_async = PromptChatModel(acomplete=agen, label="a")
    assert (await only_async.ainvoke("abc")).content == "async:abc"
    assert only_async.model_label == "a"


def test_structured_answers_become_the_parsers_format() -> None:
    answer = KnowledgeGraphAnswer.model_validate({"triples": [{"subject": "A", "relation": "r", "object": "B"}]})
    assert answer.as_answer() == '<python>[["A", "r", "B"]]</python>'
    llm = StructuredTriplesChatModel(complete=lambda prompt, model: model(triples=[]), label="empty")
    report = GraphEval(llm=llm, scorer=KeywordScorer(), max_retries=1).evaluate(FACTS, GOOD)
    assert report.extraction is not None and report.extraction.fallback  # an empty graph: the whole output checked
    assert report.extraction.attempts == 2 and report.ok


def test_structured_triples_as_lists_are_read() -> None:
    """A model in JSON mode that writes each triple as prompt A's list of three strings (the 0.5B behind an
    OpenAI-compatible server, through Ragas's llm_factory) is not rejected."""
    answer = KnowledgeGraphAnswer.model_validate_json('{"triples": [["Eiffel Tower", "stands in", "Rome"]]}')
    assert answer.as_answer() == '<python>[["Eiffel Tower", "stands in", "Rome"]]</python>'
    with pytest.raises(ValueError):
        KnowledgeGraphAnswer.model_validate({"triples": [["only", "two"]]})


# --------------------------------------------------------------------------- DeepEval's model=
deepeval = pytest.importorskip("deepeval")

from deepeval.metrics.utils import copy_metrics  # noqa: E402
from deepeval.models import DeepEvalBaseLLM  # noqa: E402
from deepeval.test_case import LLMTestCase  # noqa: E402

from grapheval_plugins.integrations.deepeval import GraphEvalMetric, deepeval_chat_model  # noqa: E402


class ScriptedDeepEvalLLM(DeepEvalBaseLLM):
    """A DeepEval custom model answering prompt A from a script (``native``: answers ``(text, cost)`` as DeepEval's
    own models do)."""

    def __init__(self, native: bool = False) -> None:
        self.prompts: list[str] = []
        self.native = native
        super().__init__("scripted-deepeval")

    def load_model(self) -> ScriptedDeepEvalLLM:
        return self

    def generate(self, prompt: str, *args: Any, **kwargs: Any) -> Any:
        self.prompts.append(prompt)
        text = "<python>" + json.dumps(triples_for(prompt)) + "</python>"
        return (text, 0.0) if self.native else text

    async def a_generate(self, prompt: str, *args: Any, **kwargs: Any) -> Any:
        return self.generate(prompt)

    def get_model_name(self) -> str:
        return "scripted-deepeval"


def case(output: str) -> LLMTestCase:
    return LLMTestCase(input="Tell me about Marie Curie.", actual_output=output, retrieval_context=[FACTS])


@pytest.mark.parametrize("native", [False, True])
def test_a_deepeval_model_extracts_the_triples(native: bool) -> None:
    model = ScriptedDeepEvalLLM(native=native)
    metric = GraphEvalMetric(model=model, scorer=KeywordScorer())
    assert metric.evaluation_model == "deepeval:scripted-deepeval + keyword-overlap"
    assert metric.measure(case(BAD), _show_indicator=False) == pytest.approx(BAD_SCORE)
    assert "three Nobel Prizes" in metric.reason and metric.success is False
    assert metric.measure(case(GOOD), _show_indicator=False) == 1.0
    assert len(model.prompts) == 2 and BAD in model.prompts[0]
    assert KG_PROMPT.system[:40] in model.prompts[0]  # prompt A, rendered as text
    (copy,) = copy_metrics([metric])  # DeepEval's per-test-case copy: the same model, adapter and engine
    assert copy.model is model and copy.engine is metric.engine


def test_a_deepeval_model_name_is_resolved_by_deepeval_once_on_first_use(monkeypatch: pytest.MonkeyPatch) -> None:
    import deepeval.metrics.utils as deepeval_utils

    resolved: list[str] = []
    model = ScriptedDeepEvalLLM(native=True)

    def initialize_model(name: Any = None, eval_mode: Any = None) -> tuple[Any, bool]:
        resolved.append(name)
        return model, True

    monkeypatch.setattr(deepeval_utils, "initialize_model", initialize_model)
    metric = GraphEvalMetric(model="gpt-4o-mini", scorer=KeywordScorer())
    (copy,) = copy_metrics([metric])
    assert resolved == [] and metric.evaluation_model == "deepeval:gpt-4o-mini + keyword-overlap"
    assert copy.engine is metric.engine
    metric.measure(case(GOOD), _show_indicator=False)
    copy.measure(case(BAD), _show_indicator=False)
    assert resolved == ["gpt-4o-mini"] and len(model.prompts) == 2


def test_deepeval_model_errors_are_clear() -> None:
    with pytest.raises(InputError, match="DeepEvalBaseLLM") as info:
        GraphEvalMetric(model=object())
    assert info.value.field == "model"
    with pytest.raises(InputError, match="either model="):
        GraphEvalMetric(model="gpt-4o", llm="local:x")
    with pytest.raises(InputError, match="grapheval= or model="):
        GraphEvalMetric(model="gpt-4o", grapheval=GraphEval())
    assert deepeval_chat_model("gpt-4o") is deepeval_chat_model("gpt-4o")


# --------------------------------------------------------------------------- Ragas's LLMs
ragas = pytest.importorskip("ragas")

import httpx  # noqa: E402
import openai  # noqa: E402
from langchain_core.language_models import FakeListChatModel  # noqa: E402
from langchain_core.outputs import Generation, LLMResult  # noqa: E402
from ragas import EvaluationDataset, SingleTurnSample, evaluate  # noqa: E402
from ragas.llms import LangchainLLMWrapper, llm_factory  # noqa: E402
from ragas.llms.base import BaseRagasLLM  # noqa: E402

from grapheval_plugins.integrations.ragas import (  # noqa: E402
    GraphEvalFaithfulness,
    GraphEvalRagasMetric,
    ragas_chat_model,
)


def sample(response: str) -> SingleTurnSample:
    return SingleTurnSample(user_input="Tell me about Marie Curie.", response=response, retrieved_contexts=[FACTS])


class FakeProvider:
    """An OpenAI-compatible chat-completions endpoint behind ``httpx.MockTransport``: answers with the JSON object
    Instructor asks for and records every request."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        prompt = "\n".join(str(m.get("content", "")) for m in body["messages"])
        triples = [{"subject": s, "relation": r, "object": o} for s, r, o in triples_for(prompt)]
        return httpx.Response(200, json={
            "id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": json.dumps({"triples": triples})}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
        })


def instructor_llm(provider: FakeProvider, asynchronous: bool) -> Any:
    transport = httpx.MockTransport(provider)
    if asynchronous:
        client: Any = openai.AsyncOpenAI(api_key="sk-test", base_url="http://llm.test/v1",
                                         http_client=httpx.AsyncClient(transport=transport))
    else:
        client = openai.OpenAI(api_key="sk-test", base_url="http://llm.test/v1",
                               http_client=httpx.Client(transport=transport))
    return llm_factory("gpt-4o-mini", client=client)


@pytest.mark.parametrize("asynchronous", [False, True])
def test_an_instructor_llm_fills_the_triples_with_structured_output(asynchronous: bool) -> None:
    provider = FakeProvider()
    llm = instructor_llm(provider, asynchronous)
    metric = GraphEvalFaithfulness(llm=llm, scorer=KeywordScorer())
    assert metric.single_turn_score(sample(BAD)) == pytest.approx(BAD_SCORE)
    assert metric.single_turn_score(sample(GOOD)) == 1.0
    assert len(provider.requests) == 2 and provider.requests[0]["model"] == "gpt-4o-mini"
    assert BAD in json.dumps(provider.requests[0]["messages"])
    report = metric.current_engine().evaluate(FACTS, BAD)  # cached: no third request
    assert report.llm == "ragas:gpt-4o-mini" and report.extraction is not None and report.extraction.cached
    assert len(provider.requests) == 2
    collections = GraphEvalRagasMetric(llm=llm, scorer=KeywordScorer())
    assert collections.score(response=BAD, retrieved_contexts=[FACTS]).value == pytest.approx(BAD_SCORE)


def test_an_instructor_llm_given_to_the_metric_is_used_in_evaluate() -> None:
    provider = FakeProvider()
    llm = instructor_llm(provider, True)
    metric = GraphEvalFaithfulness(llm=llm, scorer=KeywordScorer())
    dataset = EvaluationDataset(samples=[sample(GOOD), sample(BAD)])
    result = evaluate(dataset, metrics=[metric], llm=llm, show_progress=False)  # evaluate()'s is for Ragas's metrics
    assert [row["grapheval_faithfulness"] for row in result.scores] == [1.0, pytest.approx(BAD_SCORE)]
    assert len(provider.requests) == 2 and metric.llm is llm


def test_a_langchain_wrapper_around_a_langchain_fake_model_is_unwrapped() -> None:
    fake = FakeListChatModel(responses=["<python>" + json.dumps(TRIPLES[BAD]) + "</python>"])
    wrapper = LangchainLLMWrapper(fake)
    assert ragas_chat_model(wrapper) is fake
    metric = GraphEvalFaithfulness(llm=wrapper, scorer=KeywordScorer())
    assert metric.single_turn_score(sample(BAD)) == pytest.approx(BAD_SCORE)


class TextRagasLLM(BaseRagasLLM):
    """A Ragas LLM that is neither LangChain nor Instructor: text in, ``LLMResult`` out."""

    def __init__(self) -> None:
        super().__init__()
        self.prompts: list[str] = []

    def _answer(self, prompt: Any) -> LLMResult:
        text = prompt.to_string()
        self.prompts.append(text)
        return LLMResult(generations=[[Generation(text="<python>" + json.dumps(triples_for(text)) + "</python>")]])

    def generate_text(self, prompt: Any, n: int = 1, temperature: float = 0.01, stop: Any = None,
                      callbacks: Any = None) -> LLMResult:
        return self._answer(prompt)

    async def agenerate_text(self, prompt: Any, n: int = 1, temperature: float | None = 0.01, stop: Any = None,
                             callbacks: Any = None) -> LLMResult:
        return self._answer(prompt)

    def is_finished(self, response: LLMResult) -> bool:
        return True


def test_another_ragas_llm_answers_in_text() -> None:
    llm = TextRagasLLM()
    metric = GraphEvalRagasMetric(llm=llm, scorer=KeywordScorer())
    assert metric.score(response=BAD, retrieved_contexts=[FACTS]).value == pytest.approx(BAD_SCORE)
    assert len(llm.prompts) == 1 and re.search("Marie Curie won three Nobel Prizes", llm.prompts[0])
    assert ragas_chat_model(llm) is ragas_chat_model(llm)  # one adapter per LLM object


@pytest.mark.parametrize("sync", [False, True])
def test_a_host_model_answers_a_logprobs_request_through_its_openai_client(sync: bool) -> None:
    """Bound with ``logprobs=True`` (as the LLM judge binds it), a host model with ``acomplete_raw`` asks its
    ``openai`` client (async, or sync in a worker thread) for the token log-probabilities; the answer carries them,
    its token counts and its cost; unbound, the host's own call answers."""
    import httpx
    import openai

    from grapheval_plugins.integrations.host_models import Costed, openai_client, openai_completion

    sent: list[dict[str, Any]] = []

    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        token = {"token": "supported", "logprob": -0.1, "bytes": None, "top_logprobs": []}
        return httpx.Response(200, json={
            "id": "c", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "supported"},
                         "logprobs": {"content": [token], "refusal": None}}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 1, "total_tokens": 12}})

    kind, http = (openai.OpenAI, httpx.Client) if sync else (openai.AsyncOpenAI, httpx.AsyncClient)
    client = openai_client(kind(api_key="k", base_url="http://127.0.0.1:9/v1",
                                http_client=http(transport=httpx.MockTransport(handle))))
    assert client is not None and openai_client("not a client") is None

    async def raw(prompt: str, top_logprobs: int) -> Costed:
        return Costed(await openai_completion(client, "m", prompt, top_logprobs, "Be strict.", temperature=0), 0.002)

    llm = PromptChatModel(complete=lambda prompt: "plain", acomplete_raw=raw, label="host")
    answer = llm.bind(logprobs=True, top_logprobs=5).invoke([HumanMessage("Is it supported?")])

    assert answer.content == "supported" and answer.response_metadata["logprobs"]["content"][0]["logprob"] == -0.1
    assert answer.usage_metadata == {"input_tokens": 11, "output_tokens": 1, "total_tokens": 12}
    assert answer.response_metadata["cost_usd"] == 0.002
    assert sent == [{"model": "m", "messages": [{"role": "system", "content": "Be strict."},
                                                {"role": "user", "content": "Is it supported?"}],
                     "logprobs": True, "top_logprobs": 5, "temperature": 0}]
    assert llm.invoke([HumanMessage("Is it supported?")]).content == "plain" and len(sent) == 1
