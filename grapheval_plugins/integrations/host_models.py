"""A host framework's own model objects as the LangChain chat model GraphEval's extractor calls.

DeepEval users hold a ``DeepEvalBaseLLM`` (text in, text out), Ragas users a Ragas LLM (text in, or a Pydantic
model out through Instructor). The adapters build one of the two chat models here around it:

* :class:`PromptChatModel`: for text-generating models. The chat messages (prompt A and, on a retry, the previous
  answer and the retry instruction) are rendered into one prompt (:func:`render_prompt`); the model's text answer
  goes to the usual safe parser.
* :class:`StructuredTriplesChatModel`: for structured-output models. The model fills :class:`KnowledgeGraphAnswer`
  (a list of subject / relation / object triples); the result is written back as the ``<python>[...]</python>``
  answer the parser reads, so caching, retries and reports work as for any chat model. As the judge
  (:meth:`StructuredTriplesChatModel.for_judging`) it fills :class:`JudgeAnswer`, written back as the judge's
  ``<n>: <label> <0-100>`` lines.

Both import nothing from the hosts: the host adapter passes the functions that call its model.

>>> import asyncio
>>> from langchain_core.messages import HumanMessage, SystemMessage
>>> llm = PromptChatModel(complete=lambda prompt: f"{len(prompt)} characters", label="echo")
>>> llm.invoke([SystemMessage("Be brief."), HumanMessage("Hi")]).content
'13 characters'
>>> async def structured(prompt, response_model):
...     return response_model(triples=[{"subject": "Paris", "relation": "capital of", "object": "France"}])
>>> kg = StructuredTriplesChatModel(acomplete=structured, label="instructor")
>>> kg.invoke([HumanMessage("Paris is the capital of France.")]).content
'<python>[["Paris", "capital of", "France"]]</python>'
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, NamedTuple

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LangSmithParams
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from ..messages import describe_llm, message_text
from ..usage import COST_KEY

__all__ = [
    "ClaimVerdict",
    "Costed",
    "JudgeAnswer",
    "ExtractedTriple",
    "KnowledgeGraphAnswer",
    "PromptChatModel",
    "StructuredTriplesChatModel",
    "render_prompt",
]


def render_prompt(messages: Sequence[BaseMessage]) -> str:
    """One text prompt from chat messages, for models that take a string.

    System and user messages are joined by blank lines; an earlier answer of the model (a retry) is quoted as such.

    >>> from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
    >>> print(render_prompt([SystemMessage("Rules."), HumanMessage("Task."), AIMessage("[x"), HumanMessage("Fix it.")]))
    Rules.
    <BLANKLINE>
    Task.
    <BLANKLINE>
    Your previous answer was:
    [x
    <BLANKLINE>
    Fix it.
    """
    parts: list[str] = []
    for message in messages:
        text = message_text(message).strip()
        if not text:
            continue
        parts.append(f"Your previous answer was:\n{text}" if isinstance(message, AIMessage) else text)
    return "\n\n".join(parts)


class Costed(NamedTuple):
    """An answer of a host's model with the US dollars it cost (``None``: not reported): ``complete`` /
    ``acomplete`` may return one, and the chat model's answer then carries the cost in
    ``response_metadata["cost_usd"]``, where usage metering (:mod:`grapheval_plugins.usage`) reads it."""

    answer: Any
    cost: float | None


class ExtractedTriple(BaseModel):
    """One ``[subject, relation, object]`` triple, as a structured-output model fills it. A list of three strings
    (prompt A's own format, which small models keep to in JSON mode) is read as the three fields.

    >>> ExtractedTriple.model_validate(["Paris", "capital of", "France"]).object
    'France'
    """

    subject: str = Field(description="the first entity")
    relation: str = Field(description="the relation between the two entities")
    object: str = Field(description="the second entity")

    @model_validator(mode="before")
    @classmethod
    def _from_list(cls, value: Any) -> Any:
        if isinstance(value, (list, tuple)) and len(value) == 3:
            return dict(zip(("subject", "relation", "object"), value))
        return value


class KnowledgeGraphAnswer(BaseModel):
    """The knowledge graph of a text: every fact it states, as triples."""

    triples: list[ExtractedTriple] = Field(description="every fact of the text as a (subject, relation, object) triple")

    def as_answer(self) -> str:
        """The answer text GraphEval's parser reads: the triples inside ``<python>`` tags."""
        listed = [[t.subject, t.relation, t.object] for t in self.triples]
        return "<python>" + json.dumps(listed, ensure_ascii=False) + "</python>"


class ClaimVerdict(BaseModel):
    """The judge's verdict on one numbered claim, as a structured-output model fills it."""

    claim: int = Field(description="the claim's number")
    label: str = Field(description="supported, contradicted or unknown")
    probability: float | None = Field(default=None, description="0-100: how likely the claim is supported")

    @field_validator("claim", "probability", mode="before")
    @classmethod
    def _number(cls, value: Any) -> Any:
        """A number written as text ("1", "95", "95%"), as JSON-mode answers often are: read as the number (a
        strict validation, as Instructor's, takes no text for a number)."""
        if isinstance(value, str):
            text = value.strip().rstrip("%").strip()
            try:
                number = float(text)
            except ValueError:
                return value
            return int(number) if number.is_integer() else number
        return value


class JudgeAnswer(BaseModel):
    """The judge's verdicts on an output's numbered claims. A mapping of claim numbers to labels (what small models
    write in JSON mode, following the prompt's ``<n>: <label> <0-100>`` lines) is read as the verdicts, with its
    one probability when it gives one.

    >>> JudgeAnswer.model_validate({"1": "supported", "probability 0-100": "95"}).as_answer()
    '1: supported 95'
    """

    verdicts: list[ClaimVerdict] = Field(description="one verdict per numbered claim")

    @model_validator(mode="before")
    @classmethod
    def _from_mapping(cls, value: Any) -> Any:
        if not isinstance(value, dict) or "verdicts" in value:
            return value
        numbered = [(int(k), v) for k, v in value.items() if str(k).strip().isdigit() and isinstance(v, str)]
        figures = [v for k, v in value.items() if "prob" in str(k).lower()]
        probability = figures[0] if len(figures) == 1 and len(numbered) == 1 else None
        return {"verdicts": [{"claim": n, "label": label, "probability": probability} for n, label in numbered]}

    def as_answer(self) -> str:
        """The answer text the judge's parser reads: ``<n>: <label> <0-100>`` a line."""
        return "\n".join(f"{v.claim}: {v.label}" + ("" if v.probability is None else f" {v.probability:g}")
                         for v in self.verdicts)


class _HostChatModel(BaseChatModel):
    """A chat model over a host's ``complete`` / ``acomplete`` pair: one sync and one async path for every
    subclass, which says only what the call takes (:meth:`_arguments`) and how its result reads (:meth:`_text_of`).

    ``invoke`` calls ``complete`` (or runs ``acomplete`` on the package's background loop when there is none);
    ``ainvoke`` awaits ``acomplete`` (or runs ``complete`` in a worker thread when there is none).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    label: str = "host-model"
    """The model's name in reports and cache keys (``describe_llm`` reads ``model_label``)."""
    complete: Callable[..., Any] | None = None
    acomplete: Callable[..., Awaitable[Any]] | None = None

    @property
    def model_label(self) -> str:
        return self.label

    @property
    def _llm_type(self) -> str:
        return "grapheval-host-model"

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> LangSmithParams:
        params = super()._get_ls_params(stop=stop, **kwargs)
        params.setdefault("ls_model_name", describe_llm(self))  # the standard tracing parameters name the model
        return params

    def _arguments(self, prompt: str) -> tuple[Any, ...]:
        return (prompt,)

    def _text_of(self, result: Any) -> str:
        return str(result)

    def _answer(self, result: Any) -> ChatResult:
        metadata: dict[str, Any] = {}
        if isinstance(result, Costed):  # the dollars the host's model reported go where usage metering reads them
            result, metadata = result.answer, ({} if result.cost is None else {COST_KEY: result.cost})
        return ChatResult(generations=[ChatGeneration(message=AIMessage(self._text_of(result),
                                                                        response_metadata=metadata))])

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        arguments = self._arguments(render_prompt(messages))
        if self.complete is None:
            from .._async import run_sync

            assert self.acomplete is not None
            return self._answer(run_sync(_awaited(self.acomplete(*arguments))))
        return self._answer(self.complete(*arguments))

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        arguments = self._arguments(render_prompt(messages))
        if self.acomplete is None:
            assert self.complete is not None
            return self._answer(await asyncio.to_thread(self.complete, *arguments))
        return self._answer(await self.acomplete(*arguments))


class PromptChatModel(_HostChatModel):
    """A chat model over a text-generating function ``prompt -> answer`` (and optionally its async form).

    Args:
        complete: the synchronous call; used by ``invoke`` and, in a worker thread, by ``ainvoke`` when no
            ``acomplete`` is given.
        acomplete: the asynchronous call (used by ``invoke`` too when there is no ``complete``).
        label: the model's name (reports, cache keys).
    """

    complete: Callable[[str], str | Costed] | None = None
    acomplete: Callable[[str], Awaitable[str | Costed]] | None = None


class StructuredTriplesChatModel(_HostChatModel):
    """A chat model over a structured-output function ``(prompt, response_model) -> response_model instance``.

    The model fills :class:`KnowledgeGraphAnswer`; the answer is its triples in the parser's format.

    Args:
        complete: the synchronous call (e.g. a Ragas ``InstructorLLM.generate``).
        acomplete: the asynchronous call (e.g. ``InstructorLLM.agenerate``).
        label: the model's name (reports, cache keys).
    """

    complete: Callable[[str, type[BaseModel]], BaseModel] | None = None
    acomplete: Callable[[str, type[BaseModel]], Awaitable[BaseModel]] | None = None
    response_model: type[KnowledgeGraphAnswer] | type[JudgeAnswer] = KnowledgeGraphAnswer
    """What the model fills: the triples (extraction), or the judge's verdicts (:meth:`for_judging`)."""
    _judging: StructuredTriplesChatModel | None = PrivateAttr(default=None)

    def for_judging(self) -> StructuredTriplesChatModel:
        """The same model filling :class:`JudgeAnswer`, for the LLM judge (one model, every stage:
        :func:`~grapheval_plugins.models.scorer_for` asks for it); one per model, so engines share it."""
        if self.response_model is JudgeAnswer:
            return self
        if self._judging is None:
            self._judging = self.model_copy(update={"response_model": JudgeAnswer})
        return self._judging

    def _arguments(self, prompt: str) -> tuple[Any, ...]:
        return (prompt, self.response_model)

    def _text_of(self, result: Any) -> str:
        if not isinstance(result, self.response_model):
            result = self.response_model.model_validate(result, from_attributes=True)
        return str(result.as_answer())


async def _awaited(value: Awaitable[Any]) -> Any:
    return await value
