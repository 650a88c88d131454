"""The correction methods, as strategies of one round: GraphCorrect (prompts B then C per unsupported triple), its
``evidence`` variant (step 1 told why the triple failed and shown the closest evidence, with one follow-up when the
answer repeats the triple) and the Direct Prompt baseline (prompt D), over the shared steps of :class:`Editor`.

A strategy never raises for a bad answer: each refused step records its reason on the
:class:`~grapheval_plugins.correct.types.TripleChange` and keeps the text as it was before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import RunnableConfig

from ..extract.parser import parse_single_triple, parse_triples
from ..messages import message_text
from ..retry import RetryPolicy
from ..types import ClaimCheck, Report, Triple
from .evidence import closest_sentences, deciding_passage, failure_reason
from .guard import Guard, Tally
from .prompts import CorrectionPrompts
from .text import check_rewrite, clean_rewrite
from .types import CorrectionMethod, TripleChange

__all__ = [
    "CorrectionStrategy",
    "DirectStrategy",
    "Editor",
    "EvidenceStrategy",
    "GraphStrategy",
    "Round",
    "strategy_for",
]

NO_EVIDENCE = "(no sentence of the context shares a word with the triple)"
"""What ``{evidence}`` holds when no sentence of the deciding passage shares a content word with the triple."""


def _same_triple(a: Triple, b: Triple) -> bool:
    return [p.casefold() for p in a.as_list()] == [p.casefold() for p in b.as_list()]


@dataclass
class Step1:
    """The outcome of step 1 (prompt B) for one flagged triple."""

    new: Triple | None = None
    reason: str | None = None
    raw: list[str] = field(default_factory=list)
    calls: int = 0
    follow_up: bool = False


@dataclass
class Round:
    """The input of one correction round."""

    ctx: str
    original: str
    current: str
    report: Report
    number: int
    tally: Tally
    config: RunnableConfig | None = None

    @property
    def supported(self) -> list[Triple]:
        """The triples the report found supported (what the guard protects)."""
        return [c.triple for c in self.report.claims if not c.unsupported and c.triple is not None]


@dataclass
class Editor:
    """The steps both methods share: calling the chat model (with retries), accepting a rewrite, the guard."""

    llm: Any
    prompts: CorrectionPrompts
    retry: RetryPolicy
    guard: Guard
    max_growth: float
    min_similarity: float

    async def call(self, messages: list[BaseMessage], config: RunnableConfig | None) -> tuple[str | None, str | None, int]:
        """``(answer, error, calls)``: the answer, or ``None`` and the last error once the retries ran out."""
        calls = 0

        async def once() -> Any:
            nonlocal calls
            calls += 1
            return await self.llm.ainvoke(messages, config=config)

        try:
            message = await self.retry.call(once)
        except Exception as exc:  # noqa: BLE001 - any provider error is recorded on the change, never raised
            return None, f"{type(exc).__name__}: {exc}", calls
        return message_text(message), None, calls

    def accept(self, answer: str, current: str, original: str, step: str) -> tuple[str, str | None]:
        """The cleaned rewrite and why it is refused (``None`` when it is accepted)."""
        candidate = clean_rewrite(answer, current)
        problem = check_rewrite(candidate, current, original, self.max_growth, self.min_similarity)
        if problem is None and candidate == current:
            problem = "the rewrite changed nothing"
        return candidate, None if problem is None else f"{step}: {problem}"

    def validate_triple(self, old: Triple, new: Triple, original: str) -> Step1:
        limit = max(int(self.max_growth * len(original)), len(original) + 40)
        if len(new.sentence()) > limit:
            return Step1(new=new, reason=f"step 1: the corrected triple is too long ({len(new.sentence())} > {limit})")
        if _same_triple(old, new):
            return Step1(new=new, reason="step 1: the model returned the triple unchanged")
        return Step1(new=new)


class CorrectionStrategy(Protocol):
    """One correction round: the text after it and the changes it tried."""

    method: CorrectionMethod

    async def run_round(self, editor: Editor, job: Round) -> tuple[str, list[TripleChange]]: ...


class GraphStrategy:
    """GraphCorrect: for each unsupported triple in turn, step 1 (prompt B: a corrected triple from the triple and
    the context) then step 2 (prompt C: substitute it in the output as corrected so far). With ``batch_step1``,
    one step-1 call for all flagged triples first (one call per triple when its answer does not fit)."""

    method: CorrectionMethod = "graph"

    def __init__(self, batch_step1: bool = False) -> None:
        self.batch_step1 = batch_step1

    async def run_round(self, editor: Editor, job: Round) -> tuple[str, list[TripleChange]]:
        current = job.current
        changes: list[TripleChange] = []
        flagged: list[ClaimCheck] = []
        for claim in job.report.unsupported:
            if claim.triple is None:
                changes.append(
                    TripleChange(
                        round=job.number,
                        p_unsupported=claim.p_unsupported,
                        reason="whole-output claim: no triple was extracted, so there is nothing to correct",
                    )
                )
            else:
                flagged.append(claim)
        supported = job.supported
        olds = [c.triple for c in flagged if c.triple is not None]
        batched, batch_cost = await self._batched_step1(editor, job, olds)
        for index, (claim, old) in enumerate(zip(flagged, olds)):
            outcome = batched[index] if batched is not None else await self._step1_one(editor, job, old, claim)
            if index == 0 and batch_cost is not None:  # the batched call is counted on the first change
                outcome.calls += batch_cost.calls
                outcome.raw[:0] = batch_cost.raw
            change = TripleChange(
                round=job.number,
                old=old,
                new=outcome.new,
                p_unsupported=claim.p_unsupported,
                raw_answers=list(outcome.raw),
                llm_calls=outcome.calls,
                follow_up=outcome.follow_up,
            )
            changes.append(change)
            if outcome.new is None or outcome.reason is not None:
                change.reason = outcome.reason
                continue
            answer, error, calls = await editor.call(
                editor.prompts.substitute_messages(current, old, outcome.new), job.config
            )
            change.llm_calls += calls
            if answer is None:
                change.reason = f"step 2: the chat model raised {error}"
                continue
            change.raw_answers.append(answer)
            candidate, problem = editor.accept(answer, current, job.original, "step 2")
            if problem is not None:
                change.reason = problem
                continue
            lost = await editor.guard.lost(candidate, supported, job.tally)
            change.guard_lost = lost
            if lost and editor.guard.rejects:
                change.reason = f"guard: the substitution drops {len(lost)} supported triple(s)"
                continue
            if lost:
                job.tally.issues.append(
                    f"guard: substituting {old.as_list()} dropped supported triple(s) "
                    + ", ".join(str(t.as_list()) for t in lost)
                )
            current = candidate
            change.applied = True
        return current, changes

    async def _batched_step1(
        self, editor: Editor, job: Round, triples: Sequence[Triple]
    ) -> tuple[list[Step1] | None, Step1 | None]:
        """Step 1 for all ``triples`` in one call: ``(outcomes, cost)``; or ``(None, cost)`` when step 1 is to run
        per triple (option off, one triple, or an answer without one triple per triple), ``cost`` holding the
        calls and answer of a batched attempt that failed (``None`` when none was made)."""
        if not self.batch_step1 or len(triples) < 2:
            return None, None
        answer, error, calls = await editor.call(editor.prompts.batch_messages(triples, job.ctx), job.config)
        if answer is None:
            job.tally.issues.append(f"batched step 1: the chat model raised {error}; one call per triple instead")
            return None, Step1(calls=calls)
        parsed = parse_triples(answer, pairs=False).triples
        if len(parsed) != len(triples):
            job.tally.issues.append(
                f"batched step 1 returned {len(parsed)} triple(s) for {len(triples)}: one call per triple instead"
            )
            return None, Step1(calls=calls, raw=[answer])
        outcomes = [editor.validate_triple(old, new, job.original) for old, new in zip(triples, parsed)]
        return outcomes, Step1(calls=calls, raw=[answer])

    async def _step1_one(self, editor: Editor, job: Round, old: Triple, claim: ClaimCheck) -> Step1:
        answer, error, calls = await editor.call(editor.prompts.triple_messages(old, job.ctx), job.config)
        if answer is None:
            return Step1(reason=f"step 1: the chat model raised {error}", calls=calls)
        if not answer.strip():
            return Step1(reason="step 1: empty answer", raw=[answer], calls=calls)
        new = parse_single_triple(answer)
        if new is None:
            return Step1(reason="step 1: no triple could be parsed from the answer", raw=[answer], calls=calls)
        result = editor.validate_triple(old, new, job.original)
        result.raw.append(answer)
        result.calls = calls
        return result


class EvidenceStrategy(GraphStrategy):
    """GraphCorrect with step 1 told more than the paper's prompt B: why the triple failed (its P(unsupported)
    against the threshold) and the ``evidence_sentences`` sentences of the deciding passage (the chunk the scorer
    used, else the context) closest to the triple. When the answer repeats the flagged triple, one follow-up
    message (after the model's own answer) asks again: step 1 makes at most two calls per triple (plus retries of
    calls that raised). Step 2 is the paper's prompt C. With ``direct_fallback``, a round in which no triple
    change could be applied (every step refused, or no triple at all because the extraction fell back to the
    whole output) ends with the Direct Prompt (prompt D) on the output, recorded as a ``kind="direct"`` change."""

    method: CorrectionMethod = "evidence"

    def __init__(self, evidence_sentences: int = 3, direct_fallback: bool = True) -> None:
        super().__init__(batch_step1=False)
        if evidence_sentences < 1:
            raise ValueError("evidence_sentences must be >= 1")
        self.evidence_sentences = evidence_sentences
        self.direct_fallback = direct_fallback

    async def run_round(self, editor: Editor, job: Round) -> tuple[str, list[TripleChange]]:
        current, changes = await super().run_round(editor, job)
        if current != job.current or not self.direct_fallback:
            return current, changes
        current, direct = await DirectStrategy().run_round(editor, job)
        return current, [*changes, *direct]

    async def _step1_one(self, editor: Editor, job: Round, old: Triple, claim: ClaimCheck) -> Step1:
        evidence = closest_sentences(deciding_passage(claim, job.ctx), old, k=self.evidence_sentences)
        reason = failure_reason(claim.p_unsupported, job.report.threshold)
        messages = editor.prompts.evidence_triple_messages(old, job.ctx, evidence or NO_EVIDENCE, reason)
        answer, error, calls = await editor.call(messages, job.config)
        if answer is None:
            return Step1(reason=f"step 1: the chat model raised {error}", calls=calls)
        raw = [answer]
        new = parse_single_triple(answer) if answer.strip() else None
        if new is None:
            why = "empty answer" if not answer.strip() else "no triple could be parsed from the answer"
            return Step1(reason=f"step 1: {why}", raw=raw, calls=calls)
        follow_up = False
        if _same_triple(old, new):
            follow_up = True
            again = [*messages, AIMessage(answer), *editor.prompts.follow_up_messages(old)]
            second, error, more = await editor.call(again, job.config)
            calls += more
            if second is None:
                return Step1(new=new, reason=f"step 1: the triple came back unchanged and the follow-up raised {error}",
                             raw=raw, calls=calls, follow_up=True)
            raw.append(second)
            retried = parse_single_triple(second) if second.strip() else None
            if retried is None:
                return Step1(new=new, reason="step 1: the triple came back unchanged and the follow-up answer held "
                             "no triple", raw=raw, calls=calls, follow_up=True)
            new = retried
        result = editor.validate_triple(old, new, job.original)
        if follow_up and result.reason is not None and "unchanged" in result.reason:
            result.reason = "step 1: the model returned the triple unchanged, twice (after the follow-up)"
        result.raw, result.calls, result.follow_up = raw, calls, follow_up
        return result


class DirectStrategy:
    """The Direct Prompt baseline: one call (prompt D) with the output and the context."""

    method: CorrectionMethod = "direct"

    async def run_round(self, editor: Editor, job: Round) -> tuple[str, list[TripleChange]]:
        current = job.current
        answer, error, calls = await editor.call(editor.prompts.direct_messages(current, job.ctx), job.config)
        change = TripleChange(round=job.number, kind="direct", llm_calls=calls)
        if answer is None:
            change.reason = f"the chat model raised {error}"
            return current, [change]
        change.raw_answers.append(answer)
        candidate, problem = editor.accept(answer, current, job.original, "direct")
        if problem is not None:
            change.reason = problem
            return current, [change]
        lost = await editor.guard.lost(candidate, job.supported, job.tally)
        change.guard_lost = lost
        if lost and editor.guard.rejects:
            change.reason = f"guard: the rewrite drops {len(lost)} supported triple(s)"
            return current, [change]
        if lost:
            job.tally.issues.append(
                "guard: the direct rewrite dropped supported triple(s) " + ", ".join(str(t.as_list()) for t in lost)
            )
        change.applied = True
        return candidate, [change]


def strategy_for(
    method: CorrectionMethod, *, batch_step1: bool = False, evidence_sentences: int = 3, direct_fallback: bool = True
) -> CorrectionStrategy:
    """The strategy of a correction method (``"graph"``, ``"evidence"`` or ``"direct"``).

    >>> strategy_for("direct").method, strategy_for("evidence").method
    ('direct', 'evidence')
    """
    if method == "graph":
        return GraphStrategy(batch_step1=batch_step1)
    if method == "evidence":
        return EvidenceStrategy(evidence_sentences=evidence_sentences, direct_fallback=direct_fallback)
    return DirectStrategy()
