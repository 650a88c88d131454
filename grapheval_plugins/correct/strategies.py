"""The correction methods as strategies of one round, over the shared steps of :class:`Editor` (the methods:
``docs/guides/correct.md``). A refused step records its reason on its ``TripleChange``; it never raises."""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import RunnableConfig

from ..exceptions import ScoringError
from ..extract.parser import parse_single_triple, parse_triples
from ..messages import message_text
from ..retry import RetryPolicy
from ..text import closest_sentences, sentence_at
from ..types import ClaimCheck, Report, Triple
from .guard import Guard, Tally
from .prompts import CorrectionPrompts
from .spans import (
    VALUE_LABELS,
    Edit,
    Value,
    drop_negation,
    foreign_words,
    is_value,
    negation_only,
    pipeline,
    replace_value,
    same_kind_values,
    substitute,
    text_changes,
    triple_edits,
    values,
)
from .text import check_rewrite, clean_rewrite
from .types import CorrectionMethod, TripleChange

__all__ = ["ConstrainedStrategy", "CorrectionStrategy", "DirectStrategy", "Editor", "EvidenceStrategy",
    "GraphStrategy", "MINIMAL_PAIR_MARGIN", "RESTATE_OPTIONS", "Round", "strategy_for"]

RESTATE_OPTIONS = 5
"""How many of the context's values ``strategy="constrained"`` tries in place of an output value it does not state."""

CONTEXT_SENTENCES = 8
"""How many sentences of the deciding passage (the closest to the triple) ``strategy="constrained"`` reads."""

NO_EVIDENCE = "(no sentence of the context shares a word with the triple)"
"""What ``{evidence}`` holds when no sentence of the deciding passage shares a content word with the triple."""

MINIMAL_PAIR_MARGIN = 0.15
"""How much less unsupported than the flagged claim ``strategy="constrained"`` needs a one-place correction to score."""

_UNCHANGED = "step 1: the model returned the triple unchanged"
_RAISED = "step 1: the chat model raised"


def _same_triple(a: Triple, b: Triple) -> bool:
    return [p.casefold() for p in a.as_list()] == [p.casefold() for p in b.as_list()]


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
    passages: tuple[str, ...] = ()
    """The context's passages as the scorer reads them (empty: ``ctx`` is one)."""
    after_triples: list[Triple] | None = None
    """Set by a strategy that edits the output in place: the triples the re-check scores (``None``: it extracts)."""
    verified: dict[Triple, float] = field(default_factory=dict)
    """The P(unsupported) of each corrected triple a strategy scored against the context, to rank its tries."""


@dataclass
class Editor:
    """The steps the methods share: calling the chat model (with retries), accepting a rewrite, the guard."""

    llm: Any
    prompts: CorrectionPrompts
    retry: RetryPolicy
    guard: Guard
    max_growth: float
    min_similarity: float

    async def ask(
        self, job: Round, messages: list[BaseMessage], change: TripleChange, raised: str = _RAISED
    ) -> str | None:
        """The chat model's answer (with retries), recorded on ``change``; ``None`` once the retries ran out."""

        async def once() -> Any:
            change.llm_calls += 1
            return await self.llm.ainvoke(messages, config=job.config)

        try:
            message = await self.retry.call(once)
        except Exception as exc:  # noqa: BLE001 - any provider error is recorded on the change, never raised
            change.reason = f"{raised} {type(exc).__name__}: {exc}"
            return None
        answer = message_text(message)
        change.raw_answers.append(answer)
        return answer

    async def rewrite(
        self, job: Round, change: TripleChange, messages: list[BaseMessage], current: str, step: str, raised: str
    ) -> str | None:
        """The chat model's cleaned rewrite of ``current``, if accepted; else ``None`` with ``change.reason`` set."""
        answer = await self.ask(job, messages, change, raised)
        if answer is None:
            return None
        candidate = clean_rewrite(answer, current)
        problem = check_rewrite(candidate, current, job.original, self.max_growth, self.min_similarity)
        if problem is None and candidate == current:
            problem = "the rewrite changed nothing"
        change.reason = None if problem is None else f"{step}: {problem}"
        return candidate if problem is None else None

    async def guarded(self, candidate: str, job: Round, change: TripleChange, what: str, made: str) -> bool:
        """Whether ``candidate`` may replace the output by the guard (else ``change.reason`` says why not)."""
        supported = [c.triple for c in job.report.claims if not c.unsupported and c.triple is not None]
        lost = await self.guard.lost(candidate, supported, job.tally)
        change.guard_lost = lost
        if lost and self.guard.mode == "reject":
            change.reason = f"guard: {what} drops {len(lost)} supported triple(s)"
            return False
        if lost:
            listed = ", ".join(str(t.as_list()) for t in lost)
            job.tally.issues.append(f"guard: {made} dropped supported triple(s) {listed}")
        return True


