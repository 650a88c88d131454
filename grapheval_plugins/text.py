"""Plain-text helpers shared by the explanations: sentences of a passage, the one that bears on a claim, and a
word diff.

The explanations (DeepEval's reason, the HTML report) show, for a long deciding passage, the sentence that shares the
most words with the claim; a correction shows what it changed as a word diff. One implementation of each serves
every renderer.
"""

from __future__ import annotations

import difflib
import re
from typing import Literal

__all__ = ["DiffOp", "best_sentence", "diff_words", "sentence_spans", "words"]

DiffOp = Literal["same", "del", "ins"]
_TOKEN = re.compile(r"^\s+|\S+\s*")

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


def diff_words(before: str, after: str) -> list[tuple[DiffOp, str]]:
    """Pieces of a word-level diff of ``before`` → ``after``, whitespace kept (joined, the ``same`` and ``del``
    pieces give ``before`` back, the ``same`` and ``ins`` pieces ``after``, up to whitespace).

    Words are compared without their surrounding whitespace, so a word that only moved to the end of a line is
    still the same word.

    >>> diff_words("Ann won gold in Rio.", "Ann won silver in Paris.")
    [('same', 'Ann won '), ('del', 'gold '), ('ins', 'silver '), ('same', 'in '), ('del', 'Rio.'), ('ins', 'Paris.')]
    >>> diff_words("the cat sat", "the dog sat down")
    [('same', 'the '), ('del', 'cat '), ('ins', 'dog '), ('same', 'sat'), ('ins', 'down')]
    """
    a, b = _TOKEN.findall(before), _TOKEN.findall(after)
    matcher = difflib.SequenceMatcher(a=[t.strip() for t in a], b=[t.strip() for t in b], autojunk=False)
    out: list[tuple[DiffOp, str]] = []
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            out.append(("same", "".join(a[i1:i2])))
            continue
        if i2 > i1:
            out.append(("del", "".join(a[i1:i2])))
        if j2 > j1:
            out.append(("ins", "".join(b[j1:j2])))
    return out
