"""Stage 2: scoring claims against the context (the HuggingFace backends and the judges import lazily)."""

from __future__ import annotations

from typing import Any

from .base import ClaimScore, Scorer, split_context

__all__ = ["ClaimScore", "CrossEncoderNLIScorer", "HHEMScorer", "JudgeScorer", "LLMJudge", "LabelLogits",
    "LabelReading", "Scorer", "T5NLIScorer", "split_context"]

_LAZY = {
    "HHEMScorer": ".hf", "T5NLIScorer": ".hf", "CrossEncoderNLIScorer": ".hf",
    "JudgeScorer": ".judge", "LabelLogits": ".judge", "LabelReading": ".judge", "LLMJudge": ".llm_judge",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