class CorrectionStrategy(Protocol):
    """One correction round: the text after it and the changes it tried."""

    method: CorrectionMethod

    async def run_round(self, editor: Editor, job: Round) -> tuple[str, list[TripleChange]]: ...


def _whole_output(job: Round, claim: ClaimCheck, kind: CorrectionMethod = "graph") -> TripleChange:
    reason = "whole-output claim: no triple was extracted, so there is nothing to correct"
    return TripleChange(round=job.number, kind=kind, p_unsupported=claim.p_unsupported, reason=reason)


def failure_reason(p_unsupported: float, threshold: float) -> str:
    """Why the triple is being corrected, in words the chat model can act on: above the threshold, or (a stand-in
    triple of an output flagged as a whole) the one of its output's triples the fact checker doubted most.

    >>> failure_reason(0.4, 0.5)
    'its output was judged not supported by the context, and of its triples a fact checker doubted this one most (P(unsupported) = 0.40, within the threshold 0.50)'
    """
    if p_unsupported <= threshold:
        return (
            "its output was judged not supported by the context, and of its triples a fact checker doubted this "
            f"one most (P(unsupported) = {p_unsupported:.2f}, within the threshold {threshold:.2f})"
        )
    return (
        f"a fact checker judged it not supported by the context (P(unsupported) = {p_unsupported:.2f}, "
        f"above the threshold {threshold:.2f})"
    )


def _propose(change: TripleChange, new: Triple, original: str, max_growth: float) -> None:
    """Step 1's corrected triple recorded on ``change``, refused when it is too long or the flagged one unchanged."""
    change.new = new
    limit = max(int(max_growth * len(original)), len(original) + 40)
    if len(new.sentence()) > limit:
        change.reason = f"step 1: the corrected triple is too long ({len(new.sentence())} > {limit})"
    elif change.old is not None and _same_triple(change.old, new):
        change.reason = _UNCHANGED


