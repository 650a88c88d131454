"""Reading chat models and their answers: a model's stable name, an answer's text whatever the provider's shape.

The lowest layer of the package, used by extraction, scoring, rate limiting and correction alike.
"""

from __future__ import annotations

from typing import Any

__all__ = ["describe_llm", "message_text"]


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
