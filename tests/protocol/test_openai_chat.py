"""OpenAI's chat completions over HTTP through ``langchain_openai.ChatOpenAI`` (and the ``openai`` SDK under it),
against an emulator on 127.0.0.1: the faults. The real model behind an OpenAI-compatible server is in
``test_openai_compatible.py``."""

from __future__ import annotations

import math
import re

import pytest
from protocol_servers import OpenAIChatServer
from test_bedrock_converse import EXPECTED, QUICK, ROWS

from grapheval_plugins import GraphEval

MODEL = "gpt-4o-mini"


@pytest.fixture
def openai_server() -> OpenAIChatServer:  # type: ignore[misc]
    with OpenAIChatServer() as server:
        yield server


def _chat(server: OpenAIChatServer, **options: object):  # type: ignore[no-untyped-def]
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(model=MODEL, base_url=f"{server.url}/v1", api_key="test", **options)


def test_the_provider_spec_reaches_the_server(openai_server: OpenAIChatServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """``openai:<model>`` (``init_chat_model``), with the endpoint and key from the environment."""
    pytest.importorskip("langchain", reason="'<provider>:<model>' specs need the langchain package")
    monkeypatch.setenv("OPENAI_BASE_URL", f"{openai_server.url}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    spec = f"openai:{MODEL}"
    reports = GraphEval(llm=spec).evaluate_many(ROWS, id_key="id", show_progress=False)

    assert {r.id: r.hallucinated for r in reports} == EXPECTED
    assert {r.body["model"] for r in openai_server.calls()} == {MODEL}


@pytest.mark.parametrize("fault", ["throttle", "500", "503", "reset", "truncated", "timeout"])
def test_a_transient_fault_is_retried_and_the_row_completes(openai_server: OpenAIChatServer, fault: str) -> None:
    openai_server.timeout_s = 3.0
    openai_server.fault(fault, times=1, when="<input>The Eiffel")
    chat = _chat(openai_server, max_retries=2, timeout=1.0)
    reports = GraphEval(llm=chat, retry=QUICK).evaluate_many(ROWS, id_key="id", show_progress=False)

    assert {r.id: r.hallucinated for r in reports} == EXPECTED
    tower = openai_server.calls("<input>The Eiffel")
    assert [c.fault for c in tower] == [fault, None]
    if fault == "throttle":  # the SDK waited the retry-after the server gave
        assert tower[1].at - tower[0].at >= 0.95


def test_a_lasting_fault_ends_in_a_row_error_and_the_batch_goes_on(openai_server: OpenAIChatServer) -> None:
    openai_server.fault("500", times=1000, when="Rome")
    chat = _chat(openai_server, max_retries=1)
    reports = GraphEval(llm=chat, retry=QUICK).evaluate_many(ROWS, id_key="id", show_progress=False)

    by_id = {r.id: r for r in reports}
    assert by_id["curie"].hallucinated is False and by_id["river"].hallucinated is False
    assert not by_id["tower"].ok and "InternalServerError" in by_id["tower"].errors[0].message
    assert len(openai_server.calls("<input>The Eiffel")) == 2 * 2  # the SDK's 2 × the extractor's 2


def test_a_rejected_request_is_not_retried(openai_server: OpenAIChatServer) -> None:
    openai_server.fault("invalid", times=1000, when="<input>The Eiffel")
    chat = _chat(openai_server)
    report = GraphEval(llm=chat).evaluate(context=ROWS[1]["context"], output=ROWS[1]["output"])

    assert not report.ok and "maximum context length" in report.errors[0].message
    assert len(openai_server.calls("<input>The Eiffel")) == 1


@pytest.mark.parametrize("fault", ["empty", "refusal"])
def test_an_unusable_answer_ends_in_a_row_error(openai_server: OpenAIChatServer, fault: str) -> None:
    """An empty answer, or a refusal (``message.refusal`` set, ``content`` null)."""
    openai_server.fault(fault, times=1000, when="Rome")
    chat = _chat(openai_server)
    reports = GraphEval(llm=chat, retry=QUICK).evaluate_many(ROWS, id_key="id", show_progress=False)

    by_id = {r.id: r for r in reports}
    assert by_id["curie"].ok and by_id["river"].ok and not by_id["tower"].ok
    assert any("no verdict" in e.message for e in by_id["tower"].errors), by_id["tower"].errors
    if fault == "refusal":
        assert any("'refusal'" in e.message for e in by_id["tower"].errors), by_id["tower"].errors
    assert len(openai_server.calls("Rome")) <= 2 + 2


def _claims(prompt: str) -> list[str]:
    """The numbered claims of a judge prompt."""
    listed = prompt.split("Claims:\n", 1)[1].split("\n\n", 1)[0]
    return re.findall(r"^\d+\. (.*)$", listed, re.M)


def test_a_claim_the_judge_left_out_is_asked_again_alone(openai_server: OpenAIChatServer) -> None:
    """The judge answers every claim of the row but the last: that claim, and only it, is asked again on its own,
    and the row gets the verdict it would have had (one answer per call: no sampled answers judge it instead)."""
    from grapheval_plugins.check.llm_judge import LLMJudge

    def engine() -> GraphEval:
        chat = _chat(openai_server)
        return GraphEval(llm=chat, scorer=LLMJudge(chat, samples=1))

    context, output = ROWS[1]["context"], "The Eiffel Tower stands in Rome. It opened in 1889."
    expected = engine().evaluate(context, output)
    openai_server.clear()
    openai_server.fault("skip", times=1, when="Claims:\n")
    report = engine().evaluate(context, output)

    first, again, *more = openai_server.calls("Claims:\n")
    assert first.fault == "skip" and again.fault is None and more == []
    assert len(_claims(first.prompt)) >= 2 and _claims(again.prompt) == _claims(first.prompt)[-1:]
    assert report.ok and report.hallucinated is expected.hallucinated is True
    assert [(c.claim, c.p_unsupported) for c in report.claims] == [(c.claim, c.p_unsupported) for c in expected.claims]


@pytest.mark.parametrize("given", ["name", "GPTModel", "LocalModel"])
def test_a_deepeval_openai_model_judges_with_log_probabilities(openai_server: OpenAIChatServer, given: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``GraphEvalMetric(model="gpt-4o-mini")`` (DeepEval resolves the name, its endpoint and key from the
    environment), ``model=GPTModel(...)`` or ``model=LocalModel(base_url=...)``: the one model extracts and judges;
    the judge's call asks for ``logprobs`` and ``top_logprobs=5`` (DeepEval's ``generate_raw_response``, or
    ``LocalModel``'s own client), so the score is read from the labels' log-probabilities (graded), not from a
    verdict's fixed value, in one call; its dollars are counted (``LocalModel``'s: 0)."""
    from deepeval.models import GPTModel, LocalModel
    from deepeval.test_case import LLMTestCase

    from grapheval_plugins.integrations.deepeval import GraphEvalMetric

    monkeypatch.setenv("OPENAI_BASE_URL", f"{openai_server.url}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    url = f"{openai_server.url}/v1"
    model = {"name": MODEL, "GPTModel": lambda: GPTModel(model=MODEL, base_url=url, api_key="test"),
             "LocalModel": lambda: LocalModel(model=MODEL, base_url=url, api_key="test")}[given]
    metric = GraphEvalMetric(model=model if isinstance(model, str) else model(), rule="paper")
    case = LLMTestCase(input="Where is it?", actual_output="The Eiffel Tower stands in Rome.",
                       retrieval_context=[ROWS[1]["context"]])
    score = metric.measure(case)

    extraction, judging = openai_server.calls("<input>"), openai_server.calls("Claims:\n")
    assert len(extraction) == 1 and "logprobs" not in extraction[0].body
    assert len(judging) == 1 and judging[0].body["logprobs"] is True and judging[0].body["top_logprobs"] == 5
    # "unknown" at log-probability -0.4 beside "supported" -1.2 and "contradicted" -3.0 (protocol_servers.py)
    p_supported = math.exp(-1.2) / (math.exp(-0.4) + math.exp(-1.2) + math.exp(-3.0))
    assert score == pytest.approx(p_supported) and not metric.success
    assert metric.evaluation_cost == 0.0 if given == "LocalModel" else metric.evaluation_cost > 0
