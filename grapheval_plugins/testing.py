"""Fakes for your own tests: a scripted chat model and simple scorers. No model, no network.

>>> from grapheval_plugins.testing import ScriptedChatModel, KeywordScorer
>>> llm = ScriptedChatModel(responses=['<python>[["Sky", "is", "blue"]]</python>'])
>>> llm.invoke("hi").content
'<python>[["Sky", "is", "blue"]]</python>'
>>> len(llm.calls)
1
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import random
import re
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import ConfigDict, Field, PrivateAttr

from .check.base import Scorer
from .messages import NamedChatModel

__all__ = [
    "CHAOS_LLM_FAULTS",
    "CHAOS_SCORER_FAULTS",
    "ChaosChatModel",
    "ChaosRateLimitError",
    "ChaosScorer",
    "ChaosServerError",
    "ChaosTimeoutError",
    "FunctionScorer",
    "KeywordScorer",
    "ScriptedChatModel",
    "naive_triples_chat_model",
]

Responder = Callable[[list[BaseMessage]], str]


class _FakeChatModel(NamedChatModel):
    """A chat model answering through :meth:`_result`, after ``latency_s`` seconds (``asyncio.sleep`` on the async
    path, so concurrent calls overlap as they would with a provider's API)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    kind: ClassVar[str]
    latency_s: float = 0.0
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @property
    def _llm_type(self) -> str:
        return self.kind

    def _result(self, messages: list[BaseMessage]) -> ChatResult:
        raise NotImplementedError

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        if self.latency_s:
            time.sleep(self.latency_s)
        return self._result(messages)

    async def _agenerate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                         run_manager: AsyncCallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        return self._result(messages)


def _chat_result(text: str, **metadata: Any) -> ChatResult:
    return ChatResult(generations=[ChatGeneration(message=AIMessage(text, response_metadata=metadata))])


class ScriptedChatModel(_FakeChatModel):
    """A LangChain chat model that answers from a script and records every call (``calls``: each call's messages).

    Args:
        responses: answers returned in turn (the last one repeats); an ``Exception`` in the list is raised.
        respond: alternatively, a function of the messages that returns the answer (or raises).
        latency_s: seconds each call takes.
    """

    kind = "scripted-chat-model"
    responses: list[Any] = Field(default_factory=list)
    respond: Responder | None = None
    model_label: str = "scripted"
    _calls: list[list[BaseMessage]] = PrivateAttr(default_factory=list)

    @property
    def calls(self) -> list[list[BaseMessage]]:
        return self._calls

    def _answer(self, messages: list[BaseMessage]) -> str:
        with self._lock:
            index = len(self._calls)
            self._calls.append(list(messages))
        if self.respond is not None:
            return self.respond(list(messages))
        if not self.responses:
            raise RuntimeError("ScriptedChatModel has no responses left")
        answer = self.responses[min(index, len(self.responses) - 1)]
        if isinstance(answer, BaseException):
            raise answer
        return str(answer)

    def _result(self, messages: list[BaseMessage]) -> ChatResult:
        return _chat_result(self._answer(messages))


class FunctionScorer(Scorer):
    """A scorer from a function ``(premise, hypothesis) -> P(supported)``. Records the pairs of every batch.

    >>> s = FunctionScorer(lambda premise, hypothesis: 1.0 if hypothesis in premise else 0.0)
    >>> s.check(["abc"], ["b"])[0].p_unsupported
    0.0
    """

    def __init__(
        self,
        fn: Callable[[str, str], float],
        name: str = "function",
        max_premise_tokens: int | None = None,
    ) -> None:
        super().__init__()
        self.fn = fn
        self.name = name
        self.max_premise_tokens = max_premise_tokens
        self.batches: list[list[tuple[str, str]]] = []

    def predict_support(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        self.batches.append(list(pairs))
        return [float(self.fn(p, h)) for p, h in pairs]


_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    "a an the of in on at to for and or is was are were be been by with as from that this it its has have had "
    "he she they his her their".split()
)


def keyword_support(premise: str, hypothesis: str) -> float:
    """1.0 when every content word of the hypothesis occurs in the premise, else half the share that does."""
    words = [w for w in _WORD.findall(hypothesis.lower()) if w not in _STOP]
    if not words:
        return 1.0
    present = set(_WORD.findall(premise.lower()))
    share = sum(w in present for w in words) / len(words)
    return 1.0 if share == 1.0 else 0.5 * share


class KeywordScorer(FunctionScorer):
    """A deterministic word-overlap scorer for tests and examples: a claim is supported iff all its content words
    appear in the context. Not a real hallucination detector."""

    def __init__(self, max_premise_tokens: int | None = None) -> None:
        super().__init__(keyword_support, name="keyword-overlap", max_premise_tokens=max_premise_tokens)


_INPUT = re.compile(r"<input>(.*?)</input>", re.S)
_SENTENCE = re.compile(r"[^.!?]+[.!?]?")


def _naive_triples(messages: list[BaseMessage]) -> str:
    """Answer prompt A by cutting each sentence of the input into (first two words, next word, rest)."""
    text = ""
    for message in messages:
        found = _INPUT.findall(str(message.content))
        if found:
            text = found[-1]
    triples = []
    for sentence in _SENTENCE.findall(text):
        words = sentence.strip().rstrip(".!?").split()
        if len(words) >= 4:
            triples.append([" ".join(words[:2]), words[2], " ".join(words[3:])])
    import json

    return "<python>" + json.dumps(triples) + "</python>"


def naive_triples_chat_model(latency_s: float = 0.0) -> ScriptedChatModel:
    """A fake chat model answering prompt A with crude triples cut from each sentence of the input (the spec
    ``"py:grapheval_plugins.testing:naive_triples_chat_model"``).

    >>> from grapheval_plugins.extract.prompts import KG_PROMPT
    >>> naive_triples_chat_model().invoke(KG_PROMPT.messages("The cat sat on the mat.")).content
    '<python>[["The cat", "sat", "on the mat"]]</python>'
    """
    return ScriptedChatModel(respond=_naive_triples, model_label="naive-triples", latency_s=latency_s)


# --------------------------------------------------------------------------- fault injection
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
