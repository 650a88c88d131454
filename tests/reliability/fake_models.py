"""Factories for ``py:`` model specs in command-line tests (importable by a child process via PYTHONPATH)."""

from __future__ import annotations

import json
import os
import re
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


def _tag(name: str, text: str) -> str:
    found = re.search(rf"<{name}>(.*?)</{name}>", text, re.S)
    return found.group(1) if found else ""


def _known_words(part: str, context: str) -> str:
    known = set(re.findall(r"[a-z0-9]+", context.lower()))
    kept = " ".join(w for w in part.split() if all(t in known for t in re.findall(r"[a-z0-9]+", w.lower())))
    return kept or part


def _correcting(messages: list[Any]) -> str:
    """Extraction: naive triples. Step 1 (correct a triple): keep the words the context has. Step 2 (rewrite):
    substitute the changed parts. Direct prompt: keep the words the context has."""
    text = str(messages[-1].content)
    if "<old_triple>" in text:
        summary = _tag("context", text)
        for old, new in zip(json.loads(_tag("old_triple", text)), json.loads(_tag("new_triple", text))):
            summary = summary.replace(old, new, 1) if old != new else summary
        return f"<context>{summary}</context>"
    if "<triples>" in text:
        fixed = [[_known_words(p, _tag("context", text)) for p in t] for t in json.loads(_tag("triples", text))]
        return "<python>" + json.dumps(fixed) + "</python>"
    if "<triple>" in text:
        return json.dumps([_known_words(p, _tag("context", text)) for p in json.loads(_tag("triple", text))])
    if "<summary>" in text:
        return _known_words(_tag("summary", text), _tag("context", text))
    return _naive_triples(messages)


def slow_correcting_llm() -> ScriptedChatModel:
    """Extracts naive triples and corrects them from the context's words, a few milliseconds per call."""

    def respond(messages: list[Any]) -> str:
        time.sleep(0.005)
        return _correcting(messages)

    return ScriptedChatModel(respond=respond, model_label="slow-correcting")


def correcting_llm() -> ScriptedChatModel:
    """:func:`slow_correcting_llm` without the delay."""
    return ScriptedChatModel(respond=_correcting, model_label="correcting")
