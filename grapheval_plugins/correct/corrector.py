"""GraphCorrect: fix the triples GraphEval flags, then check the result again (the strategies: :mod:`.strategies`)."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import warnings
from collections.abc import Iterable, Sequence
from typing import Any, Literal, cast

from langchain_core.runnables import RunnableConfig

from .._async import run_sync
from .._progress import progress_bar, show_bars
from ..exceptions import InputError, MissingDependencyError, ModelLoadError, renamed
from ..inputs import PASSAGE_SEPARATOR, normalize_output, normalize_passages, to_sample
from ..messages import describe_llm
from ..pipeline import GraphEval
from ..retry import RetryPolicy
from ..types import ExtractedRow, Extraction, Report, StageError, StageUsage, Triple, total_usage
from ..usage import metered
from .guard import Guard, GuardMode, Tally
from .prompts import CORRECTION_PROMPTS, CorrectionPrompts
from .strategies import Editor, Round, strategy_for
from .text import _rouge_scorer, rouge_scores, word_diff
from .types import CorrectionMethod, CorrectionReport, CorrectionRound, CorrectionStatus, TripleChange

__all__ = ["STRATEGIES", "GraphCorrect", "GuardMode", "strategy_argument"]

logger = logging.getLogger(__name__)


class GraphCorrect:
    """Hallucination correction guided by GraphEval's knowledge graph (GraphCorrect, Sansford et al. 2024).

    The strategies and what each option does: ``docs/guides/correct.md``. A failed step never loses the output.

    Args:
        grapheval: the detector used to find what to correct and to re-check the result (default: ``GraphEval()``).
        llm: the chat model that corrects (a model or a spec for
            :func:`~grapheval_plugins.models.resolve_llm`); default: ``grapheval.llm``.
        method: deprecated alias of ``strategy`` (warns; ``GraphEval``'s decision rule is ``rule=``).
        evidence_sentences: how many sentences of the deciding passage step 1 is shown (``"evidence"``, constrained).
        direct_fallback: a round that changed nothing ends with the Direct Prompt (default: on for ``"evidence"`` only).
        max_retries: extra attempts when the chat model raises (not when it answers badly).
        prompts: the prompt set (default :data:`~grapheval_plugins.correct.prompts.CORRECTION_PROMPTS`).
        rouge: ROUGE-1/2/L (``rouge-score``): ``None`` (default) when installed, ``True`` on (or raise), ``False`` off.
        retry: the backoff between calls that raised (default: ``RetryPolicy`` with ``max_retries + 1`` attempts).
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
        >>> fixer = GraphCorrect(grapheval, rouge=False, strategy="paper")   # the paper's procedure
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
        strategy: CorrectionMethod = "constrained",
        max_rounds: int = 1,
        guard: GuardMode = False,
        batch_step1: bool = False,
        evidence_sentences: int = 3,
        direct_fallback: bool | None = None,
        max_growth: float = 1.5,
        min_similarity: float = 0.5,
        max_retries: int = 1,
        prompts: CorrectionPrompts = CORRECTION_PROMPTS,
        rouge: bool | None = None,
        max_concurrency: int | None = None,
        show_progress: bool | None = None,
        retry: RetryPolicy | None = None,
        method: CorrectionMethod | None = None,
    ) -> None:
        strategy = strategy_argument(strategy, method)
        if batch_step1 and strategy != "paper":
            raise InputError("batch_step1", f"applies to strategy='paper' only, not {strategy!r}")
        for name, count in (("evidence_sentences", evidence_sentences), ("max_rounds", max_rounds)):
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                raise InputError(name, f"must be an integer >= 1, got {count!r}")
        guard_mode = Guard.mode_of(guard)
        if not max_growth >= 1.0:
            raise InputError("max_growth", f"must be >= 1.0, got {max_growth!r}")
        if not 0.0 <= min_similarity <= 1.0:
            raise InputError("min_similarity", f"must be in [0, 1], got {min_similarity!r}")
        if max_retries < 0:
            raise InputError("max_retries", f"must be >= 0, got {max_retries!r}")
        if max_concurrency is not None and max_concurrency < 1:
            raise InputError("max_concurrency", f"must be >= 1, got {max_concurrency!r}")
        if not isinstance(prompts, CorrectionPrompts):
            raise InputError("prompts", f"expected a CorrectionPrompts, got {type(prompts).__name__}", reason="type")
        self.grapheval = grapheval if grapheval is not None else GraphEval()
        self._llm_spec = llm
        self._llm: Any = None
        self._resolve_lock = threading.Lock()
        self.strategy: CorrectionMethod = strategy
        self.max_rounds = max_rounds
        self.guard: Literal["reject", "flag"] | None = guard_mode
        self.batch_step1 = batch_step1
        self.evidence_sentences = evidence_sentences
        self.direct_fallback = (strategy == "evidence") if direct_fallback is None else bool(direct_fallback)
        self.max_growth = float(max_growth)
        self.min_similarity = float(min_similarity)
        self.max_retries = max_retries
        self.retry = retry if retry is not None else RetryPolicy.from_retries(max_retries)
        self.prompts = prompts
        self.rouge = rouge
        self._rouge_on: bool | None = rouge
        self.max_concurrency = max_concurrency
        self.show_progress = show_progress

    @property
    def method(self) -> CorrectionMethod:
        """Deprecated alias of :attr:`strategy` (warns)."""
        warnings.warn("GraphCorrect.method is deprecated: read GraphCorrect.strategy", DeprecationWarning, stacklevel=2)
        return self.strategy

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
        """``"<strategy> by <llm>; checked by <grapheval.describe()>"``: every model a correction depends on."""
        return f"{self.strategy} by {self.llm_id}; checked by {self.grapheval.describe()}"

    # ----------------------------------------------------------------- public API
    def correct(self, context: Any, output: Any, *, report: Report | None = None, id: str | None = None,
            config: RunnableConfig | None = None) -> CorrectionReport:
        """Correct one output. See :meth:`acorrect`."""
        return run_sync(self.acorrect(context, output, report=report, id=id, config=config))

    async def acorrect(self, context: Any, output: Any, *, report: Report | None = None, id: str | None = None,
            config: RunnableConfig | None = None) -> CorrectionReport:
        """Detect, correct and re-check one output.

        Args:
            context: the grounding context (a string, or a list of strings / Documents).
            report: GraphEval's report on this output, when already computed (detection is then not re-run).

        Raises:
            InputError: the context or output is unusable, or ``report`` was made for a different output.
            MissingDependencyError: ``rouge=True`` and ``rouge-score`` is not installed.
        """
        with metered() as meter:
            result = await self._acorrect(context, output, report=report, id=id, config=config)
        spent = meter.usage()
        if report is None and result.detection is not None:  # detection ran here: its calls are its report's
            spent = _without(spent, total_usage([result.detection.usage]))
        result.usage = {"correct": spent}
        return result

    async def _acorrect(
        self,
        context: Any,
        output: Any,
        *,
        report: Report | None,
        id: str | None,
        config: RunnableConfig | None,
    ) -> CorrectionReport:
        passages = normalize_passages(context)  # detection scores each passage on its own
        ctx = PASSAGE_SEPARATOR.join(passages)
        original = normalize_output(output)
        if report is not None:
            if not isinstance(report, Report):
                raise InputError("report", f"expected a Report, got {type(report).__name__}", reason="type")
            if report.output != original:
                raise InputError("report", "was made for a different output")
        t0 = time.perf_counter()
        if report is None:
            report = await self.grapheval.aevaluate(passages, original, id=id, config=config)
        t_detect = time.perf_counter() - t0
        rid = id if id is not None else report.id
        common = self._common(original, report, rid)
        if not report.hallucinated:  # detection failed (no verdict), or found nothing to correct
            ok = report.ok
            return CorrectionReport(
                **common,
                corrected=original,
                status="unflagged" if ok else "error",
                flagged=False if ok else None,
                passed=True if ok else None,
                rouge=self._rouge(original, original) if ok else None,
                errors=[] if ok else list(report.errors),
                timings={"detect": t_detect, "total": time.perf_counter() - t0},
            )

        tally = Tally()
        strategy = strategy_for(
            self.strategy, batch_step1=self.batch_step1, evidence_sentences=self.evidence_sentences,
            direct_fallback=self.direct_fallback,
        )
        llm = await asyncio.to_thread(lambda: self.llm)  # resolving a correction model never blocks the loop
        editor = Editor(
            llm=llm,
            prompts=self.prompts,
            retry=self.retry,
            guard=Guard(self.guard, self.grapheval),
            max_growth=self.max_growth,
            min_similarity=self.min_similarity,
        )
        current = original
        changes: list[TripleChange] = []
        rounds: list[CorrectionRound] = []
        recheck_calls = 0
        t_correct = t_recheck = 0.0
        final = report  # the latest verdict: detection, then each re-check
        for number in range(1, self.max_rounds + 1):
            before = current
            t1 = time.perf_counter()
            job = Round(ctx, original, current, final, number, tally, config, passages=tuple(passages))
            current, round_changes = await strategy.run_round(editor, job)
            t2 = time.perf_counter()
            t_correct += t2 - t1
            changes.extend(round_changes)
            if current == before:
                recheck = final  # same text: the verdict is the one we already have
            elif job.after_triples is not None:  # edited in place: score the triples it states, no extraction
                recheck = await self._recheck_in_place(
                    passages, current, job.after_triples, final, rid
                )
            else:
                recheck = await self.grapheval.aevaluate(passages, current, id=rid, config=config)
                recheck_calls += extraction_calls(recheck)
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

    def correct_many(self, rows: Iterable[Any], **options: Any) -> list[CorrectionReport]:
        """Correct many rows. See :meth:`acorrect_many`."""
        return run_sync(self.acorrect_many(rows, **options))

    async def acorrect_many(self, rows: Iterable[Any], *, context_key: str = "context", output_key: str = "output",
            id_key: str = "id", show_progress: bool | None = None,
            config: RunnableConfig | None = None) -> list[CorrectionReport]:
        """Detect, correct and re-check many rows: mappings with ``context``/``output`` (and ``id``) keys, or pairs.

        A failing row never stops the batch: its report has ``status="error"`` and the error in ``errors``.
        """
        rows = list(rows)
        if rows:
            await asyncio.to_thread(self.rouge_enabled)  # a missing extra asked for fails once, before any model work
        show_progress = show_bars(show_progress, self.show_progress, len(rows))
        detections = await self.grapheval.aevaluate_many(
            rows, context_key=context_key, output_key=output_key, id_key=id_key, show_progress=show_progress,
            config=config,
        )
        semaphore = asyncio.Semaphore(self.max_concurrency or self.grapheval.max_concurrency)
        bar = progress_bar(len(rows), "correct", enabled=show_progress)

        async def one(index: int, row: Any, detection: Report) -> CorrectionReport:
            try:
                if not detection.ok:
                    return self._error_report(row, output_key, detection, None)
                sample = to_sample(row, index, context_key, output_key, id_key)
                async with semaphore:
                    return await self.acorrect(
                        list(sample.passages), sample.output, report=detection, id=sample.id, config=config
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
            pairs = enumerate(zip(rows, detections, strict=True))  # GraphEval returns one report per row
            return list(await asyncio.gather(*(one(i, r, d) for i, (r, d) in pairs)))
        finally:
            bar.close()

    def _error_report(self, row: Any, output_key: str, detection: Report, error: StageError | None) -> CorrectionReport:
        """The report of a row that could not be corrected: the output unchanged, the errors recorded."""
        output = (
            row.get(output_key)
            if isinstance(row, dict)
            else (row[1] if isinstance(row, (tuple, list)) and len(row) == 2 else None)
        )
        text = output.strip() if isinstance(output, str) else detection.output
        return CorrectionReport(
            **self._common(text, detection, detection.id),
            corrected=text,
            status="error",
            flagged=detection.hallucinated,
            errors=list(detection.errors) + ([error] if error is not None else []),
        )

    def _common(self, original: str, detection: Report, rid: str | None) -> dict[str, Any]:
        """The fields of every report of a row: its output, the strategy, the detection, its calls, the id."""
        return {"original": original, "method": self.strategy, "detection": detection, "id": rid,
                "detection_llm_calls": extraction_calls(detection), "prompt_version": self.prompts.version}

    async def _recheck_in_place(
        self, passages: Sequence[str], output: str, triples: list[Triple], before: Report, rid: str | None
    ) -> Report:
        """The re-check of an output edited in place: the engine's own check of the triples it now states."""
        extraction = None if before.extraction is None else Extraction(
            triples=list(triples), fallback=not triples,
            issues=["re-check of an in-place edit: the previous triples with the changed ones replaced"],
        )
        row = ExtractedRow(id=rid, context=PASSAGE_SEPARATOR.join(passages), passages=list(passages), output=output,
                           extraction=extraction, claims=self.grapheval.claims_of(output, extraction), llm=before.llm)
        [report] = await self.grapheval.acheck_rows([row])
        return report

    # ----------------------------------------------------------------- reports
    def rouge_enabled(self) -> bool:
        """Whether ROUGE is computed: ``rouge`` as given, or with ``rouge=None`` whether ``rouge-score`` imports."""
        if self._rouge_on is not False:
            try:
                _rouge_scorer()
                self._rouge_on = True
            except MissingDependencyError:
                if self._rouge_on:  # rouge=True: asked for, so missing is an error
                    raise
                logger.info(
                    "ROUGE is off: rouge-score is not installed (pip install 'grapheval-plugins[correct]')"
                )
                self._rouge_on = False
        return self._rouge_on

    def _rouge(self, original: str, corrected: str) -> Any:
        return rouge_scores(original, corrected) if self.rouge_enabled() else None

    def __repr__(self) -> str:
        return (
            f"GraphCorrect(strategy={self.strategy!r}, max_rounds={self.max_rounds}, guard={self.guard!r}, "
            f"batch_step1={self.batch_step1})"
        )


STRATEGIES: tuple[CorrectionMethod, ...] = ("constrained", "paper", "evidence", "direct")
"""The correction strategies, by name (``GraphCorrect(strategy=...)``)."""


def strategy_argument(strategy: Any, method: Any = None) -> CorrectionMethod:
    """The correction strategy given as ``strategy=``, or as ``method=``, its deprecated old name (warns), checked;
    ``"graph"``, the old name of ``"paper"``, reads as ``"paper"`` (warns).

    >>> strategy_argument("paper"), strategy_argument("constrained", "constrained")
    ('paper', 'constrained')
    """
    field = "strategy" if method is None else "method"
    if method is not None:
        strategy = renamed("GraphCorrect", "method", method, "strategy", None if strategy == "constrained" else strategy,
                           note=", the correction strategy (GraphEval's decision rule is rule=...)",
                           same=lambda old, new: _canonical(old) == _canonical(new), stacklevel=4)
    if strategy == "graph":
        warnings.warn("GraphCorrect(strategy='graph') is deprecated: the paper's procedure is strategy='paper'",
                      DeprecationWarning, stacklevel=3)
    name = _canonical(strategy)
    if name in STRATEGIES:
        return cast(CorrectionMethod, name)
    raise InputError(field, f"must be one of {', '.join(map(repr, STRATEGIES))}, got {strategy!r}")


def _canonical(strategy: Any) -> Any:
    return "paper" if strategy == "graph" else strategy


def extraction_calls(report: Report | None) -> int:
    """The chat-model calls the extraction behind ``report`` made (0 for none, a cached graph or raw mode)."""
    return 0 if report is None or report.extraction is None else report.extraction.attempts


def _without(spent: StageUsage, part: StageUsage) -> StageUsage:
    """``spent`` less ``part`` (counted inside it): what the correction spent beyond its detection."""
    def less(a: int | None, b: int | None) -> int | None:
        return None if a is None or b is None else a - b

    cost = None if spent.cost is None else spent.cost - (part.cost or 0.0)
    return StageUsage(calls=spent.calls - part.calls, input_tokens=less(spent.input_tokens, part.input_tokens),
                      output_tokens=less(spent.output_tokens, part.output_tokens), cost=cost)
