"""Where a triple sits in the output: a character span, for explanations a person can act on."""

from __future__ import annotations

import re

from .types import Triple

__all__ = ["locate_triple"]

_WORD = re.compile(r"\w+", re.UNICODE)
_STOP = frozenset("a an the of in on at to for and or is was are were be by with as from that this".split())


def _find_phrase(text_lower: str, phrase: str) -> list[tuple[int, int]]:
    """Occurrences of ``phrase`` in the text (case-insensitive); else of its longest content word."""
    phrase = phrase.strip().lower()
    if not phrase:
        return []
    hits = [(m.start(), m.start() + len(phrase)) for m in re.finditer(re.escape(phrase), text_lower)]
    if hits:
        return hits
    words = sorted((w for w in _WORD.findall(phrase) if w not in _STOP and len(w) > 2), key=len, reverse=True)
    for word in words:
        hits = [(m.start(), m.end()) for m in re.finditer(r"\b" + re.escape(word) + r"\b", text_lower)]
        if hits:
            return hits
    return []


def locate_triple(output: str, triple: Triple, max_span_chars: int = 400) -> tuple[int, int] | None:
    """The tightest span of ``output`` covering the triple's subject and object, or ``None`` when neither is found.

    >>> text = "Paris, a large city, is the capital of France."
    >>> start, end = locate_triple(text, Triple(subject="Paris", relation="capital of", object="France"))
    >>> text[start:end]
    'Paris, a large city, is the capital of France'
    """
    lower = output.lower()
    subj = _find_phrase(lower, triple.subject)
    obj = _find_phrase(lower, triple.object)
    if subj and obj:
        best = min(
            ((min(s[0], o[0]), max(s[1], o[1])) for s in subj for o in obj),
            key=lambda span: span[1] - span[0],
        )
        if best[1] - best[0] <= max_span_chars:
            return best
    return next(iter(obj or subj), None)
