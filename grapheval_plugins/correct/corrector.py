"""GraphCorrect: fix the triples GraphEval flags, then check the result again. And the Direct Prompt baseline.

One async code path (:meth:`GraphCorrect.acorrect`); the sync methods call it through ``run_sync``. Detection and
re-check go through the public :class:`~grapheval_plugins.pipeline.GraphEval` API only.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Union

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig

from .._async import run_sync
from .._messages import message_text
from ..exceptions import InputError, MissingDependencyError, ModelLoadError, ScoringError
from ..extract.extractor import describe_llm
from ..extract.parser import parse_single_triple, parse_triples
from ..inputs import PASSAGE_SEPARATOR, normalize_output, normalize_passages, to_sample
from ..pipeline import GraphEval
from ..types import ClaimCheck, Report, StageError, Triple
from .prompts import CORRECTION_PROMPTS, CorrectionPrompts
from .text import _rouge_scorer, check_rewrite, clean_rewrite, rouge_scores, word_diff
from .types import CorrectionMethod, CorrectionReport, CorrectionRound, CorrectionStatus, TripleChange

__all__ = ["GraphCorrect", "GuardMode"]

logger = logging.getLogger(__name__)

GuardMode = Union[bool, Literal["reject", "flag"]]
"""``False``: no guard. ``"reject"`` (or ``True``): refuse a change that drops a previously supported triple.
``"flag"``: apply it but record the lost triples."""


def _extraction_calls(report: Report | None) -> int:
    if report is None or report.extraction is None:
        return 0
    return report.extraction.attempts


def _same_triple(a: Triple, b: Triple) -> bool:
    return [p.casefold() for p in a.as_list()] == [p.casefold() for p in b.as_list()]


@dataclass
class _Step1:
    """The outcome of step 1 for one flagged triple."""

    new: Triple | None = None
    reason: str | None = None
    raw: list[str] = field(default_factory=list)
    calls: int = 0


@dataclass
class _Tally:
    """Counters of one ``acorrect`` call (never stored on the corrector: safe to run many at once)."""

    guard_checks: int = 0
    issues: list[str] = field(default_factory=list)


class GraphCorrect:
    """Hallucination correction guided by GraphEval's knowledge graph (GraphCorrect, Sansford et al. 2024).

    For an output GraphEval flags, each unsupported triple is corrected in turn: (1) the chat model proposes a
    corrected triple from the triple and the grounding context (prompt B), parsed like extracted triples; (2) it
    substitutes the old triple's information with the new one in the current output, changing nothing else
    (prompt C). The substitutions apply one after another; then GraphEval checks the corrected output again.
    ``method="direct"`` is the paper's baseline instead: one call with the output and the context (prompt D).

    A failed step never loses the output: an unparseable corrected triple, an empty or too long rewrite, or a
    rewrite of the whole output is refused, its reason recorded, and the text before it kept.

    Args:
        grapheval: the detector used to find what to correct and to re-check the result (default: ``GraphEval()``).
        llm: the chat model that corrects (a model or a spec for
            :func:`~grapheval_plugins.models.resolve_llm`); default: ``grapheval.llm``.
        method: ``"graph"`` (GraphCorrect, the default) or ``"direct"`` (the Direct Prompt baseline).
        max_rounds: correct → re-check rounds; ``1`` is the paper's procedure. With ``k > 1`` an output that the
            re-check still flags is corrected again from the re-check's unsupported triples, up to ``k`` times.
        guard: ``"reject"`` (or ``True``) refuses a change after which the output no longer states a triple the
            detection found supported (scored by ``grapheval.scorer`` with the changed output as the premise);
            ``"flag"`` applies it and records the lost triples; ``False`` (default) does neither.
        batch_step1: correct all flagged triples of one output in one step-1 call; when the answer does not hold
            exactly one triple per flagged triple, falls back to one call per triple.
        max_growth: a rewrite longer than ``max_growth`` × the original output (at least 40 characters of slack) is
            refused, and so is a corrected triple longer than that.
        min_similarity: a rewrite whose word similarity to the text it rewrites is below this is refused as "rewrote
            the whole output".
        max_retries: extra attempts when the chat model raises (not when it answers badly).
        prompts: the prompt set (default :data:`~grapheval_plugins.correct.prompts.CORRECTION_PROMPTS`).
        rouge: compute ROUGE-1/2/L between original and corrected (needs ``rouge-score``, the ``correct`` extra).
        max_concurrency: rows corrected at once in :meth:`correct_many` (default: ``grapheval.max_concurrency``).
        show_progress: progress bar in batch runs (default: on for 2+ rows on a terminal).

    Example:
        >>> from grapheval_plugins import GraphEval
        >>> from grapheval_plugins.correct import GraphCorrect
        >>> from grapheval_plugins.testing import ScriptedChatModel, KeywordScorer
        >>> def respond(messages):
        ...     text = messages[-1].content
        ...     if "<old_triple>" in text:                      # prompt C
        ...         return "<context>Marie Curie won two Nobel Prizes.</context>"
        ...     if "<triple>" in text:                          # prompt B
        ...         return '["Marie Curie", "won", "two Nobel Prizes"]'
        ...     if "two" in text:                               # prompt A on the corrected output
        ...         return '<python>[["Marie Curie", "won", "two Nobel Prizes"]]</python>'
        ...     return '<python>[["Marie Curie", "won", "three Nobel Prizes"]]</python>'
        >>> grapheval = GraphEval(llm=ScriptedChatModel(respond=respond), scorer=KeywordScorer())
        >>> fixer = GraphCorrect(grapheval, rouge=False)
        >>> result = fixer.correct(context="Marie Curie won two Nobel Prizes.",
        ...                        output="Marie Curie won three Nobel Prizes.")
        >>> result.corrected, result.status, result.passed, result.llm_calls
        ('Marie Curie won two Nobel Prizes.', 'corrected', True, 2)
        >>> result.diff
        'Marie Curie won [-three-]{+two+} Nobel Prizes.'
    """

    def __init__(
        self,
        grapheval: GraphEval | None = None,
        llm: Any = None,
        *,
        method: CorrectionMethod = "graph",
        max_rounds: int = 1,
        guard: GuardMode = False,
        batch_step1: bool = False,
        max_growth: float = 1.5,
        min_similarity: float = 0.5,
        max_retries: int = 1,
        prompts: CorrectionPrompts = CORRECTION_PROMPTS,
        rouge: bool = True,
        max_concurrency: int | None = None,
        show_progress: bool | None = None,
    ) -> None:
        if method not in ("graph", "direct"):
            raise InputError("method", f"must be 'graph' or 'direct', got {method!r}")
        if isinstance(max_rounds, bool) or not isinstance(max_rounds, int) or max_rounds < 1:
            raise InputError("max_rounds", f"must be an integer >= 1, got {max_rounds!r}")
        if guard not in (False, True, "reject", "flag"):
            raise InputError("guard", f"must be False, True, 'reject' or 'flag', got {guard!r}")
        if not max_growth >= 1.0:
            raise InputError("max_growth", f"must be >= 1.0, got {max_growth!r}")
        if not 0.0 <= min_similarity <= 1.0:
            raise InputError("min_similarity", f"must be in [0, 1], got {min_similarity!r}")
        if max_retries < 0:
            raise InputError("max_retries", f"must be >= 0, got {max_retries!r}")
        if max_concurrency is not None and max_concurrency < 1:
            raise InputError("max_concurrency", f"must be >= 1, got {max_concurrency!r}")
        if not isinstance(prompts, CorrectionPrompts):
            raise InputError("prompts", f"expected a CorrectionPrompts, got {type(prompts).__name__}")
        self.grapheval = grapheval if grapheval is not None else GraphEval()
        self._llm_spec = llm
        self._llm: Any = None
        self._resolve_lock = threading.Lock()
        self.method: CorrectionMethod = method
        self.max_rounds = max_rounds
        self.guard: Literal["reject", "flag"] | None = (
            None if guard is False else "reject" if guard is True else guard  # type: ignore[assignment]
        )
        self.batch_step1 = batch_step1
        self.max_growth = float(max_growth)
        self.min_similarity = float(min_similarity)
        self.max_retries = max_retries
        self.prompts = prompts
        self.rouge = rouge
        self.max_concurrency = max_concurrency
        self.show_progress = show_progress

    # ----------------------------------------------------------------- models
    @property
    def llm(self) -> Any:
        """The chat model that makes the corrections (resolved on first access; default ``grapheval.llm``)."""
        if self._llm is None:
            if self._llm_spec is None:
                return self.grapheval.llm
            with self._resolve_lock:
                if self._llm is None:
                    from ..models import resolve_llm

                    self._llm = resolve_llm(self._llm_spec)
        return self._llm

    @property
    def llm_id(self) -> str:
        return describe_llm(self.llm)

    def describe(self) -> str:
        """``"<method> by <llm>; checked by <grapheval.describe()>"``: every model a correction depends on."""
        return f"{self.method} by {self.llm_id}; checked by {self.grapheval.describe()}"

    # ----------------------------------------------------------------- public API
    def correct(
        self,
        context: Any,
        output: Any,
        *,
        report: Report | None = None,
        id: str | None = None,
        config: RunnableConfig | None = None,
    ) -> CorrectionReport:
        """Correct one output. See :meth:`acorrect`."""
        return run_sync(self.acorrect(context, output, report=report, id=id, config=config))

    async def acorrect(
        self,
        context: Any,
        output: Any,
        *,
        report: Report | None = None,
        id: str | None = None,
        config: RunnableConfig | None = None,
    ) -> CorrectionReport:
        """Detect, correct and re-check one output.

        Args:
            context: the grounding context (a string, or a list of strings / Documents).
            output: the LLM output to correct.
            report: GraphEval's report on this output, when already computed (detection is then not re-run).
            id: an identifier carried into the report.

        An output GraphEval does not flag comes back unchanged with zero correction calls. Failures of the chat
        model or of a rewrite are recorded in the report (``changes[i].reason``, ``issues``), never raised.

        Raises:
            InputError: the context or output is unusable, or ``report`` was made for a different output.
            MissingDependencyError: ``rouge=True`` and ``rouge-score`` is not installed.
        """
        passages = normalize_passages(context)  # detection scores each passage on its own
        ctx = PASSAGE_SEPARATOR.join(passages)
        original = normalize_output(output)
        if report is not None:
            if not isinstance(report, Report):
                raise InputError("report", f"expected a Report, got {type(report).__name__}")
            if report.output != original:
                raise InputError("report", "was made for a different output")
        t0 = time.perf_counter()
        if report is None:
            report = await self.grapheval.aevaluate(passages, original, id=id, config=config)
        t_detect = time.perf_counter() - t0
        rid = id if id is not None else report.id
        common: dict[str, Any] = {
            "original": original,
            "method": self.method,
            "detection": report,
            "detection_llm_calls": _extraction_calls(report),
            "prompt_version": self.prompts.version,
            "id": rid,
        }
        if not report.ok:
            return CorrectionReport(
                **common,
                corrected=original,
                status="error",
                errors=list(report.errors),
                timings={"detect": t_detect, "total": time.perf_counter() - t0},
            )
        if not report.hallucinated:
            return CorrectionReport(
                **common,
                corrected=original,
                status="unflagged",
                flagged=False,
                passed=True,
                rouge=self._rouge(original, original),
                timings={"detect": t_detect, "total": time.perf_counter() - t0},
            )

        tally = _Tally()
        current, current_report = original, report
        changes: list[TripleChange] = []
        rounds: list[CorrectionRound] = []
        recheck_calls = 0
        t_correct = t_recheck = 0.0
        final = report
        for number in range(1, self.max_rounds + 1):
            before = current
            t1 = time.perf_counter()
            if self.method == "graph":
                current, round_changes = await self._graph_round(
                    ctx, original, current, current_report, number, tally, config
                )
            else:
                current, round_changes = await self._direct_round(
                    ctx, original, current, current_report, number, tally, config
                )
            t2 = time.perf_counter()
            t_correct += t2 - t1
            changes.extend(round_changes)
            if current == before:
                recheck = current_report  # same text: the verdict is the one we already have
            else:
                recheck = await self.grapheval.aevaluate(passages, current, id=rid, config=config)
                recheck_calls += _extraction_calls(recheck)
            t_recheck += time.perf_counter() - t2
            rounds.append(
                CorrectionRound(
                    round=number,
                    before=before,
                    after=current,
                    applied=sum(c.applied for c in round_changes),
                    hallucinated=recheck.hallucinated,
                    unsupported=len(recheck.unsupported),
                )
            )
            final = recheck
            if current == before or not recheck.ok or not recheck.hallucinated:
                break
            current_report = recheck

        status: CorrectionStatus
        passed: bool | None
        if current == original:
            status, passed = "unchanged", bool(final.ok and not final.hallucinated)
        elif not final.ok:
            status, passed = "recheck_failed", None
        else:
            passed = not final.hallucinated
            status = "corrected" if passed else "still_flagged"
        return CorrectionReport(
            **common,
            corrected=current,
            status=status,
            flagged=True,
            passed=passed,
            changes=changes,
            rounds=rounds,
            diff=word_diff(original, current),
            rouge=self._rouge(original, current),
            recheck=final,
            llm_calls=sum(c.llm_calls for c in changes),
            recheck_llm_calls=recheck_calls,
            guard_checks=tally.guard_checks,
            llm=self.llm_id,
            issues=tally.issues,
            errors=list(final.errors) if final is not report else [],
            timings={
                "detect": t_detect,
                "correct": t_correct,
                "recheck": t_recheck,
                "total": time.perf_counter() - t0,
            },
        )

    def correct_many(
        self,
        rows: Iterable[Any],
        *,
        context_key: str = "context",
        output_key: str = "output",
        id_key: str = "id",
        show_progress: bool | None = None,
        config: RunnableConfig | None = None,
    ) -> list[CorrectionReport]:
        """Correct many rows. See :meth:`acorrect_many`."""
        return run_sync(
            self.acorrect_many(
                rows,
                context_key=context_key,
                output_key=output_key,
                id_key=id_key,
                show_progress=show_progress,
                config=config,
            )
        )

    async def acorrect_many(
        self,
        rows: Iterable[Any],
        *,
        context_key: str = "context",
        output_key: str = "output",
        id_key: str = "id",
        show_progress: bool | None = None,
        config: RunnableConfig | None = None,
    ) -> list[CorrectionReport]:
        """Detect, correct and re-check many rows: mappings with ``context``/``output`` (and ``id``) keys, or pairs.

        Detection runs batched (:meth:`GraphEval.aevaluate_many`); the flagged rows are then corrected with at
        most ``max_concurrency`` rows in flight. A failing row never stops the batch: its report has
        ``status="error"`` and the error in ``errors``. Reports come back in the order of ``rows``.
        """
        rows = list(rows)
        if self.rouge and rows:
            await asyncio.to_thread(_rouge_scorer)  # a missing extra fails once, before any model work
        if show_progress is None:
            show_progress = self.show_progress
        if show_progress is None:
            show_progress = len(rows) > 1 and sys.stderr.isatty()
        detections = await self.grapheval.aevaluate_many(
            rows,
            context_key=context_key,
            output_key=output_key,
            id_key=id_key,
            show_progress=show_progress,
            config=config,
        )
        if len(detections) != len(rows):  # pragma: no cover - GraphEval returns one report per row
            raise RuntimeError(
                "GraphEval.aevaluate_many returned a report count different from the row count"
            )
        semaphore = asyncio.Semaphore(self.max_concurrency or self.grapheval.max_concurrency)
        from tqdm.auto import tqdm

        bar = tqdm(total=len(rows), desc="correct", unit="row", disable=not show_progress, leave=False)

        async def one(index: int, row: Any, detection: Report) -> CorrectionReport:
            try:
                if not detection.ok:
                    return self._error_report(row, output_key, detection, None)
                sample = to_sample(row, index, context_key, output_key, id_key)
                async with semaphore:
                    return await self.acorrect(
                        sample.context, sample.output, report=detection, id=sample.id, config=config
                    )
            except (MissingDependencyError, ModelLoadError):
                raise  # configuration errors: every row would fail the same way
            except Exception as exc:  # noqa: BLE001 - one failing row never stops the batch
                logger.warning("correction of row %d failed: %s", index, exc)
                error = StageError(stage="correct", type=type(exc).__name__, message=str(exc))
                return self._error_report(row, output_key, detection, error)
            finally:
                bar.update(1)

        try:
            return list(
                await asyncio.gather(*(one(i, r, d) for i, (r, d) in enumerate(zip(rows, detections))))
            )
        finally:
            bar.close()

    # ----------------------------------------------------------------- the two methods
    async def _graph_round(
        self,
        ctx: str,
        original: str,
        current: str,
        report: Report,
        number: int,
        tally: _Tally,
        config: RunnableConfig | None,
    ) -> tuple[str, list[TripleChange]]:
        """One GraphCorrect round: for each unsupported triple in turn, step 1 then step 2 on the output as
        corrected so far (with ``batch_step1``, one step-1 call for all triples first)."""
        changes: list[TripleChange] = []
        flagged: list[ClaimCheck] = []
        for claim in report.unsupported:
            if claim.triple is None:
                changes.append(
                    TripleChange(
                        round=number,
                        p_unsupported=claim.p_unsupported,
                        reason="whole-output claim: no triple was extracted, so there is nothing to correct",
                    )
                )
            else:
                flagged.append(claim)
        supported = [c.triple for c in report.claims if not c.unsupported and c.triple is not None]
        olds = [c.triple for c in flagged if c.triple is not None]
        batched, batch_cost = await self._batched_step1(ctx, original, olds, tally, config)
        for index, (claim, old) in enumerate(zip(flagged, olds)):
            # In turn: step 1 (unless batched) then step 2 for this triple, on the output as corrected so far.
            outcome = (
                batched[index] if batched is not None else await self._step1_one(ctx, original, old, config)
            )
            if index == 0 and batch_cost is not None:  # the batched call is counted on the first change
                outcome.calls += batch_cost.calls
                outcome.raw[:0] = batch_cost.raw
            change = TripleChange(
                round=number,
                old=old,
                new=outcome.new,
                p_unsupported=claim.p_unsupported,
                raw_answers=list(outcome.raw),
                llm_calls=outcome.calls,
            )
            changes.append(change)
            if outcome.new is None or outcome.reason is not None:
                change.reason = outcome.reason
                continue
            answer, error, calls = await self._call(
                self.prompts.substitute_messages(current, old, outcome.new), config
            )
            change.llm_calls += calls
            if answer is None:
                change.reason = f"step 2: the chat model raised {error}"
                continue
            change.raw_answers.append(answer)
            candidate, problem = self._accept(answer, current, original, "step 2")
            if problem is not None:
                change.reason = problem
                continue
            lost = await self._guard_lost(candidate, supported, tally)
            change.guard_lost = lost
            if lost and self.guard == "reject":
                change.reason = f"guard: the substitution drops {len(lost)} supported triple(s)"
                continue
            if lost:
                tally.issues.append(
                    f"guard: substituting {old.as_list()} dropped supported triple(s) "
                    + ", ".join(str(t.as_list()) for t in lost)
                )
            current = candidate
            change.applied = True
        return current, changes

    async def _direct_round(
        self,
        ctx: str,
        original: str,
        current: str,
        report: Report,
        number: int,
        tally: _Tally,
        config: RunnableConfig | None,
    ) -> tuple[str, list[TripleChange]]:
        """One Direct Prompt round: one call with the output and the context."""
        answer, error, calls = await self._call(self.prompts.direct_messages(current, ctx), config)
        change = TripleChange(round=number, kind="direct", llm_calls=calls)
        if answer is None:
            change.reason = f"the chat model raised {error}"
            return current, [change]
        change.raw_answers.append(answer)
        candidate, problem = self._accept(answer, current, original, "direct")
        if problem is not None:
            change.reason = problem
            return current, [change]
        supported = [c.triple for c in report.claims if not c.unsupported and c.triple is not None]
        lost = await self._guard_lost(candidate, supported, tally)
        change.guard_lost = lost
        if lost and self.guard == "reject":
            change.reason = f"guard: the rewrite drops {len(lost)} supported triple(s)"
            return current, [change]
        if lost:
            tally.issues.append(
                "guard: the direct rewrite dropped supported triple(s) "
                + ", ".join(str(t.as_list()) for t in lost)
            )
        change.applied = True
        return candidate, [change]

    # ----------------------------------------------------------------- steps
    async def _batched_step1(
        self,
        ctx: str,
        original: str,
        triples: Sequence[Triple],
        tally: _Tally,
        config: RunnableConfig | None,
    ) -> tuple[list[_Step1] | None, _Step1 | None]:
        """Step 1 for all ``triples`` in one call (``batch_step1``): ``(outcomes, None)``; or ``(None, cost)``
        when step 1 is to run per triple (option off, one triple, or an answer without one triple per triple),
        ``cost`` holding the calls and answer of a batched attempt that failed (``None`` when none was made)."""
        if not self.batch_step1 or len(triples) < 2:
            return None, None
        answer, error, calls = await self._call(self.prompts.batch_messages(triples, ctx), config)
        if answer is None:
            tally.issues.append(f"batched step 1: the chat model raised {error}; one call per triple instead")
            return None, _Step1(calls=calls)
        parsed = parse_triples(answer).triples
        if len(parsed) != len(triples):
            tally.issues.append(
                f"batched step 1 returned {len(parsed)} triple(s) for {len(triples)}: one call per triple instead"
            )
            return None, _Step1(calls=calls, raw=[answer])
        outcomes = [self._validate_triple(old, new, original) for old, new in zip(triples, parsed)]
        return outcomes, _Step1(calls=calls, raw=[answer])

    async def _step1_one(self, ctx: str, original: str, old: Triple, config: RunnableConfig | None) -> _Step1:
        answer, error, calls = await self._call(self.prompts.triple_messages(old, ctx), config)
        if answer is None:
            return _Step1(reason=f"step 1: the chat model raised {error}", calls=calls)
        if not answer.strip():
            return _Step1(reason="step 1: empty answer", raw=[answer], calls=calls)
        new = parse_single_triple(answer)
        if new is None:
            return _Step1(
                reason="step 1: no triple could be parsed from the answer", raw=[answer], calls=calls
            )
        result = self._validate_triple(old, new, original)
        result.raw.append(answer)
        result.calls = calls
        return result

    def _validate_triple(self, old: Triple, new: Triple, original: str) -> _Step1:
        limit = max(int(self.max_growth * len(original)), len(original) + 40)
        if len(new.sentence()) > limit:
            return _Step1(
                new=new, reason=f"step 1: the corrected triple is too long ({len(new.sentence())} > {limit})"
            )
        if _same_triple(old, new):
            return _Step1(new=new, reason="step 1: the model returned the triple unchanged")
        return _Step1(new=new)

    def _accept(self, answer: str, current: str, original: str, step: str) -> tuple[str, str | None]:
        """The cleaned rewrite and why it is refused (``None`` when it is accepted)."""
        candidate = clean_rewrite(answer, current)
        problem = check_rewrite(candidate, current, original, self.max_growth, self.min_similarity)
        if problem is None and candidate == current:
            problem = "the rewrite changed nothing"
        return candidate, None if problem is None else f"{step}: {problem}"

    async def _guard_lost(self, candidate: str, supported: Sequence[Triple], tally: _Tally) -> list[Triple]:
        """The previously supported triples that ``candidate`` no longer states (empty when the guard is off)."""
        if self.guard is None or not supported:
            return []
        claims = [self.grapheval.render_triple(t) for t in supported]
        tally.guard_checks += len(claims)
        try:
            scores = await self.grapheval.scorer.acheck([candidate] * len(claims), claims)
        except ScoringError as exc:
            tally.issues.append(f"guard: scoring failed, change not guarded: {exc}")
            return []
        threshold = self.grapheval.threshold
        return [t for t, s in zip(supported, scores) if s.p_unsupported > threshold]

    async def _call(
        self, messages: list[BaseMessage], config: RunnableConfig | None
    ) -> tuple[str | None, str | None, int]:
        """``(answer, error, calls)``: the chat model's answer, or ``None`` and the last error once retries ran out."""
        error: str | None = None
        llm = self.llm
        for attempt in range(self.max_retries + 1):
            try:
                message = await llm.ainvoke(messages, config=config)
            except Exception as exc:  # noqa: BLE001 - any provider error is retried, then recorded
                error = f"{type(exc).__name__}: {exc}"
                logger.warning("correction call failed (attempt %d): %s", attempt + 1, exc)
                if attempt < self.max_retries:
                    await asyncio.sleep(min(0.1 * 2**attempt, 2.0))
                continue
            return message_text(message), None, attempt + 1
        return None, error, self.max_retries + 1

    # ----------------------------------------------------------------- reports
    def _rouge(self, original: str, corrected: str) -> Any:
        return rouge_scores(original, corrected) if self.rouge else None

    def _error_report(
        self, row: Any, output_key: str, detection: Report, error: StageError | None
    ) -> CorrectionReport:
        output = (
            row.get(output_key)
            if isinstance(row, dict)
            else (row[1] if isinstance(row, (tuple, list)) and len(row) == 2 else None)
        )
        text = output.strip() if isinstance(output, str) else detection.output
        errors = list(detection.errors) + ([error] if error is not None else [])
        return CorrectionReport(
            original=text,
            corrected=text,
            method=self.method,
            status="error",
            flagged=detection.hallucinated,
            detection=detection,
            detection_llm_calls=_extraction_calls(detection),
            prompt_version=self.prompts.version,
            errors=errors,
            id=detection.id,
        )

    def __repr__(self) -> str:
        return (
            f"GraphCorrect(method={self.method!r}, max_rounds={self.max_rounds}, guard={self.guard!r}, "
            f"batch_step1={self.batch_step1})"
        )
