"""The pure helpers of ``GraphCorrect(method="constrained")``: what a corrected triple changed, whether its new words
are the context's own, the values of the context a wrong number or date may be replaced by, and the substitution of
a changed span in the output in place (no rewrite call).

Nothing here calls a model.

>>> old = Triple(subject="Council tax bills", relation="could rise by", object="£ 120 over five years")
>>> new = Triple(subject="Council tax bills", relation="could rise by", object="£200 over five years")
>>> [(e.old, e.new) for e in triple_edits(old, new)]
[('120', '200')]
>>> substitute("Bills could rise by £ 120 over five years.", triple_edits(old, new), old)
'Bills could rise by £ 200 over five years.'
>>> foreign_words("£200 and a cat", "Bills rose by £200.")
['cat']
>>> [v.text for v in typed_values("The ship left on Friday, 3 May 2014, with 1,200 people.")]
['Friday', '3 May 2014', '1,200']
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from dataclasses import dataclass

from ..locate import locate_triple
from ..text import sentence_at, sentence_spans
from ..types import Triple

__all__ = [
    "Change",
    "Edit",
    "Value",
    "MAX_EDIT_WORDS",
    "bound_problem",
    "candidates_for",
    "copied_changes",
    "drop_negation",
    "edit_problem",
    "filler_problem",
    "foreign_words",
    "has_spaced_numbers",
    "in_kind",
    "is_name",
    "kinds_lost",
    "negation_only",
    "one_for_one",
    "replace_value",
    "stated_around",
    "substitute",
    "text_changes",
    "tidy_numbers",
    "triple_edits",
    "typed_values",
    "unit_lost",
]

_SPACED_GROUPS = r"\d{1,3}(?:, \d{3}(?!\d)(?![.,]\d))+"  # "3, 500": a tokenised corpus's "3,500"
_TOKEN = re.compile(rf"(?<![\w.,]){_SPACED_GROUPS}|\w+(?:[.,'’]\w+)*|[^\w\s]", re.UNICODE)
_STOP = frozenset(
    "a an the of in on at to for from by with and or but is are was were be been being has have had it its this "
    "that these those as he she they his her their them him who which what when where than then so not no do "
    "does did will would can could may might also into over after before about".split()
)
_NUMBER_WORDS = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
        "seventeen eighteen nineteen twenty".split()
    )
}
_MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december|"
    "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
)
_WEEKDAYS = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
_DATE = re.compile(
    rf"\b(?:(?:\d{{1,2}}(?:st|nd|rd|th)?\s+)?(?:{_MONTHS})\b\.?(?:\s+\d{{1,2}}(?:st|nd|rd|th)?\b)?(?:,?\s+\d{{4}}\b)?"
    rf"|(?:{_WEEKDAYS})\b|(?:1[89]\d\d|20\d\d)s?\b)",
    re.I,
)
_NUMBER = re.compile(
    r"(?<![\w.-])\d{1,3}-\d{1,3}(?![\w-])"  # a score or a range ("3-0"): one value, its two numbers together
    rf"|(?<![\w.])(?:[£$€]\s?)?(?:{_SPACED_GROUPS}|\d+(?:[.,]\d+)*)"
    r"(?:\s?%|\s?(?:per cent|percent|million|billion|m|bn|k)\b)?"
    r"|\b(?:" + "|".join(_NUMBER_WORDS) + r")\b",
    re.I,
)


@dataclass(frozen=True)
class Edit:
    """One changed stretch of a triple: ``old`` (the flagged triple's words, as written there) became ``new``."""

    old: str
    new: str


@dataclass(frozen=True)
class Value:
    """A number or a date in a text (``kind``: ``"number"`` or ``"date"``)."""

    text: str
    kind: str
    start: int


def _tokens(text: str) -> list[re.Match[str]]:
    return list(_TOKEN.finditer(text))


def _norm(token: str) -> str:
    t = token.casefold().replace("’", "'").replace(", ", ",")
    if re.fullmatch(r"\d{1,3}(?:,\d{3})+", t):
        t = t.replace(",", "")
    return str(_NUMBER_WORDS[t]) if t in _NUMBER_WORDS else t


def triple_edits(old: Triple, new: Triple) -> list[Edit]:
    """The stretches in which ``new`` differs from ``old``, word by word (case, thousands separators and number
    words aside: "1,200" is "1200", "two" is "2"). A pure insertion or deletion takes its left neighbour (or its
    right one at the start) along, so that every edit has old words to find in the output. Empty when the two say
    the same.

    >>> o = Triple(subject="Charles Manuel", relation="did not sign", object="an agreement")
    >>> [(e.old, e.new) for e in triple_edits(o, Triple(subject="Charles Manuel", relation="signed", object="an agreement"))]
    [('did not sign', 'signed')]
    >>> o = Triple(subject="It", relation="is", object="known")
    >>> [(e.old, e.new) for e in triple_edits(o, Triple(subject="It", relation="is not", object="known"))]
    [('is', 'is not')]
    """
    return [Edit(old=c.old, new=c.new) for c in text_changes(old.sentence(), new.sentence())]


@dataclass(frozen=True)
class Change:
    """One changed stretch of a text: ``before[start:end]`` (``old``) became ``new``."""

    start: int
    end: int
    old: str
    new: str

    @property
    def edit(self) -> Edit:
        return Edit(old=self.old, new=self.new)

    def apply(self, before: str) -> str:
        """``before`` with this change made, and nothing else."""
        return before[: self.start] + self.new + before[self.end :]


def text_changes(before: str, after: str, words_only: bool = False) -> list[Change]:
    """The stretches in which ``after`` differs from ``before`` (as :func:`triple_edits` reads them), with where
    each sits in ``before``. ``words_only``: leave out the changes of punctuation alone (quotes, commas), which say
    nothing of the facts. Empty when a pure insertion or deletion has no neighbour to take along.

    >>> before = "Ann won 2 gold medals in `` Paris ''."
    >>> [(c.old, c.new, c.start) for c in text_changes(before, 'Ann won 3 gold medals in "Paris".', words_only=True)]
    [('2', '3', 8)]
    """
    a, b = _tokens(before), _tokens(after)
    matcher = difflib.SequenceMatcher(None, [_norm(t.group()) for t in a], [_norm(t.group()) for t in b],
                                      autojunk=False)
    changes: list[Change] = []
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
        old_part = before[start:end]
        new_part = after[b[j1].start() : b[j2 - 1].end()] if j2 > j1 else ""
        if "".join(old_part.casefold().split()) == "".join(new_part.casefold().split()):
            continue  # spacing only ("cycling 's" / "cycling's"): nothing to change
        changes.append(Change(start=start, end=end, old=old_part, new=new_part))
    return _join_dates(before, changes)


def _join_dates(before: str, changes: list[Change]) -> list[Change]:
    """``changes`` with those inside one date of ``before`` made one change: "august 8, 1968" → "july 1, 1969" is a
    date corrected, not a month and day and, apart, a year (one of them alone is neither the old date nor the
    new)."""
    for date in (v for v in typed_values(before) if v.kind == "date"):
        start, end = date.start, date.start + len(date.text)
        inside = [c for c in changes if c.start < end and c.end > start]
        if len(inside) < 2:
            continue
        lo, hi = min(start, inside[0].start), max(end, inside[-1].end)
        new = before[lo:hi]
        for c in reversed(inside):  # made from the right, so the earlier offsets stay valid
            new = new[: c.start - lo] + c.new + new[c.end - lo :]
        joined = Change(start=lo, end=hi, old=before[lo:hi], new=new)
        changes = [c for c in changes if c not in inside]
        changes.append(joined)
        changes.sort(key=lambda c: c.start)
    return changes


def _pattern(phrase: str) -> re.Pattern[str] | None:
    """``phrase`` as a case-insensitive pattern on token boundaries, any spacing between its tokens."""
    tokens = [t.group() for t in _tokens(phrase)]
    if not tokens:
        return None
    body = r"\s*".join(re.escape(t) for t in tokens)
    left = r"(?<!\w)" if re.match(r"\w", tokens[0]) else ""
    right = r"(?!\w)" if re.search(r"\w$", tokens[-1]) else ""
    return re.compile(left + body + right, re.I)


def _pick(hits: list[re.Match[str]], output: str, triple: Triple) -> re.Match[str]:
    """Of several occurrences, one inside the span where the triple sits in ``output`` (:func:`locate_triple`),
    else the nearest to it (the first when the triple cannot be located)."""
    span = locate_triple(output, triple)
    if span is None:
        return hits[0]
    inside = [m for m in hits if m.start() >= span[0] and m.end() <= span[1]]
    if inside:
        return inside[0]
    return min(hits, key=lambda m: min(abs(m.start() - span[0]), abs(m.end() - span[1])))


def substitute(output: str, edits: list[Edit], old: Triple) -> str | None:
    """``output`` with each edit's old words replaced by its new ones, in place; ``None`` when an edit's old words
    are not in the output (then a rewrite call has to do it). Of several occurrences, the one nearest to where the
    flagged triple sits in the output is replaced. Nothing else of the output changes.

    >>> substitute("A b c. A b c.", [Edit(old="b", new="x")], Triple(subject="z", relation="r", object="c."))
    'A x c. A b c.'
    >>> substitute("A b c.", [Edit(old="q", new="x")], Triple(subject="A", relation="b", object="c")) is None
    True
    """
    if not edits:
        return None
    text = output
    for edit in edits:
        pattern = _pattern(edit.old)
        if pattern is None:
            return None
        hits = list(pattern.finditer(text))
        if not hits:
            return None
        hit = _pick(hits, text, old)
        replacement = edit.new
        if not replacement:  # a deletion: also drop one space beside it
            start, end = hit.start(), hit.end()
            if end < len(text) and text[end] == " ":
                end += 1
            elif start > 0 and text[start - 1] == " ":
                start -= 1
            text = text[:start] + text[end:]
        else:
            # keep the output's own spacing around a currency sign ("£ 120" → "£ 200")
            if re.match(r"[£$€]\s", hit.group()) and re.match(r"[£$€]\S", replacement):
                replacement = replacement[0] + " " + replacement[1:]
            text = text[: hit.start()] + replacement + text[hit.end() :]
    return text if text != output else None


def _content(text: str) -> list[str]:
    return [_norm(t.group()) for t in _tokens(text) if re.match(r"\w", t.group())]


def foreign_words(new_text: str, context: str, inflecting: str = "") -> list[str]:
    """The content words of ``new_text`` that the context does not contain (case, thousands separators, number
    words and a plural "s" aside): a correction must take its new words from the context. ``inflecting``: words
    whose new form is allowed (another inflection of one of its words: "did not ease" → "eased" brings in no new
    word).

    >>> foreign_words("eased to victory", "Inverness ease to a win."), foreign_words("eased", "", "did not ease")
    (['eased', 'victory'], [])
    """
    known = set()
    for w in _content(context):
        known.add(w)
        known.add(w[:-1] if len(w) > 3 and w.endswith("s") else w)
        if w.endswith("'s") and len(w) > 2:  # "Turner's" in the context: "Turner" is the context's word
            known.add(w[:-2])
    inflections = _inflected(_unnegated(_content(inflecting)))
    out = []
    for w in _unnegated(_content(new_text)):  # "cannot": "can" and "not"
        if w in _STOP or w in known or (len(w) > 3 and w.endswith("s") and w[:-1] in known):
            continue
        if any(_same_word(w, other) for other in inflections):
            continue
        if w not in out:
            out.append(w)
    return out


def typed_values(text: str) -> list[Value]:
    """The dates (a month with its day and year, a weekday, a year) and numbers (digits with their currency or
    unit, the number words up to twenty) of ``text``, in order; a number inside a date is the date's."""
    values: list[Value] = []
    taken: list[tuple[int, int]] = []
    for m in _DATE.finditer(text):
        values.append(Value(text=m.group().strip(), kind="date", start=m.start()))
        taken.append((m.start(), m.end()))
    for m in _NUMBER.finditer(text):
        if any(s <= m.start() < e for s, e in taken):
            continue
        values.append(Value(text=m.group().strip(), kind="number", start=m.start()))
    return sorted(values, key=lambda v: v.start)


def kinds_lost(edit: Edit) -> str | None:
    """The kind (``"date"`` or ``"number"``) of a value in the edit's old words that its new words have none of:
    a date replaced by a place is not a correction of the date. ``None`` when every kind is kept.

    >>> kinds_lost(Edit(old="sunday", new="Dublin")), kinds_lost(Edit(old="sunday", new="monday"))
    ('date', None)
    >>> kinds_lost(Edit(old="did not sign", new="signed")) is None
    True
    """
    had = {v.kind for v in typed_values(edit.old)}
    has = {v.kind for v in typed_values(edit.new)}
    lost = sorted(had - has)
    return lost[0] if lost else None


_SPACED = re.compile(rf"(?<![\w.,])({_SPACED_GROUPS})")


def tidy_numbers(text: str) -> str:
    """``text`` with the thousands groups of a tokenised corpus closed up ("3, 500" → "3,500"), for a value taken
    from such a context into an output that writes its numbers the usual way.

    >>> tidy_numbers("more than 3, 500 kenyan soldiers, 2, 3 and 4")
    'more than 3,500 kenyan soldiers, 2, 3 and 4'
    """
    return _SPACED.sub(lambda m: m.group(1).replace(", ", ","), text)


def has_spaced_numbers(text: str) -> bool:
    """Whether ``text`` writes a thousands group with a space ("3, 500"), as a tokenised corpus does."""
    return _SPACED.search(text) is not None


_PERCENT = re.compile(r"%|\bper ?cent\b", re.I)
_MONEY = re.compile(r"[£$€¥]|\b(?:pounds?|dollars?|euros?|pence|cents?|yen)\b", re.I)


_PAIR = re.compile(r"\d-\d")


def _unit(number: str) -> str:
    if _PAIR.search(number):
        return "pair"  # a score or a range is replaced by a score or a range
    return "percent" if _PERCENT.search(number) else "money" if _MONEY.search(number) else "count"


def unit_lost(edit: Edit) -> str | None:
    """Why ``edit`` is no correction of a number's or a date's value: it changes what the number measures (a count
    becomes a percentage, an amount of money a count) or what the date names (a year becomes a weekday), which a
    wrong value of the same quantity never does. ``None`` when the edit's old and new numbers are of one unit and
    its dates of one form (or either side has none).

    >>> unit_lost(Edit(old="four", new="60%"))
    "a count ('four') becomes a percent ('60%')"
    >>> unit_lost(Edit(old="£ 440,000", new="£400,000")) is None, unit_lost(Edit(old="4", new="five")) is None
    (True, True)
    >>> unit_lost(Edit(old="the 1939 film", new="the Saturday film")), unit_lost(Edit(old="1939", new="1936"))
    ("a year ('the 1939 film') becomes a weekday ('the Saturday film')", None)
    """
    for kind, unit in (("number", _unit), ("date", _date_form)):
        old = [v.text for v in typed_values(edit.old) if v.kind == kind]
        new = [v.text for v in typed_values(edit.new) if v.kind == kind]
        if not old or not new:
            continue
        had, has = {unit(n) for n in old}, {unit(n) for n in new}
        if not had & has:
            return f"a {sorted(had)[0]} ({edit.old!r}) becomes a {sorted(has)[0]} ({edit.new!r})"
    return None


def _date_form(date: str) -> str:
    """What a date names: a ``"weekday"``, a ``"year"`` (or a decade), or a ``"day"`` (a month, with its day or
    year)."""
    if re.fullmatch(rf"(?:{_WEEKDAYS})", date, re.I):
        return "weekday"
    return "year" if re.fullmatch(r"\d{4}s?", date) else "day"


def filler_problem(triple: Triple, edit: Edit) -> str | None:
    """Why ``edit`` corrects nothing of ``triple``: its old words are a part of the triple made of function words
    only ("[Rihanna, for, a new single]", an extraction slip that states no relation) and its new words bring in
    a claim. ``None`` otherwise ("voted for" → "voted against" changes a word of a real relation).

    >>> t = Triple(subject="Rihanna", relation="for", object="a new single")
    >>> filler_problem(t, Edit(old="for", new="released"))
    "the triple's part 'for' is function words only, which state nothing to correct"
    >>> filler_problem(Triple(subject="MPs", relation="voted for", object="it"), Edit(old="for", new="against"))
    """
    old = _content(edit.old)
    if not old or any(w not in _STOP for w in old) or all(w in _STOP for w in _content(edit.new)):
        return None
    for part in triple.as_list():
        words = _content(part)
        if words and all(w in _STOP for w in words) and set(old) <= set(words):
            return f"the triple's part {part!r} is function words only, which state nothing to correct"
    return None


MAX_EDIT_WORDS = 5
"""The most words a correction may replace or bring in at one place: a wrong value is a name, a number, a date, a
negation or a relation word, not a clause."""

_NEGATIONS = frozenset({"not", "never", "no", "n't"})
_SENTENCE_START = re.compile(r"(?:^|[.!?:;\"“]\s*|\n\s*)$")


def is_name(text: str, context: str) -> bool:
    """Whether ``text`` is a name of the context: each of its content words (digits aside) is written with a capital
    in most of its occurrences in the context that do not start a sentence (outputs are often lower-cased; the
    context says which words are names). Words the context has only at the start of sentences, or not at all, say
    nothing; ``False`` when no word says anything.

    >>> ctx = "Talks on the future of Scotland went on. The UK government spoke of devolution. Scotland voted."
    >>> is_name("the scotland", ctx), is_name("uk", ctx), is_name("devolution", ctx), is_name("the", ctx)
    (True, True, False, False)
    """
    words = [w for w in _content(text) if w not in _STOP and not w[0].isdigit()]
    seen = False
    for word in words:
        capital = lower = 0
        for m in re.finditer(rf"(?<!\w){re.escape(word)}(?!\w)", context, re.I):
            if _SENTENCE_START.search(context[max(0, m.start() - 3) : m.start()]):
                continue  # a capital at the start of a sentence says nothing
            if m.group()[0].isupper():
                capital += 1
            else:
                lower += 1
        if capital + lower == 0:
            continue  # only at the start of sentences, or not in the context: no evidence either way
        if capital <= lower:
            return False
        seen = True
    return seen


def negation_only(edit: Edit) -> bool:
    """Whether ``edit`` only adds or removes a negation ("is" → "is not", "did not sign" → "signed", "can" →
    "cannot"), which turns a claim into its opposite.

    >>> negation_only(Edit(old="has been", new="has not been")), negation_only(Edit(old="been not", new="been"))
    (True, True)
    >>> negation_only(Edit(old="did not sign", new="signed")), negation_only(Edit(old="2016", new="2016 finals"))
    (True, False)
    >>> negation_only(Edit(old="did not ease", new="eased")), negation_only(Edit(old="did not respond", new="responded"))
    (True, True)
    >>> negation_only(Edit(old="can", new="cannot")), negation_only(Edit(old="won't", new="will"))
    (True, True)
    >>> negation_only(Edit(old="did not respond", new="responds to"))
    False
    """
    old, new = _unnegated(_content(edit.old)), _unnegated(_content(edit.new))
    negated = any(w in _NEGATIONS for w in old) != any(w in _NEGATIONS for w in new)
    return negated and _same_words(_inflected(old), _inflected(new))


def one_for_one(edit: Edit) -> bool:
    """Whether ``edit`` replaces one to three words by as many others and does nothing else ("father" → "mother",
    "Eleanor Tomlinson" → "Aidan Turner"): with :func:`negation_only`, a change that leaves the rest of the claim as
    it was, so the flagged claim and the corrected one differ in one place.

    >>> one_for_one(Edit(old="son's", new="daughter's")), one_for_one(Edit(old="teamed down", new="collaborated"))
    (True, False)
    >>> one_for_one(Edit(old="the republic of ireland", new="the irish capital"))
    False
    """
    old, new = _content(edit.old), _content(edit.new)
    return 1 <= len(old) == len(new) <= 3 and old != new


_CONTRACTED_BASES = {"ca": "can", "wo": "will", "sha": "shall"}


def _unnegated(words: list[str]) -> list[str]:
    """``words`` with a negation written into a word split off ("cannot" → "can not", "won't" → "will not")."""
    out: list[str] = []
    for w in words:
        if w == "cannot":
            out += ["can", "not"]
        elif w.endswith("n't") and len(w) > 3:
            out += [_CONTRACTED_BASES.get(w[:-3], w[:-3]), "not"]
        else:
            out.append(w)
    return out


def _inflected(words: list[str]) -> list[str]:
    """The words that carry the claim: no negations and no auxiliary "do"."""
    return [w for w in words if w not in _NEGATIONS and w not in ("do", "does", "did")]


def _same_word(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` are one word inflected ("sign" / "signed" / "signs", "ease" / "eased", "stop" /
    "stopped"); crude, and only used to recognise a negation added or taken out with its verb."""
    short, long = sorted((a, b), key=len)
    if short == long:
        return True
    if len(short) < 2:
        return False
    for base in (short, short[:-1] if short.endswith("e") else None, short + short[-1]):
        if base is not None and any(long == base + suffix for suffix in ("s", "es", "d", "ed", "ing")):
            return True
    return False


def _same_words(a: list[str], b: list[str]) -> bool:
    return len(a) == len(b) and all(_same_word(x, y) for x, y in zip(a, b))


def edit_problem(edit: Edit, context: str) -> str | None:
    """Why ``edit`` is not a correction of a wrong value (``None``: it may be one):

    * it brings in or drops words without replacing any (a negation aside): "euro 2016" → "euro 2016 finals" adds
      a fact, it does not fix one, and a claim cut short is a deletion;
    * it replaces more than :data:`MAX_EDIT_WORDS` words, or brings in more: a rewrite of the claim;
    * it replaces a name of the context with words that are not one ("the scotland" → "devolution").

    >>> ctx = "Wales is central to the debate on the future of the UK, and on devolution."
    >>> edit_problem(Edit(old="the scotland", new="devolution"), ctx + " In Scotland, turnout was high.")
    "it replaces a name ('the scotland') with words that are not one ('devolution')"
    >>> edit_problem(Edit(old="the scotland", new="the UK"), ctx + " In Scotland, turnout was high.") is None
    True
    >>> edit_problem(Edit(old="2016", new="2016 finals"), ctx)
    "it adds words ('finals') without replacing any"
    """
    old, new = _content(edit.old), _content(edit.new)
    if negation_only(edit):
        return None
    if not new:
        return f"it drops {edit.old!r} without replacing it"
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    kept = sum(size for _, _, size in matcher.get_matching_blocks())
    if kept == len(old):
        added = [w for w in new if w not in old] or new[len(old):]
        return f"it adds words ({' '.join(added)!r}) without replacing any"
    if kept == len(new):
        return f"it drops words of {edit.old!r} without replacing them"
    if max(len(old), len(new)) > MAX_EDIT_WORDS:
        return f"it rewrites {len(old)} words into {len(new)}, more than a wrong value ({MAX_EDIT_WORDS} at most)"
    if is_name(edit.old, context) and not is_name(edit.new, context):
        return f"it replaces a name ({edit.old!r}) with words that are not one ({edit.new!r})"
    return None


# A bound on a number ("more than 100"): the values it admits, given the bound's own value.
_BOUNDS: tuple[tuple[str, str], ...] = (
    ("no more than", "upper"), ("no fewer than", "lower"), ("not more than", "upper"), ("in excess of", "lower"),
    ("more than", "lower"), ("greater than", "lower"), ("upwards of", "lower"), ("at least", "lower"),
    ("over", "lower"), ("above", "lower"), ("exceeding", "lower"),
    ("less than", "upper"), ("fewer than", "upper"), ("up to", "upper"), ("at most", "upper"),
    ("under", "upper"), ("below", "upper"),
    ("approximately", "about"), ("an estimated", "about"), ("close to", "about"), ("roughly", "about"),
    ("around", "about"), ("about", "about"), ("nearly", "about"), ("almost", "about"), ("some", "about"),
)
_APPROX = 0.1  # "about 100" admits 90 to 110
_SCALE = {"k": 1e3, "thousand": 1e3, "m": 1e6, "million": 1e6, "bn": 1e9, "billion": 1e9}


def _amount(text: str) -> float | None:
    """The one number of ``text`` as a float ("£1.2 million" is 1200000.0, "two" 2.0); ``None`` when ``text`` holds
    no number, or several."""
    numbers = [v.text for v in typed_values(text) if v.kind == "number"]
    if len(numbers) != 1:
        return None
    number = numbers[0].casefold().replace(", ", ",")
    if number in _NUMBER_WORDS:
        return float(_NUMBER_WORDS[number])
    digits = re.search(r"\d+(?:[.,]\d+)*", number)
    if digits is None:
        return None
    raw = digits.group()
    raw = raw.replace(",", "") if re.fullmatch(r"\d{1,3}(?:,\d{3})+", raw) else raw.replace(",", ".")
    try:
        value = float(raw)
    except ValueError:
        return None
    unit = re.search(r"(k|thousand|m|million|bn|billion)\b", number[digits.end():])
    return value * _SCALE[unit.group(1)] if unit else value


def _bound(words: str, at_end: bool) -> tuple[str, str] | None:
    """The bound ``words`` start with (``at_end``: end with), as ``(phrase, kind)``."""
    text = " ".join(_content(words))
    for phrase, kind in _BOUNDS:
        if (text.endswith(phrase) if at_end else text.startswith(phrase)) and (
            len(text) == len(phrase) or text[-len(phrase) - 1 if at_end else len(phrase)] == " "
        ):
            return phrase, kind
    return None


def _admits(kind: str, bound: float, value: float) -> bool:
    if kind == "lower":
        return value >= bound
    if kind == "upper":
        return value <= bound
    return abs(value - bound) <= _APPROX * abs(bound)


def bound_problem(edit: Edit, sentence: str, context: str = "") -> str | None:
    """Why ``edit`` is no correction of a number with a bound (``None``: it may be one). ``sentence`` is the
    flagged triple's text, where the edit's old words sit.

    * The bound is in the edit and the new words drop it ("more than 150" → "116"): the claim was a bound, the
      replacement states an exact amount; that changes what is claimed, not just the value.
    * The bound stands before the edit and already admits the new value ("more than £ 200,000" with the context's
      "£270,000"): the output's bound is true of the context's amount, there is nothing to correct.
    * A lower or upper bound stands before the edit and ``context`` does not state that bound with the new value:
      "more than 150" → "more than 116" from the context's "116 bodies" is not true either (an approximate bound,
      "about 116", is).

    >>> bound_problem(Edit(old="200,000", new="270,000"), "woman helped hide more than £ 200,000")
    "the output's 'more than 200,000' already holds for 270,000"
    >>> bound_problem(Edit(old="more than 150", new="116"), "prosecutors exhume more than 150 bodies")
    "it drops the bound 'more than' of 'more than 150' and states an exact amount"
    >>> bound_problem(Edit(old="17,000", new="14,000"), "she swam nearly 17,000 miles") is None
    True
    >>> bound_problem(Edit(old="150", new="116"), "exhumed more than 150 bodies", "They exhumed 116 bodies.")[-55:]
    'an exact amount of the context does not correct a bound'
    >>> bound_problem(Edit(old="150", new="100"), "exhumed more than 150 bodies", "More than 100 bodies.") is None
    True
    >>> bound_problem(Edit(old="67", new="3,500"), "to protest the more than 67 soldiers", "more than 3, 500 soldiers")
    """
    old, new = _amount(edit.old), _amount(edit.new)
    if old is None or new is None:
        return None
    inside = _bound(edit.old, at_end=False)
    if inside is not None:
        if _bound(edit.new, at_end=False) is None:
            return f"it drops the bound {inside[0]!r} of {edit.old!r} and states an exact amount"
        return None
    at = sentence.casefold().find(edit.old.casefold())
    before = _bound(sentence[:at], at_end=True) if at > 0 else None
    if before is None:
        return None
    phrase, kind = before
    stated = " ".join(_content(phrase + " " + edit.new))
    said = bool(context) and f" {stated} " in f" {' '.join(_content(context))} "
    if _admits(kind, old, new) and not said:  # the context's own bound is the correction ("more than 3,500")
        return f"the output's {phrase + ' ' + edit.old!r} already holds for {edit.new}"
    if kind != "about" and context and not said:
        return (f"the output's {phrase + ' ' + edit.old!r} is a bound and the context does not state "
                f"{phrase + ' ' + edit.new!r}: an exact amount of the context does not correct a bound")
    return None


def _value_key(text: str) -> str:
    return " ".join(_content(text))


def candidates_for(
    triple: Triple, evidence: str, limit: int = 5, output: str = ""
) -> tuple[Value, list[str]] | None:
    """A value of ``triple`` (a number or a date) and the values of the same kind (for a number, of the same unit:
    count, percent or money) in ``evidence`` that differ from every value of the triple: what a constrained step 1
    offers as replacements. ``None`` when the triple holds no number or date, or the evidence no other of its kind.
    Of several, the triple's first value with candidates.

    ``output``: the output the triple comes from; a value it already states (of another claim: "Jay has 735,000
    followers and Alexis 1.1 million") is not offered for this one.

    >>> t = Triple(subject="Irn bru", relation="is", object="two of the best-known brands")
    >>> candidates_for(t, "Irn Bru, one of Scotland's best-known brands, was sold in 2014.")
    (Value(text='two', kind='number', start=11), ['one'])
    >>> alexis = Triple(subject="Alexis", relation="has", object="1.2 million followers")
    >>> candidates_for(alexis, "Jay has 735,000 followers, Alexis 1.1 million.", output="Jay has 735,000 and Alexis "
    ...                "1.2 million followers.")
    (Value(text='1.2 million', kind='number', start=11), ['1.1 million'])
    """
    sentence = triple.sentence()
    own = typed_values(sentence)
    for value in own:
        options = value_options(value, evidence, own_text=sentence + "\n" + output, limit=limit)
        if options:
            return value, options
    return None


_SPACED_DECIMAL = re.compile(r"(?<![\w.,])(\d+)\. (\d+)\b")
_SPACED_PAIR = re.compile(r"(?<![\w.,-])(\d{1,3}) - (\d{1,3})(?![\w-])")


def closed_numbers(text: str) -> str:
    """``text`` with the numbers a tokenised corpus splits written whole: "1. 1 million" → "1.1 million", "2 - 0" →
    "2-0" (and the thousands groups of :func:`tidy_numbers`), so that they are compared and offered as one value.

    >>> closed_numbers("alexis boasts 1. 1 million, a 2 - 0 win and 3, 500 fans")
    'alexis boasts 1.1 million, a 2-0 win and 3,500 fans'
    """
    return _SPACED_PAIR.sub(r"\1-\2", _SPACED_DECIMAL.sub(r"\1.\2", tidy_numbers(text)))


def value_options(value: Value, evidence: str, own_text: str = "", limit: int = 5) -> list[str]:
    """The values of ``value``'s kind in ``evidence`` (for a number, of its unit too: count, percent, money or a
    pair such as a score), in evidence order, at most ``limit``: what may replace it. A value ``own_text`` states
    already (the claim's own, or another of the output's) is not offered, nor is ``value`` itself.

    >>> value_options(Value(text="18", kind="number", start=0), "Xi came 20 years on, with 3% growth and 20 aides.")
    ['20']
    """
    own_keys = {_value_key(v.text) for v in typed_values(own_text)} | {_value_key(value.text)}
    options: list[str] = []
    for other in typed_values(closed_numbers(evidence)):
        if other.kind != value.kind or (value.kind == "number" and _unit(other.text) != _unit(value.text)):
            continue  # a count is replaced by a count, a percentage by a percentage, money by money
        key = _value_key(other.text)
        if key not in own_keys and key not in {_value_key(o) for o in options}:
            options.append(other.text)
    return options[:limit]


def unstated_values(output: str, context: str) -> list[Value]:
    """The numbers and dates of ``output`` that the context never states. A number is stated by a number of the
    context with its words (digits and number words alike, thousands separators aside: "three" by "3"); a date by
    the words of the context's dates, in any order or spread over them ("June 2015" by "June 9" and "2015"). A
    faithful output takes its values from the context, so such a value is the first suspect of a flagged output.

    >>> [v.text for v in unstated_values("He was 18 in June 2015, one of three.", "In 2015, aged 20, he was 1 of 3.")]
    ['18', 'June 2015']
    >>> [v.text for v in unstated_values("He won on 9 June 2015.", "He won on June 9. That was in 2015.")]
    []
    """
    found = typed_values(closed_numbers(context))
    numbers = [set(_content(v.text)) for v in found if v.kind == "number"]
    dates = {w for v in found if v.kind == "date" for w in _content(v.text)}
    out = []
    for value in typed_values(output):
        words = set(_content(value.text))
        stated = words <= dates if value.kind == "date" else any(words <= other for other in numbers)
        if words and not stated:
            out.append(value)
    return out


_AUX = r"is|are|was|were|has|have|had|will|would|should|could|can|may|might|must"
_AUX_NOT = re.compile(rf"\b({_AUX})\s+(?:not|never)\b", re.I)
_CONTRACTED = re.compile(r"\b(is|are|was|were|has|have|had|would|should|could|must)n['’]t\b", re.I)
_IRREGULAR = re.compile(r"\b(?:(won)|(can))['’]t\b", re.I)


def drop_negation(triple: Triple) -> Triple | None:
    """``triple`` with the negation of its auxiliary verbs taken out ("has not grabbed" → "has grabbed", "isn't" →
    "is", "won't" → "will"): the opposite claim, for a negation the context does not state. ``None`` when the
    triple negates no auxiliary ("did not sign" is left alone: its positive form needs the verb inflected).

    >>> drop_negation(Triple(subject="Ashley", relation="has not grabbed", object="control")).as_list()
    ['Ashley', 'has grabbed', 'control']
    >>> drop_negation(Triple(subject="He", relation="won't", object="play")).relation
    'will'
    >>> drop_negation(Triple(subject="He", relation="did not sign", object="it")) is None
    True
    """
    parts = []
    for part in triple.as_list():
        part = _AUX_NOT.sub(lambda m: m.group(1), part)
        part = _CONTRACTED.sub(lambda m: m.group(1), part)
        part = _IRREGULAR.sub(lambda m: ("will" if m.group(1) else "can") if m.group()[0].islower()
                              else ("Will" if m.group(1) else "Can"), part)
        parts.append(part)
    flipped = Triple.from_list(parts)
    return None if flipped == triple else flipped


def replace_value(triple: Triple, value: str, replacement: str) -> Triple | None:
    """``triple`` with ``value`` replaced by ``replacement`` in the first part that holds it (``None``: no part
    does).

    >>> replace_value(Triple(subject="Bills", relation="rise by", object="£ 120"), "£ 120", "£200").as_list()
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


COPY_ANCHOR = 2
"""How many words (punctuation aside) a context sentence must share with an output sentence on each side of a
difference (or the output sentence must start or end there) for :func:`copied_changes` to offer that change."""


COPY_SHARED_WORDS = 5
COPY_SHARE = 0.6
"""A near copy shares at least :data:`COPY_SHARED_WORDS` words, and this share of its own words, with the context
sentence it copies (:func:`copied_changes`)."""


def copied_changes(sentence: str, context: str, anchor: int = COPY_ANCHOR, limit: int = 4) -> list[Change]:
    """The one-place changes that bring ``sentence`` (of an output) back to a sentence of ``context`` it nearly
    copies (at least :data:`COPY_SHARED_WORDS` words and :data:`COPY_SHARE` of its own shared), where the two
    share at least ``anchor`` words in a row on each side of a difference (or the output sentence starts or ends
    there) of at most :data:`MAX_EDIT_WORDS` words ("ibe was present among the reds squad" against "Ibe was
    present among the Reds squad": nothing; "sterling was present among the reds squad": "sterling" → "ibe"). A
    change replaces a value in kind (:func:`in_kind`: as many words as it brings in, a name of the context by
    another, or a negation added or taken out, with its left neighbour: "has" → "has not"); a clause rewritten
    ("great yarmouth" → "ontario canada, which") is no value replaced. The caller holds each change to the rules
    of a corrected value too. The changes of the most similar context sentences first, at most ``limit``, each
    alone; the new words as the context writes them (lower-cased when ``sentence`` has no capital letter: a
    lower-cased corpus). Nothing of a summary that paraphrases its source is found; most of an extractive one is.

    >>> ctx = "Rodgers said he has not disciplined Sterling. Ibe was present among the Reds squad on Friday."
    >>> [(c.old, c.new) for c in copied_changes("sterling was present among the reds squad on friday.", ctx)]
    [('sterling', 'ibe')]
    >>> [(c.old, c.new) for c in copied_changes("Rodgers said he has disciplined Sterling.", ctx)]
    [('has', 'has not')]
    >>> copied_changes("The Reds trained on Friday.", ctx)
    []
    """
    own = _tokens(sentence)
    own_words = [_norm(t.group()) for t in own]
    lower = not any(ch.isupper() for ch in sentence)
    found: list[tuple[float, int, Change]] = []
    vocabulary = Counter(w for w in own_words if re.match(r"\w", w))
    for lo, hi in sentence_spans(context):
        other = _tokens(context[lo:hi])
        other_words = [_norm(t.group()) for t in other]
        common = vocabulary & Counter(w for w in other_words if re.match(r"\w", w))
        if sum(common.values()) < COPY_SHARED_WORDS:
            continue  # too few words in common for an alignment to share enough (a quick bound before it)
        matcher = difflib.SequenceMatcher(None, own_words, other_words, autojunk=False)
        ops = matcher.get_opcodes()
        ratio = matcher.ratio()
        shared = sum(_words_in(own[i1:i2]) for op, i1, i2, _, _ in ops if op == "equal")
        if shared < max(COPY_SHARED_WORDS, COPY_SHARE * _words_in(own)):
            continue  # not a near copy of this sentence
        for n, (op, i1, i2, j1, j2) in enumerate(ops):
            if op == "equal" or max(i2 - i1, j2 - j1) > MAX_EDIT_WORDS:
                continue
            left = _words_in(own[ops[n - 1][1] : ops[n - 1][2]]) if n > 0 and ops[n - 1][0] == "equal" else 0
            right = _words_in(own[ops[n + 1][1] : ops[n + 1][2]]) if n + 1 < len(ops) and ops[n + 1][0] == "equal" else 0
            starts, ends = not _words_in(own[:i1]), not _words_in(own[i2:])  # the sentence's edges
            if (not starts and left < anchor) or (not ends and right < anchor) or left + right < anchor:
                continue
            if not _words_in([*own[i1:i2], *other[j1:j2]]):
                continue  # punctuation only
            if i1 == i2 or j1 == j2:  # a pure insertion or deletion: taken with its left neighbour
                if i1 == 0 or j1 == 0:
                    continue
                i1, j1 = i1 - 1, j1 - 1
            start, end = own[i1].start(), own[i2 - 1].end()
            new = context[lo + other[j1].start() : lo + other[j2 - 1].end()] if j2 > j1 else ""
            if lower:
                new = new.lower()
            change = Change(start=start, end=end, old=sentence[start:end], new=new)
            if not in_kind(change.edit, context):
                continue  # a clause rewritten, not a value replaced: "great yarmouth" → "ontario canada, which"
            found.append((-ratio, len(found), change))
    out: list[Change] = []
    for _, _, change in sorted(found, key=lambda f: (f[0], f[1])):
        if all((c.start, c.end, c.new.casefold()) != (change.start, change.end, change.new.casefold()) for c in out):
            out.append(change)
    return out[:limit]


def _words_in(tokens: list[re.Match[str]]) -> int:
    return sum(1 for t in tokens if re.match(r"\w", t.group()))


_POSSESSIVE = re.compile(r"\s+(['’]s)\b")


STATED_ANCHOR = 2
"""How many words on each side of a change's old words :func:`stated_around` reads with them."""


def stated_around(text: str, start: int, end: int, context: str, anchor: int = STATED_ANCHOR) -> str | None:
    """The words of ``text`` around its characters ``[start, end)`` (those words, or the word before an insertion
    at ``start``, with up to ``anchor`` words of the sentence on each side) when the context says them word for
    word (case, punctuation and number words aside): a change there would depart from what the context states.
    ``None`` otherwise, or when the stretch is shorter than three words.

    >>> ctx = "Space lasers are best known for blowing people up. A 1939 film was shown."
    >>> out = "space lasers are best known for blowing planets up. a 1939 film was shown."
    >>> stated_around(out, 13, 16, ctx), stated_around(out, 37, 44, ctx)  # "are" (→ "are not"), "planets"
    ('space lasers are best known', None)
    """
    lo, hi = sentence_at(text, start)
    words = [t for t in _tokens(text[lo:hi]) if re.match(r"\w", t.group())]
    at = [i for i, t in enumerate(words) if t.end() > start - lo and t.start() < end - lo]
    if not at:
        before = [i for i, t in enumerate(words) if t.end() <= start - lo]
        if not before:
            return None
        at = [before[-1]]
    i1, i2 = max(0, at[0] - anchor), min(len(words), at[-1] + 1 + anchor)
    if i2 - i1 < 3:
        return None
    wanted = [_norm(t.group()) for t in words[i1:i2]]
    said = [_norm(t.group()) for t in _tokens(context) if re.match(r"\w", t.group())]
    n = len(wanted)
    if any(said[k : k + n] == wanted for k in range(len(said) - n + 1)):
        return text[lo + words[i1].start() : lo + words[i2 - 1].end()]
    return None


def in_kind(edit: Edit, context: str) -> bool:
    """Whether ``edit`` replaces a value by another of its kind: as many words for as many (a tokenised "'s" is no
    word), a name by a name of the context written without a break (no comma: not a clause), or a negation added
    or taken out. The old words are a name when the context writes them as one, or, one or two words, when the
    context has none of them (a name the output made up: "tony" for "Alan Joyce").

    >>> ctx = "The Netherlands lost to Northern Ireland. Tussaud's is in Ontario, Canada, which is far."
    >>> in_kind(Edit("joe marler 's", "nathan hughes's"), ctx), in_kind(Edit("netherlands", "northern ireland"), ctx)
    (True, True)
    >>> in_kind(Edit("great yarmouth", "ontario canada, which"), ctx), in_kind(Edit("not rejected", "failed to pass"), ctx)
    (False, False)
    >>> in_kind(Edit("tony", "Northern Ireland"), ctx), in_kind(Edit("the", "the Netherlands"), ctx)
    (True, False)
    >>> in_kind(Edit("see their last live", "watch gp"), ctx), in_kind(Edit("not been", "was"), ctx)
    (False, False)
    """
    if negation_only(edit):
        return True
    old, new = (_content(_POSSESSIVE.sub(r"\1", text)) for text in (edit.old, edit.new))
    if len(old) == len(new):
        return True
    if re.search(r"[,;:()\"]", edit.new) or not is_name(edit.new, context):
        return False
    return is_name(edit.old, context) or _made_up(old, context)


def _made_up(words: list[str], context: str) -> bool:
    """Whether ``words`` are one or two content words (function words aside) of which the context has none."""
    content = [w for w in words if w not in _STOP]
    return 0 < len(content) <= 2 and not any(
        re.search(rf"(?<!\w){re.escape(w)}(?!\w)", context, re.I) for w in content)
