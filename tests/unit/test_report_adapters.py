"""The adapters carry the report's JSON: one call turns DeepEval's verbose_logs or a Ragas trace into the page."""

from __future__ import annotations

import json
import os

import pytest

os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")
os.environ.setdefault("DEEPEVAL_NO_INSPECT_PROMPT", "1")
os.environ.setdefault("DEEPEVAL_DISABLE_DOTENV", "1")

pytest.importorskip("jinja2")

from grapheval_plugins import GraphEval  # noqa: E402
from grapheval_plugins.report import render_json, report_from_json  # noqa: E402
from grapheval_plugins.testing import KeywordScorer, ScriptedChatModel  # noqa: E402

FACTS = "Marie Curie was born in Warsaw. She won two Nobel Prizes."
BAD = "Marie Curie won three <script>window.__pwned=1</script> Nobel Prizes."
TRIPLE = ["Marie Curie", "won", "three <script>window.__pwned=1</script> Nobel Prizes"]


def engine() -> GraphEval:
    chat = ScriptedChatModel(respond=lambda messages: "<python>" + json.dumps([TRIPLE]) + "</python>")
    return GraphEval(llm=chat, scorer=KeywordScorer(), max_retries=0)


def test_deepeval_verbose_logs_carry_the_report() -> None:
    pytest.importorskip("deepeval")
    from deepeval.test_case import LLMTestCase

    from grapheval_plugins.integrations.deepeval import GraphEvalMetric

    metric = GraphEvalMetric(grapheval=engine())
    metric.measure(LLMTestCase(input="Prizes?", actual_output=BAD, context=[FACTS]), _show_indicator=False)
    assert metric.reason.startswith("hallucination")  # the text reason is kept
    report = report_from_json(metric.verbose_logs)
    assert report.output == BAD and report.triples[0].as_list() == TRIPLE
    html = render_json(metric.verbose_logs)
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in html and "<script>" not in html


def test_ragas_traces_carry_the_report() -> None:
    pytest.importorskip("ragas")
    from grapheval_plugins.integrations.ragas import GraphEvalMetric, _trace_output

    result = GraphEvalMetric(engine()).score(response=BAD, retrieved_contexts=[FACTS])
    assert result.reason.startswith("hallucination")
    assert report_from_json(result.traces["output"]).output == BAD
    legacy = _trace_output(report_from_json(result.traces["output"]))  # what ragas.evaluate() traces hold
    assert "three" in legacy["reason"] and render_json(legacy) == render_json(result.traces["output"])
