"""Retries of chat-model calls on ``tenacity``: bounded attempts, exponential backoff with jitter (never after the
last attempt), an optional deadline, and no retry of an error a second call cannot cure (:func:`is_retryable`).

>>> import asyncio
>>> calls = []
>>> async def flaky() -> str:
...     calls.append(1)
...     if len(calls) < 3:
...         raise ConnectionError("reset by peer")
...     return "ok"
>>> asyncio.run(RetryPolicy(attempts=3, initial_s=0, jitter_s=0).call(flaky)), len(calls)
('ok', 3)
>>> is_retryable(InputError("prompt", "has 5000 tokens, the window is 4096"))
False
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt, stop_after_delay
from tenacity.wait import wait_exponential, wait_random

from .exceptions import InputError, MissingDependencyError, ModelLoadError

__all__ = ["NON_RETRYABLE", "RETRY_AFTER_MAX_S", "Reprompt", "RetryPolicy", "is_retryable", "retry_after"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

NON_RETRYABLE: tuple[type[BaseException], ...] = (
    InputError, MissingDependencyError, ModelLoadError, NotImplementedError, TypeError,
)
"""Errors a second identical call cannot cure: they are raised (or recorded) after the first attempt."""

_RETRYABLE_STATUS = {408, 409, 425, 429}

RETRY_AFTER_MAX_S = 60.0
"""The longest ``Retry-After`` a retry waits for (a longer one waits this long)."""


class Reprompt(Exception):
    """Raised inside an attempt to ask again at once (no backoff): the model answered, but unusably."""


def retry_after(exc: BaseException) -> float | None:
    """The seconds a provider's ``Retry-After`` header asked to wait, on an SDK error's ``response.headers`` or in
    botocore's ``ResponseMetadata["HTTPHeaders"]``; ``None`` when there is none (or not in seconds)."""
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        headers = (response.get("ResponseMetadata") or {}).get("HTTPHeaders") or {}
    else:
        headers = getattr(response, "headers", None) or {}
    value = headers.get("retry-after")
    try:
        return None if value is None else max(0.0, float(value))
    except (TypeError, ValueError):
        return None


def is_retryable(exc: BaseException) -> bool:
    """Whether a call that raised ``exc`` may succeed when made again: not for :data:`NON_RETRYABLE` errors nor a
    provider's HTTP 4xx (on the error, its ``response``, or botocore's ``ResponseMetadata``) other than 408, 409,
    425 and 429; yes for timeouts, connection resets, 5xx and throttling.

    >>> is_retryable(TimeoutError())
    True
    """
    if isinstance(exc, Reprompt):
        return True
    if isinstance(exc, NON_RETRYABLE) or not isinstance(exc, Exception):
        return False
    response = getattr(exc, "response", None)
    meta = (response.get("ResponseMetadata") or {}) if isinstance(response, dict) else {}  # botocore's ClientError
    codes = (getattr(exc, "status_code", None), getattr(response, "status_code", None), meta.get("HTTPStatusCode"))
    code = next((c for c in codes if isinstance(c, int)), None)
    return not (code is not None and 400 <= code < 500 and code not in _RETRYABLE_STATUS)


async def _sleep(seconds: float) -> None:  # asyncio.sleep looked up at each call (tests replace it)
    await asyncio.sleep(seconds)


@dataclass(frozen=True)
class RetryPolicy:
    """How often, and how patiently, a failing chat-model call is made again: ``attempts`` calls in all, backoffs
    from ``initial_s`` doubling up to ``max_wait_s`` plus a random ``[0, jitter_s]`` (at least a provider's
    ``Retry-After``, up to :data:`RETRY_AFTER_MAX_S`), no attempt nor backoff past
    ``deadline_s`` since the first; a :class:`Reprompt` is retried without backoff.

    >>> RetryPolicy.from_retries(2).attempts
    3
    """

    attempts: int = 3
    initial_s: float = 0.25
    max_wait_s: float = 4.0
    jitter_s: float = 0.25
    deadline_s: float | None = None

    def __post_init__(self) -> None:
        if isinstance(self.attempts, bool) or not isinstance(self.attempts, int) or self.attempts < 1:
            raise InputError("attempts", f"must be an integer >= 1, got {self.attempts!r}")
        for name in ("initial_s", "max_wait_s", "jitter_s"):
            if not getattr(self, name) >= 0:
                raise InputError(name, f"must be >= 0, got {getattr(self, name)!r}")
        if self.deadline_s is not None and not self.deadline_s > 0:
            raise InputError("deadline_s", f"must be > 0 or None, got {self.deadline_s!r}")

    @classmethod
    def from_retries(cls, max_retries: int, **kwargs: Any) -> RetryPolicy:
        return cls(attempts=max_retries + 1, **kwargs)

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome is not None else None
        if isinstance(exc, Reprompt):
            return 0.0
        backoff = wait_exponential(multiplier=self.initial_s, max=self.max_wait_s) + wait_random(0, self.jitter_s)
        seconds = float(backoff(state))
        asked = retry_after(exc) if exc is not None else None
        if asked is not None:  # the provider's Retry-After, up to RETRY_AFTER_MAX_S
            seconds = max(seconds, min(asked, RETRY_AFTER_MAX_S))
        if self.deadline_s is not None:
            seconds = max(0.0, min(seconds, self.deadline_s - (state.seconds_since_start or 0.0)))
        return seconds

    @staticmethod
    def _log(state: RetryCallState) -> None:
        outcome = state.outcome
        exc = outcome.exception() if outcome is not None else None
        if exc is not None and not isinstance(exc, Reprompt):
            logger.warning(
                "chat-model call failed (attempt %d), retrying in %.2f s: %s: %s",
                state.attempt_number, state.upcoming_sleep, type(exc).__name__, exc,
            )

    def retrying(self) -> AsyncRetrying:
        """A ``tenacity.AsyncRetrying`` with this policy; when attempts run out, the last error is raised as it is."""
        stop = stop_after_attempt(self.attempts)
        return AsyncRetrying(
            stop=stop if self.deadline_s is None else stop | stop_after_delay(self.deadline_s), wait=self._wait,
            retry=retry_if_exception(is_retryable), before_sleep=self._log, sleep=_sleep, reraise=True)

    async def call(self, fn: Callable[[], Awaitable[T]]) -> T:
        """``await fn()``, made again on a retryable error; the last error is raised when attempts run out."""
        result: T = await self.retrying()(fn)
        return result
