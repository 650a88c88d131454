"""The reasons of a ``ragas.evaluate()`` result in one call, in the order of Ragas's table."""

from __future__ import annotations

import importlib.util
import os

import pytest

if importlib.util.find_spec("ragas") is None:  # the extra is not installed: nothing to test
    pytest.skip("ragas is not installed (extra 'ragas')", allow_module_level=True)

os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")

from ragas import EvaluationDataset, SingleTurnSample, evaluate  # noqa: E402

from grapheval_plugins import GraphEval  # noqa: E402
from grapheval_plugins.integrations.ragas import GraphEvalFaithfulness, reasons  # noqa: E402
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
