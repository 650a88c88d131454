"""The ChatML prompt of Qwen2.5 models as ``(text, is_control)`` segments: control tokens are parsed only in the
frame, never in the content, and each message is tokenized on its own (an unchanged prefix keeps its tokens)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..messages import message_text

__all__ = ["DEFAULT_SYSTEM", "chatml_segments", "message_role", "message_text"]

DEFAULT_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
"""The system message Qwen2.5's own chat template inserts when a conversation has none."""

_ROLES = {"system": "system", "human": "user", "user": "user", "ai": "assistant", "assistant": "assistant",
          "tool": "tool", "function": "tool"}


def message_role(message: Any) -> str:
    """The ChatML role of a LangChain message (``system``, ``user``, ``assistant`` or ``tool``)."""
    role = getattr(message, "role", None) or getattr(message, "type", "user")
    return _ROLES.get(str(role).lower(), "user")


def chatml_segments(messages: Sequence[tuple[str, str]]) -> list[tuple[str, bool]]:
    """The segments of a ChatML prompt for ``(role, content)`` pairs, ending with the assistant header.

    >>> chatml_segments([("user", "Hi")])[:3]
    [('<|im_start|>system\\n', True), ('You are Qwen, created by Alibaba Cloud. You are a helpful assistant.', False), ('<|im_end|>\\n', True)]
    """
    pairs = list(messages)
    if not pairs or pairs[0][0] != "system":
        pairs.insert(0, ("system", DEFAULT_SYSTEM))
    segments = [part for role, text in pairs
                for part in ((f"<|im_start|>{role}\n", True), (text, False), ("<|im_end|>\n", True))]
    return [*segments, ("<|im_start|>assistant\n", True)]


def tokenize_segments(segments: Sequence[tuple[str, bool]], tokenize: Callable[[str, bool], list[int]]) -> list[int]:
    """Concatenated tokens of ``segments``; ``tokenize(text, special)`` parses control tokens when ``special``."""
    return [token for text, control in segments if text for token in tokenize(text, control)]
