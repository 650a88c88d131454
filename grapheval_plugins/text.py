"""Plain-text helpers shared by the explanations: sentences of a passage, the one that bears on a claim, the few that
bear on a triple, and a word diff."""

from __future__ import annotations

import difflib
import re
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from .types import Triple

__all__ = [
    "DiffOp", "best_sentence", "closest_sentences", "diff_words", "sentence_at", "sentence_spans", "words"
]

DiffOp = Literal["same", "del", "ins"]
_TOKEN = re.compile(r"^\s+|\S+\s*")

_WORD = re.compile(r"\w+", re.UNICODE)
_SENTENCE_BREAK = re.compile(r"[.!?][\"')\]]*(\s+)|(\n+)")  # a full stop in "1.2" or "gov.uk" ends nothing


def words(text: str) -> set[str]:
    """The lower-cased words of ``text``.

    >>> sorted(words("Ann won Gold, in 2012."))
    ['2012', 'ann', 'gold', 'in', 'won']
    """
    return set(_WORD.findall(text.lower()))


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """``[start, end)`` of each sentence of ``text`` (split after ``.``, ``!`` and ``?`` followed by a space, and at
    line breaks), stripped.

    >>> text = "Ann is tall. Ann won!\\nBob has 1.2 million (\\"a lot.\\") Cy"
    >>> [text[s:e] for s, e in sentence_spans(text)]
    ['Ann is tall.', 'Ann won!', 'Bob has 1.2 million ("a lot.")', 'Cy']
    """
    spans = []
    start = 0
    breaks = [m.span(1) if m.group(1) else m.span(2) for m in _SENTENCE_BREAK.finditer(text)]
    for end, after in [*breaks, (len(text), len(text))]:
        piece = text[start:end]
        if piece.strip():
            lead = len(piece) - len(piece.lstrip())
            spans.append((start + lead, start + len(piece.rstrip())))
        start = after
    return spans


def sentence_at(text: str, at: int) -> tuple[int, int]:
    """``[start, end)`` of the sentence of ``text`` (as :func:`sentence_spans` splits it) that holds character
    ``at``, or ends right before it; the whole text when none does.

    >>> text = "Ann is tall. Bob won."
    >>> [text[slice(*sentence_at(text, at))] for at in (0, 12, 13, 21)]
    ['Ann is tall.', 'Ann is tall.', 'Bob won.', 'Bob won.']
    """
    for start, end in sentence_spans(text):
        if start <= at <= end:
            return start, end
    return 0, len(text)


def best_sentence(passage: str, claim: str) -> tuple[int, int] | None:
    """``[start, end)`` of the sentence of ``passage`` sharing most words with ``claim`` (``None``: no word shared;
    the first such sentence on a tie).

    >>> text = "Ann is tall. Ann won silver in 2012."
    >>> start, end = best_sentence(text, "Ann won gold")
    >>> text[start:end]
    'Ann won silver in 2012.'
    """
    wanted = words(claim)
    scored = [(len(wanted & words(passage[s:e])), (s, e)) for s, e in sentence_spans(passage)]
    score, best = max(scored, key=lambda sb: sb[0], default=(0, None))  # the first of the best
    return best if score else None


_CONTENT_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    "a an the of in on at to for from by with and or but is are was were be been being has have had it its this "
    "that these those as he she they his her their them him who whom which what when where than then there so "
    "not no said says will would can could may might also into over after before about".split()
)


def _content_words(text: str) -> set[str]:
    """Content words, lower-cased, with a crude plural/inflection trim so "prizes" meets "prize"."""
    return {w[:-1] if len(w) > 3 and w.endswith("s") else w
            for w in _CONTENT_WORD.findall(text.lower()) if w not in _STOP and len(w) >= 2}


def closest_sentences(passage: str, triple: Triple, k: int = 3) -> str:
    """The ``k`` sentences of ``passage`` sharing the most content words with ``triple`` (subject and object count
    double), in passage order; sentences sharing none are left out.

    >>> from grapheval_plugins.types import Triple
    >>> closest_sentences("A cat sat. Paris is big. Rome is old.", Triple(subject="Paris", relation="is", object="old"), k=2)
    'Paris is big. Rome is old.'
    >>> closest_sentences("A cat sat. Rome is old.", Triple(subject="Oslo", relation="is", object="cold"))
    ''
    """
    if k < 1:
        raise ValueError("k must be >= 1")
    sentences = [passage[start:end] for start, end in sentence_spans(passage)]
    anchor = _content_words(triple.subject) | _content_words(triple.object)
    relation = _content_words(triple.relation)
    scores = [2 * len(found & anchor) + len(found & relation) for found in map(_content_words, sentences)]
    best = sorted((i for i, score in enumerate(scores) if score), key=lambda i: -scores[i])[:k]  # ties: in order
    return " ".join(sentences[i] for i in sorted(best))


def diff_words(before: str, after: str) -> list[tuple[DiffOp, str]]:
    """Pieces of a word-level diff of ``before`` → ``after``, whitespace kept but not compared (the ``same`` and
    ``del`` pieces give ``before`` back, the ``same`` and ``ins`` pieces ``after``).

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
