"""Text helpers of GraphCorrect: cleaning a rewritten output, checking it, diffing and ROUGE.

Nothing here calls a model. ``rouge-score`` (the ``correct`` extra) is imported on first use only.

>>> clean_rewrite("Here is the corrected summary:\\n<summary>Paris is in France.</summary>", "Paris is in Italy.")
'Paris is in France.'
>>> word_diff("Paris is in Italy.", "Paris is in France.")
'Paris is in [-Italy.-]{+France.+}'
"""

from __future__ import annotations

import difflib
import functools
import re
from typing import Any

from .._imports import require
from ..text import diff_words
from .types import RougeScores

__all__ = ["check_rewrite", "clean_rewrite", "rouge_scores", "similarity", "word_diff"]

_TAGS = (
    "context",
    "summary",
    "new_context",
    "corrected_summary",
    "corrected_context",
    "output",
    "text",
    "answer",
)
_TAG_BLOCK = re.compile(r"<(" + "|".join(_TAGS) + r")>\s*(.*?)\s*(?:</\1>|$)", re.S | re.I)
_ECHO = re.compile(r"<(old_triple|new_triple|triple|triples)>.*?(?:</\1>|$)", re.S | re.I)
_STRAY_TAG = re.compile(r"</?(?:" + "|".join(_TAGS) + r")>", re.I)
_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n?(.*?)\n?```$", re.S)
_LEAD = r"(?:(?:sure|okay|ok|certainly|of course|absolutely)[!,.]?\s*)?"
_HERE = r"(?:here(?:'s| is| are)|below is|this is)\s+(?:the\s+|your\s+|an?\s+)?"
_ADJ = r"(?:(?:corrected|new|updated|revised|modified|fixed|rewritten|resulting|final|edited)\s+)"
_NOUN = r"(?:summary|context|text|version|output|answer|paragraph|passage)"
_PREAMBLE = re.compile(
    rf"^\s*(?:{_LEAD}{_HERE}{_ADJ}*{_NOUN}?|{_LEAD}(?:the\s+)?{_ADJ}+{_NOUN})[^:\n]{{0,60}}:[ \t]*\n?\s*", re.I
)
_CHATTY_LINE = re.compile(
    r"^\s*(?:sure|okay|ok|certainly|of course|absolutely)[!,.]?"
    r"(?:\s+(?:here(?:'s| is| are| you go)|i (?:can|will|have|'ve))\b[^\n]{0,70})?[ \t]*\n+",
    re.I,
)
_TRAILER = re.compile(
    r"\n\s*\n\s*(?:\(?\s*note\b|explanation\b|changes?(?: made)?\s*:|i (?:have )?(?:replaced|changed|corrected|"
    r"updated|modified)\b|the (?:old|new) triple\b|in this (?:version|summary|context)\b).*$",
    re.S | re.I,
)
_QUOTES = (('"', '"'), ("'", "'"), ("\u201c", "\u201d"))


def clean_rewrite(answer: str, original: str) -> str:
    """The rewritten output inside a chat model's answer to prompt C or D.

    Removes, when the original output has none of them: code fences, the ``<context>``/``<summary>`` wrapper
    (the text inside the first one is kept), echoed ``<old_triple>``/``<new_triple>`` blocks, a preamble such as
    "Here is the corrected summary:" or "Sure!", a trailing "Note: …" paragraph, and quotes around the whole text.
    Never raises on any string.

    >>> clean_rewrite('Sure! Here is the new context: "Paris is in France."', "Paris is in Italy.")
    'Paris is in France.'
    >>> clean_rewrite("Paris is in France.\\n\\nNote: I replaced Italy with France.", "Paris is in Italy.")
    'Paris is in France.'
    >>> clean_rewrite("Summary: Paris is in France.", "Summary: Paris is in Italy.")
    'Summary: Paris is in France.'
    """
    if not isinstance(answer, str):
        return ""
    text = answer.strip()
    low_original = original.lower()
    fence = _FENCE.match(text)
    if fence and "```" not in original:
        text = fence.group(1).strip()
    if "<" not in original:
        block = _TAG_BLOCK.search(text)
        if block:
            text = block.group(2).strip()
        text = _ECHO.sub("", text)
        text = _STRAY_TAG.sub("", text).strip()
    for _ in range(2):  # "Sure!\nHere is the corrected summary:" has two layers
        chatty = _CHATTY_LINE.match(text)
        if (
            chatty
            and not low_original.startswith(chatty.group(0).strip().lower())
            and text[chatty.end() :].strip()
        ):
            text = text[chatty.end() :].strip()
        pre = _PREAMBLE.match(text)
        if pre and pre.group(0).strip() and text[pre.end() :].strip():
            prefix = pre.group(0).strip().lower()
            if not low_original.startswith(prefix):
                text = text[pre.end() :].strip()
    trailer = _TRAILER.search(text)
    if trailer and not _TRAILER.search(original):
        text = text[: trailer.start()].strip()
    for left, right in _QUOTES:
        if (
            len(text) >= 2
            and text.startswith(left)
            and text.endswith(right)
            and not original.startswith(left)
        ):
            inner = text[1:-1].strip()
            if left not in inner and right not in inner:
                text = inner
            break
    return text.strip()