class GraphStrategy:
    """The paper's procedure: per unsupported triple, prompt B then prompt C (``docs/guides/correct.md``)."""

    method: CorrectionMethod = "graph"
    follow_up = False
    """Whether step 1 asks again, once, when the answer repeats the flagged triple."""

    def __init__(self, batch_step1: bool = False) -> None:
        self.batch_step1 = batch_step1

    async def run_round(self, editor: Editor, job: Round) -> tuple[str, list[TripleChange]]:
        current = job.current
        changes = [_whole_output(job, claim) for claim in job.report.unsupported if claim.triple is None]
        flagged = [(c, c.triple) for c in job.report.unsupported if c.triple is not None]
        tried = [TripleChange(round=job.number, old=old, p_unsupported=c.p_unsupported) for c, old in flagged]
        changes.extend(tried)
        batched = await self._batched_step1(editor, job, [old for _, old in flagged], tried)
        for (claim, old), change in zip(flagged, tried):
            if not batched:
                await self._step1_one(editor, job, old, claim, change)
            if change.new is None or change.reason is not None:
                continue
            messages = editor.prompts.substitute_messages(current, old, change.new)
            candidate = await editor.rewrite(job, change, messages, current, "step 2", "step 2: the chat model raised")
            if candidate is not None and await editor.guarded(
                candidate, job, change, "the substitution", f"substituting {old.as_list()}"
            ):
                current = candidate
                change.applied = True
        return current, changes

    async def _batched_step1(
        self, editor: Editor, job: Round, triples: Sequence[Triple], changes: Sequence[TripleChange]
    ) -> bool:
        """Step 1 for all ``triples`` in one call, recorded on ``changes``; ``False``: run it per triple."""
        if not self.batch_step1 or len(triples) < 2:
            return False
        messages = editor.prompts.batch_messages(triples, job.ctx)
        answer = await editor.ask(job, messages, changes[0], "batched step 1: the chat model raised")
        if answer is None:  # the triples are tried one by one: the failure is the round's, not the first triple's
            job.tally.issues.append(f"{changes[0].reason}; one call per triple instead")
            changes[0].reason = None
            return False
        parsed = parse_triples(answer, pairs=False).triples
        if len(parsed) != len(triples):
            job.tally.issues.append(
                f"batched step 1 returned {len(parsed)} triple(s) for {len(triples)}: one call per triple instead"
            )
            return False
        for change, new in zip(changes, parsed):
            _propose(change, new, job.original, editor.max_growth)
        return True

    def _messages(self, editor: Editor, job: Round, old: Triple, claim: ClaimCheck) -> list[BaseMessage]:
        return editor.prompts.triple_messages(old, job.ctx)

    async def _step1_one(
        self, editor: Editor, job: Round, old: Triple, claim: ClaimCheck, change: TripleChange
    ) -> None:
        """Step 1 for one triple: its corrected triple on ``change``, or the reason there is none."""
        messages = self._messages(editor, job, old, claim)
        answer = await editor.ask(job, messages, change)
        new = None if answer is None else parse_single_triple(answer)
        if answer is None or new is None:
            if answer is not None:
                why = "no triple could be parsed from the answer" if answer.strip() else "empty answer"
                change.reason = f"step 1: {why}"
            return
        if self.follow_up and _same_triple(old, new):
            change.follow_up, change.new = True, new
            again = [*messages, AIMessage(answer), *editor.prompts.follow_up_messages(old)]
            second = await editor.ask(job, again, change,
                                      "step 1: the triple came back unchanged and the follow-up raised")
            if second is None:
                return
            new = parse_single_triple(second)
            if new is None:
                change.reason = "step 1: the triple came back unchanged and the follow-up answer held no triple"
                return
        _propose(change, new, job.original, editor.max_growth)
        if change.follow_up and change.reason == _UNCHANGED:
            change.reason = "step 1: the model returned the triple unchanged, twice (after the follow-up)"


class EvidenceStrategy(GraphStrategy):
    """``strategy="evidence"``: step 1 told why the triple failed and shown the closest sentences
    (``docs/guides/correct.md``); ``direct_fallback``: a round that changed nothing ends with the Direct Prompt."""

    method: CorrectionMethod = "evidence"
    follow_up = True

    def __init__(self, evidence_sentences: int = 3, direct_fallback: bool = True) -> None:
        super().__init__(batch_step1=False)
        self.evidence_sentences = evidence_sentences
        self.direct_fallback = direct_fallback

    async def run_round(self, editor: Editor, job: Round) -> tuple[str, list[TripleChange]]:
        current, changes = await super().run_round(editor, job)
        if current != job.current or not self.direct_fallback:
            return current, changes
        current, direct = await DirectStrategy().run_round(editor, job)
        return current, [*changes, *direct]

    def _messages(self, editor: Editor, job: Round, old: Triple, claim: ClaimCheck) -> list[BaseMessage]:
        evidence = closest_sentences(claim.evidence or job.ctx, old, k=self.evidence_sentences)  # the deciding chunk
        reason = failure_reason(claim.p_unsupported, job.report.hallucination_threshold)
        return editor.prompts.evidence_triple_messages(old, job.ctx, evidence or NO_EVIDENCE, reason)


_OPTION = re.compile(r"\s*(?:option\s*)?(\d+)\s*(?:[.:)\]]|$)", re.IGNORECASE)  # "2", "Option 2", "2. 116", "2)"


