"""The client-side rate limits: a token bucket with debt, and a chat model that keeps under its budgets."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.messages import AIMessage

from grapheval_plugins import GraphEval
from grapheval_plugins.ratelimit import RateLimitedChatModel, TokenBucket, estimate_tokens
from grapheval_plugins.testing import KeywordScorer, ScriptedChatModel


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_bucket_refills_at_its_rate_and_tells_the_wait() -> None:
    clock = Clock()
    bucket = TokenBucket(per_minute=60, burst=3, clock=clock)  # one unit a second
    assert [bucket.try_acquire() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.try_acquire() == pytest.approx(1.0)
    clock.now = 0.5
    assert bucket.try_acquire() == pytest.approx(0.5)
    clock.now = 1.0
    assert bucket.try_acquire() == 0.0


def test_bucket_debt_and_requests_above_the_burst() -> None:
    clock = Clock()
    bucket = TokenBucket(per_minute=600, burst=100, clock=clock)  # 10 a second
    assert bucket.try_acquire(250) == 0.0  # larger than the burst: allowed when full, into debt
    assert bucket.level == pytest.approx(-150)
    assert bucket.try_acquire(10) == pytest.approx(16.0)  # 160 units to refill at 10/s
    clock.now = 16.0
    assert bucket.try_acquire(10) == 0.0
    bucket.charge(-1000)  # a refund never overfills
    assert bucket.level == pytest.approx(100)


def test_bucket_rejects_bad_rates() -> None:
    with pytest.raises(ValueError):
        TokenBucket(per_minute=0)


def test_requests_per_minute_spaces_the_calls() -> None:
    llm = ScriptedChatModel(responses=["ok"], model_label="m")
    # 120 a minute, a burst of one: the second and third calls wait half a second each
    limited = RateLimitedChatModel(llm, requests_per_minute=120, burst_seconds=0.5)

    async def run() -> float:
        loop = asyncio.get_running_loop()
        start = loop.time()
        await asyncio.gather(*(limited.ainvoke("hi") for _ in range(3)))
        return loop.time() - start

    assert 0.9 <= asyncio.run(run()) < 3.0
    assert len(llm.calls) == 3


class UsageModel(ScriptedChatModel):
    """Reports 1,000 tokens used per call, as providers do in ``usage_metadata``."""

    async def ainvoke(self, input: Any, config: Any = None, **kwargs: Any) -> AIMessage:  # type: ignore[override]
        self._answer([])
        return AIMessage("ok", usage_metadata={"input_tokens": 900, "output_tokens": 100, "total_tokens": 1000})


def test_reported_usage_corrects_the_estimate() -> None:
    llm = RateLimitedChatModel(UsageModel(responses=["ok"]), tokens_per_minute=60, expected_completion_tokens=10)
    assert llm.tokens is not None
    before = llm.tokens.level
    asyncio.run(llm.ainvoke("x" * 40))
    assert before - llm.tokens.level == pytest.approx(1000, abs=2)  # the reported 1,000, not the estimate of 20


def test_wrapped_model_keeps_its_name_so_cache_keys_match() -> None:
    inner = ScriptedChatModel(responses=['<python>[["Sky", "is", "green"]]</python>'], model_label="provider-x")
    ge = GraphEval(llm=RateLimitedChatModel(inner, requests_per_minute=1000), scorer=KeywordScorer())
    report = ge.evaluate(context="The sky is blue.", output="The sky is green.")
    assert report.llm == "provider-x" and report.hallucinated is True
    assert estimate_tokens([AIMessage("a" * 80)]) == 20
