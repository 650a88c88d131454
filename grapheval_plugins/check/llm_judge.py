"""An LLM judge over any LangChain chat model: one call per context chunk with all its claims, numbered (how it
reads P(supported): docs/scorers.md and :func:`~grapheval_plugins.check.judge.p_supported`).

Example (any chat model; here a fake that always answers the same)::

    >>> from grapheval_plugins.check.llm_judge import LLMJudge
    >>> from grapheval_plugins.testing import ScriptedChatModel
    >>> judge = LLMJudge(ScriptedChatModel(responses=["1: supported 95\\n2: contradicted 3"]))
    >>> [round(s.p_unsupported, 2) for s in judge.check(["Paris is in France."] * 2, ["Paris in France", "Paris in Spain"])]
    [0.05, 0.97]
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from typing_extensions import Unpack

from .._async import run_sync
from .._template import fill
from ..exceptions import InputError
from ..messages import describe_llm, message_text, stop_reason
from .judge import (
    JUDGE_LABELS,
    JUDGE_RUBRIC,
    VERDICT_P_UNSUPPORTED,
    JudgeCalibration,
    JudgeScorer,
    LabelReading,
)
from .verdicts import label_logprobs_at, parse_verdicts

__all__ = ["AUTO_TOP_LOGPROBS", "CHAT_JUDGE_PROMPT", "ChatJudgePrompt", "ChatLabelLogits", "ChatOptions", "LLMJudge",
           "is_chat_model", "takes_option"]

AUTO_TOP_LOGPROBS = 5


@dataclass(frozen=True)
class ChatJudgePrompt:
    """The chat judge's wording: ``system`` holds ``{labels}``, ``user`` ``{context}`` and ``{claims}``,
    ``claim_line`` ``{number}`` and ``{claim}`` (filled in one pass by :func:`grapheval_plugins._template.fill`)."""

    system: str = (
        JUDGE_RUBRIC
        + "\n\nYou are given a context and numbered claims. Judge every claim on its own. Answer with one line "
        "per claim, in the order given: the claim's number, a colon, one word ({labels}), then the probability "
        "from 0 to 100 that the claim is supported by the context (100: the context states it; 50: unsure; 0: the "
        "context contradicts it or does not state it). Write nothing else."
    )
    user: str = ("Context:\n{context}\n\nClaims:\n{claims}\n\n"
                 "Answer one line per claim: <number>: <label> <probability 0-100>")
    claim_line: str = "{number}. {claim}"

    def messages(self, context: str, claims: Sequence[str], labels: Sequence[str]) -> list[BaseMessage]:
        """The system and user messages: the context once, then the claims numbered.

        >>> m = CHAT_JUDGE_PROMPT.messages("Ctx {x}.", ["a", "b\\nc"], JUDGE_LABELS)
        >>> print(m[1].content)
        Context:
        Ctx {x}.
        <BLANKLINE>
        Claims:
        1. a
        2. b c
        <BLANKLINE>
        Answer one line per claim: <number>: <label> <probability 0-100>
        """
        lines = "\n".join(
            fill(self.claim_line, number=str(i), claim=" ".join(claim.split()))
            for i, claim in enumerate(claims, start=1)
        )
        system = fill(self.system, labels=", ".join(labels))
        user = fill(self.user, claims=lines, context=context)
        return [SystemMessage(content=system), HumanMessage(content=user)]


CHAT_JUDGE_PROMPT = ChatJudgePrompt()


def is_chat_model(obj: Any) -> bool:
    """True for a LangChain ``BaseChatModel``, or one bound with options (``model.bind(logprobs=True)``).

    >>> from grapheval_plugins.testing import ScriptedChatModel
    >>> is_chat_model(ScriptedChatModel()), is_chat_model(ScriptedChatModel().bind(stop=["x"])), is_chat_model("x")
    (True, True, False)
    """
    from langchain_core.language_models import BaseChatModel

    return isinstance(_unbound(obj), BaseChatModel)


def _unbound(llm: Any) -> Any:
    from langchain_core.runnables import RunnableBinding

    return llm.bound if isinstance(llm, RunnableBinding) else llm


def takes_option(llm: Any, option: str) -> bool:
    """True when the chat model's client declares ``option`` (``"logprobs"``: ``ChatOpenAI`` and the clients built
    on it, whether the provider honours it is read from its answers; ``"temperature"``: the provider clients).

    >>> from grapheval_plugins.testing import ScriptedChatModel
    >>> takes_option(ScriptedChatModel(), "logprobs"), takes_option(ScriptedChatModel(), "temperature")
    (False, False)
    """
    return option in (getattr(type(_unbound(llm)), "model_fields", None) or {})


class ChatLabelLogits:
    """The :class:`~grapheval_plugins.check.judge.LabelLogits` backend over a LangChain chat model (or a bound one).

    Args:
        request_logprobs: ``"auto"``: where the client takes the option, ask for ``top_logprobs=5`` until an answer
            comes back without them or the call with them fails (:attr:`logprobs_returned` remembers); an integer
            ``k``: always ask (``top_logprobs=k`` if ``k > 0``); ``None``: never ask.
        max_context_tokens: chunk contexts longer than this (in :meth:`count_tokens` units); ``None``: whole.
        samples: when an answer comes back without log-probabilities, ask the same prompt this many times in all
            (the others at ``sample_temperature``, where the client takes one) and average each claim's
            P(supported) over the answers, so that the score still ranks outputs; ``1``: one answer.
    """

    def __init__(self, llm: Any, *, prompt: ChatJudgePrompt = CHAT_JUDGE_PROMPT,
            request_logprobs: int | str | None = "auto", max_context_tokens: int | None = None,
            samples: int = 5, sample_temperature: float = 1.0, name: str | None = None) -> None:
        if not (hasattr(llm, "invoke") and hasattr(llm, "ainvoke")):
            raise InputError("llm", f"{type(llm).__name__} is not a LangChain chat model")
        if request_logprobs != "auto" and request_logprobs is not None and (
                isinstance(request_logprobs, bool) or not isinstance(request_logprobs, int) or request_logprobs < 0):
            raise InputError("request_logprobs", f"must be 'auto', None or an integer >= 0, got {request_logprobs!r}")
        if max_context_tokens is not None and (isinstance(max_context_tokens, bool)
                                               or not isinstance(max_context_tokens, int) or max_context_tokens < 8):
            raise InputError("max_context_tokens", f"must be None or an integer >= 8, got {max_context_tokens!r}")
        if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
            raise InputError("samples", f"must be an integer >= 1, got {samples!r}")
        self.llm = llm
        self.samples = samples
        self._sampler: Any = llm.bind(temperature=sample_temperature) if samples > 1 and takes_option(llm, "temperature") else None
        self.prompt = prompt
        self.request_logprobs = request_logprobs
        self.max_context_tokens = max_context_tokens
        self.name = name or f"judge:{describe_llm(_unbound(llm))}"
        self.logprobs_returned: bool | None = None  # None until the first answer
        self._bound: Any = None
        if request_logprobs == "auto":
            if takes_option(llm, "logprobs"):
                self._bound = llm.bind(logprobs=True, top_logprobs=AUTO_TOP_LOGPROBS)
        elif isinstance(request_logprobs, int):
            self._bound = llm.bind(logprobs=True, **({"top_logprobs": request_logprobs} if request_logprobs else {}))

    @property
    def _runnable(self) -> Any:
        if self._bound is not None and (self.request_logprobs != "auto" or self.logprobs_returned is not False):
            return self._bound
        return self.llm

    def _learn(self, message: Any) -> Any:
        if self.logprobs_returned is None or _logprob_tokens(message) is not None:
            self.logprobs_returned = _logprob_tokens(message) is not None
        return message

    def _probing(self) -> bool:
        return self.request_logprobs == "auto" and self._bound is not None and self.logprobs_returned is None

    async def _aask(self, messages: list[BaseMessage]) -> Any:
        runnable = self._runnable
        try:
            return self._learn(await runnable.ainvoke(messages))
        except Exception:
            if runnable is not self._bound or not self._probing():
                raise
        message = await self.llm.ainvoke(messages)
        self.logprobs_returned = False
        return message

    def label_logprobs(self, context: str, claims: Sequence[str], labels: Sequence[str]) -> list[LabelReading]:
        return run_sync(self.alabel_logprobs(context, claims, labels))

    async def alabel_logprobs(self, context: str, claims: Sequence[str], labels: Sequence[str]) -> list[LabelReading]:
        if not claims:
            return []
        messages = self.prompt.messages(context, claims, labels)
        message = await self._aask(messages)
        first = self.read(message, len(claims), labels)
        if self._sampler is None or _logprob_tokens(message) is not None or not any(r.ok for r in first):
            return first  # log-probabilities grade it, or it judged nothing (the scorer's retry asks again)
        more = await asyncio.gather(*(self._sampler.ainvoke(messages) for _ in range(self.samples - 1)),
                                    return_exceptions=True)
        return self.read_samples([first], more, len(claims), labels)

    @classmethod
    def read_samples(cls, readings: list[list[LabelReading]], more: Sequence[Any], n_claims: int,
            labels: Sequence[str]) -> list[LabelReading]:
        """Per claim, the readings of the answers that judged it (``samples``, averaged by
        :func:`~grapheval_plugins.check.judge.p_supported`) and their most frequent verdict: those already read,
        then the answers in ``more``, of which a failed call (an exception) is left out.

        >>> from langchain_core.messages import AIMessage
        >>> [r] = ChatLabelLogits.read_samples([], [AIMessage("1: supported 90"), AIMessage("1: unknown 30"),
        ...                                         RuntimeError("503")], 1, ["supported", "unknown"])
        >>> r.verdict, [s.stated for s in r.samples]
        ('supported', [0.9, 0.3])
        """
        for answer in more:
            if isinstance(answer, BaseException) and not isinstance(answer, Exception):
                raise answer  # a cancellation or an exit is never swallowed
        readings = readings + [cls.read(a, n_claims, labels) for a in more if not isinstance(a, BaseException)]
        combined: list[LabelReading] = []
        for per_answer in zip(*readings):
            judged = [r for r in per_answer if r.ok]
            verdicts = [r.verdict for r in judged]
            combined.append(LabelReading(verdict=max(verdicts, key=verdicts.count), samples=tuple(judged))
                            if judged else per_answer[0])
        return combined

    @staticmethod
    def read(message: Any, n_claims: int, labels: Sequence[str]) -> list[LabelReading]:
        """The readings of ``n_claims`` claims from a chat answer (and its OpenAI-format token log-probabilities)."""
        text = message_text(message)
        parsed = parse_verdicts(text, n_claims, labels)
        tokens = _logprob_tokens(message)
        readings: list[LabelReading] = []
        for number in range(1, n_claims + 1):
            verdict = parsed.verdicts.get(number)
            if verdict is None:
                excerpt = " ".join(text.split())[:160]
                stopped = stop_reason(message)
                why = f" (the provider's stop reason: {stopped!r})" if stopped else ""
                readings.append(LabelReading(error=f"{parsed.claim_problems[number]} in the answer {excerpt!r}{why}"))
                continue
            logprobs, note = label_logprobs_at(tokens, text, verdict, labels) if tokens else (None, None)
            notes = (note,) if note else ()
            readings.append(LabelReading(logprobs=logprobs, verdict=verdict.label, notes=notes, stated=verdict.stated))
        return readings

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` by the model class's own tokenizer, else an estimate from words (never LangChain's
        GPT-2 fallback, which may download one)."""
        from langchain_core.language_models import BaseLanguageModel

        from .base import _approx_tokens

        model = _unbound(self.llm)
        own = (type(model).get_token_ids is not BaseLanguageModel.get_token_ids
               or type(model).get_num_tokens is not BaseLanguageModel.get_num_tokens
               or getattr(model, "custom_get_token_ids", None) is not None)
        if own:
            try:
                return int(model.get_num_tokens(text))
            except Exception:  # noqa: BLE001 - a provider whose tokenizer is unavailable falls back to the estimate
                pass
        return _approx_tokens(text)