class ConstrainedStrategy:
    """``strategy="constrained"``: answers held to the context, changes made in place (the steps:
    ``docs/guides/correct.md``); the round records the triples the output then states (:attr:`Round.after_triples`).

    Raises:
        MissingDependencyError: spaCy or its English pipeline is missing (the ``correct`` extra).
    """

    method: CorrectionMethod = "constrained"

    def __init__(self, evidence_sentences: int = 3, direct_fallback: bool = False) -> None:
        self.evidence_sentences = evidence_sentences
        self.direct_fallback = direct_fallback  # when no flagged triple could be corrected: :meth:`_fallback`

    async def run_round(self, editor: Editor, job: Round) -> tuple[str, list[TripleChange]]:
        pipeline()  # spaCy or its pipeline missing: say so before any model call
        current = job.current
        after = [c.triple for c in job.report.claims if c.triple is not None]
        applied: list[Edit] = []
        current, changes = await self._restate_values(editor, job, current, after, applied)
        for claim in _to_correct(job.report):
            old = claim.triple
            if old is None:
                changes.append(_whole_output(job, claim, "constrained"))
                continue
            change = TripleChange(round=job.number, kind="constrained", old=old, p_unsupported=claim.p_unsupported)
            changes.append(change)
            carried = _carry(old, applied)
            if carried is not None:  # an earlier change already fixed what this triple repeats: no call
                change.new = carried
                change.reason = "already corrected by an earlier change of this output"
                _replace(after, old, carried)
                continue
            new = await self._step1(editor, job, claim, old, change, current)
            if new is None:
                continue
            change.new = new
            edits = triple_edits(old, new)
            if {_edit_key(e) for e in edits} & {_edit_key(e) for e in applied}:
                change.reason = "the same change was already made for another triple"
                _replace(after, old, new)
                continue
            edited = substitute(current, edits, old)
            if edited is None:
                change.reason = "the changed words of the triple are not in the output"
                continue
            worse = await self._sentence_problem(editor, job, current, edited)
            if worse is not None:
                change.reason = worse
                continue
            current = edited
            change.applied = True
            applied.extend(edits)
            _replace(after, old, new)
        if self.direct_fallback and current == job.current:
            current, fallback = await self._fallback(editor, job, after)
            changes.append(fallback)
        job.after_triples = after
        return current, changes

    async def _restate_values(
        self, editor: Editor, job: Round, current: str, after: list[Triple], applied: list[Edit]
    ) -> tuple[str, list[TripleChange]]:
        """The first step (no chat-model call): a wrong value replaced by one of the context's, by the judge."""
        changes: list[TripleChange] = []
        flagged = [c.triple for c in _to_correct(job.report) if c.triple is not None]
        whole = not any(c.triple is not None for c in job.report.claims)  # no triple: every value of the output
        threshold = editor.guard.grapheval.hallucination_threshold
        for value in reversed(values(current)):  # from the end: earlier offsets stay valid
            holder = next((t for t in flagged if replace_value(t, value.text, value.text) is not None), None)
            if holder is None and not whole:
                continue
            start, end = sentence_at(current, value.start)
            sentence = current[start:end]
            near = Triple(subject=sentence, relation="", object="")  # all its words anchor the evidence
            evidence = closest_sentences(job.ctx, near, k=3) + " " + closest_sentences(
                job.ctx, near, k=CONTEXT_SENTENCES)
            options = [_like(o, value.text) for o in same_kind_values(value, evidence, limit=RESTATE_OPTIONS)]
            if not options:
                continue
            before = await self._p_unsupported(editor, job, sentence)
            if before is None or before <= threshold:
                continue  # supported (or unscored): nothing to restate
            change = TripleChange(round=job.number, kind="constrained", old=holder, p_unsupported=before)
            changes.append(change)
            at = value.start - start
            tried = await self._try_variants(editor, job, [
                (option, sentence[:at] + option + sentence[at + len(value.text):]) for option in options
            ])
            said = (f"{value.text!r} ({value.label}): its sentence scored {before:.2f}, with the context's values "
                    f"of that kind: {', '.join(f'{o!r} {p:.2f}' for p, o in tried) or 'none could be scored'}")
            option, why = _best_variant(tried, before)
            if option is None:
                change.reason = f"{said}: {why}"
                continue
            current = current[: value.start] + option + current[value.start + len(value.text):]
            edit = Edit(old=value.text, new=option)
            applied.append(edit)
            _made_in(after, edit)
            flagged = [replace_value(t, value.text, option) or t for t in flagged]
            change.new = replace_value(holder, value.text, option) if holder is not None else None
            change.applied = True
            change.reason = f"{said}: {option!r} taken"
        return current, changes

    async def _sentence_problem(self, editor: Editor, job: Round, current: str, edited: str) -> str | None:
        """Why a change is not made in the output (``None``: it is made): its sentence does not gain by it."""
        before_text, after_text = _changed_sentences(current, edited)
        before = await self._p_unsupported(editor, job, before_text)
        after = await self._p_unsupported(editor, job, after_text) if before is not None else None
        if before is None or after is None:
            return "scoring its sentence failed: the change is not verified, not made"
        if after < before:
            return None
        return f"its sentence scored {before:.2f}, and {after:.2f} with the change: no less unsupported, not made"

    async def _try_variants(self, editor: Editor, job: Round, variants: list[tuple[_V, str]]) -> list[tuple[float, _V]]:
        """Each variant's sentence scored against the context: ``(P(unsupported), variant)`` for those scored."""
        scored = [(await self._p_unsupported(editor, job, text), variant) for variant, text in variants]
        return [(p, variant) for p, variant in scored if p is not None]

    async def _fallback(self, editor: Editor, job: Round, after: list[Triple]) -> tuple[str, TripleChange]:
        """The Direct Prompt's rewrite held to :meth:`_problem`: its best supported changed place only."""
        current = job.current
        change = TripleChange(round=job.number, kind="direct")
        messages = editor.prompts.direct_messages(current, job.ctx)
        rewrite = await editor.rewrite(job, change, messages, current, "the Direct Prompt",
                                       "the Direct Prompt: the chat model raised")
        if rewrite is None:  # not a rewrite of the output (a copy of the context, a cut, a summary)
            return current, change
        found = text_changes(current, rewrite, words_only=True)
        problems = [self._problem(c, job.ctx) for c in found]
        kept = [c for c, problem in zip(found, problems) if problem is None]
        if not kept:
            change.reason = f"the Direct Prompt's rewrite: {next((p for p in problems if p), 'no word changed')}"
            return current, change
        bar = editor.guard.grapheval.hallucination_threshold
        edited = [(c, c.apply(current)) for c in kept]
        sentences = [(c, text[slice(*sentence_at(text, c.start))]) for c, text in edited]
        tried = await self._try_variants(editor, job, sentences)
        best = min((pc for pc in tried if pc[0] <= bar), key=lambda pc: pc[0], default=None)
        if best is None:
            change.reason = "the Direct Prompt's rewrite: no change of it is supported by the context"
            return current, change
        made = best[1]
        change.applied = True
        _made_in(after, made)
        return made.apply(current), change

    @staticmethod
    async def _p_unsupported(editor: Editor, job: Round, claim: str, what: str = "", note: str = "") -> float | None:
        """P(unsupported) of ``claim`` against the context by GraphEval's scorer; ``None`` when scoring failed."""
        try:
            scorer = await asyncio.to_thread(lambda: editor.guard.grapheval.scorer)
            [score] = await scorer.acheck([tuple(job.passages or (job.ctx,))], [claim])
        except ScoringError as exc:
            job.tally.issues.append(f"constrained: scoring {what or repr(claim)} failed{note}: {exc}")
            return None
        return None if score.error is not None else score.p_unsupported

    async def _step1(
        self, editor: Editor, job: Round, claim: ClaimCheck, old: Triple, change: TripleChange, current: str
    ) -> Triple | None:
        """The corrected triple (steps 1-3 of the guide), or ``None`` with ``change.reason`` set."""
        passage = claim.evidence or job.ctx  # the chunk the scorer decided the claim on, when it records one
        evidence = closest_sentences(passage, old, k=self.evidence_sentences)
        shown = closest_sentences(passage, old, k=CONTEXT_SENTENCES) or job.ctx
        reason = failure_reason(claim.p_unsupported, job.report.hallucination_threshold)
        messages = editor.prompts.evidence_triple_messages(old, shown, evidence or NO_EVIDENCE, reason)
        answer = await editor.ask(job, messages, change)
        if answer is None:  # the chat model raised (retries spent): say so, stop
            return None
        new = parse_single_triple(answer)
        taken, problem = await self._take(editor, job, claim, old, new)
        if taken is not None:
            return taken
        flipped = drop_negation(old)  # only ever taken on the scorer's word
        if flipped is not None and await self._unsupported(
            editor, job, flipped, claim.p_unsupported, strict=True, paired=True
        ) is None:
            return flipped  # the context states the claim without its negation
        offered = _choices(old, evidence, current) if evidence else None
        if offered is not None:
            value, options = offered
            asked = editor.prompts.choice_messages(old, shown, evidence, value.text, options)
            choice = await editor.ask(job, asked, change)
            picked = _option(choice, options) if choice is not None else None
            if picked is None:
                change.reason = f"step 1: {problem}; no value of the context chosen for {value.text!r}"
                return None
            chosen = replace_value(old, value.text, picked)
            if chosen is None or _same_triple(old, chosen):
                change.reason = f"step 1: {problem}; the chosen value changes nothing"
                return None
            unsupported = await self._unsupported(editor, job, chosen, claim.p_unsupported)
            if unsupported is not None:
                change.new = chosen
                change.reason = f"step 1: {problem}; with the chosen value {picked!r}: {unsupported}"
                return None
            return chosen
        if new is None or not _same_triple(old, new):
            change.new = new
            change.reason = f"step 1: {problem}"
            return None
        change.follow_up = True
        again = [*messages, AIMessage(answer), *editor.prompts.follow_up_messages(old)]
        second = await editor.ask(job, again, change)
        retried = parse_single_triple(second) if second is not None else None
        taken, problem = await self._take(editor, job, claim, old, retried)
        if taken is None:
            change.new = retried
            change.reason = f"step 1 (after the follow-up): {problem}"
        return taken

    async def _take(
        self, editor: Editor, job: Round, claim: ClaimCheck, old: Triple, new: Triple | None
    ) -> tuple[Triple | None, str | None]:
        """The corrected triple taken from a proposed one (steps 1-2 of the guide), or ``None`` and why not."""
        if new is None:
            return None, "no triple could be parsed from the answer"
        edits = triple_edits(old, new)
        if not edits:
            return None, "the model returned the triple unchanged"
        problems = [self._problem(edit, job.ctx) for edit in edits]
        kept = [edit for edit, problem in zip(edits, problems) if problem is None]
        first = next((problem for problem in problems if problem is not None), None)
        if not kept:
            return None, first
        made = [replace_value(old, edit.old, edit.new) for edit in kept]  # each kept change alone
        tries = [new] if len(kept) == len(edits) == 1 else list(dict.fromkeys(t for t in made if t not in (None, old)))
        if not tries:
            return None, first or "the changes of the corrected triple cannot be made one at a time"
        best: Triple | None = None
        why: str | None = None
        for attempt in tries:
            strict, paired = _kind(old, attempt)
            unsupported = await self._unsupported(editor, job, attempt, claim.p_unsupported, strict, paired)
            if unsupported is not None:
                why = why or unsupported
            elif best is None or job.verified[attempt] < job.verified[best]:
                best = attempt
        if best is None:
            dropped = f" (with {first})" if first else ""
            return None, f"{why}{dropped}"
        return best, None

    @staticmethod
    async def _unsupported(
        editor: Editor, job: Round, new: Triple, before: float, strict: bool = False, paired: bool = False
    ) -> str | None:
        """Why a scored corrected triple is not taken (``None``: it is); ``strict``, ``paired``: :func:`_kind`."""
        engine = editor.guard.grapheval
        p = await ConstrainedStrategy._p_unsupported(editor, job, engine.render_triple(new), f"{new.as_list()}",
                                                     ", not taken")
        if p is None:
            return "scoring the corrected triple failed: it is not verified, not taken"
        threshold = engine.hallucination_threshold
        job.verified[new] = p
        if before <= threshold and p >= before:  # a stand-in triple
            return (f"the corrected triple is no less unsupported than the unflagged triple it corrects "
                    f"(P(unsupported) = {p:.2f}, the triple's {before:.2f})")
        if p <= threshold or (strict and paired and p <= before - MINIMAL_PAIR_MARGIN):
            return None
        if strict:
            return (f"the corrected triple changes more than a value and is not supported by the context "
                    f"(P(unsupported) = {p:.2f})")
        if p >= before:
            return (f"the corrected triple is not supported by the context either (P(unsupported) = {p:.2f}, "
                    f"the flagged triple's {before:.2f})")
        return None

    @staticmethod
    def _problem(edit: Edit, context: str) -> str | None:
        """Why one change is not a correction (``None``: it may be one); the rules: step 1 of the guide."""
        negation = negation_only(edit)
        foreign = foreign_words(edit.new, context, inflecting=edit.old if negation else "")
        if foreign:
            return "the change brings in words the context does not contain: " + ", ".join(foreign[:5])
        if negation:
            return None
        old_value, new_value = is_value(edit.old), is_value(edit.new)
        if old_value != new_value:
            return f"the change replaces {edit.old!r} with {edit.new!r}: a value with something else, or the reverse"
        if old_value or _words(edit.old) == _words(edit.new):
            return None
        # a name (spaCy's proper nouns, nouns, adjectives, determiners, possessives) for a name of the context
        name = [t for t in pipeline()(edit.old) if not t.is_punct]
        key = " ".join(edit.new.casefold().split())
        if name and all(t.pos_ in ("PROPN", "NOUN", "ADJ", "DET") or t.tag_ == "POS" for t in name) and key and any(
            v.key == key for v in values(context)
        ):
            return None
        return (f"the change is not a value replaced in kind: {edit.old!r} → {edit.new!r} is neither a value, nor "
                "a name of the context, nor a negation, nor as many words for as many")