def similarity(a: str, b: str) -> float:
    """Word-level similarity in [0, 1] (``difflib`` ratio over whitespace-split words).

    >>> similarity("a b c d", "a b x d")
    0.75
    """
    return difflib.SequenceMatcher(None, a.split(), b.split(), autojunk=False).ratio()


def check_rewrite(
    candidate: str, before: str, original: str, max_growth: float, min_similarity: float
) -> str | None:
    """Why a rewritten output is refused, or ``None`` when it is acceptable.

    Refused: empty; longer than ``max_growth`` × the original output (with at least 40 characters of slack, so a
    short output may take a longer name); or less similar than ``min_similarity`` to the text it rewrites
    (``before``): the model rewrote the whole output instead of substituting one fact.

    >>> check_rewrite("", "x", "x", 1.5, 0.5)
    'empty answer'
    >>> check_rewrite("Totally different words here now", "Paris is in Italy today", "Paris is in Italy today", 1.5, 0.5)
    'rewrote the whole output (similarity 0.00 < 0.50)'
    """
    if not candidate.strip():
        return "empty answer"
    limit = max(int(max_growth * len(original)), len(original) + 40)
    if len(candidate) > limit:
        return f"answer too long ({len(candidate)} characters, at most {limit} allowed)"
    ratio = similarity(before, candidate)
    if ratio < min_similarity:
        return f"rewrote the whole output (similarity {ratio:.2f} < {min_similarity:.2f})"
    return None


def word_diff(a: str, b: str) -> str:
    """A readable word diff of ``a`` → ``b``: removed ``[-…-]``, added ``{+…+}``; empty if equal.

    >>> word_diff("the cat sat", "the dog sat down")
    'the [-cat-]{+dog+} sat {+down+}'
    """
    if a == b:
        return ""
    parts: list[str] = []
    after_deletion = False
    for op, text in diff_words(a, b):
        words = " ".join(text.split())
        if not words:
            continue
        if op == "same":
            parts.append(words)
        elif op == "ins" and after_deletion:  # a replacement reads [-old-]{+new+}
            parts[-1] += "{+" + words + "+}"
        else:
            parts.append("[-" + words + "-]" if op == "del" else "{+" + words + "+}")
        after_deletion = op == "del"
    return " ".join(parts)


@functools.cache
def _rouge_scorer() -> Any:
    module = require(
        "rouge_score.rouge_scorer", "correct", "ROUGE between original and corrected outputs", package="rouge-score"
    )
    return module.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)


def rouge_scores(original: str, corrected: str) -> RougeScores:
    """ROUGE-1/2/L F-measures of ``corrected`` against ``original`` (``rouge-score``, Porter stemmer).

    Identical texts score 1.0 without loading ``rouge-score``.

    Raises:
        MissingDependencyError: ``rouge-score`` is not installed (``pip install 'grapheval-plugins[correct]'``).

    >>> rouge_scores("Paris is in France.", "Paris is in France.").rouge1
    1.0
    """
    if original == corrected:
        return RougeScores(rouge1=1.0, rouge2=1.0, rougeL=1.0)
    scores = _rouge_scorer().score(original, corrected)
    return RougeScores(
        rouge1=scores["rouge1"].fmeasure, rouge2=scores["rouge2"].fmeasure, rougeL=scores["rougeL"].fmeasure
    )
