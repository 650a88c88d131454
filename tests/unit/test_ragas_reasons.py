"""The reasons, the usage and the cost of a ``ragas.evaluate()`` result in one call each."""

from __future__ import annotations

import importlib.util
import os

import pytest

if importlib.util.find_spec("ragas") is None:  # the extra is not installed: nothing to test
    pytest.skip("ragas is not installed (extra 'ragas')", allow_module_level=True)

os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")

from langchain_core.messages import BaseMessage  # noqa: E402
from langchain_core.outputs import ChatResult  # noqa: E402
from ragas import EvaluationDataset, SingleTurnSample, evaluate  # noqa: E402

from grapheval_plugins import GraphEval  # noqa: E402
from grapheval_plugins.integrations.ragas import GraphEvalFaithfulness, cost, reasons, usage  # noqa: E402
from grapheval_plugins.testing import KeywordScorer, ScriptedChatModel  # noqa: E402


def test_reasons_line_up_with_the_table() -> None:
    def triples(messages: list) -> str:  # type: ignore[type-arg]
        if "Berlin" in messages[-1].content:
            return '<python>[["Marie Curie", "born in", "Berlin"]]</python>'
        return '<python>[["Marie Curie", "born in", "Warsaw"]]</python>'

    context = ["Marie Curie was born in Warsaw."]
    dataset = EvaluationDataset(samples=[
        SingleTurnSample(response="Marie Curie was born in Warsaw.", retrieved_contexts=context),
        SingleTurnSample(response="Marie Curie was born in Berlin.", retrieved_contexts=context),
        SingleTurnSample(response="  ", retrieved_contexts=context),  # no usable response: NaN, no report
    ])
    metric = GraphEvalFaithfulness(grapheval=GraphEval(llm=ScriptedChatModel(respond=triples), scorer=KeywordScorer()))
    result = evaluate(dataset, metrics=[metric], show_progress=False)

    got = reasons(result)
    assert len(got) == 3
    assert got[0] is not None and got[0].startswith("faithful")
    assert got[1] is not None and got[1].startswith("hallucination") and "Berlin" in got[1]
    assert got[2] is None
    table = result.to_pandas().assign(reason=got)
    assert list(table["reason"])[:2] == got[:2] and len(table) == 3
    assert reasons(result, name="another_metric") == [None, None, None]


class CountedChatModel(ScriptedChatModel):
    """A scripted chat model whose every answer reports 100 prompt and 7 completion tokens."""

    def _result(self, messages: list[BaseMessage]) -> ChatResult:
        result = super()._result(messages)
        result.generations[0].message.usage_metadata = {"input_tokens": 100, "output_tokens": 7, "total_tokens": 107}
        return result


def test_usage_and_cost_add_up_the_reports_behind_the_scores() -> None:
    def triples(messages: list) -> str:  # type: ignore[type-arg]
        place = "Berlin" if "Berlin" in messages[-1].content else "Warsaw"
        return f'<python>[["Marie Curie", "born in", "{place}"]]</python>'

    context = ["Marie Curie was born in Warsaw."]
    dataset = EvaluationDataset(samples=[
        SingleTurnSample(response="Marie Curie was born in Warsaw.", retrieved_contexts=context),
        SingleTurnSample(response="Marie Curie was born in Berlin.", retrieved_contexts=context),
        SingleTurnSample(response="  ", retrieved_contexts=context),  # no report: no calls
    ])
    llm = CountedChatModel(respond=triples)
    metric = GraphEvalFaithfulness(grapheval=GraphEval(llm=llm, scorer=KeywordScorer(), cache=False))
    result = evaluate(dataset, metrics=[metric], show_progress=False)

    total = usage(result)
    assert len(llm.calls) == 2  # one extraction call a scored sample; the keyword scorer calls no model
    assert (total.calls, total.input_tokens, total.output_tokens) == (2, 200, 14)
    assert cost(result, {"input": 1.0, "output": 10.0}) == pytest.approx((200 * 1.0 + 14 * 10.0) / 1e6)
    assert cost(result) is None  # no prices, and the fake reports no dollars
    assert usage(result, name="another_metric").calls == 0 and cost(result, name="another_metric") == 0.0