def _logprob_tokens(message: Any) -> list[Mapping[str, Any]] | None:
    metadata = getattr(message, "response_metadata", None)
    logprobs = metadata.get("logprobs") if isinstance(metadata, Mapping) else None
    content = logprobs.get("content") if isinstance(logprobs, Mapping) else None
    return content if isinstance(content, list) and content else None


class ChatOptions(TypedDict, total=False):
    """The options of :class:`ChatLabelLogits`, which :class:`LLMJudge` passes through."""

    prompt: ChatJudgePrompt
    request_logprobs: int | str | None
    max_context_tokens: int | None
    samples: int
    sample_temperature: float
    name: str | None


class LLMJudge(JudgeScorer):
    """A :class:`~grapheval_plugins.check.judge.JudgeScorer` over :class:`ChatLabelLogits` (see the module docs);
    ``GraphEval(scorer=chat_model)`` and ``"judge:<provider>:<model>"`` specs build one."""

    def __init__(self, llm: Any, *, calibration: JudgeCalibration | None = None,
            verdict_p_unsupported: Mapping[str, float] = VERDICT_P_UNSUPPORTED,
            labels: Sequence[str] = JUDGE_LABELS, retries: int = 1, max_concurrency: int = 4,
            **chat: Unpack[ChatOptions]) -> None:
        backend = ChatLabelLogits(llm, **chat)
        super().__init__(backend, labels=labels, calibration=calibration, verdict_p_unsupported=verdict_p_unsupported,
                         retries=retries, max_concurrency=max_concurrency, name=backend.name)
        self.llm = llm
        self.chat = backend

    @property
    def logprobs_returned(self) -> bool | None:
        return self.chat.logprobs_returned
