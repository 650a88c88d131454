"""Typed, serialisable results of GraphEval. Imports nothing else from the package.

Every model here is a pydantic model: ``report.model_dump()`` gives plain JSON-ready data and
``Report.model_validate(data)`` reads it back. ``to_html()`` draws with the renderer that the package sets at import
(:func:`set_html_renderer`, :func:`grapheval_plugins.report.report_html`), so this module needs nothing above it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field

__all__ = [
    "TRIPLE_RENDERERS",
    "ClaimCheck",
    "ExtractedRow",
    "Extraction",
    "Mode",
    "Report",
    "StageError",
    "Triple",
    "render_html",
    "render_sentence",
    "set_html_renderer",
]

Mode = Literal["graph", "raw"]
"""``"graph"``: check each extracted triple (GraphEval). ``"raw"``: check the whole output as one claim (baseline)."""
Method = Literal["hybrid", "paper"]
"""How graph mode decides a row (see :mod:`grapheval_plugins.aggregate`): ``hybrid`` (default) combines the whole
output's score with its triples'; ``paper`` is the paper's rule, the largest P(unsupported) over the triples."""


HTMLRenderer = Callable[..., str]
"""Draws a result as HTML: ``(result, *, context=None, document=True) -> str``."""

_html_renderer: list[HTMLRenderer] = []


def set_html_renderer(renderer: HTMLRenderer) -> None:
    """Set what ``to_html()`` and ``_repr_html_()`` of the results draw with.

    The package sets :func:`grapheval_plugins.report.report_html` when it is imported; the result types themselves
    import nothing from the report layer above them.
    """
    _html_renderer[:] = [renderer]


def render_html(result: object, **options: object) -> str:
    """``result`` drawn as HTML by the renderer set with :func:`set_html_renderer`."""
    if not _html_renderer:  # pragma: no cover - the package sets it on import
        raise RuntimeError("no HTML renderer is set: import grapheval_plugins first")
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


def render_sentence(triple: Triple) -> str:
    """The triple as a written sentence: its parts joined by spaces, capitalised, ending with a full stop.

    >>> render_sentence(Triple(subject="the treaty", relation="was signed in", object="Vienna"))
    'The treaty was signed in Vienna.'
    """
    text = f"{triple.subject} {triple.relation} {triple.object}".strip()
    text = text[:1].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."


TRIPLE_RENDERERS: dict[str, Callable[[Triple], str]] = {
    "concat": Triple.sentence,
    "sentence": render_sentence,
}
"""How a triple becomes the scorer's hypothesis (``GraphEval(render_triple=...)``): ``concat`` (the paper: the
three parts joined by spaces, :meth:`Triple.sentence`) or ``sentence`` (the same, capitalised and ending with a
full stop)."""


class StageError(BaseModel):
    """An error that happened in one stage for one sample, recorded instead of raised."""

    stage: Literal["input", "extract", "check", "correct"]
    type: str
    message: str


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
    """``p_unsupported > threshold``."""
    evidence: str | None = None
    """The context passage (chunk) that decided the score: the one that best supports the claim."""
    evidence_index: int | None = None
    """Index of that chunk among the context's chunks."""
    evidence_passage: int | None = None
    """Index of the passage (the document, for a context given as a list) that chunk comes from."""
    span: tuple[int, int] | None = None
    """Character span ``[start, end)`` of the claim in the output, when it could be located."""


