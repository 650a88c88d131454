"""Typed, serialisable (pydantic) results of GraphEval. Imports nothing else from the package: ``to_html()`` draws
with the renderer the package sets at import (:func:`set_html_renderer`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, computed_field
from typing_extensions import deprecated

__all__ = ["Case", "ClaimCheck", "Decision", "ExtractedRow", "Explanation", "Extraction", "Mode", "Report",
    "StageError", "StageUsage", "Triple", "render_html", "set_html_renderer", "total_usage", "usage_cost"]

Mode = Literal["graph", "raw"]
"""``"graph"``: check each extracted triple (GraphEval). ``"raw"``: check the whole output as one claim (baseline)."""
Method = Literal["hybrid", "paper"]
"""The names of the shipped decision rules (:mod:`grapheval_plugins.aggregate`); a registered rule may have any."""
Case = Literal["faithful", "unsupported", "outweighed", "combined"]
"""The four ways a verdict can stand against the claims (see :class:`Decision`)."""


HTMLRenderer = Callable[..., str]
"""Draws a result as HTML: ``(result, *, context=None, document=True) -> str``."""

_html_renderer: list[HTMLRenderer] = []


def set_html_renderer(renderer: HTMLRenderer) -> None:
    """Set what ``to_html()`` and ``_repr_html_()`` draw with (docs/architecture.md)."""
    _html_renderer[:] = [renderer]


def render_html(result: object, **options: object) -> str:
    """``result`` drawn as HTML by the renderer of :func:`set_html_renderer` (the package sets one on import)."""
    return _html_renderer[0](result, **options)


class Triple(BaseModel):
    """One knowledge-graph edge: ``[subject, relation, object]``, each a non-empty string.

    >>> Triple(subject="Amanda Jackson", relation="born in", object="Springfield").sentence()
    'Amanda Jackson born in Springfield'
    """

    model_config = ConfigDict(frozen=True)

    subject: str
    relation: str
    object: str

    def sentence(self) -> str:
        """The triple read as a sentence: its three parts joined by spaces (the paper's concatenation)."""
        return f"{self.subject} {self.relation} {self.object}"

    def as_list(self) -> list[str]:
        """``[subject, relation, object]``, the format of the paper's prompts."""
        return [self.subject, self.relation, self.object]

    @classmethod
    def from_list(cls, parts: list[str] | tuple[str, str, str]) -> Triple:
        """Build from ``[subject, relation, object]``."""
        subject, relation, obj = parts
        return cls(subject=subject, relation=relation, object=obj)


class StageError(BaseModel):
    """An error that happened in one stage for one sample, recorded instead of raised."""

    stage: Literal["input", "extract", "check", "correct"]
    type: str
    message: str


class StageUsage(BaseModel):
    """The chat-model calls of one stage of one row and their tokens (from each answer's ``usage_metadata``).

    >>> a = StageUsage(calls=1, input_tokens=100, output_tokens=10)
    >>> (a + a).calls, (a + a).input_tokens, (a + StageUsage(calls=1, input_tokens=None)).input_tokens
    (2, 200, None)
    """

    calls: int = 0
    """Chat-model calls that answered (a call that raised, e.g. a rate limit before a retry, is not counted)."""
    input_tokens: int | None = 0
    """Prompt tokens (``None``: not reported by every call)."""
    output_tokens: int | None = 0
    """Completion tokens (``None``: not reported by every call)."""
    cost: float | None = None
    """US dollars reported by the model for these calls (``None``: not reported by every call)."""

    def __add__(self, other: StageUsage) -> StageUsage:
        def tokens(a: int | None, b: int | None) -> int | None:
            return None if a is None or b is None else a + b

        if not self.calls or not other.calls:  # the cost of no calls says nothing
            cost = self.cost if self.calls else other.cost
        else:
            cost = None if self.cost is None or other.cost is None else self.cost + other.cost
        return StageUsage(calls=self.calls + other.calls, input_tokens=tokens(self.input_tokens, other.input_tokens),
                          output_tokens=tokens(self.output_tokens, other.output_tokens), cost=cost)

    def split(self, weights: list[int]) -> list[StageUsage]:
        """This usage shared in proportion to ``weights``, by largest remainder (the parts add up exactly).

        >>> [u.calls for u in StageUsage(calls=3, input_tokens=10, output_tokens=1).split([1, 1])]
        [2, 1]
        """
        total = sum(weights)
        if len(weights) == 1 or total <= 0:
            return [self.model_copy()] + [StageUsage() for _ in weights[1:]]

        def shares(value: int | None) -> list[int | None]:
            if value is None:
                return [None] * len(weights)
            exact = [value * w / total for w in weights]
            out = [int(x) for x in exact]
            for i in sorted(range(len(weights)), key=lambda i: out[i] - exact[i])[: value - sum(out)]:
                out[i] += 1
            return list(out)

        parts = zip(shares(self.calls), shares(self.input_tokens), shares(self.output_tokens), weights)
        return [StageUsage(calls=c or 0, input_tokens=i, output_tokens=o,
                           cost=None if self.cost is None else self.cost * w / total) for c, i, o, w in parts]


def total_usage(usages: Iterable[Mapping[str, StageUsage]]) -> StageUsage:
    """Every stage of every given usage added up (a run's totals).

    >>> total_usage([{"extract": StageUsage(calls=1, input_tokens=5, output_tokens=2)},
    ...              {"check": StageUsage(calls=2, input_tokens=7, output_tokens=1)}]).input_tokens
    12
    """
    return sum((stage for usage in usages for stage in usage.values()), StageUsage())


def usage_cost(usage: Mapping[str, StageUsage], prices: Mapping[str, float] | None = None) -> float | None:
    """US dollars of the calls in ``usage``: per stage, the cost the model reported, else its tokens at ``prices``
    (``{"input": usd_per_1M_tokens, "output": usd_per_1M_tokens}``); ``None`` when a stage with calls has neither.

    >>> usage_cost({"extract": StageUsage(calls=1, input_tokens=1000, output_tokens=100)},
    ...            {"input": 0.15, "output": 0.6})
    0.00021
    >>> usage_cost({"extract": StageUsage(calls=1, input_tokens=1000, output_tokens=100)}) is None
    True
    """
    total = 0.0
    for stage in usage.values():
        if not stage.calls:
            continue
        if stage.cost is not None:
            total += stage.cost
        elif prices is not None and stage.input_tokens is not None and stage.output_tokens is not None:
            total += (stage.input_tokens * prices["input"] + stage.output_tokens * prices["output"]) / 1e6
        else:
            return None
    return round(total, 12)


class Extraction(BaseModel):
    """What the knowledge-graph extraction stage produced for one output."""

    triples: list[Triple] = Field(default_factory=list)
    raw_text: str | None = None
    """The chat model's last answer, verbatim (``None`` when no call was made)."""
    attempts: int = 0
    """Chat-model calls made for this output (0 when served from the cache or in raw mode)."""
    cached: bool = False
    fallback: bool = False
    """True when nothing could be parsed and the whole output was checked as one claim instead."""
    issues: list[str] = Field(default_factory=list)
    """Parser notes: repaired defects, dropped malformed items, retries."""


class ClaimCheck(BaseModel):
    """One claim (a triple's sentence, or the whole output) scored against the context."""

    claim: str
    """The hypothesis text given to the scorer."""
    triple: Triple | None = None
    """The triple the claim was read from; ``None`` for a whole-output claim (raw mode or fallback)."""
    p_unsupported: float
    """Probability in [0, 1] that the context does not support the claim."""
    unsupported: bool
    """``p_unsupported > hallucination_threshold``."""
    evidence: str | None = None
    """The context passage (chunk) that decided the score: the one that best supports the claim."""
    evidence_index: int | None = None
    """Index of that chunk among the context's chunks."""
    evidence_passage: int | None = None
    """Index of the passage (the document, for a context given as a list) that chunk comes from."""
    span: tuple[int, int] | None = None
    """Character span ``[start, end)`` of the claim in the output, when it could be located."""


_THRESHOLD_NAMES = AliasChoices("hallucination_threshold", "threshold")
"""The names the hallucination threshold reads from (older JSON calls it ``threshold``)."""


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def claim_text(claim: ClaimCheck) -> str:
    """How an explanation names a claim: its triple as a list, or the claim's text quoted."""
    return str(claim.triple.as_list()) if claim.triple is not None else repr(claim.claim)


def _case(flagged: bool, any_above: bool) -> Case:
    """The one place the four cases are told apart: the verdict against the claims above the threshold."""
    if flagged:
        return "unsupported" if any_above else "combined"
    return "outweighed" if any_above else "faithful"


class Decision(BaseModel):
    """A decision rule's account of one row's verdict, which every host's reason is built from. ``case``:
    ``faithful`` (no claim above the threshold), ``unsupported`` (flagged, claims above), ``outweighed`` (not
    flagged although claims are above) or ``combined`` (flagged with no claim above).

    >>> c = ClaimCheck(claim="a", p_unsupported=0.7, unsupported=True)
    >>> d = Decision.of("paper", 0.7, [c], 0.5)
    >>> d.case, d.hallucinated, d.deciding
    ('unsupported', True, 0)
    """

    model_config = ConfigDict(frozen=True)

    rule: str
    """The rule that decided (its registered name)."""
    p_hallucination: float
    hallucination_threshold: float = Field(validation_alias=_THRESHOLD_NAMES)
    """The P(hallucination) (and P(unsupported) of a claim) above which it is flagged."""
    case: Case
    deciding: int | None = None
    """Index in ``claims`` of the likeliest unsupported claim; ``None`` without claims."""
    why: str = ""
    """The rule's words for what outweighed or combined the claims, e.g. ``"the whole output's score"``."""

    @property
    def hallucinated(self) -> bool:
        """``p_hallucination > hallucination_threshold``."""
        return self.p_hallucination > self.hallucination_threshold

    @property
    @deprecated("Decision.threshold is deprecated: read Decision.hallucination_threshold")
    def threshold(self) -> float:
        """Deprecated alias of :attr:`hallucination_threshold` (warns)."""
        return self.hallucination_threshold

    @classmethod
    def of(cls, rule: str, p_hallucination: float, claims: list[ClaimCheck], threshold: float,
           why: str = "", *, hallucinated: bool | None = None) -> Decision:
        """The account of ``p_hallucination`` over ``claims`` at ``threshold`` (``hallucinated``: a known verdict)."""
        if hallucinated is None:
            hallucinated = p_hallucination > threshold
        case = _case(hallucinated, any(c.p_unsupported > threshold for c in claims))
        deciding = max(range(len(claims)), key=lambda i: claims[i].p_unsupported) if claims else None
        return cls(rule=rule, p_hallucination=p_hallucination, hallucination_threshold=threshold, case=case,
                   deciding=deciding, why=why)


class Explanation(BaseModel):
    """The one explanation of a verdict (:meth:`Report.explanation`), which every host formats.

    >>> r = Report(output="x", mode="raw", hallucination_threshold=0.5, hallucinated=False, score=0.9)
    >>> r.explanation().summary
    '0 claims checked, none unsupported'
    """

    verdict: Literal["faithful", "hallucination", "error"]
    case: Case | None = None
    """The :class:`Decision`'s case (``None`` on error)."""
    summary: str
    """One line: what the claims say and, when they alone did not decide, what did."""
    claims: list[ClaimCheck] = Field(default_factory=list)
    """The claims above the threshold to list, likeliest unsupported first."""
    more: int = 0
    """Claims above the threshold left out of ``claims`` (beyond ``max_claims``)."""
    note: str | None = None
    """A remark on how the claims were read (no knowledge graph could be extracted)."""


class Report(BaseModel):
    """GraphEval's verdict on one ``(context, output)`` pair (``docs/concepts.md``, the method; a tour: ``docs/report.md``)."""

    output: str
    mode: Mode
    hallucination_threshold: float = Field(validation_alias=_THRESHOLD_NAMES)
    """The P(unsupported) and P(hallucination) above which a claim and the output are flagged."""
    hallucinated: bool | None = None
    score: float | None = None
    """``1 − P(hallucination)`` (``None`` on error)."""
    method: str | None = None
    """The decision rule's name (``None``: raw mode, or an older report, decided by the paper's rule)."""
    claims: list[ClaimCheck] = Field(default_factory=list)
    whole_output: ClaimCheck | None = None
    """Under the ``hybrid`` rule, the whole output scored as one claim (``None`` when it is in ``claims``)."""
    extraction: Extraction | None = None
    llm: str | None = None
    scorer: str | None = None
    timings: dict[str, float] = Field(default_factory=dict)
    """Seconds spent per stage: ``extract``, ``check``, ``total``."""
    errors: list[StageError] = Field(default_factory=list)
    """What failed: a stage (no verdict), or a claim the scorer could not judge (left out of ``claims``)."""
    id: str | None = None
    """Optional identifier of the sample, carried through batch runs."""
    decision: Decision | None = None
    """The rule's own account of the verdict (``None`` without one)."""
    usage: dict[str, StageUsage] = Field(default_factory=dict)
    """The chat-model calls and tokens of each stage (a shared scorer pass split by claims)."""

    @property
    @deprecated("Report.threshold is deprecated: read Report.hallucination_threshold")
    def threshold(self) -> float:
        """Deprecated alias of :attr:`hallucination_threshold` (warns)."""
        return self.hallucination_threshold

    def cost(self, prices: Mapping[str, float] | None = None) -> float | None:
        """US dollars of this row's calls (:func:`usage_cost`)."""
        return usage_cost(self.usage, prices)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ok(self) -> bool:
        """True when a verdict was reached (no stage failed fatally)."""
        return self.hallucinated is not None

    @property
    def unsupported(self) -> list[ClaimCheck]:
        """The claims judged unsupported: the explanation of a positive verdict."""
        return [c for c in self.claims if c.unsupported]

    @property
    def triples(self) -> list[Triple]:
        """The triples that were checked (empty in raw mode)."""
        return [c.triple for c in self.claims if c.triple is not None]

    def explanation(self, max_claims: int = 10, *, min_score: float | None = None) -> Explanation:
        """The one explanation of the verdict, listing at most ``max_claims`` claims; ``min_score``: judge in a
        minimum-score host's terms (``score < min_score``)."""
        if not self.ok:
            msg = "; ".join(f"{e.stage}: {e.message}" for e in self.errors) or "no verdict"
            return Explanation(verdict="error", summary=msg)
        decision = self.decision or Decision.of(
            self.method or "paper", 1.0 - (self.score or 0.0), self.claims, self.hallucination_threshold,
            why="the whole output's score" if self.whole_output is not None else "", hallucinated=self.hallucinated)
        n = len(self.claims)
        if min_score is None:
            flagged = bool(self.hallucinated)
            above = [c for c in self.claims if c.p_unsupported > decision.hallucination_threshold]
        else:
            flagged = (self.score or 0.0) < min_score
            above = [c for c in self.claims if 1.0 - c.p_unsupported < min_score]
        above.sort(key=lambda c: -c.p_unsupported)
        case = decision.case if min_score is None else _case(flagged, bool(above))
        why = decision.why or "the rule's combination of the claims"
        top = self.claims[decision.deciding] if decision.deciding is not None and decision.deciding < n else None
        listed = above[:max_claims]
        if case == "faithful":
            summary = f"{_plural(n, 'claim')} checked, none unsupported"
        elif case == "unsupported":
            summary = f"{len(above)} of {_plural(n, 'claim')} unsupported"
        elif case == "outweighed":
            summary = f"{len(above)} of {_plural(n, 'claim')} unsupported, outweighed by {why}"
        else:
            summary = f"no single claim of {_plural(n, 'claim')} unsupported; {why} decided"
            if top is not None:
                summary += f"; the likeliest unsupported: {claim_text(top)} P(unsupported)={top.p_unsupported:.3f}"
            listed = []
        note = None
        if self.extraction is not None and self.extraction.fallback:
            note = "no knowledge graph could be extracted: the whole output was checked as one claim"
        return Explanation(verdict="hallucination" if flagged else "faithful", case=case,
                           summary=summary, claims=listed, more=len(above) - len(listed), note=note)

    def explain(self, max_claims: int = 10) -> str:
        """A short human-readable explanation of the verdict: :meth:`explanation` as text.

        >>> r = Report(output="x", mode="raw", hallucination_threshold=0.5, hallucinated=False, score=0.9)
        >>> r.explain()
        'faithful (score 0.900): 0 claims checked, none unsupported'
        """
        ex = self.explanation(max_claims)
        if ex.verdict == "error":
            return f"error: {ex.summary}"
        lines = [f"{ex.verdict} (score {self.score:.3f}): {ex.summary}"]
        lines += [f"- {claim_text(c)} p_unsupported={c.p_unsupported:.3f}" for c in ex.claims]
        if ex.more:
            lines.append(f"- … {ex.more} more")
        if ex.note:
            lines.append(f"({ex.note})")
        return "\n".join(lines)

    def to_html(self, context: str | None = None) -> str:
        """A self-contained HTML page of the report (and ``context``). Needs the ``report`` extra.

        >>> r = Report(output="<b>x</b>", mode="raw", hallucination_threshold=0.5, hallucinated=False, score=0.9)
        >>> "&lt;b&gt;x&lt;/b&gt;" in r.to_html()
        True
        """
        return render_html(self, context=context)

    def _repr_html_(self) -> str:
        """What Jupyter shows: the report as an HTML fragment with its own scoped style."""
        return render_html(self, document=False)

class ExtractedRow(BaseModel):
    """One row between :meth:`GraphEval.extract_rows <grapheval_plugins.GraphEval.extract_rows>` and
    :meth:`~grapheval_plugins.GraphEval.check_rows`: plain data, so the stages can run in different processes.

    >>> row = ExtractedRow(id="1", context="Paris is in France.", output="Paris is in France.",
    ...                    claims=[("Paris is in France", Triple.from_list(["Paris", "is in", "France"]))])
    >>> ExtractedRow.model_validate_json(row.model_dump_json()) == row
    True
    """

    id: str | None = None
    context: str
    passages: list[str] = Field(default_factory=list)
    """The context's passages, as the scorer reads them (each chunked on its own); empty: ``context`` is one."""
    output: str
    extraction: Extraction | None = None
    claims: list[tuple[str, Triple | None]] = Field(default_factory=list)
    """The hypotheses to score, each with the triple it was read from (``None``: the whole output)."""
    llm: str | None = None
    """The chat model that extracted the claims (``None`` in raw mode)."""
    extract_seconds: float = 0.0
    usage: dict[str, StageUsage] = Field(default_factory=dict)
    """The extraction's chat-model calls and tokens (stage ``extract``), carried into the report."""
