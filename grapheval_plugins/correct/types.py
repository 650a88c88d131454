"""Typed, serialisable (pydantic) results of GraphCorrect and the Direct Prompt baseline."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, computed_field

from ..types import Report, StageError, StageUsage, Triple, render_html

__all__ = ["CorrectionMethod", "CorrectionReport", "CorrectionRound", "CorrectionStatus", "RougeScores",
    "TripleChange"]

CorrectionMethod = Literal["paper", "graph", "evidence", "direct", "constrained"]
"""A correction strategy (``docs/guides/correct.md``); ``"graph"`` is the old name of ``"paper"``, which reports
written before the rename hold."""

CorrectionStatus = Literal["unflagged", "corrected", "still_flagged", "unchanged", "recheck_failed", "error"]
"""What happened to one output:

* ``unflagged`` — detection found nothing unsupported: returned unchanged, no correction call made;
* ``corrected`` — the output was changed and the re-check passes;
* ``still_flagged`` — the output was changed but the re-check still flags it;
* ``unchanged`` — flagged, but no correction could be applied (each reason is recorded): the original is kept;
* ``recheck_failed`` — the output was changed but the re-check itself failed (see ``errors``);
* ``error`` — detection failed (or the row was unusable): nothing was corrected.
"""


class TripleChange(BaseModel):
    """One correction attempt: a flagged triple (GraphCorrect) or a whole-output rewrite (Direct Prompt)."""

    round: int = 1
    """The correction round (1 unless ``max_rounds > 1``)."""
    kind: CorrectionMethod = "graph"
    old: Triple | None = None
    """The flagged triple (``None`` for a direct rewrite, or a whole-output claim that has no triple)."""
    new: Triple | None = None
    """The corrected triple from step 1 (``None`` when step 1 failed, and for a direct rewrite)."""
    p_unsupported: float | None = None
    """The old triple's P(unsupported) in the report that flagged it."""
    applied: bool = False
    """True when the output was changed by this correction."""
    reason: str | None = None
    """Why the correction was not applied (or what was noted about it)."""
    guard_lost: list[Triple] = Field(default_factory=list)
    """Triples supported before the change that the changed output no longer states (``guard`` option)."""
    llm_calls: int = 0
    """Chat-model calls made for this change (steps 1 and 2, or the direct prompt)."""
    follow_up: bool = False
    """True when step 1 answered with the triple unchanged and the follow-up message was sent."""
    raw_answers: list[str] = Field(default_factory=list)
    """The chat model's answers, verbatim, in call order."""


class CorrectionRound(BaseModel):
    """One round of correction followed by a re-check."""

    round: int
    before: str
    after: str
    applied: int
    """Changes applied in this round."""
    hallucinated: bool | None
    """The re-check verdict on ``after`` (``None`` when the re-check failed)."""
    unsupported: int
    """Unsupported claims left according to the re-check."""


class RougeScores(BaseModel):
    """ROUGE-1/2/L F-measures between the original and the corrected output (``rouge-score``, Porter stemmer)."""

    rouge1: float
    rouge2: float
    rougeL: float


class CorrectionReport(BaseModel):
    """GraphCorrect's result for one ``(context, output)`` pair (the fields: ``docs/guides/correct.md#the-report``).

    >>> r = CorrectionReport(original="a", corrected="a", method="paper", status="unflagged", flagged=False,
    ...                      passed=True)
    >>> r.changed, r.explain()
    (False, 'unflagged: nothing to correct')
    """

    original: str
    corrected: str
    method: CorrectionMethod
    status: CorrectionStatus
    flagged: bool | None = None
    """Detection's verdict on the original (``None`` when detection failed)."""
    passed: bool | None = None
    """The re-check's verdict on the corrected output: True when it is not a hallucination any more."""
    changes: list[TripleChange] = Field(default_factory=list)
    rounds: list[CorrectionRound] = Field(default_factory=list)
    diff: str = ""
    """A word diff of original → corrected: ``[-removed-]{+added+}``; empty when unchanged."""
    rouge: RougeScores | None = None
    """ROUGE-1/2/L between original and corrected (``None`` when not computed)."""
    detection: Report | None = None
    """The GraphEval report on the original that decided what to correct."""
    recheck: Report | None = None
    """The GraphEval report on the corrected output (the paper's protocol). The detection report itself when the
    text did not change."""
    llm_calls: int = 0
    """Chat-model calls made by the correction (prompts B, C, D), excluding detection and re-checks."""
    detection_llm_calls: int = 0
    """Knowledge-graph extraction calls of the detection (0 when cached or when a report was passed in)."""
    recheck_llm_calls: int = 0
    """Knowledge-graph extraction calls of the re-check(s)."""
    guard_checks: int = 0
    """Claims scored by the guard (the ``guard`` option)."""
    llm: str | None = None
    """The chat model that made the corrections."""
    prompt_version: str | None = None
    issues: list[str] = Field(default_factory=list)
    errors: list[StageError] = Field(default_factory=list)
    timings: dict[str, float] = Field(default_factory=dict)
    id: str | None = None
    usage: dict[str, StageUsage] = Field(default_factory=dict)
    """The chat-model calls and tokens of the correction, stage ``correct``: every call after detection (the
    rewrites and the re-checks). The detection's are in ``detection.usage``; the row's whole cost is both."""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def changed(self) -> bool:
        """True when the corrected output differs from the original."""
        return self.corrected != self.original

    @property
    def applied(self) -> list[TripleChange]:
        """The changes that were applied."""
        return [c for c in self.changes if c.applied]

    @property
    def rejected(self) -> list[TripleChange]:
        """The attempted changes that were not applied."""
        return [c for c in self.changes if not c.applied]

    def explain(self) -> str:
        """A short human-readable account of what was corrected."""
        if self.status == "error":
            msg = "; ".join(f"{e.stage}: {e.message}" for e in self.errors) or "no verdict"
            return f"error: {msg}"
        if self.status == "unflagged":
            return "unflagged: nothing to correct"
        head = {
            "corrected": "corrected: the re-check passes",
            "still_flagged": "changed, but the re-check still flags it",
            "unchanged": "flagged, but no correction could be applied: the original is kept",
            "recheck_failed": "changed, but the re-check failed",
        }[self.status]
        lines = [head]
        for c in self.changes:
            if c.kind == "direct":
                what = "direct rewrite"
            else:
                old = c.old.as_list() if c.old else "whole output"
                what = f"{old} -> {c.new.as_list() if c.new else '?'}"
            state = "applied" if c.applied else f"not applied ({c.reason})"
            lines.append(f"- {what}: {state}")
        if self.diff:
            lines.append(f"diff: {self.diff}")
        return "\n".join(lines)

    def to_html(self, context: str | None = None) -> str:
        """A self-contained HTML page: original vs corrected with the word diff, each attempted change, and the
        detection (changed claims marked) and re-check reports drawn. Needs the ``report`` extra."""
        return render_html(self, context=context)

    def _repr_html_(self) -> str:
        """What Jupyter shows: the correction report as an HTML fragment with its own scoped style."""
        return render_html(self, document=False)
