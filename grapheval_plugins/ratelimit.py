"""Client-side rate limits for a chat model: requests and tokens per minute (:class:`RateLimitedChatModel`).

Tokens are charged before a call with an estimate and corrected by the reported usage after (docs/ray.md, "Rate
limits"): that post-hoc charge is why this is a token bucket of its own rather than a library's.

>>> import asyncio
>>> from grapheval_plugins.testing import ScriptedChatModel
>>> llm = RateLimitedChatModel(ScriptedChatModel(responses=["ok"], model_label="m"), requests_per_minute=600)
>>> llm.invoke("hi").content, llm.model_label
('ok', 'm')
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import ConfigDict, PrivateAttr

from ._async import run_sync
from .messages import NamedChatModel, describe_llm, message_text

__all__ = ["RateLimitedChatModel", "TokenBucket", "estimate_tokens"]


def estimate_tokens(messages: Any) -> int:
    """A provider-neutral estimate of a prompt's tokens: its characters / 4 (English prose with BPE tokenizers).

    >>> estimate_tokens("a" * 400)
    100
    """
    items = messages if isinstance(messages, (list, tuple)) else [messages]
    return max(1, len("".join(message_text(m) for m in items)) // 4)


class TokenBucket:
    """A token bucket refilled at ``per_minute`` units a minute, holding at most ``burst``; safe across threads and
    event loops (no asyncio primitive is bound to a loop).

    >>> bucket = TokenBucket(per_minute=60, burst=2)
    >>> asyncio.run(bucket.acquire(2)); bucket.level < 1
    True
    """

    def __init__(self, per_minute: float, burst: float | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        if per_minute <= 0:
            raise ValueError("per_minute must be > 0")
        self.rate = per_minute / 60.0
        self.capacity = float(burst if burst is not None else per_minute)
        if self.capacity <= 0:
            raise ValueError("burst must be > 0")
        self._clock = clock
        self._level = self.capacity
        self._updated = clock()
        self._lock = threading.Lock()

    def _refill(self) -> None:
        now = self._clock()
        self._level = min(self.capacity, self._level + (now - self._updated) * self.rate)
        self._updated = now

    @property
    def level(self) -> float:
        """Units available now (negative while in debt)."""
        with self._lock:
            self._refill()
            return self._level

    def try_acquire(self, amount: float = 1.0) -> float:
        """Take ``amount`` if available and return 0.0; otherwise take nothing and return the seconds to wait."""
        need = min(amount, self.capacity)
        with self._lock:
            self._refill()
            if self._level >= need:
                self._level -= amount
                return 0.0
            return (need - self._level) / self.rate

    async def acquire(self, amount: float = 1.0) -> None:
        """Wait until ``amount`` units are available, then take them."""
        while True:
            wait = self.try_acquire(amount)
            if wait <= 0.0:
                return
            await asyncio.sleep(wait)

    def charge(self, amount: float) -> None:
        """Take ``amount`` more units now (a negative amount gives units back), without waiting."""
        with self._lock:
            self._refill()
            self._level = min(self.capacity, self._level - amount)


class RateLimitedChatModel(NamedChatModel):
    """A LangChain chat model, named as the one it wraps, that keeps it under per-instance requests-per-minute and
    tokens-per-minute budgets (``None``: unbounded); ``burst_seconds`` of budget may be spent at once. For requests
    alone, LangChain's ``rate_limiter=`` (``InMemoryRateLimiter``) does the same.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    llm: Any
    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    expected_completion_tokens: int = 256
    burst_seconds: float = 60.0

    _requests: TokenBucket | None = PrivateAttr(default=None)
    _tokens: TokenBucket | None = PrivateAttr(default=None)

    def __init__(self, llm: Any = None, /, **options: Any) -> None:
        if llm is not None:
            options["llm"] = llm
        super().__init__(**options)
        share = self.burst_seconds / 60.0
        rpm, tpm = self.requests_per_minute, self.tokens_per_minute
        self._requests = TokenBucket(rpm, max(1.0, rpm * share)) if rpm else None
        self._tokens = TokenBucket(tpm, tpm * share) if tpm else None

    @property
    def tokens(self) -> TokenBucket | None:
        return self._tokens

    @property
    def model_label(self) -> str:  # the wrapped model's: cache keys and reports read the same with limits
        return describe_llm(self.llm)

    @property
    def _llm_type(self) -> str:
        return "rate-limited"

    async def _agenerate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                         run_manager: AsyncCallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        estimate = estimate_tokens(messages) + self.expected_completion_tokens
        if self._requests is not None:
            await self._requests.acquire(1.0)
        if self._tokens is not None:
            await self._tokens.acquire(estimate)
        answer = await self.llm.ainvoke(messages, stop=stop, **kwargs)
        if self._tokens is not None:
            used = getattr(answer, "usage_metadata", None) or {}
            if isinstance(used.get("total_tokens"), int):
                self._tokens.charge(used["total_tokens"] - estimate)
        return ChatResult(generations=[ChatGeneration(message=answer)])

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        return run_sync(self._agenerate(messages, stop=stop, **kwargs))

    def __repr__(self) -> str:
        return f"RateLimitedChatModel({self.model_label!r})"
