"""grapheval-plugins: knowledge-graph based hallucination detection (GraphEval) and correction (GraphCorrect).

>>> from grapheval_plugins import GraphEval
>>> from grapheval_plugins.testing import ScriptedChatModel, KeywordScorer
>>> llm = ScriptedChatModel(responses=['<python>[["The Eiffel Tower", "located in", "Rome"]]</python>'])
>>> report = GraphEval(llm=llm, scorer=KeywordScorer()).evaluate(
...     context="The Eiffel Tower is in Paris.", output="The Eiffel Tower is located in Rome.")
>>> report.hallucinated, [c.triple.object for c in report.unsupported]
(True, ['Rome'])

Importing this package loads neither torch, transformers, deepeval nor ragas: the optional parts load when used.
"""

from __future__ import annotations

import importlib as _importlib
from typing import Any as _Any

from ._version import __version__
from .aggregate import DecisionRule, HybridWeights, register_rule
from .cache import KGCache, MemoryKGCache, SQLiteKGCache
from .check.base import ClaimScore, Scorer
from .exceptions import (
    CorrectionError,
    ExtractionError,
    GraphEvalError,
    InputError,
    MissingDependencyError,
    ModelLoadError,
    ScoringError,
    WeightsIntegrityError,
)
from .extract.prompts import KG_PROMPT, KG_PROMPT_PAPER, KGPrompt
from .models import DEFAULT_LLM, DEFAULT_SCORER, resolve_llm, resolve_scorer
from .pipeline import GraphEval
from .retry import RetryPolicy
from .score_cache import CachedScorer, MemoryScoreCache, ScoreCache, SQLiteScoreCache
from .types import (
    ClaimCheck,
    Decision,
    Explanation,
    ExtractedRow,
    Extraction,
    Report,
    StageError,
    StageUsage,
    Triple,
)
from .types import set_html_renderer as _set_html_renderer


def _report_html(result: _Any, **options: _Any) -> str:
    from .report import report_html  # on first use: importing the package does not load the report stack

    return report_html(result, **options)


# Report.to_html() draws with the report package, wired here: the result types import nothing above them.
_set_html_renderer(_report_html)

# Optional parts: name -> module (imported on first attribute access).
_LAZY: dict[str, str] = {
    "HHEMScorer": "grapheval_plugins.check.hf",
    "T5NLIScorer": "grapheval_plugins.check.hf",
    "CrossEncoderNLIScorer": "grapheval_plugins.check.hf",
    "ChatLocalLlama": "grapheval_plugins.local",
    "LocalJudgeScorer": "grapheval_plugins.local",
    "LLMJudge": "grapheval_plugins.check.llm_judge",
    "GraphCorrect": "grapheval_plugins.correct",
    "CorrectionReport": "grapheval_plugins.correct",
    "CorrectionPrompts": "grapheval_plugins.correct",
    "CORRECTION_PROMPTS": "grapheval_plugins.correct",
    "TripleChange": "grapheval_plugins.correct",
    "RougeScores": "grapheval_plugins.correct",
    "GraphEvalRunnable": "grapheval_plugins.integrations.langchain",
    "GraphCorrectRunnable": "grapheval_plugins.integrations.langchain",
    "route_on_hallucination": "grapheval_plugins.integrations.langchain",
    "GraphEvalMetric": "grapheval_plugins.integrations.deepeval",
    "GraphEvalFaithfulness": "grapheval_plugins.integrations.ragas",
    "GraphEvalRagasMetric": "grapheval_plugins.integrations.ragas",
    "GraphEvalEvaluator": "grapheval_plugins.integrations.langsmith",
}

# Plumbing that left ``__all__``: importable from its own module; still served here for one release.
_MOVED: dict[str, str] = {
    "run_sync": "grapheval_plugins._async",
    "registry": "grapheval_plugins.registry",
    "Needs": "grapheval_plugins.aggregate",
    "RuleLike": "grapheval_plugins.aggregate",
    "CachedKG": "grapheval_plugins.cache",
    "normalize_context": "grapheval_plugins.inputs",
    "normalize_output": "grapheval_plugins.inputs",
    "normalize_passages": "grapheval_plugins.inputs",
    "Method": "grapheval_plugins.types",
    "Mode": "grapheval_plugins.types",
}

__all__ = ["CORRECTION_PROMPTS", "CachedScorer", "ChatLocalLlama", "ClaimCheck", "ClaimScore",
    "CorrectionError", "CorrectionPrompts", "CorrectionReport", "CrossEncoderNLIScorer", "DEFAULT_LLM",
    "DEFAULT_SCORER", "Decision", "DecisionRule", "Explanation", "ExtractedRow", "Extraction",
    "ExtractionError", "GraphCorrect", "GraphCorrectRunnable", "GraphEval", "GraphEvalError",
    "GraphEvalEvaluator", "GraphEvalFaithfulness", "GraphEvalMetric", "GraphEvalRagasMetric",
    "GraphEvalRunnable", "HHEMScorer", "HybridWeights", "InputError", "KGCache", "KGPrompt", "KG_PROMPT",
    "KG_PROMPT_PAPER", "LLMJudge", "LocalJudgeScorer", "MemoryKGCache", "MemoryScoreCache",
    "MissingDependencyError", "ModelLoadError", "Report", "RetryPolicy", "RougeScores", "SQLiteKGCache",
    "SQLiteScoreCache", "ScoreCache", "Scorer", "ScoringError", "StageError", "StageUsage", "T5NLIScorer",
    "Triple", "TripleChange", "WeightsIntegrityError", "__version__", "register_rule", "resolve_llm",
    "resolve_scorer", "route_on_hallucination"]


def __getattr__(name: str) -> _Any:
    if name == "registry":
        return _importlib.import_module(_MOVED[name])
    if name in _LAZY or name in _MOVED:
        return getattr(_importlib.import_module(_LAZY.get(name) or _MOVED[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
