"""The text of a chat-model answer, whatever the provider's message shape."""

from __future__ import annotations

from typing import Any

__all__ = ["message_text"]


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