class Report(BaseModel):
    """GraphEval's verdict on one ``(context, output)`` pair.

    ``score`` follows the convention of DeepEval and Ragas: 1 = faithful, ``1 − P(hallucination)``.
    ``hallucinated`` is ``P(hallucination) > threshold``; P(hallucination) is, under the paper's rule
    (``method="paper"``, and in raw mode), the largest ``p_unsupported`` over the claims, and under ``hybrid`` a
    fitted combination of the whole output's and the triples' (:mod:`grapheval_plugins.aggregate`). Both are
    ``None`` when the sample errored.
    """

    output: str
    mode: Mode
    threshold: float
    hallucinated: bool | None = None
    score: float | None = None
    """``1 − P(hallucination)`` (``None`` on error)."""
    method: Method | None = None
    """The decision rule of a graph-mode report (``None``: raw mode, or a report written before rules were named,
    which used the paper's)."""
    claims: list[ClaimCheck] = Field(default_factory=list)
    whole_output: ClaimCheck | None = None
    """Under ``method="hybrid"``, the whole output scored as one claim: the rule's other input beside ``claims``
    (``None`` in raw mode, under the paper's rule, and when nothing was extracted: then the whole output is the
    one claim in ``claims``)."""
    extraction: Extraction | None = None
    llm: str | None = None
    scorer: str | None = None
    timings: dict[str, float] = Field(default_factory=dict)
    """Seconds spent per stage: ``extract``, ``check``, ``total``."""
    errors: list[StageError] = Field(default_factory=list)
    """What failed. A stage failure leaves no verdict (``ok`` is False). A claim the scorer could not judge is listed
    here (stage ``check``) and left out of ``claims``; the verdict stands only if another claim decides it
    (some claim is unsupported), else ``hallucinated`` and ``score`` are ``None``."""
    id: str | None = None
    """Optional identifier of the sample, carried through batch runs."""

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

    def explain(self, max_claims: int = 10) -> str:
        """A short human-readable explanation of the verdict.

        >>> r = Report(output="x", mode="raw", threshold=0.5, hallucinated=False, score=0.9)
        >>> r.explain()
        'faithful (score 0.900): no unsupported claims'
        """
        if not self.ok:
            msg = "; ".join(f"{e.stage}: {e.message}" for e in self.errors) or "no verdict"
            return f"error: {msg}"
        bad = sorted(self.unsupported, key=lambda c: -c.p_unsupported)
        if not bad and self.hallucinated and self.claims:  # a combined rule decided: name the likeliest claim
            top = max(self.claims, key=lambda c: c.p_unsupported)
            what = str(top.triple.as_list()) if top.triple is not None else repr(top.claim)
            return (f"hallucination (score {self.score:.3f}): no single claim above {self.threshold}; the likeliest "
                    f"unsupported is {what} p_unsupported={top.p_unsupported:.3f}")
        if not bad:
            return f"faithful (score {self.score:.3f}): no unsupported claims"
        if not self.hallucinated:  # the hybrid rule can pass an output some claim of which is above the threshold
            return (f"faithful (score {self.score:.3f}): {len(bad)} claim(s) above {self.threshold}, outweighed by "
                    f"the whole output's score")
        lines = [f"hallucination (score {self.score:.3f}): {len(bad)} unsupported claim(s)"]
        for c in bad[:max_claims]:
            what = str(c.triple.as_list()) if c.triple is not None else repr(c.claim)
            lines.append(f"- {what} p_unsupported={c.p_unsupported:.3f}")
        if len(bad) > max_claims:
            lines.append(f"- … {len(bad) - max_claims} more")
        return "\n".join(lines)

    def to_html(self, context: str | None = None) -> str:
        """A self-contained HTML page: the output with each claim's span highlighted by verdict, the knowledge
        graph drawn, and ``context`` (when given) with the deciding passages marked. Needs the ``report`` extra.

        >>> r = Report(output="<b>x</b>", mode="raw", threshold=0.5, hallucinated=False, score=0.9)
        >>> "&lt;b&gt;x&lt;/b&gt;" in r.to_html()
        True
        """
        return render_html(self, context=context)

    def _repr_html_(self) -> str:
        """What Jupyter shows: the report as an HTML fragment with its own scoped style."""
        return render_html(self, document=False)

class ExtractedRow(BaseModel):
    """One row between the two stages of :class:`~grapheval_plugins.GraphEval`: extracted, not yet scored.

    Produced by :meth:`GraphEval.extract_rows <grapheval_plugins.GraphEval.extract_rows>` and consumed by
    :meth:`GraphEval.check_rows <grapheval_plugins.GraphEval.check_rows>`. It is plain data (``model_dump_json`` /
    ``model_validate_json`` round-trip it), so the two stages can run in different processes or machines.

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
