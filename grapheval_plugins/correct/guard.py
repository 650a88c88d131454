"""The guard of GraphCorrect: refuse (or record) a change after which the output no longer states a triple that
detection found supported, by GraphEval's own scorer and threshold (a triple it cannot judge counts as lost).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Union

from ..exceptions import InputError, ScoringError
from ..types import Triple

if TYPE_CHECKING:
    from ..pipeline import GraphEval

__all__ = ["Guard", "GuardMode", "Tally"]

GuardMode = Union[bool, Literal["reject", "flag"]]
"""``False`` (no guard), ``"reject"`` (or ``True``) or ``"flag"``: ``GraphCorrect(guard=...)``."""


@dataclass
class Tally:
    """Counters of one correction (never stored on the corrector: safe to run many corrections at once)."""

    guard_checks: int = 0
    issues: list[str] = field(default_factory=list)


class Guard:
    """Checks a candidate output against the triples the detection found supported.

    >>> Guard.mode_of(True), Guard.mode_of(False), Guard.mode_of("flag")
    ('reject', None, 'flag')
    """

    def __init__(self, mode: Literal["reject", "flag"] | None, grapheval: GraphEval) -> None:
        self.mode = mode
        self.grapheval = grapheval

    @staticmethod
    def mode_of(guard: GuardMode) -> Literal["reject", "flag"] | None:
        """The normalised mode: ``None`` (off), ``"reject"`` or ``"flag"`` (:class:`InputError` for any other)."""
        if guard is False:
            return None
        if guard is True or guard == "reject":
            return "reject"
        if guard == "flag":
            return "flag"
        raise InputError("guard", f"must be False, True, 'reject' or 'flag', got {guard!r}")

    async def lost(self, candidate: str, supported: Sequence[Triple], tally: Tally) -> list[Triple]:
        """The ``supported`` triples that ``candidate`` is not shown to state any more (empty when the guard is
        off): those scored unsupported, and those the scorer could not judge (recorded in ``tally.issues``)."""
        if self.mode is None or not supported:
            return []
        claims = [self.grapheval.render_triple(t) for t in supported]
        tally.guard_checks += len(claims)
        try:
            scores = await self.grapheval.scorer.acheck([candidate] * len(claims), claims)
        except ScoringError as exc:
            tally.issues.append(f"guard: scoring failed, the change is not verified: {exc}")
            return list(supported)
        threshold = self.grapheval.hallucination_threshold
        unjudged = [t for t, s in zip(supported, scores) if s.error is not None]
        if unjudged:
            tally.issues.append(f"guard: {len(unjudged)} supported triple(s) could not be scored against the change; "
                                "it is not verified")
        return [t for t, s in zip(supported, scores) if s.error is not None or s.p_unsupported > threshold]
