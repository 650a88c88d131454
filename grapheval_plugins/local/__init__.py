"""The embedded offline default: local GGUF models over llama.cpp, with no API key, GPU or model hub (docs/offline.md).

:class:`~.chat.ChatLocalLlama` is ``local:<name>``, :class:`~.judge.LocalJudgeScorer` ``judge:local:<name>``.
"""

from __future__ import annotations

from .chat import ChatLocalLlama, load_local_chat_model
from .judge import (
    JUDGE_CALIBRATIONS,
    JUDGE_PROMPT,
    JUDGE_PROMPTS,
    QUESTION_FIRST_PROMPT,
    JudgeCalibration,
    JudgePrompt,
    LocalJudgeScorer,
    load_judge_scorer,
)
from .runtime import ContextOverflowError, LlamaSession, clear_sessions, get_session
from .weights import (
    KNOWN_MODELS,
    GGUFModel,
    ResolvedWeights,
    assemble_parts,
    cache_dir,
    resolve_model,
    resolve_model_path,
)

__all__ = ["JUDGE_CALIBRATIONS", "JUDGE_PROMPT", "JUDGE_PROMPTS", "KNOWN_MODELS", "QUESTION_FIRST_PROMPT",
    "ChatLocalLlama", "ContextOverflowError", "GGUFModel", "JudgeCalibration", "JudgePrompt", "LlamaSession",
    "LocalJudgeScorer", "ResolvedWeights", "assemble_parts", "cache_dir", "clear_sessions", "get_session",
    "load_judge_scorer", "load_local_chat_model", "resolve_model", "resolve_model_path"]