def _words(text: str) -> int:
    return len(re.findall(r"\w+", text))


def _edit_key(edit: Edit) -> tuple[str, str]:
    return " ".join(edit.old.casefold().split()), " ".join(edit.new.casefold().split())


def _choices(old: Triple, evidence: str, output: str) -> tuple[Value, list[str]] | None:
    """The first value of ``old`` and the values of its label in ``evidence`` that ``output`` lacks."""
    for value in values(old.sentence()):
        if value.label not in VALUE_LABELS:
            continue
        stated = {v.key for v in values(output)}
        options = [o for o in same_kind_values(value, evidence) if " ".join(o.casefold().split()) not in stated]
        if options:
            return value, options
    return None


def _to_correct(report: Report) -> list[ClaimCheck]:
    """The claims ``strategy="constrained"`` corrects: the flagged ones, or the stand-in triple."""
    flagged = list(report.unsupported)
    if not report.hallucinated or any(c.triple is not None for c in flagged):
        return flagged
    triples = [c for c in report.claims if c.triple is not None]
    return [max(triples, key=lambda c: c.p_unsupported)] if triples else flagged


_V = TypeVar("_V")


def _best_variant(tried: Sequence[tuple[float, _V]], before: float) -> tuple[_V | None, str]:
    """The variant of a sentence to take (at least :data:`MINIMAL_PAIR_MARGIN` better, and alone), or ``None`` and why.

    >>> _best_variant([(0.2, "a"), (0.6, "b")], 0.9), _best_variant([(0.8, "a")], 0.9)[0]
    (('a', ''), None)
    >>> _best_variant([(0.2, "a"), (0.2, "b")], 0.9)
    (None, "'a' and 'b' scored alike, nothing changed")
    """
    ranked = sorted(tried, key=lambda pv: pv[0])
    if not ranked or ranked[0][0] > before - MINIMAL_PAIR_MARGIN:
        return None, f"none by {MINIMAL_PAIR_MARGIN} less unsupported, nothing changed"
    if len(ranked) > 1 and ranked[1][0] - ranked[0][0] < 1e-9:
        return None, f"{ranked[0][1]!r} and {ranked[1][1]!r} scored alike, nothing changed"
    return ranked[0][1], ""


