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
import json
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

__all__ = ["FunctionScorer", "KeywordScorer", "ScriptedChatModel", "naive_triples_chat_model"]

Responder = Callable[[list[BaseMessage]], str]


class _FakeChatModel(NamedChatModel):
    """A chat model answering through :meth:`_result` after ``latency_s`` seconds (async calls overlap)."""

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
    """A LangChain chat model that answers ``responses`` in turn (the last repeats, an ``Exception`` is raised), or
    what ``respond(messages)`` returns, after ``latency_s`` seconds; ``calls`` holds each call's messages."""

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
    inputs = [found for message in messages for found in _INPUT.findall(str(message.content))]
    triples = []
    for sentence in _SENTENCE.findall(inputs[-1] if inputs else ""):
        words = sentence.strip().rstrip(".!?").split()
        if len(words) >= 4:
            triples.append([" ".join(words[:2]), words[2], " ".join(words[3:])])
    return "<python>" + json.dumps(triples) + "</python>"


def naive_triples_chat_model(latency_s: float = 0.0) -> ScriptedChatModel:
    """A fake chat model answering prompt A with crude triples cut from each sentence of the input (the spec
    ``"py:grapheval_plugins.testing:naive_triples_chat_model"``).

    >>> from grapheval_plugins.extract.prompts import KG_PROMPT
    >>> naive_triples_chat_model().invoke(KG_PROMPT.messages("The cat sat on the mat.")).content
    '<python>[["The cat", "sat", "on the mat"]]</python>'
    """
    return ScriptedChatModel(respond=_naive_triples, model_label="naive-triples", latency_s=latency_s)
