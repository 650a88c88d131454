"""The engine stops the rest of a batch when one row fails in a way that is not the row's own, and ``method``
names the rule that decides its rows."""

from __future__ import annotations

import asyncio

import pytest

from grapheval_plugins import GraphEval
from grapheval_plugins._async import run_sync
from grapheval_plugins.exceptions import ModelLoadError
from grapheval_plugins.testing import KeywordScorer, ScriptedChatModel


def test_a_failure_that_is_not_a_rows_own_cancels_the_other_extractions() -> None:
    engine = GraphEval(llm=ScriptedChatModel(responses=["unused"]), scorer=KeywordScorer(), cache=False,
                       max_concurrency=8)
    started: list[str] = []
    cancelled: list[str] = []

    async def extract(sample, config):  # type: ignore[no-untyped-def]
        started.append(sample.output)
        if sample.output == "boom":
            await asyncio.sleep(0.05)  # the others are waiting by now
            raise ModelLoadError("the chat model could not load")
        try:
            await asyncio.Event().wait()  # a slow chat model: never answers by itself
        except asyncio.CancelledError:
            cancelled.append(sample.output)
            raise
        raise AssertionError("unreachable")

    engine._extract_claims = extract  # type: ignore[method-assign]
    rows = [{"context": "ctx", "output": out} for out in ("one", "boom", "two", "three")]
    with pytest.raises(ModelLoadError):
        run_sync(engine.aextract_rows(rows))
    assert sorted(started) == ["boom", "one", "three", "two"]
    assert sorted(cancelled) == ["one", "three", "two"]  # stopped before the error reached the caller


def test_the_rule_in_force_is_the_one_the_reports_say() -> None:
    def in_force(engine: GraphEval) -> str:
        return engine.decision_rule()[0].name

    answer = '<python>[["The sky", "is", "blue"]]</python>'
    engine = GraphEval(llm=ScriptedChatModel(responses=[answer]), scorer=KeywordScorer(), cache=False)
    report = engine.evaluate("The sky is blue.", "The sky is blue.")
    assert engine.rule.name == "hybrid" and report.method == in_force(engine) == "paper"  # no weights for this scorer
    assert in_force(GraphEval(scorer="hhem")) == "paper" and in_force(GraphEval(mode="raw")) == "paper"
    assert in_force(GraphEval()) == "hybrid"  # the offline default judge has fitted weights
    assert "rule='hybrid'" in repr(engine)  # the option as given
