"""One retry policy for chat-model calls (extraction and correction): backoff between attempts, never after the
last; no retry of errors that cannot succeed; an optional total deadline."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from grapheval_plugins import GraphEval, InputError
from grapheval_plugins.correct import GraphCorrect
from grapheval_plugins.exceptions import ExtractionError, MissingDependencyError
from grapheval_plugins.extract.extractor import TripleExtractor
from grapheval_plugins.retry import RetryPolicy, is_retryable
from grapheval_plugins.testing import KeywordScorer, ScriptedChatModel

GOOD = '<python>[["Paris", "capital of", "France"]]</python>'


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Every backoff (``asyncio.sleep`` with a positive delay) is recorded and skipped."""
    recorded: list[float] = []
    real_sleep = asyncio.sleep

    async def fake_sleep(delay: float, result: Any = None) -> Any:
        if delay > 0:
            recorded.append(delay)
        return await real_sleep(0, result)

    monkeypatch.setattr(asyncio, "sleep", fake_sleep)
    return recorded


def test_the_extractor_does_not_sleep_after_its_last_attempt(sleeps: list[float]) -> None:
    llm = ScriptedChatModel(responses=[ConnectionError("reset by peer")])
    with pytest.raises(ExtractionError, match="raised on all 3 attempt"):
        TripleExtractor(llm, max_retries=2).extract("Paris is the capital of France.")
    assert len(llm.calls) == 3
    assert len(sleeps) == 2  # between attempts only


def test_the_extractor_does_not_retry_an_input_error(sleeps: list[float]) -> None:
    overflow = InputError("prompt", "the prompt has 5000 tokens and the model's context window is 4096")
    llm = ScriptedChatModel(responses=[overflow, GOOD])
    with pytest.raises(ExtractionError, match="context window") as info:
        TripleExtractor(llm, max_retries=2).extract("Paris is the capital of France.")
    assert len(llm.calls) == 1 and sleeps == []
    assert info.value.__cause__ is overflow


def test_a_row_whose_prompt_overflows_fails_alone_after_one_call() -> None:
    def respond(messages: Any) -> str:
        if "very long" in str(messages[-1].content):
            raise InputError("prompt", "over the context window")
        return GOOD

    llm = ScriptedChatModel(respond=respond)
    rows = [("Paris is the capital of France.", "Paris is the capital of France."), ("ctx", "a very long output")]
    reports = GraphEval(llm=llm, scorer=KeywordScorer(), cache=False).evaluate_many(rows)
    assert reports[0].ok and not reports[1].ok and reports[1].errors[0].stage == "extract"
    assert len(llm.calls) == 2


def test_an_unparseable_answer_is_asked_again_at_once(sleeps: list[float]) -> None:
    llm = ScriptedChatModel(responses=["no triples here", GOOD])
    extraction = TripleExtractor(llm, max_retries=2).extract("Paris is the capital of France.")
    assert extraction.attempts == 2 and extraction.triples and sleeps == []


def test_backoff_grows_with_jitter_and_stays_bounded(sleeps: list[float]) -> None:
    policy = RetryPolicy(attempts=6, initial_s=0.5, max_wait_s=3.0, jitter_s=0.2)
    calls: list[int] = []

    async def always_fails() -> None:
        calls.append(1)
        raise TimeoutError("slow provider")

    with pytest.raises(TimeoutError):
        asyncio.run(policy.call(always_fails))
    assert len(calls) == 6 and len(sleeps) == 5
    base = [min(3.0, 0.5 * 2**i) for i in range(5)]
    assert all(b <= s <= b + 0.2 for b, s in zip(base, sleeps)), sleeps


def test_a_deadline_stops_the_retries_and_caps_the_backoff(sleeps: list[float]) -> None:
    policy = RetryPolicy(attempts=50, initial_s=10.0, max_wait_s=10.0, jitter_s=0, deadline_s=0.05)
    calls: list[int] = []

    async def always_fails() -> None:
        calls.append(1)
        await asyncio.get_running_loop().run_in_executor(None, __import__("time").sleep, 0.03)
        raise ConnectionError("down")

    with pytest.raises(ConnectionError):
        asyncio.run(policy.call(always_fails))
    assert 1 <= len(calls) < 50
    assert all(s <= 0.05 for s in sleeps)


