"""A host framework's own model objects (a DeepEval ``DeepEvalBaseLLM``, a Ragas LLM) as LangChain chat models,
over the functions the host adapter passes (text in and out, or a structured answer written back as text).

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
import functools
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

__all__ = ["ClaimVerdict", "Costed", "JudgeAnswer", "ExtractedTriple", "KnowledgeGraphAnswer",
    "PromptChatModel", "StructuredTriplesChatModel", "openai_client", "openai_completion", "render_prompt"]


def render_prompt(messages: Sequence[BaseMessage]) -> str:
    """One text prompt from chat messages (blank lines between them; an earlier answer quoted as such).

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
    texts = [(message, message_text(message).strip()) for message in messages]
    return "\n\n".join(f"Your previous answer was:\n{t}" if isinstance(m, AIMessage) else t
                       for m, t in texts if t)


def openai_client(obj: Any) -> Any:
    """``obj`` if it is an ``openai`` SDK client (sync or async), else ``None``."""
    try:
        import openai
    except ImportError:
        return None
    return obj if isinstance(obj, (openai.OpenAI, openai.AsyncOpenAI)) else None


async def openai_completion(client: Any, model: str, prompt: str, top_logprobs: int, system: str | None = None,
        **options: Any) -> Any:
    """The ``ChatCompletion`` of ``prompt`` as one user message (after ``system`` where given) through an ``openai``
    client (a sync one in a worker thread), with the token log-probabilities, the SDK retrying twice."""
    import openai

    messages = [{"role": "system", "content": system}] if system else []
    call = functools.partial(client.with_options(max_retries=2).chat.completions.create, model=model,
        messages=[*messages, {"role": "user", "content": prompt}], logprobs=True, top_logprobs=top_logprobs, **options)
    return await call() if isinstance(client, openai.AsyncOpenAI) else await asyncio.to_thread(call)


class Costed(NamedTuple):
    """An answer with the US dollars it cost (``None``: not reported), put where usage metering reads it."""

    answer: Any
    cost: float | None


class ExtractedTriple(BaseModel):
    """One triple as a structured-output model fills it (a list of three strings too, as small models write).

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
        """A number written as text ("95%"), as JSON-mode answers often are, read as the number."""
        if isinstance(value, str):
            text = value.strip().rstrip("%").strip()
            try:
                number = float(text)
            except ValueError:
                return value
            return int(number) if number.is_integer() else number
        return value


class JudgeAnswer(BaseModel):
    """The judge's verdicts on numbered claims (a mapping of numbers to labels, as small models write, too).

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
        return "\n".join(f"{v.claim}: {v.label}" + ("" if v.probability is None else f" {v.probability:g}")
                         for v in self.verdicts)


class _HostChatModel(BaseChatModel):
    """A chat model over a host's ``complete`` / ``acomplete`` pair (each path falls back to the other); bound with
    ``logprobs=True`` (as the LLM judge binds a model declaring the option), over ``acomplete_raw(prompt,
    top_logprobs)`` where given: an OpenAI ``ChatCompletion`` with the token log-probabilities (and its cost)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    label: str = "host-model"  # the name in reports and cache keys
    complete: Callable[..., Any] | None = None
    acomplete: Callable[..., Awaitable[Any]] | None = None
    acomplete_raw: Callable[[str, int], Awaitable[Costed]] | None = None
    logprobs: bool | None = None  # declared: the judge asks, and reads from the answer whether they came
    top_logprobs: int | None = None

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
        counts = None
        if hasattr(result, "choices"):  # an OpenAI ChatCompletion: its text, log-probabilities and token counts
            choice, usage = result.choices[0], result.usage
            logprobs: Any = getattr(choice, "logprobs", None)  # an SDK object, or a dict (LiteLLM)
            metadata.update(finish_reason=choice.finish_reason,
                            logprobs=logprobs.model_dump() if hasattr(logprobs, "model_dump") else logprobs)
            counts = usage and {"input_tokens": usage.prompt_tokens, "output_tokens": usage.completion_tokens,
                                "total_tokens": usage.total_tokens}
            text = choice.message.content or ""
        else:
            text = self._text_of(result)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(
            text, response_metadata=metadata, usage_metadata=counts))])

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
            run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        if self.complete is None or (kwargs.get("logprobs") and self.acomplete_raw is not None):
            from .._async import run_sync

            assert self.complete is not None or self.acomplete is not None
            return run_sync(self._agenerate(messages, stop, **kwargs))
        return self._answer(self.complete(*self._arguments(render_prompt(messages))))

    async def _agenerate(self, messages: list[BaseMessage], stop: list[str] | None = None,
            run_manager: AsyncCallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        if kwargs.get("logprobs") and self.acomplete_raw is not None:
            return self._answer(await self.acomplete_raw(render_prompt(messages), kwargs.get("top_logprobs") or 1))
        if self.acomplete is None:  # LangChain's own: _generate in a worker thread
            return await super()._agenerate(messages, stop, run_manager, **kwargs)
        return self._answer(await self.acomplete(*self._arguments(render_prompt(messages))))


class PromptChatModel(_HostChatModel):
    """A chat model over a text-generating ``complete(prompt)`` and/or ``acomplete(prompt)``."""

    complete: Callable[[str], str | Costed] | None = None
    acomplete: Callable[[str], Awaitable[str | Costed]] | None = None


class StructuredTriplesChatModel(_HostChatModel):
    """A chat model over a structured-output ``(a)complete(prompt, response_model)`` (e.g. Ragas's
    ``InstructorLLM.generate`` / ``agenerate``), filling :class:`KnowledgeGraphAnswer`."""

    complete: Callable[[str, type[BaseModel]], BaseModel] | None = None
    acomplete: Callable[[str, type[BaseModel]], Awaitable[BaseModel]] | None = None
    response_model: type[KnowledgeGraphAnswer] | type[JudgeAnswer] = KnowledgeGraphAnswer
    _judging: StructuredTriplesChatModel | None = PrivateAttr(default=None)

    def for_judging(self) -> StructuredTriplesChatModel:
        """The same model filling :class:`JudgeAnswer`, for the LLM judge (one per model, so engines share it)."""
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