def _made_in(triples: list[Triple], edit: Edit) -> None:
    triples[:] = [replace_value(triple, edit.old, edit.new) or triple for triple in triples]


def _like(value: str, written: str) -> str:
    """``value`` with its first letter capitalised when ``written`` (the value it replaces) starts with a capital.

    >>> _like("two", "Zero"), _like("20", "18"), _like("two", "zero")
    ('Two', '20', 'two')
    """
    return value[:1].upper() + value[1:] if written[:1].isupper() else value


def _changed_sentences(before: str, after: str) -> tuple[str, str]:
    """The sentences of ``before`` that differ in ``after``, and what they became (each run of them whole).

    >>> _changed_sentences("Ann is tall. Bob won. Cy ran.", "Ann is tall. Bob lost. Cy ran.")
    ('Bob won.', 'Bob lost.')
    """
    head = len(os.path.commonprefix([before, after]))
    tail = len(os.path.commonprefix([before[head:][::-1], after[head:][::-1]]))
    spans = []
    for text in (before, after):
        start, _ = sentence_at(text, head)
        _, stop = sentence_at(text, max(len(text) - tail - 1, start))
        spans.append(text[start:stop])
    return spans[0], spans[1]


def _kind(old: Triple, new: Triple) -> tuple[bool, bool]:
    """Whether ``new`` changes more than values of ``old``, and whether it is a minimal pair with it."""
    edits = triple_edits(old, new)
    if not edits:
        return True, False
    value = all(is_value(e.old) and is_value(e.new) for e in edits)
    paired = all(negation_only(e) for e in edits) or (len(edits) == 1 and _words(edits[0].old) == _words(edits[0].new))
    return not value, paired


