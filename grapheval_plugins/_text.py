"""Plain-text helpers shared by the explanations: sentences of a passage, and the one that bears on a claim.

The explanations (``Report.explain``'s hosts, DeepEval's reason, the HTML report) show, for a long deciding passage,
the sentence that shares the most words with the claim. One splitter and one choice serve them all.
"""

from __future__ import annotations

import re

__all__ = ["best_sentence", "sentence_spans", "words"]

_WORD = re.compile(r"\w+", re.UNICODE)
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]*")


def words(text: str) -> set[str]:
    """The lower-cased words of ``text``.

    >>> sorted(words("Ann won Gold, in 2012."))
    ['2012', 'ann', 'gold', 'in', 'won']
    """
    return set(_WORD.findall(text.lower()))


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """``[start, end)`` of each sentence of ``text`` (split at ``.``, ``!``, ``?`` and line breaks), stripped.

    >>> text = "Ann is tall. Ann won!\\nBob"
    >>> [text[s:e] for s, e in sentence_spans(text)]
    ['Ann is tall.', 'Ann won!', 'Bob']
    """
    spans = []
    for match in _SENTENCE.finditer(text):
        sentence = match.group()
        if sentence.strip():
            start = match.start() + len(sentence) - len(sentence.lstrip())
            spans.append((start, match.start() + len(sentence.rstrip())))
    return spans


def best_sentence(passage: str, claim: str) -> tuple[int, int] | None:
    """``[start, end)`` of the sentence of ``passage`` sharing most words with ``claim`` (``None``: no word shared;
    the first such sentence on a tie).

    >>> text = "Ann is tall. Ann won silver in 2012."
    >>> start, end = best_sentence(text, "Ann won gold")
    >>> text[start:end]
    'Ann won silver in 2012.'
    """
    wanted = words(claim)
    best, best_score = None, 0
    for start, end in sentence_spans(passage):
        score = len(wanted & words(passage[start:end]))
        if score > best_score:
            best, best_score = (start, end), score
    return best
