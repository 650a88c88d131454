"""Factories for ``py:`` model specs in command-line tests (importable by a child process via PYTHONPATH)."""

from __future__ import annotations

import os
import time
from typing import Any

from pydantic import SecretStr

from grapheval_plugins.testing import KeywordScorer, ScriptedChatModel, _naive_triples


class KeyedChatModel(ScriptedChatModel):
    """A fake provider model holding an API key, as hosted chat models do (a pydantic ``SecretStr``)."""

    api_key: SecretStr = SecretStr("")


def keyed_llm() -> KeyedChatModel:
    """Naive triples, with the key of ``OPENAI_API_KEY`` in its constructor."""
    return KeyedChatModel(respond=_naive_triples, api_key=SecretStr(os.environ.get("OPENAI_API_KEY", "")))


def slow_llm() -> ScriptedChatModel:
    """Naive triples, a few milliseconds per call (so a killed run stops mid-way)."""

    def respond(messages: list[Any]) -> str:
        time.sleep(0.01)
        return _naive_triples(messages)

    return ScriptedChatModel(respond=respond, model_label="slow-naive")


def keyword_scorer() -> KeywordScorer:
    return KeywordScorer()
