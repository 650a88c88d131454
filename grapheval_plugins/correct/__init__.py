"""GraphCorrect: correcting the hallucinations GraphEval finds, and the Direct Prompt baseline.

>>> from grapheval_plugins.correct import GraphCorrect, CorrectionReport, CORRECTION_PROMPTS
>>> CORRECTION_PROMPTS.triple.version
'correct-b/1'

Importing this package loads no model and not ``rouge-score``: that is imported when ROUGE is first computed.
"""

from __future__ import annotations

from .corrector import GraphCorrect, GuardMode
from .prompts import (
    BATCH_TRIPLE_CORRECTION_PROMPT,
    CORRECTION_PROMPTS,
    DIRECT_PROMPT,
    SUBSTITUTION_PROMPT,
    TRIPLE_CORRECTION_PROMPT,
    CorrectionPrompts,
    TextPrompt,
)
from .text import check_rewrite, clean_rewrite, rouge_scores, similarity, word_diff
from .types import (
    CorrectionMethod,
    CorrectionReport,
    CorrectionRound,
    CorrectionStatus,
    RougeScores,
    TripleChange,
)

__all__ = ["BATCH_TRIPLE_CORRECTION_PROMPT", "CORRECTION_PROMPTS", "DIRECT_PROMPT", "SUBSTITUTION_PROMPT",
    "TRIPLE_CORRECTION_PROMPT", "CorrectionMethod", "CorrectionPrompts", "CorrectionReport",
    "CorrectionRound", "CorrectionStatus", "GraphCorrect", "GuardMode", "RougeScores", "TextPrompt",
    "TripleChange", "check_rewrite", "clean_rewrite", "rouge_scores", "similarity", "word_diff"]