def _option(answer: str, options: Sequence[str]) -> str | None:
    """The option an answer names: the number it starts with, else the one option it quotes (``None``: none).

    >>> _option("Option 2", ["115", "116"]), _option("2.", ["115", "116"])
    ('116', '116')
    >>> _option("The context gives 1 value: 116", ["115", "116"]), _option("0", ["115", "116"])
    ('116', None)
    >>> _option("The context gives 1 value", ["115", "116"]) is None
    True
    """
    found = _OPTION.match(answer)
    if found is not None and int(found.group(1)) <= len(options):
        number = int(found.group(1))
        return options[number - 1] if number else None
    quoted = [o for o in options if o.casefold() in answer.casefold()]
    return quoted[0] if len(quoted) == 1 else None


def _carry(old: Triple, applied: Sequence[Edit]) -> Triple | None:
    """``old`` with the edits already applied to the output made to it too; ``None`` when none concerns it."""
    new = old
    for edit in applied:
        if not edit.new or edit.old.casefold() in edit.new.casefold() or not (
            is_value(edit.old) or foreign_words(edit.old, "")
        ):
            continue  # a deletion, an addition, or only stop words ("is not"): too loose to carry over
        new = replace_value(new, edit.old, edit.new) or new
    return None if new == old else new


def _replace(triples: list[Triple], old: Triple, new: Triple) -> None:
    triples[:] = [new if triple == old else triple for triple in triples]


