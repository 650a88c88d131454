"""Reading chat models and their answers: a model's stable name, an answer's text whatever the provider's shape."""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel, LangSmithParams

__all__ = ["NamedChatModel", "describe_llm", "message_text", "stop_reason"]


def describe_llm(llm: Any) -> str:
    """A short stable name for a chat model: its ``model_label``, else its class and model id.

    >>> from grapheval_plugins.testing import ScriptedChatModel
    >>> describe_llm(ScriptedChatModel(model_label="my-model"))
    'my-model'
    """
    name = getattr(llm, "model_label", None)
    if isinstance(name, str) and name:
        return name
    for attr in ("model_id", "model", "model_name", "model_path"):
        value = getattr(llm, attr, None)
        if isinstance(value, str) and value:
            return f"{type(llm).__name__}({value})"
    return type(llm).__name__


class NamedChatModel(BaseChatModel):
    """A chat model of this package, named in tracing (``ls_model_name``) as reports name it."""

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> LangSmithParams:
        params = super()._get_ls_params(stop=stop, **kwargs)
        params.setdefault("ls_model_name", describe_llm(self))
        return params


def message_text(message: Any) -> str:
    """The text of a LangChain message (or a plain string); content blocks keep their text parts.

    >>> from langchain_core.messages import AIMessage
    >>> message_text(AIMessage(content=[{"type": "text", "text": "Hello"}, {"type": "tool_use", "id": "x"}]))
    'Hello'
    """
    content = getattr(message, "content", message)
    if isinstance(content, str):
        return content
    if not isinstance(content, (list, tuple)):
        return str(content)
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type", "text") == "text":
            parts.append(str(block.get("text", "")))
    return "".join(parts)


_NORMAL_STOPS = frozenset({"end_turn", "stop", "stop_sequence", "eos", "tool_use", "tool_calls", "function_call"})


def stop_reason(message: Any) -> str | None:
    """Why the provider ended an answer, when not in the normal way (``"refusal"``, ``"content_filter"``,
    ``"max_tokens"`` …); ``None`` for a normal end or when the answer does not say.

    >>> from langchain_core.messages import AIMessage
    >>> stop_reason(AIMessage(content="", response_metadata={"stop_reason": "refusal"}))
    'refusal'
    >>> stop_reason(AIMessage(content="ok", response_metadata={"stopReason": "end_turn"})) is None
    True
    """
    extra = getattr(message, "additional_kwargs", None)
    if isinstance(extra, dict) and isinstance(extra.get("refusal"), str) and extra["refusal"]:
        return "refusal"  # OpenAI's: the answer's text is in ``refusal``, its finish reason a plain "stop"
    metadata = getattr(message, "response_metadata", None)
    if not isinstance(metadata, dict):
        return None
    for key in ("stop_reason", "stopReason", "finish_reason"):
        value = metadata.get(key)
        if isinstance(value, str) and value and value.lower() not in _NORMAL_STOPS:
            return value
    return None