@pytest.mark.parametrize(
    ("error", "retryable"),
    [
        (InputError("prompt", "too long"), False),
        (MissingDependencyError("llama-cpp-python", "local"), False),
        (TypeError("unexpected keyword"), False),
        (ConnectionError("reset"), True),
        (TimeoutError(), True),
        (RuntimeError("CUDA out of memory"), True),
    ],
)
def test_what_is_retried(error: BaseException, retryable: bool) -> None:
    assert is_retryable(error) is retryable


def test_provider_http_errors_are_retried_only_when_they_can_succeed() -> None:
    class ProviderError(Exception):
        def __init__(self, status_code: int) -> None:
            super().__init__(f"HTTP {status_code}")
            self.status_code = status_code

    class Response:
        status_code = 400

    class WrappedError(Exception):
        response = Response()

    assert [is_retryable(ProviderError(c)) for c in (400, 401, 404, 408, 409, 429, 500, 503)] == [
        False, False, False, True, True, True, True, True,
    ]
    assert is_retryable(WrappedError()) is False

    class BotocoreError(Exception):  # botocore's ClientError: the parsed response, its status in ResponseMetadata
        def __init__(self, status: int) -> None:
            super().__init__(f"HTTP {status}")
            self.response = {"Error": {"Code": "X"}, "ResponseMetadata": {"HTTPStatusCode": status}}

    assert [is_retryable(BotocoreError(c)) for c in (400, 429, 503)] == [False, True, True]


def test_correction_calls_use_the_same_policy(sleeps: list[float]) -> None:
    def respond(messages: Any) -> str:
        text = str(messages[-1].content)
        if "<triple>" in text or "<old_triple>" in text:
            raise InputError("prompt", "over the context window")
        return '<python>[["Marie Curie", "born in", "Paris"]]</python>'

    llm = ScriptedChatModel(respond=respond)
    fixer = GraphCorrect(GraphEval(llm=llm, scorer=KeywordScorer()), max_retries=3, rouge=False, strategy="paper")
    result = fixer.correct("Marie Curie was born in Warsaw.", "Marie Curie was born in Paris.")
    assert result.changes[0].llm_calls == 1 and "InputError" in (result.changes[0].reason or "")
    assert sleeps == []

    flaky = ScriptedChatModel(responses=[
        '<python>[["Marie Curie", "born in", "Paris"]]</python>', ConnectionError("reset"), ConnectionError("reset"),
    ])
    fixer = GraphCorrect(GraphEval(llm=flaky, scorer=KeywordScorer()), max_retries=1, rouge=False, strategy="paper")
    result = fixer.correct("Marie Curie was born in Warsaw.", "Marie Curie was born in Paris.")
    assert result.changes[0].llm_calls == 2 and len(sleeps) == 1


def test_policy_arguments_are_validated() -> None:
    with pytest.raises(InputError, match="attempts"):
        RetryPolicy(attempts=0)
    with pytest.raises(InputError, match="deadline_s"):
        RetryPolicy(deadline_s=0)


class Throttled(Exception):
    """A provider SDK's 429 with a ``Retry-After`` header on its ``response``."""

    def __init__(self, seconds: str) -> None:
        super().__init__("429 Too Many Requests")
        self.status_code = 429
        self.response = type("Response", (), {"headers": {"retry-after": seconds}})()


def test_a_retry_after_is_waited_up_to_its_bound_and_the_deadline(sleeps: list[float]) -> None:
    llm = ScriptedChatModel(responses=[Throttled("3"), Throttled("3600"), GOOD])
    quick = RetryPolicy(attempts=3, initial_s=0.01, jitter_s=0)
    assert TripleExtractor(llm, retry=quick).extract("Paris is the capital of France.").triples
    assert sleeps == [3.0, 60.0]  # the header's 3 s, then an hour capped at RETRY_AFTER_MAX_S
    sleeps.clear()
    llm = ScriptedChatModel(responses=[Throttled("3600"), GOOD])
    bounded = RetryPolicy(attempts=2, initial_s=0.01, jitter_s=0, deadline_s=5)
    assert TripleExtractor(llm, retry=bounded).extract("Paris is the capital of France.").triples
    assert len(sleeps) == 1 and 4.0 < sleeps[0] <= 5.0  # never past the deadline
