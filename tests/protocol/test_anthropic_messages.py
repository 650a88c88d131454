"""Anthropic's Messages API over HTTP through ``langchain_anthropic.ChatAnthropic`` (and the ``anthropic`` SDK under
it), against an emulator on 127.0.0.1."""

from __future__ import annotations

import time

import pytest
from protocol_servers import AnthropicMessagesServer
from test_bedrock_converse import EXPECTED, QUICK, ROWS

from grapheval_plugins import GraphEval

pytest.importorskip("langchain_anthropic", reason="the protocol tests need langchain-anthropic (dev extra)")

MODEL = "claude-3-5-haiku-latest"


def _chat(server: AnthropicMessagesServer, **options: object):  # type: ignore[no-untyped-def]
    from langchain_anthropic import ChatAnthropic

    return ChatAnthropic(model=MODEL, base_url=server.url, api_key="test", **options)


def test_a_chat_model_extracts_and_judges(anthropic_server: AnthropicMessagesServer) -> None:
    chat = _chat(anthropic_server)
    reports = GraphEval(llm=chat).evaluate_many(ROWS, id_key="id", show_progress=False)

    assert {r.id: r.hallucinated for r in reports} == EXPECTED
    first = anthropic_server.calls("<input>")[0]
    assert first.path == "/v1/messages"
    assert first.body["model"] == MODEL and first.body["max_tokens"] > 0
    assert "knowledge graph" in first.body["system"]  # the system prompt goes in the top-level field
    assert "test" in (first.headers.get("x-api-key"), first.headers.get("authorization", "").removeprefix("Bearer "))
    assert first.headers.get("anthropic-version")


def test_without_log_probabilities_the_judge_averages_sampled_answers(anthropic_server: AnthropicMessagesServer) -> None:
    """Anthropic returns no token log-probabilities: the judge asks each prompt five times in all, the four more at
    temperature 1.0, and the verdicts stay those of one answer (the emulator answers alike)."""
    chat = _chat(anthropic_server, temperature=0.0)
    reports = GraphEval(llm=chat).evaluate_many(ROWS, id_key="id", show_progress=False)

    assert {r.id: r.hallucinated for r in reports} == EXPECTED
    judged = anthropic_server.calls("Claims:\n")
    prompts: dict[str, list[float]] = {}
    for call in judged:
        prompts.setdefault(call.prompt, []).append(call.body.get("temperature"))
    assert prompts and all(sorted(t) == [0.0, 1.0, 1.0, 1.0, 1.0] for t in prompts.values()), prompts
    # every answer is in the row's cost
    assert sum(r.usage["check"].calls for r in reports if "check" in r.usage) == len(judged), [r.usage for r in reports]


def test_the_provider_spec_reaches_the_server(anthropic_server: AnthropicMessagesServer,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """``anthropic:<model>`` (``init_chat_model``), with the endpoint and key from the environment."""
    pytest.importorskip("langchain", reason="'<provider>:<model>' specs need the langchain package")
    monkeypatch.setenv("ANTHROPIC_API_URL", anthropic_server.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
    spec = f"anthropic:{MODEL}"
    report = GraphEval(llm=spec).evaluate(
        context=ROWS[1]["context"], output=ROWS[1]["output"])

    assert report.hallucinated is True
    assert {r.body["model"] for r in anthropic_server.calls()} == {MODEL}


@pytest.mark.parametrize("fault", ["throttle", "500", "503", "reset", "truncated", "timeout"])
def test_a_transient_fault_is_retried_and_the_row_completes(anthropic_server: AnthropicMessagesServer,
                                                            fault: str) -> None:
    """429 ``rate_limit_error`` with ``retry-after: 1``, 500 ``api_error``, 529 ``overloaded_error``, a reset,
    a truncated body and a read timeout, once: the SDK asks again and the row gets its verdict; after a 429 the
    next request waits the ``retry-after`` the server gave."""
    anthropic_server.timeout_s = 3.0
    anthropic_server.fault(fault, times=1, when="<input>The Eiffel")
    chat = _chat(anthropic_server, max_retries=2, default_request_timeout=1.0)
    reports = GraphEval(llm=chat, retry=QUICK).evaluate_many(ROWS, id_key="id", show_progress=False)

    assert {r.id: r.hallucinated for r in reports} == EXPECTED
    tower = anthropic_server.calls("<input>The Eiffel")
    assert [c.fault for c in tower] == [fault, None]
    if fault == "throttle":
        assert tower[1].at - tower[0].at >= 0.95


def test_a_lasting_fault_ends_in_a_row_error_and_the_batch_goes_on(anthropic_server: AnthropicMessagesServer) -> None:
    anthropic_server.fault("503", times=1000, when="Rome")
    chat = _chat(anthropic_server, max_retries=1)
    started = time.monotonic()
    reports = GraphEval(llm=chat, retry=QUICK).evaluate_many(ROWS, id_key="id", show_progress=False)

    by_id = {r.id: r for r in reports}
    assert by_id["curie"].hallucinated is False and by_id["river"].hallucinated is False
    assert not by_id["tower"].ok and "overloaded" in by_id["tower"].errors[0].message.lower()
    assert len(anthropic_server.calls("<input>The Eiffel")) == 2 * 2  # the SDK's 2 × the extractor's 2
    assert time.monotonic() - started < 30


def test_a_rejected_request_is_not_retried(anthropic_server: AnthropicMessagesServer) -> None:
    """A 400 ``invalid_request_error`` (e.g. a prompt over the window): one request, then the row's error."""
    anthropic_server.fault("invalid", times=1000, when="<input>The Eiffel")
    chat = _chat(anthropic_server)
    report = GraphEval(llm=chat).evaluate(context=ROWS[1]["context"], output=ROWS[1]["output"])

    assert not report.ok and "prompt is too long" in report.errors[0].message
    assert len(anthropic_server.calls("<input>The Eiffel")) == 1


@pytest.mark.parametrize("fault", ["empty", "refusal"])
def test_an_unusable_answer_ends_in_a_row_error(anthropic_server: AnthropicMessagesServer, fault: str) -> None:
    """No content (``stop_reason: refusal``, or an empty answer): bounded re-asks, then the row has no verdict."""
    anthropic_server.fault(fault, times=1000, when="Rome")
    chat = _chat(anthropic_server)
    reports = GraphEval(llm=chat, retry=QUICK).evaluate_many(ROWS, id_key="id", show_progress=False)

    by_id = {r.id: r for r in reports}
    assert by_id["curie"].ok and by_id["river"].ok
    assert not by_id["tower"].ok
    assert any("no verdict" in e.message for e in by_id["tower"].errors), by_id["tower"].errors
    if fault == "refusal":  # the provider's stop reason says why the answer is empty
        assert any("'refusal'" in e.message for e in by_id["tower"].errors), by_id["tower"].errors
    assert len(anthropic_server.calls("Rome")) <= 2 + 2


def test_content_as_a_list_of_blocks(anthropic_server: AnthropicMessagesServer) -> None:
    """A thinking block and the text split over two text blocks: read as the joined text."""
    anthropic_server.fault("blocks", times=1000)
    chat = _chat(anthropic_server)
    reports = GraphEval(llm=chat).evaluate_many(ROWS, id_key="id", show_progress=False)

    assert {r.id: r.hallucinated for r in reports} == EXPECTED
