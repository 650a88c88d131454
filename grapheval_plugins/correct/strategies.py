"""The correction methods, as strategies of one round: GraphCorrect (prompts B then C per unsupported triple), its
``evidence`` variant (step 1 told why the triple failed and shown the closest evidence, with one follow-up when the
answer repeats the triple) and the Direct Prompt baseline (prompt D), over the shared steps of :class:`Editor`.

A strategy never raises for a bad answer: each refused step records its reason on the
:class:`~grapheval_plugins.correct.types.TripleChange` and keeps the text as it was before.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import RunnableConfig

from ..exceptions import ScoringError
from ..extract.parser import parse_single_triple, parse_triples
from ..locate import locate_triple
from ..messages import message_text
from ..retry import RetryPolicy
from ..text import sentence_at, sentence_spans
from ..types import ClaimCheck, Report, Triple
from .evidence import closest_sentences, deciding_passage, failure_reason
from .guard import Guard, Tally
from .prompts import CorrectionPrompts
from .spans import (
    Change,
    Edit,
    bound_problem,
    candidates_for,
    copied_changes,
    drop_negation,
    edit_problem,
    filler_problem,
    foreign_words,
    has_spaced_numbers,
    in_kind,
    kinds_lost,
    negation_only,
    one_for_one,
    replace_value,
    stated_around,
    substitute,
    text_changes,
    tidy_numbers,
    triple_edits,
    typed_values,
    unit_lost,
    unstated_values,
    value_options,
)
from .text import check_rewrite, clean_rewrite
from .types import CorrectionMethod, TripleChange

if TYPE_CHECKING:
    from ..check.base import ClaimScore

__all__ = [
    "ConstrainedStrategy",
    "CorrectionStrategy",
    "DirectStrategy",
    "Editor",
    "EvidenceStrategy",
    "GraphStrategy",
    "MINIMAL_PAIR_MARGIN",
    "RESTATE_OPTIONS",
    "Round",
    "strategy_for",
]

RESTATE_OPTIONS = 5
"""How many of the context's values ``method="constrained"`` tries in place of an output value the context does not
state (one scorer call each, on the value's sentence)."""

NO_EVIDENCE = "(no sentence of the context shares a word with the triple)"
"""What ``{evidence}`` holds when no sentence of the deciding passage shares a content word with the triple."""

MINIMAL_PAIR_MARGIN = 0.15
"""How much less unsupported than the flagged claim a correction that differs from it in one place only (its
opposite: a negation added or taken out; or one to three words replaced by as many: "father" → "mother") must be
scored for ``method="constrained"`` to take it when the judge does not find it supported outright. Of two claims
that differ in one place, the context supports the one the judge doubts less, which a small judge decides better
than an absolute threshold."""


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
    passages: tuple[str, ...] = ()
    """The context's passages as the scorer reads them (empty: ``ctx`` is one)."""
    after_triples: list[Triple] | None = None
    """Set by a strategy that edits the output in place: the triples the output states after the round (the
    report's, with each applied change's old triple replaced by its new one), so that the re-check scores these
    instead of extracting again. ``None``: the re-check extracts."""
    verified: dict[Triple, float] = field(default_factory=dict)
    """The P(unsupported) of each corrected triple a strategy scored against the context, to rank its tries (the
    re-check scores the output again, by the engine's own check)."""

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
    verify: bool = True
    """``method="constrained"``: score a corrected triple against the context before taking it."""

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
        reason = failure_reason(claim.p_unsupported, job.report.hallucination_threshold)
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


_OPTION = re.compile(r"\s*(?:option\s*)?(\d+)\s*(?:[.:)\]]|$)", re.IGNORECASE)
"""A choice as the choice prompt asks for it: the answer starts with the option's number ("2", "Option 2", "2. 116",
"2)"); a number elsewhere in the answer is no choice."""


class ConstrainedStrategy:
    """``method="constrained"`` (not from the paper): first the output's numbers and dates that the context never
    states, each replaced in place by the value of the context the judge finds best supported, and the places where
    an output sentence departs from a context sentence it nearly copies, restored the same way; then for each
    flagged triple, ``evidence``'s step 1 (the reason and the closest sentences), its answer held to the context,
    the change made in place, no rewrite call.

    First (:meth:`_restate_values`, no chat-model call), each number or date of the output that no value of the
    context states is tried with the context's values of its kind and unit, the closest sentences' first; the judge
    scores the value's sentence with each, and the best is taken when it is scored at least
    :data:`MINIMAL_PAIR_MARGIN` less unsupported than the sentence was. Second (:meth:`_restore_copies`, no
    chat-model call either), an output sentence that the judge scores unsupported and that nearly copies a sentence
    of the context, differing from it in one place (a name swapped, a relation word changed, a negation added), is
    tried with the context's words at that place, under the same rule. A flagged triple that held the words changed
    is then carried over without a call. Then:

    0. The triples to correct are the flagged ones; when the output is flagged and none of its triples is (the
       hybrid rule's whole-output term carried the verdict), the triple the scorer doubted most stands in
       (:func:`_to_correct`), and a correction of it must also be scored less unsupported than it was.
    1. The evidence prompt proposes a corrected triple.
    2. Each change it makes at one place is kept when every word it brings in occurs in the context and it is a
       corrected value replaced in kind (:meth:`_problem`); the others are left out. When several are kept, each
       is tried alone (:meth:`_take`). A try is taken when GraphEval's scorer finds it supported by the context,
       or (a number or a date) at least better supported than the flagged triple, or (a minimal pair with the
       flagged claim: a negation added or taken out, or a few words replaced by as many) better supported by
       :data:`MINIMAL_PAIR_MARGIN` (one scorer call); of several, the best supported. Otherwise (the same triple, no triple, no change kept, or still
       unsupported): a triple that negates an auxiliary is tried without the negation (held to the same rule);
       then, when the triple holds a number or a date and the closest sentences hold other values of that kind
       and unit, the model chooses among those values (one call, answered by a number; ``0``: none), and the
       choice is held to the bound rule and scored the same way; else, for an unchanged answer, the evidence
       follow-up is sent once and its answer held to the same rules.
    3. The words that changed in the triple are replaced in the output where the triple sits (the output's other
       words are never touched); when they are not found there, the change is refused, not handed to a rewrite.
       It is not made where the context says the words around it word for word
       (:func:`~grapheval_plugins.correct.spans.stated_around`), and made only when the judge scores the sentence
       less unsupported with it (:meth:`_sentence_problem`).
    4. The round records the triples the output now states (:attr:`Round.after_triples`): the re-check is the
       engine's check of them (the whole output alone when there is none), without extracting again.

    A change is made only on the scorer's word: when scoring it fails, it is refused as not verified.
    """

    method: CorrectionMethod = "constrained"

    def __init__(
        self, evidence_sentences: int = 3, context_sentences: int | None = 8, direct_fallback: bool = False
    ) -> None:
        if evidence_sentences < 1:
            raise ValueError("evidence_sentences must be >= 1")
        if context_sentences is not None and context_sentences < evidence_sentences:
            raise ValueError("context_sentences must be None or >= evidence_sentences")
        self.evidence_sentences = evidence_sentences
        self.direct_fallback = direct_fallback
        """When no flagged triple could be corrected (or none was extracted), ask the Direct Prompt and keep, of its
        rewrite, one changed place held to the same rules (:meth:`_fallback`)."""
        self.context_sentences = context_sentences
        """How many sentences of the deciding passage (the closest to the triple, in passage order) step 1 reads as
        its context; ``None``: the whole context. A short prompt is read faster, and the values it offers are the
        closest sentences' anyway."""

    async def run_round(self, editor: Editor, job: Round) -> tuple[str, list[TripleChange]]:
        current = job.current
        changes: list[TripleChange] = []
        after = [c.triple for c in job.report.claims if c.triple is not None]
        done: set[tuple[str, str]] = set()
        applied: list[Edit] = []
        current, restated = await self._restate_values(editor, job, current, after, applied)
        changes.extend(restated)
        current, copied = await self._restore_copies(editor, job, current, after, applied)
        changes.extend(copied)
        done.update((" ".join(e.old.casefold().split()), " ".join(e.new.casefold().split())) for e in applied)
        for claim in _to_correct(job.report):
            old = claim.triple
            if old is None:
                changes.append(TripleChange(round=job.number, kind="constrained", p_unsupported=claim.p_unsupported,
                                            reason="whole-output claim: no triple was extracted, so there is "
                                                   "nothing to correct"))
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
            key = tuple(sorted((" ".join(e.old.casefold().split()), " ".join(e.new.casefold().split()))
                               for e in edits))
            if any(k in done for k in key):
                change.reason = "the same change was already made for another triple"
                _replace(after, old, new)
                continue
            edited = substitute(current, edits, old)
            if edited is None:
                change.reason = "the changed words of the triple are not in the output"
                continue
            stated = _stated(current, edited, job.ctx)
            if stated is not None:
                change.reason = f"the context says {stated!r} word for word; the change would depart from it"
                continue
            worse = await self._sentence_problem(editor, job, current, edited)
            if worse is not None:
                change.reason = worse
                continue
            current = edited
            change.applied = True
            done.update(key)
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
        """The first step, no chat-model call: each number or date of the output that the context never states
        (:func:`~grapheval_plugins.correct.spans.unstated_values`) is tried with each value of its kind and unit in
        the context sentences closest to its sentence (:func:`~grapheval_plugins.correct.spans.value_options`, up to
        :data:`RESTATE_OPTIONS`, the closest three sentences' first); the judge scores the sentence against the
        context with each, and the best is made in place when it is scored at least :data:`MINIMAL_PAIR_MARGIN`
        less unsupported than the sentence as it was and no other value is scored the same (a scorer that cannot
        tell two values apart, such as a word-overlap one, decides nothing here; the options keep to the bound rule). The edits made are appended to
        ``applied`` and made in ``after`` too, so the flagged triples that held the value are carried, not asked
        again. Every try is recorded with its score in the change's reason."""
        changes: list[TripleChange] = []
        if not editor.verify:  # the rule is the scorer's: nothing to decide by without it
            return current, changes
        for value in reversed(unstated_values(current, job.ctx)):  # from the end: earlier offsets stay valid
            start, end = sentence_at(current, value.start)
            sentence = current[start:end]
            near = _SentenceClaim(sentence)
            options = value_options(value, closest_sentences(job.ctx, near, k=3), own_text=current)
            wider = closest_sentences(job.ctx, near, k=self.context_sentences or 8)
            options += [o for o in value_options(value, wider, own_text=current) if o not in options]
            options = [_like(o, value.text) for o in options[:RESTATE_OPTIONS]  # written whole: "1.1 million"
                       if bound_problem(Edit(old=value.text, new=o), sentence, job.ctx) is None]
            if not options:
                continue
            holder = next((t for t in after if replace_value(t, value.text, value.text) is not None), None)
            change = TripleChange(round=job.number, kind="constrained", old=holder)
            changes.append(change)
            before = await self._p_unsupported(editor, job, sentence)
            if before is None:
                change.reason = f"{value.text!r}, a value the context does not state: scoring its sentence failed"
                continue
            change.p_unsupported = before
            at = value.start - start
            tried = await self._try_variants(editor, job, [
                (option, sentence[:at] + option + sentence[at + len(value.text):]) for option in options
            ])
            said = (f"{value.text!r} is a value the context does not state; its sentence scored {before:.2f}, "
                    f"with the context's values: {_scores(tried)}")
            option, why = _best_variant(tried, before)
            if option is None:
                change.reason = f"{said}: {why}"
                continue
            current = current[: value.start] + option + current[value.start + len(value.text):]
            edit = Edit(old=value.text, new=option)
            applied.append(edit)
            _made_in(after, edit)
            change.new = replace_value(holder, value.text, option) if holder is not None else None
            change.applied = True
            change.reason = f"{said}: {option!r} taken"
        return current, changes

    async def _restore_copies(
        self, editor: Editor, job: Round, current: str, after: list[Triple], applied: list[Edit]
    ) -> tuple[str, list[TripleChange]]:
        """The second step, no chat-model call: an output sentence that nearly copies a sentence of the context
        and differs from it in one place ("sterling was present among the reds squad" against "Ibe was present
        among the Reds squad", :func:`~grapheval_plugins.correct.spans.copied_changes`) is tried with the
        context's words at that place, each change alone and held to the rules of a corrected value
        (:meth:`_problem`), when the judge scores the sentence unsupported. The best is made in place under
        :meth:`_restate_values`' rule (at least :data:`MINIMAL_PAIR_MARGIN` less unsupported than the sentence, no
        other scored the same), and carried into ``after`` and ``applied``. A swapped name, a relation changed, a
        negation added or taken out: what the chat model's step 1 rarely restores, read off the sentence the output
        copied."""
        changes: list[TripleChange] = []
        if not editor.verify:
            return current, changes
        threshold = editor.guard.grapheval.hallucination_threshold
        for start, end in reversed(sentence_spans(current)):  # from the end: earlier offsets stay valid
            sentence = current[start:end]
            found = [c for c in copied_changes(sentence, job.ctx)
                     if self._problem(c.edit, sentence, job.ctx) is None]
            if not found:
                continue
            before = await self._p_unsupported(editor, job, sentence)
            if before is None or before <= threshold:
                continue  # supported (or unscored): a near copy that differs is a paraphrase, not an error
            here = [i for i, t in enumerate(after) if (at := locate_triple(current, t)) and start <= at[0] < end]
            holder = next((after[i] for c in found for i in here
                           if replace_value(after[i], c.old, c.old) is not None), None)
            change = TripleChange(round=job.number, kind="constrained", old=holder, p_unsupported=before)
            changes.append(change)
            tried = await self._try_variants(editor, job, [(c, c.apply(sentence)) for c in found])
            said = (f"{sentence!r} nearly copies the context; it scored {before:.2f}, with the context's words: "
                    + ", ".join(f"{c.old!r} → {c.new!r} {p:.2f}" for p, c in tried))
            made, why = _best_variant(tried, before)
            if made is None:
                change.reason = f"{said}: {why}"
                continue
            current = current[:start] + made.apply(sentence) + current[end:]
            applied.append(made.edit)
            change.new = replace_value(holder, made.old, made.new) if holder is not None else None
            for i in here:  # the triples of this sentence only: "has" → "has not" is no edit of every "has"
                after[i] = replace_value(after[i], made.old, made.new) or after[i]
            change.applied = True
            change.reason = f"{said}: {made.old!r} → {made.new!r} taken"
        return current, changes

    async def _sentence_problem(self, editor: Editor, job: Round, current: str, edited: str) -> str | None:
        """Why a corrected triple's change is not made in the output (``None``: it is made): the judge scores the
        output's sentences it changes no less unsupported with it than without. The triple was scored alone, and
        its sentence may hold another error the change leaves in place ("the late pink floyd [star → legend] syd
        barrett is to be not built": the triple now agrees with the context, the sentence no better), or an earlier
        change may have corrected that sentence already. Nothing is decided without a scorer; a sentence that
        cannot be scored leaves the change unverified, and not made."""
        if not editor.verify:
            return None
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
        tried: list[tuple[float, _V]] = []
        for variant, text in variants:
            p = await self._p_unsupported(editor, job, text)
            if p is not None:
                tried.append((p, variant))
        return tried

    async def _fallback(self, editor: Editor, job: Round, after: list[Triple]) -> tuple[str, TripleChange]:
        """The Direct Prompt's rewrite held to the rules of the triples: each place where it changes words of the
        output (case and punctuation aside) is a change held to :meth:`_problem`; each kept one is made alone in the
        output and the sentence it sits in is scored against the context (supported outright; a number or a date:
        better supported than the sentence was); the best supported is made, nothing else of the rewrite. The
        triples in ``after`` that held its old words are given the new ones."""
        current = job.current
        answer, error, calls = await editor.call(editor.prompts.direct_messages(current, job.ctx), job.config)
        change = TripleChange(round=job.number, kind="direct", llm_calls=calls)
        if answer is None:
            change.reason = f"the Direct Prompt: the chat model raised {error}"
            return current, change
        change.raw_answers.append(answer)
        rewrite, problem = editor.accept(answer, current, job.original, "the Direct Prompt")
        if problem is not None:  # not a rewrite of the output (a copy of the context, a cut, a summary)
            change.reason = problem
            return current, change
        found = text_changes(current, rewrite, words_only=True)
        if not found:
            change.reason = "the Direct Prompt changed no word of the output"
            return current, change
        problems = [self._problem(c.edit, _sentence_at(current, c.start), job.ctx) for c in found]
        kept = [c for c, problem in zip(found, problems) if problem is None]
        if not kept:
            change.reason = f"the Direct Prompt's rewrite: {next(p for p in problems if p)}"
            return current, change
        best: tuple[float, str, Change] | None = None
        closest: float | None = None  # the lowest P(unsupported) of a change refused
        for made in kept:
            edited = made.apply(current)
            p_new = await self._p_unsupported(editor, job, _sentence_at(edited, made.start))
            if p_new is None:
                continue
            bar = editor.guard.grapheval.hallucination_threshold
            if typed_values(made.old) and typed_values(made.new):  # a number or a date: better than it was
                before = await self._p_unsupported(editor, job, _sentence_at(current, made.start))
                bar = max(bar, before - 1e-9) if before is not None else bar
            if p_new > bar:
                closest = p_new if closest is None else min(closest, p_new)
            elif best is None or p_new < best[0]:
                best = (p_new, edited, made)
        if best is None:
            lowest = "" if closest is None else f" (lowest P(unsupported) {closest:.2f})"
            change.reason = f"the Direct Prompt's rewrite: no change of it is supported by the context{lowest}"
            return current, change
        _, edited, made = best
        change.applied = True
        _made_in(after, made.edit)
        return edited, change

    @staticmethod
    async def _p_unsupported(editor: Editor, job: Round, claim: str) -> float | None:
        """P(unsupported) of ``claim`` against the context by GraphEval's scorer (``None``: scoring failed)."""
        score = await ConstrainedStrategy._score(editor, job, claim, repr(claim))
        return None if score is None else score.p_unsupported

    @staticmethod
    async def _score(editor: Editor, job: Round, claim: str, what: str, note: str = "") -> ClaimScore | None:
        """``claim`` scored against the context by GraphEval's scorer; ``None`` when scoring failed (a raised
        :class:`~grapheval_plugins.exceptions.ScoringError`, recorded in the tally as ``what`` failed ``note``, or
        a per-claim error)."""
        try:
            scorer = await asyncio.to_thread(lambda: editor.guard.grapheval.scorer)
            [score] = await scorer.acheck([tuple(job.passages or (job.ctx,))], [claim])
        except ScoringError as exc:
            job.tally.issues.append(f"constrained: scoring {what} failed{note}: {exc}")
            return None
        return None if score.error is not None else score

    async def _step1(
        self, editor: Editor, job: Round, claim: ClaimCheck, old: Triple, change: TripleChange, current: str
    ) -> Triple | None:
        """The corrected triple, or ``None`` with ``change.reason`` set. ``current``: the output with the changes
        made so far (a value it states is not offered as a choice)."""
        passage = deciding_passage(claim, job.ctx)
        evidence = closest_sentences(passage, old, k=self.evidence_sentences)
        shown = job.ctx
        if self.context_sentences is not None:
            shown = closest_sentences(passage, old, k=self.context_sentences) or job.ctx
        reason = failure_reason(claim.p_unsupported, job.report.hallucination_threshold)
        messages = editor.prompts.evidence_triple_messages(old, shown, evidence or NO_EVIDENCE, reason)
        answer = await self._ask(editor, job, messages, change)
        if answer is None and change.reason is not None:  # the chat model raised (retries spent): say so, stop
            return None
        new = parse_single_triple(answer) if answer else None
        taken, problem = await self._take(editor, job, claim, old, new)
        if taken is not None:
            return taken
        flipped = drop_negation(old) if editor.verify else None  # only ever taken on the scorer's word
        if flipped is not None and await self._unsupported(
            editor, job, flipped, claim.p_unsupported, strict=True, paired=True
        ) is None:
            return flipped  # the context states the claim without its negation
        offered = candidates_for(old, evidence, output=current) if evidence else None
        if offered is not None:
            value, options = offered
            choice = await self._ask(
                editor, job, editor.prompts.choice_messages(old, shown, evidence, value.text, options), change
            )
            picked = _option(choice, options) if choice is not None else None
            if picked is not None and not has_spaced_numbers(job.current):
                picked = tidy_numbers(picked)
            if picked is None:
                change.reason = f"step 1: {problem}; no value of the context chosen for {value.text!r}"
                return None
            chosen = replace_value(old, value.text, picked)
            if chosen is None or _same_triple(old, chosen):
                change.reason = f"step 1: {problem}; the chosen value changes nothing"
                return None
            unsupported = bound_problem(Edit(old=value.text, new=picked), old.sentence(), job.ctx)
            if unsupported is None:
                unsupported = await self._unsupported(editor, job, chosen, claim.p_unsupported)
            if unsupported is not None:
                change.new = chosen
                change.reason = f"step 1: {problem}; with the chosen value {picked!r}: {unsupported}"
                return None
            return chosen
        if answer is None or new is None or not _same_triple(old, new):
            change.new = new
            change.reason = f"step 1: {problem}"
            return None
        change.follow_up = True
        again = [*messages, AIMessage(answer), *editor.prompts.follow_up_messages(old)]
        second = await self._ask(editor, job, again, change)
        retried = parse_single_triple(second) if second else None
        taken, problem = await self._take(editor, job, claim, old, retried)
        if taken is None:
            change.new = retried
            change.reason = f"step 1 (after the follow-up): {problem}"
        return taken

    async def _take(
        self, editor: Editor, job: Round, claim: ClaimCheck, old: Triple, new: Triple | None
    ) -> tuple[Triple | None, str | None]:
        """The corrected triple taken from a proposed one, or ``None`` and why not.

        Each change the proposal makes at one place is held to the rules of :meth:`_problem`. The changes that
        break them are dropped when others keep to them ("9th hole" → "11th hole at port douglas": the added place
        goes, the corrected number stays), and a triple is corrected one value at a time: when several changes keep
        to the rules, each is tried alone and the best supported is taken ("sherwood will repeat" → "Grealish will
        not repeat": the name and the negation are scored apart). Each try is scored as in :meth:`_unsupported`.
        """
        if new is None:
            return None, "no triple could be parsed from the answer"
        if not has_spaced_numbers(job.current):  # the context's "3, 500" is written "3,500" in such an output
            new = Triple.from_list([tidy_numbers(part) for part in new.as_list()])
        edits = triple_edits(old, new)
        if not edits:
            return None, "the model returned the triple unchanged"
        problems = [filler_problem(old, edit) or self._problem(edit, old.sentence(), job.ctx) for edit in edits]
        kept = [edit for edit, problem in zip(edits, problems) if problem is None]
        first = next((problem for problem in problems if problem is not None), None)
        if not kept:
            return None, first
        tries = [new] if len(kept) == len(edits) == 1 else _one_at_a_time(old, kept)
        if not tries:
            return None, first or "the changes of the corrected triple cannot be made one at a time"
        best: Triple | None = None
        why: str | None = None
        for attempt in tries:
            unsupported = await self._unsupported(
                editor, job, attempt, claim.p_unsupported, strict=not _changes_a_value(old, attempt),
                paired=_minimal_pair(old, attempt),
            )
            if unsupported is not None:
                why = why or unsupported
            elif best is None or _p(job, attempt) < _p(job, best):
                best = attempt
        if best is None:
            dropped = f" (with {first})" if first else ""
            return None, f"{why}{dropped}"
        return best, None

    @staticmethod
    async def _unsupported(
        editor: Editor, job: Round, new: Triple, before: float | None, strict: bool = False, paired: bool = False
    ) -> str | None:
        """Why a corrected triple is not taken after scoring it against the context: it is unsupported and no
        better supported than the flagged triple was (P(unsupported) ``before``); ``None``: it is taken. (A small
        judge often leaves a right correction just above the threshold: better than the flagged triple is enough,
        the re-check then says whether the output passes.) ``strict`` (a correction that changes something other
        than a number or a date: a name, a word, a negation, which nothing constrains the way the context's values
        of one kind constrain a number or a date): it must be supported, unless it is the flagged claim's
        ``paired`` with the flagged claim (they differ in one place: a negation added or taken out, or a few words
        replaced by as many, see :func:`_minimal_pair`) and the judge prefers it to the flagged claim by
        :data:`MINIMAL_PAIR_MARGIN` or more: of two such claims, the one the context supports is the one scored the
        less unsupported, which a small judge decides better than an absolute threshold. A triple that was not
        flagged (``before`` at or under the threshold: a stand-in, see :func:`_to_correct`) is corrected only into
        one scored less unsupported than it was. The verdict is
        kept to rank the tries (:attr:`Round.verified`); a triple that cannot be scored is not verified, and not
        taken."""
        if not editor.verify:
            return None
        engine = editor.guard.grapheval
        claim = engine.render_triple(new)
        score = await ConstrainedStrategy._score(editor, job, claim, f"{new.as_list()}", ", not taken")
        if score is None:
            return "scoring the corrected triple failed: it is not verified, not taken"
        threshold = engine.hallucination_threshold
        job.verified[new] = score.p_unsupported
        unsupported = score.p_unsupported > threshold
        if before is not None and before <= threshold and score.p_unsupported >= before:  # a stand-in triple
            return (f"the corrected triple is no less unsupported than the unflagged triple it corrects "
                    f"(P(unsupported) = {score.p_unsupported:.2f}, the triple's {before:.2f})")
        if unsupported and strict and paired and before is not None and (
            score.p_unsupported <= before - MINIMAL_PAIR_MARGIN
        ):
            return None
        if unsupported and strict:
            return (f"the corrected triple changes more than a number or a date and is not supported by the "
                    f"context (P(unsupported) = {score.p_unsupported:.2f})")
        if unsupported and (before is None or score.p_unsupported >= before):
            was = "" if before is None else f", the flagged triple's {before:.2f}"
            return (f"the corrected triple is not supported by the context either (P(unsupported) = "
                    f"{score.p_unsupported:.2f}{was})")
        return None

    @staticmethod
    async def _ask(editor: Editor, job: Round, messages: list[BaseMessage], change: TripleChange) -> str | None:
        answer, error, calls = await editor.call(messages, job.config)
        change.llm_calls += calls
        if answer is None:
            change.reason = f"step 1: the chat model raised {error}"
            return None
        change.raw_answers.append(answer)
        return answer if answer.strip() else None

    @staticmethod
    def _problem(edit: Edit, where: str, context: str) -> str | None:
        """Why one change (of a proposed triple, or of a rewrite) is not a correction (``None``: it may be one): it
        brings in words the context lacks (another inflection of a verb whose negation it takes out aside: "did not
        ease" → "eased"), turns a number or a date into something else or a count into a percentage or money
        (:func:`~grapheval_plugins.correct.spans.unit_lost`), is no corrected value
        (:func:`~grapheval_plugins.correct.spans.edit_problem`), changes a number under a bound that the new value
        does not need changed (:func:`~grapheval_plugins.correct.spans.bound_problem`; ``where``: the text the
        edit's old words sit in), or rewrites words rather than replacing a value in kind
        (:func:`~grapheval_plugins.correct.spans.in_kind`: "see their last live" → "watch gp")."""
        foreign = foreign_words(edit.new, context, inflecting=edit.old if negation_only(edit) else "")
        if foreign:
            return "the change brings in words the context does not contain: " + ", ".join(foreign[:5])
        lost = kinds_lost(edit)
        if lost:
            return f"the change replaces a {lost} ({edit.old!r}) with something else ({edit.new!r})"
        unit = unit_lost(edit)
        if unit:
            return f"the change is not a corrected value: {unit}"
        problem = edit_problem(edit, context) or bound_problem(edit, where, context)
        if problem:
            return f"the change is not a corrected value: {problem}"
        if not in_kind(edit, context):
            return (f"the change is not a value replaced in kind: {edit.old!r} → {edit.new!r} is neither as many "
                    "words for as many, nor a name of the context for another, nor a negation")
        return None


def _to_correct(report: Report) -> list[ClaimCheck]:
    """The claims ``method="constrained"`` corrects: the flagged ones; when the output is flagged and none of its
    triples is (the hybrid rule's whole-output term carried the verdict), the triple the scorer doubted most stands
    in, held to one more rule: its correction must be scored less unsupported than it was."""
    flagged = list(report.unsupported)
    if not report.hallucinated or any(c.triple is not None for c in flagged):
        return flagged
    triples = [c for c in report.claims if c.triple is not None]
    return [max(triples, key=lambda c: c.p_unsupported)] if triples else flagged


_V = TypeVar("_V")


def _scores(tried: Sequence[tuple[float, object]]) -> str:
    return ", ".join(f"{o!r} {p:.2f}" for p, o in tried) or "none could be scored"


def _best_variant(tried: Sequence[tuple[float, _V]], before: float) -> tuple[_V | None, str]:
    """The variant of a sentence to take: scored at least :data:`MINIMAL_PAIR_MARGIN` less unsupported than the
    sentence was (``before``) and strictly better than every other (a scorer that cannot tell two apart, such as a
    word-overlap one, decides nothing). ``None`` and why not otherwise.

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
    """``edit`` made in each triple of ``triples`` that holds its old words."""
    for i, triple in enumerate(triples):
        replaced = replace_value(triple, edit.old, edit.new)
        if replaced is not None:
            triples[i] = replaced


@dataclass(frozen=True)
class _SentenceClaim:
    """An output sentence as the anchor of :func:`~grapheval_plugins.text.closest_sentences` (all its words)."""

    subject: str
    relation: str = ""
    object: str = ""


def _like(value: str, written: str) -> str:
    """``value`` with its first letter capitalised when ``written`` (the value it replaces) starts with a capital.

    >>> _like("two", "Zero"), _like("20", "18"), _like("two", "zero")
    ('Two', '20', 'two')
    """
    return value[:1].upper() + value[1:] if written[:1].isupper() else value


def _changed_span(before: str, after: str) -> tuple[int, int, int]:
    """Where ``after`` departs from ``before``: the start, and the end in ``before`` and in ``after``.

    >>> _changed_span("Bob won.", "Bob lost.")
    (4, 7, 8)
    """
    head = len(os.path.commonprefix([before, after]))
    tail = len(os.path.commonprefix([before[head:][::-1], after[head:][::-1]]))
    return head, len(before) - tail, len(after) - tail


def _changed_sentences(before: str, after: str) -> tuple[str, str]:
    """The sentences of ``before`` that differ in ``after``, and what they became (each run of them whole).

    >>> _changed_sentences("Ann is tall. Bob won. Cy ran.", "Ann is tall. Bob lost. Cy ran.")
    ('Bob won.', 'Bob lost.')
    """
    head, *ends = _changed_span(before, after)
    spans = []
    for text, end in zip((before, after), ends):
        start, _ = sentence_at(text, head)
        _, stop = sentence_at(text, max(end - 1, start))
        spans.append(text[start:stop])
    return spans[0], spans[1]


def _stated(before: str, after: str, context: str) -> str | None:
    """The words around the place where ``after`` departs from ``before`` when the context says them word for word
    (:func:`~grapheval_plugins.correct.spans.stated_around`), else ``None``.

    >>> _stated("Ann won gold in 2012.", "Ann won silver in 2012.", "Ann won gold in 2012 in London.")
    'Ann won gold in 2012'
    """
    head, end, _ = _changed_span(before, after)
    return stated_around(before, head, end, context)


def _sentence_at(text: str, at: int) -> str:
    """The sentence of ``text`` that holds character ``at`` (the whole text when none does)."""
    return text[slice(*sentence_at(text, at))]


def _one_at_a_time(old: Triple, edits: Sequence[Edit]) -> list[Triple]:
    """``old`` with each edit made alone (those that cannot be placed in one part of the triple left out)."""
    out: list[Triple] = []
    for edit in edits:
        made = replace_value(old, edit.old, edit.new)
        if made is not None and made != old and made not in out:
            out.append(made)
    return out


def _p(job: Round, triple: Triple) -> float:
    """The scored P(unsupported) of a tried triple (1.0 when it was not scored: verification off)."""
    return job.verified.get(triple, 1.0)


def _minimal_pair(old: Triple, new: Triple) -> bool:
    """Whether ``new`` differs from ``old`` in one place: it only adds or takes out negations (see
    :func:`~grapheval_plugins.correct.spans.negation_only`), or makes one change of a few words into as many
    (:func:`~grapheval_plugins.correct.spans.one_for_one`)."""
    edits = triple_edits(old, new)
    if not edits:
        return False
    return all(negation_only(e) for e in edits) or (len(edits) == 1 and one_for_one(edits[0]))


def _changes_a_value(old: Triple, new: Triple) -> bool:
    """Whether every change from ``old`` to ``new`` replaces a number or a date (by one of its kind, see
    :func:`~grapheval_plugins.correct.spans.kinds_lost`)."""
    edits = triple_edits(old, new)
    return bool(edits) and all(typed_values(e.old) and typed_values(e.new) for e in edits)


def _option(answer: str, options: Sequence[str]) -> str | None:
    """The option an answer to the choice prompt names: the number it starts with (:data:`_OPTION`), else the one
    option it quotes; ``None`` for ``0``, an unknown number or no option.

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
    """``old`` with the edits already applied to the output made to it too, when one of them concerns it (its old
    words are in the triple and not in its replacement); ``None`` when none does."""
    new = old
    for edit in applied:
        if not edit.new or edit.old.casefold() in edit.new.casefold() or not foreign_words(edit.old, ""):
            continue  # a deletion, an addition, or only common words ("is not"): too loose to carry over
        replaced = replace_value(new, edit.old, edit.new)
        if replaced is not None:
            new = replaced
    return None if new == old else new


def _replace(triples: list[Triple], old: Triple, new: Triple) -> None:
    for i, t in enumerate(triples):
        if t == old:
            triples[i] = new


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
    """The strategy of a correction method (``"graph"``, ``"evidence"``, ``"direct"`` or ``"constrained"``).

    >>> strategy_for("direct").method, strategy_for("evidence").method
    ('direct', 'evidence')
    """
    if method == "graph":
        return GraphStrategy(batch_step1=batch_step1)
    if method == "evidence":
        return EvidenceStrategy(evidence_sentences=evidence_sentences, direct_fallback=direct_fallback)
    if method == "constrained":
        return ConstrainedStrategy(evidence_sentences=evidence_sentences, direct_fallback=direct_fallback)
    return DirectStrategy()
