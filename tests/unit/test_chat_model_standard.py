"""LangChain's standard unit tests (``langchain_tests``) on every chat model the package ships.

The same suite LangChain's partner packages run on theirs: construction, parameters, tracing metadata, tool and
structured-output binding where declared, serialisation where declared. None of these calls a model.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("langchain_tests")

from chaos_models import ChaosChatModel  # noqa: E402
from langchain_tests.unit_tests import ChatModelUnitTests  # noqa: E402

from grapheval_plugins.integrations.host_models import (  # noqa: E402
    KnowledgeGraphAnswer,
    PromptChatModel,
    StructuredTriplesChatModel,
)
from grapheval_plugins.local.chat import ChatLocalLlama  # noqa: E402
from grapheval_plugins.ratelimit import RateLimitedChatModel  # noqa: E402
from grapheval_plugins.testing import ScriptedChatModel  # noqa: E402


class TestScriptedChatModel(ChatModelUnitTests):
    @property
    def chat_model_class(self) -> type[ScriptedChatModel]:
        return ScriptedChatModel

    @property
    def chat_model_params(self) -> dict[str, Any]:
        return {"responses": ["ok"]}


class TestChaosChatModel(ChatModelUnitTests):
    @property
    def chat_model_class(self) -> type[ChaosChatModel]:
        return ChaosChatModel

    @property
    def chat_model_params(self) -> dict[str, Any]:
        return {"failure_rate": 0.0}


class TestPromptChatModel(ChatModelUnitTests):
    @property
    def chat_model_class(self) -> type[PromptChatModel]:
        return PromptChatModel

    @property
    def chat_model_params(self) -> dict[str, Any]:
        return {"complete": lambda prompt: "ok", "label": "a-text-model"}


class TestStructuredTriplesChatModel(ChatModelUnitTests):
    @property
    def chat_model_class(self) -> type[StructuredTriplesChatModel]:
        return StructuredTriplesChatModel

    @property
    def chat_model_params(self) -> dict[str, Any]:
        return {"complete": lambda prompt, model: KnowledgeGraphAnswer(triples=[]), "label": "a-structured-model"}


class TestChatLocalLlama(ChatModelUnitTests):
    """The offline default's chat model: constructing it resolves and loads nothing."""

    @property
    def chat_model_class(self) -> type[ChatLocalLlama]:
        return ChatLocalLlama

    @property
    def chat_model_params(self) -> dict[str, Any]:
        return {"model": "local:qwen2.5-coder-0.5b", "hub": False}


class TestRateLimitedChatModel(ChatModelUnitTests):
    @property
    def chat_model_class(self) -> type[RateLimitedChatModel]:
        return RateLimitedChatModel

    @property
    def chat_model_params(self) -> dict[str, Any]:
        return {"llm": ScriptedChatModel(responses=["ok"], model_label="provider-x"), "requests_per_minute": 600}


def test_a_rate_limited_model_is_a_chat_model_a_judge_can_use() -> None:
    from grapheval_plugins.check.llm_judge import LLMJudge, is_chat_model

    limited = RateLimitedChatModel(ScriptedChatModel(responses=["1: supported"], model_label="m"), tokens_per_minute=10**6)
    assert is_chat_model(limited) and is_chat_model(limited.bind(stop=["\n\n"]))
    [score] = LLMJudge(limited).check(["Paris is in France."], ["Paris is in France"])
    assert score.p_unsupported < 0.5
