"""What the ``evidence`` correction method tells step 1 about a flagged triple: the deciding passage, narrowed to the
sentences closest to the triple, and why the triple failed.

Nothing here calls a model.

>>> t = Triple(subject="Marie Curie", relation="won", object="three Nobel Prizes")
>>> passage = "Marie Curie was born in Warsaw. She won two Nobel Prizes. Her daughter Irene won one."
>>> closest_sentences(passage, t, k=1)
'She won two Nobel Prizes.'
>>> failure_reason(0.93, 0.5)
'a fact checker judged it not supported by the context (P(unsupported) = 0.93, above the threshold 0.50)'
"""

from __future__ import annotations

import re

from ..types import ClaimCheck, Triple

__all__ = ["closest_sentences", "deciding_passage", "failure_reason"]

_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+|\n+")
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    "a an the of in on at to for from by with and or but is are was were be been being has have had it its this "
    "that these those as he she they his her their them him who whom which what when where than then there so "
    "not no said says will would can could may might also into over after before about".split()
)


def _words(text: str) -> set[str]:
    """Content words, lower-cased, with a crude plural/inflection trim so "prizes" meets "prize"."""
    out = set()
    for w in _WORD.findall(text.lower()):
        if w in _STOP or len(w) < 2:
            continue
        out.add(w[:-1] if len(w) > 3 and w.endswith("s") else w)
    return out


def closest_sentences(passage: str, triple: Triple, k: int = 3) -> str:
    """The ``k`` sentences of ``passage`` that share the most content words with ``triple``, in passage order.

    The subject and object count double (they are what a correction usually changes or anchors on). Sentences
    sharing no word are left out; an empty string comes back when none shares one.

    >>> closest_sentences("A cat sat. Paris is big. Rome is old.", Triple(subject="Paris", relation="is", object="old"), k=2)
    'Paris is big. Rome is old.'
    """
    if k < 1:
        raise ValueError("k must be >= 1")
    sentences = [s.strip() for s in _SENTENCE_END.split(passage) if s and s.strip()]
    anchor = _words(triple.subject) | _words(triple.object)
    relation = _words(triple.relation)
    scored = []
    for index, sentence in enumerate(sentences):
        words = _words(sentence)
        score = 2 * len(words & anchor) + len(words & relation)
        if score:
            scored.append((score, index))
    best = sorted(scored, key=lambda si: (-si[0], si[1]))[:k]
    return " ".join(sentences[i] for _, i in sorted(best, key=lambda si: si[1]))


def deciding_passage(claim: ClaimCheck, context: str) -> str:
    """The passage (chunk) the scorer decided ``claim`` on, or ``context`` when the report does not record one
    (a report rebuilt from stored rows, or a context the scorer judged as one chunk)."""
    return claim.evidence if claim.evidence else context


def failure_reason(p_unsupported: float | None, threshold: float) -> str:
    """Why the triple is being corrected, in words the chat model can act on."""
    if p_unsupported is None:
        return "a fact checker judged it not supported by the context"
    return (
        f"a fact checker judged it not supported by the context (P(unsupported) = {p_unsupported:.2f}, "
        f"above the threshold {threshold:.2f})"
    )