class DirectStrategy:
    """The Direct Prompt baseline: one call (prompt D) with the output and the context."""

    method: CorrectionMethod = "direct"

    async def run_round(self, editor: Editor, job: Round) -> tuple[str, list[TripleChange]]:
        change = TripleChange(round=job.number, kind="direct")
        messages = editor.prompts.direct_messages(job.current, job.ctx)
        candidate = await editor.rewrite(job, change, messages, job.current, "direct", "the chat model raised")
        if candidate is None or not await editor.guarded(candidate, job, change, "the rewrite", "the direct rewrite"):
            return job.current, [change]
        change.applied = True
        return candidate, [change]


def strategy_for(
    method: CorrectionMethod, *, batch_step1: bool = False, evidence_sentences: int = 3, direct_fallback: bool = True
) -> CorrectionStrategy:
    """The strategy of a correction method (``"paper"`` or its old name ``"graph"``, ``"evidence"``, ``"direct"``
    or ``"constrained"``).

    >>> strategy_for("direct").method, strategy_for("evidence").method
    ('direct', 'evidence')
    """
    if method in ("paper", "graph"):
        return GraphStrategy(batch_step1=batch_step1)
    if method == "evidence":
        return EvidenceStrategy(evidence_sentences=evidence_sentences, direct_fallback=direct_fallback)
    if method == "constrained":
        return ConstrainedStrategy(evidence_sentences=evidence_sentences, direct_fallback=direct_fallback)
    return DirectStrategy()
