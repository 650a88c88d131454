"""Fault-injecting fakes for the reliability tests: a chat model and a scorer that fail a share of their calls,
reproducibly. No model, no network."""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult
from pydantic import PrivateAttr

from grapheval_plugins.check.base import Scorer
from grapheval_plugins.testing import KeywordScorer, Responder, _chat_result, _FakeChatModel, _naive_triples

CHAOS_LLM_FAULTS: tuple[str, ...] = ("timeout", "throttle", "server_error", "empty", "truncated", "wrong_format")
"""The faults :class:`ChaosChatModel` injects: the first three raise (retryable errors), the last three answer
unusably (an empty answer, an answer cut mid-way as at ``max_tokens``, an answer that is not prompt A's format)."""

CHAOS_SCORER_FAULTS: tuple[str, ...] = ("raise", "nan", "out_of_range", "oom")
"""The faults :class:`ChaosScorer` injects: an exception, a NaN score, a score outside [0, 1], a ``MemoryError``
like a device running out of memory."""


class ChaosTimeoutError(TimeoutError):
    """An injected request timeout."""


class ChaosRateLimitError(Exception):
    """An injected throttling answer (HTTP 429, as provider SDKs raise it: ``status_code`` on the error)."""

    status_code = 429


class ChaosServerError(Exception):
    """An injected provider failure (HTTP 503)."""

    status_code = 503


def _chaos_draw(seed: int, *parts: object) -> random.Random:
    """A generator seeded by ``seed`` and ``parts`` only: the same call draws the same fault in any order."""
    digest = hashlib.sha256(repr((seed, *parts)).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


class ChaosChatModel(_FakeChatModel):
    """A chat model that fails a share ``failure_rate`` of its calls with one of ``faults``, reproducibly.

    Whether and how a call fails is drawn from ``seed``, its messages and how often they were sent before, never
    from the order of calls; the others are answered by ``respond`` (default: :func:`naive_triples_chat_model`'s).
    ``faults_injected`` counts the faults by kind, ``calls`` all calls.

    >>> from grapheval_plugins.extract.prompts import KG_PROMPT
    >>> llm = ChaosChatModel(failure_rate=1.0, faults=("empty",))
    >>> llm.invoke(KG_PROMPT.messages("The cat sat on the mat.")).content
    ''
    >>> llm.faults_injected
    {'empty': 1}
    >>> ChaosChatModel(failure_rate=0.0).invoke(KG_PROMPT.messages("The cat sat on the mat.")).content
    '<python>[["The cat", "sat", "on the mat"]]</python>'

    """

    kind = "chaos-chat-model"
    failure_rate: float = 0.3
    faults: tuple[str, ...] = CHAOS_LLM_FAULTS
    seed: int = 0
    respond: Responder = _naive_triples
    model_label: str = "chaos"
    _seen: dict[str, int] = PrivateAttr(default_factory=dict)
    _injected: dict[str, int] = PrivateAttr(default_factory=dict)
    _calls: int = PrivateAttr(default=0)

    def model_post_init(self, context: Any) -> None:
        if not 0.0 <= self.failure_rate <= 1.0:
            raise ValueError(f"failure_rate must be in [0, 1], got {self.failure_rate!r}")
        if not self.faults or set(self.faults) - set(CHAOS_LLM_FAULTS):
            raise ValueError(f"faults must be a non-empty subset of {CHAOS_LLM_FAULTS}, got {self.faults!r}")

    @property
    def calls(self) -> int:
        return self._calls

    @property
    def faults_injected(self) -> dict[str, int]:
        return dict(self._injected)

    def _result(self, messages: list[BaseMessage]) -> ChatResult:
        key = hashlib.sha256("\x1f".join(str(m.content) for m in messages).encode()).hexdigest()
        with self._lock:
            self._calls += 1
            nth = self._seen[key] = self._seen.get(key, 0) + 1
        rng = _chaos_draw(self.seed, key, nth - 1)
        fault = rng.choice(self.faults) if rng.random() < self.failure_rate else None
        if fault is not None:
            with self._lock:
                self._injected[fault] = self._injected.get(fault, 0) + 1
        if fault == "timeout":
            raise ChaosTimeoutError("injected: the request timed out after 60 s")
        if fault == "throttle":
            raise ChaosRateLimitError("injected: 429 Too Many Requests (rate limit reached)")
        if fault == "server_error":
            raise ChaosServerError("injected: 503 Service Unavailable")
        if fault == "empty":
            return _chat_result("", finish_reason="stop")
        answer = self.respond(list(messages))
        if fault == "truncated":
            return _chat_result(answer[: max(1, len(answer) // 2)], finish_reason="length")
        if fault == "wrong_format":
            answer = answer.replace("<python>", "").replace("</python>", "").translate(str.maketrans("[]", "()"))
            answer = "Sure! Here is what I found: " + answer
        return _chat_result(answer, finish_reason="stop")


class ChaosScorer(Scorer):
    """A scorer that fails on a share ``failure_rate`` of its pairs, drawn from ``seed`` and the pair alone.

    ``raise`` and ``oom`` fail the whole call, ``nan`` and ``out_of_range`` give that pair NaN or 1.5; other pairs
    get ``inner``'s score (default :class:`KeywordScorer`).

    >>> ChaosScorer(failure_rate=0.0).check(["The sky is blue."], ["The sky is blue"])[0].p_unsupported
    0.0
    >>> ChaosScorer(failure_rate=1.0, faults=("nan",)).predict_support([("a", "b")])
    [nan]
    """

    def __init__(
        self,
        failure_rate: float = 0.1,
        faults: Sequence[str] = CHAOS_SCORER_FAULTS,
        seed: int = 0,
        inner: Scorer | None = None,
    ) -> None:
        super().__init__()
        if not 0.0 <= failure_rate <= 1.0:
            raise ValueError(f"failure_rate must be in [0, 1], got {failure_rate!r}")
        if not faults or set(faults) - set(CHAOS_SCORER_FAULTS):
            raise ValueError(f"faults must be a non-empty subset of {CHAOS_SCORER_FAULTS}, got {tuple(faults)!r}")
        self.failure_rate = failure_rate
        self.faults = tuple(faults)
        self.seed = seed
        self.inner = inner if inner is not None else KeywordScorer()
        self.name = f"chaos({self.inner.name})"
        self.max_premise_tokens = self.inner.max_premise_tokens

    def fault_of(self, premise: str, hypothesis: str) -> str | None:
        """The fault this pair triggers (``None``: scored normally)."""
        rng = _chaos_draw(self.seed, premise, hypothesis)
        return rng.choice(self.faults) if rng.random() < self.failure_rate else None

    def predict_support(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        faults = [self.fault_of(p, h) for p, h in pairs]
        if "oom" in faults:
            raise MemoryError("injected: CUDA out of memory. Tried to allocate 2.00 GiB")
        if "raise" in faults:
            raise RuntimeError("injected: scorer backend crashed")
        scores = self.inner.predict_support(pairs)
        out: list[float] = []
        for fault, score in zip(faults, scores):
            out.append(math.nan if fault == "nan" else 1.5 if fault == "out_of_range" else score)
        return out
