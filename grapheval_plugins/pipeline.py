"""GraphEval: wires extraction, checking and aggregation. One async path; sync wrappers call it."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig

from . import aggregate
from ._async import run_sync
from .cache import KGCache, MemoryKGCache, SQLiteKGCache
from .check.base import ClaimScore, Scorer
from .exceptions import ExtractionError, GraphEvalError, InputError, ScoringError
from .extract.extractor import TripleExtractor
from .extract.prompts import KG_PROMPT, KGPrompt
from .inputs import Sample, normalize_context, normalize_output, to_sample
from .locate import locate_triple
from .types import ClaimCheck, ExtractedRow, Extraction, Mode, Report, StageError, Triple

__all__ = ["GraphEval"]

logger = logging.getLogger(__name__)


def _progress(total: int, desc: str, enabled: bool):  # type: ignore[no-untyped-def]
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="row", disable=not enabled, leave=False)


class _CheckBatcher:
    """Gathers the claims of concurrent ``aevaluate`` calls into one scorer pass (one per event loop)."""

    def __init__(self, scorer: Scorer, max_wait_s: float) -> None:
        self.scorer = scorer
        self.max_wait_s = max_wait_s
        self._pending: list[tuple[list[str], list[str], asyncio.Future[list[ClaimScore]]]] = []
        self._flush_task: asyncio.Task[None] | None = None

    async def submit(self, contexts: list[str], claims: list[str]) -> list[ClaimScore]:
        future: asyncio.Future[list[ClaimScore]] = asyncio.get_running_loop().create_future()
        self._pending.append((contexts, claims, future))
        if self._flush_task is None or self._flush_task.done():
            self._flush_task = asyncio.ensure_future(self._flush())
        return await future

    async def _flush(self) -> None:
        # Loops until nothing is pending: a request submitted while a pass is running is served by the next
        # iteration (no new flush task is started while this one runs, and nothing else would serve it).
        while self._pending:
            await asyncio.sleep(self.max_wait_s)
            batch, self._pending = self._pending, []
            try:
                await self._serve(batch)
            except BaseException as exc:  # never leave a caller waiting on a future nobody will resolve
                for _, _, future in batch:
                    if not future.done():
                        if isinstance(exc, Exception):
                            future.set_exception(exc)
                        else:  # cancelled (loop shutdown, KeyboardInterrupt): the waiters are cancelled too
                            future.cancel()
                if not isinstance(exc, Exception):
                    raise

    async def _serve(self, batch: list[tuple[list[str], list[str], asyncio.Future[list[ClaimScore]]]]) -> None:
        contexts = [c for req in batch for c in req[0]]
        claims = [c for req in batch for c in req[1]]
        try:
            scores = await self.scorer.acheck(contexts, claims)
        except ScoringError:
            # Isolate the failing request(s): score each on its own.
            for ctxs, clms, future in batch:
                try:
                    result = await self.scorer.acheck(ctxs, clms)
                except ScoringError as exc:
                    if not future.done():
                        future.set_exception(exc)
                else:
                    if not future.done():
                        future.set_result(result)
            return
        start = 0
        for ctxs, _, future in batch:
            if not future.done():  # a caller cancelled while waiting
                future.set_result(scores[start : start + len(ctxs)])
            start += len(ctxs)


class GraphEval:
    """Knowledge-graph based hallucination detection (GraphEval, Sansford et al. 2024).

    1. **Extract**: one chat-model call turns the output (never the context) into ``[entity, relation, entity]``
       triples (prompt A).
    2. **Check**: each triple, read as a sentence, is scored against the context: P(unsupported).
    3. **Aggregate**: the output is a hallucination iff some triple's P(unsupported) > ``threshold``; the
       unsupported triples are the explanation. ``score = 1 − max P(unsupported)`` (1 = faithful).

    ``mode="raw"`` skips extraction and scores the whole output as one claim: the paper's baseline.

    Args:
        llm: a LangChain chat model, or a spec resolved by :func:`~grapheval_plugins.models.resolve_llm`
            (``"local:qwen2.5-coder-1.5b"``, ``"bedrock:<model id>"`` …). ``None``: the offline default.
            Resolved on first use, never in the constructor.
        scorer: a :class:`~grapheval_plugins.check.Scorer`, or a spec for
            :func:`~grapheval_plugins.models.resolve_scorer` (``"hhem"``, ``"trueteacher"``, ``"nli:<model>"``,
            ``"judge:local:qwen2.5-coder-1.5b"`` …). ``None``: the offline default.
        threshold: decision threshold on P(unsupported); the paper's 0.5 by default.
        mode: ``"graph"`` (GraphEval) or ``"raw"`` (whole output as one hypothesis).
        prompt: prompt A; see :mod:`grapheval_plugins.extract.prompts`.
        max_retries: extra extraction calls when an answer cannot be parsed or the call raises.
        cache: knowledge-graph cache: ``True`` (in memory, default), ``False``/``None`` (off), a path (SQLite
            file), or a :class:`~grapheval_plugins.cache.KGCache`.
        max_concurrency: chat-model calls in flight at once in batch runs.
        check_batch_rows: rows whose claims go to the scorer together in :meth:`evaluate_many`.
        render_triple: how a triple becomes the scorer's hypothesis (default: the paper's concatenation).
        locate: find each triple's character span in the output.
        show_progress: progress bars in batch runs (default: on for 2+ rows when attached to a terminal).

    Example:
        >>> from grapheval_plugins import GraphEval
        >>> from grapheval_plugins.testing import ScriptedChatModel, KeywordScorer
        >>> llm = ScriptedChatModel(responses=[
        ...     '<python>[["Marie Curie", "born in", "Warsaw"], ["Marie Curie", "won", "three Nobel Prizes"]]</python>'])
        >>> grapheval = GraphEval(llm=llm, scorer=KeywordScorer())
        >>> report = grapheval.evaluate(
        ...     context="Marie Curie was born in Warsaw. She won two Nobel Prizes.",
        ...     output="Marie Curie, born in Warsaw, won three Nobel Prizes.")
        >>> report.hallucinated
        True
        >>> [c.triple.as_list() for c in report.unsupported]
        [['Marie Curie', 'won', 'three Nobel Prizes']]
    """

    def __init__(
        self,
        llm: Any = None,
        scorer: Any = None,
        *,
        threshold: float = 0.5,
        mode: Mode = "graph",
        prompt: KGPrompt = KG_PROMPT,
        max_retries: int = 2,
        cache: KGCache | str | Path | bool | None = True,
        max_concurrency: int = 4,
        check_batch_rows: int = 32,
        render_triple: Callable[[Triple], str] = Triple.sentence,
        locate: bool = True,
        show_progress: bool | None = None,
        batch_wait_s: float = 0.02,
    ) -> None:
        if mode not in ("graph", "raw"):
            raise InputError("mode", f"must be 'graph' or 'raw', got {mode!r}")
        if not 0.0 <= threshold <= 1.0:
            raise InputError("threshold", f"must be in [0, 1], got {threshold!r}")
        if max_concurrency < 1 or check_batch_rows < 1:
            raise InputError("max_concurrency", "max_concurrency and check_batch_rows must be >= 1")
        self._llm_spec = llm
        self._scorer_spec = scorer
        self.threshold = threshold
        self.mode: Mode = mode
        self.prompt = prompt
        self.max_retries = max_retries
        self.cache = self._make_cache(cache)
        self.max_concurrency = max_concurrency
        self.check_batch_rows = check_batch_rows
        self.render_triple = render_triple
        self.locate = locate
        self.show_progress = show_progress
        self.batch_wait_s = batch_wait_s
        self._resolve_lock = threading.Lock()
        self._llm: Any = None
        self._scorer: Scorer | None = None
        self._extractor: TripleExtractor | None = None
        self._batchers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _CheckBatcher] = (
            weakref.WeakKeyDictionary()
        )

    @staticmethod
    def _make_cache(cache: KGCache | str | Path | bool | None) -> KGCache | None:
        if cache is True:
            return MemoryKGCache()
        if cache is False or cache is None:
            return None
        if isinstance(cache, (str, Path)):
            return SQLiteKGCache(cache)
        return cache

    # ----------------------------------------------------------------- models (resolved lazily)
    @property
    def llm(self) -> Any:
        """The chat model used for extraction (resolved on first access)."""
        if self._llm is None:
            with self._resolve_lock:
                if self._llm is None:
                    from .models import resolve_llm

                    self._llm = resolve_llm(self._llm_spec)
        return self._llm

    @property
    def scorer(self) -> Scorer:
        """The scorer (resolved on first access)."""
        if self._scorer is None:
            with self._resolve_lock:
                if self._scorer is None:
                    from .models import resolve_scorer

                    self._scorer = resolve_scorer(self._scorer_spec)
        return self._scorer

    @property
    def extractor(self) -> TripleExtractor:
        if self._extractor is None:
            llm = self.llm
            with self._resolve_lock:
                if self._extractor is None:
                    self._extractor = TripleExtractor(
                        llm, prompt=self.prompt, max_retries=self.max_retries, cache=self.cache
                    )
        return self._extractor

    def describe(self, *, load: bool = True) -> str:
        """``"<llm> + <scorer>"`` (or ``"raw + <scorer>"``): names every model a verdict depends on.

        ``load=False`` names them from what was given to the constructor (spec strings, or the objects' names)
        without loading anything; that name is the same before and after first use, so it suits cache keys.

        >>> GraphEval(scorer="hhem").describe(load=False)
        'local:qwen2.5-coder-1.5b + hhem'
        """
        if not load:
            from .extract.extractor import describe_llm
            from .models import DEFAULT_LLM, DEFAULT_SCORER

            if self.mode == "raw":
                llm = "raw"
            elif self._llm_spec is None or isinstance(self._llm_spec, str):
                llm = self._llm_spec or DEFAULT_LLM
            else:
                llm = describe_llm(self._llm_spec)
            scorer = self._scorer_spec
            if scorer is None or isinstance(scorer, str):
                scorer_name = scorer or DEFAULT_SCORER
            else:
                scorer_name = str(getattr(scorer, "name", None) or type(scorer).__name__)
            return f"{llm} + {scorer_name}"
        llm = "raw" if self.mode == "raw" else self.extractor.llm_id
        return f"{llm} + {self.scorer.name}"

    # ----------------------------------------------------------------- public API
    def evaluate(
        self, context: Any, output: Any, *, id: str | None = None, config: RunnableConfig | None = None
    ) -> Report:
        """Check one output against its context. See :meth:`aevaluate`."""
        return run_sync(self.aevaluate(context, output, id=id, config=config))

    async def aevaluate(
        self, context: Any, output: Any, *, id: str | None = None, config: RunnableConfig | None = None
    ) -> Report:
        """Check one output against its context.

        Concurrent calls on one event loop share scorer passes (their claims are batched together).

        Raises:
            InputError: the context or output is missing, empty or of the wrong type (the message names it).

        Stage failures (the chat model raising on every retry, the scorer failing) do not raise: the report
        carries them in ``errors`` with ``hallucinated=None``.
        """
        sample = Sample(normalize_context(context), normalize_output(output), id)
        t0 = time.perf_counter()
        extraction, claims, error = await self._extract_claims(sample, config)
        if error is not None:
            return self._error_report(sample, extraction, error, {"total": time.perf_counter() - t0})
        loop = asyncio.get_running_loop()
        batcher = self._batchers.get(loop)
        if batcher is None:
            batcher = self._batchers[loop] = _CheckBatcher(self.scorer, self.batch_wait_s)
        t1 = time.perf_counter()
        try:
            scores = await batcher.submit([sample.context] * len(claims), [c for c, _ in claims])
        except ScoringError as exc:
            err = StageError(stage="check", type=type(exc).__name__, message=str(exc))
            return self._error_report(sample, extraction, err, {"total": time.perf_counter() - t0})
        t2 = time.perf_counter()
        timings = {"extract": t1 - t0, "check": t2 - t1, "total": t2 - t0}
        return self._report(sample, extraction, claims, scores, timings)

    def evaluate_many(
        self,
        rows: Iterable[Any],
        *,
        context_key: str = "context",
        output_key: str = "output",
        id_key: str = "id",
        show_progress: bool | None = None,
        config: RunnableConfig | None = None,
    ) -> list[Report]:
        """Check many rows. See :meth:`aevaluate_many`."""
        return run_sync(
            self.aevaluate_many(
                rows, context_key=context_key, output_key=output_key, id_key=id_key,
                show_progress=show_progress, config=config,
            )
        )

    async def aevaluate_many(
        self,
        rows: Iterable[Any],
        *,
        context_key: str = "context",
        output_key: str = "output",
        id_key: str = "id",
        show_progress: bool | None = None,
        config: RunnableConfig | None = None,
    ) -> list[Report]:
        """Check many rows: mappings with ``context``/``output`` (and optional ``id``) keys, or pairs.

        Extraction calls run with at most ``max_concurrency`` in flight; the claims of ``check_batch_rows`` rows
        at a time go to the scorer in one batched pass. A bad row never stops the batch: its report carries the
        error (``errors``, ``hallucinated=None``). Reports come back in the order of ``rows``.
        """
        rows = list(rows)
        if show_progress is None:
            show_progress = self.show_progress
        if show_progress is None:
            import sys

            show_progress = len(rows) > 1 and sys.stderr.isatty()
        reports: list[Report | None] = [None] * len(rows)
        samples: list[tuple[int, Sample]] = []
        for i, row in enumerate(rows):
            try:
                samples.append((i, to_sample(row, i, context_key, output_key, id_key)))
            except InputError as exc:
                reports[i] = self._input_error_report(row, exc, output_key, id_key)

        # Stage 1: extraction, bounded concurrency.
        semaphore = asyncio.Semaphore(self.max_concurrency)
        bar = _progress(len(samples), "extract", bool(show_progress) and self.mode == "graph")

        async def extract(sample: Sample) -> tuple[Extraction | None, list[tuple[str, Triple | None]], StageError | None, float]:
            async with semaphore:
                t0 = time.perf_counter()
                result = await self._extract_claims(sample, config)
                bar.update(1)
                return (*result, time.perf_counter() - t0)

        try:
            extracted = await asyncio.gather(*(extract(s) for _, s in samples))
        finally:
            bar.close()

        # Stage 2: scoring, batched across rows.
        ready: list[tuple[int, Sample, Extraction | None, list[tuple[str, Triple | None]], float]] = []
        for (i, sample), (extraction, claims, error, seconds) in zip(samples, extracted):
            if error is not None:
                reports[i] = self._error_report(sample, extraction, error, {"extract": seconds, "total": seconds})
            else:
                ready.append((i, sample, extraction, claims, seconds))
        bar = _progress(len(ready), "check", bool(show_progress))
        try:
            for start in range(0, len(ready), self.check_batch_rows):
                group = ready[start : start + self.check_batch_rows]
                t0 = time.perf_counter()
                results = await self._check_group([(s, claims) for _, s, _, claims, _ in group])
                share = (time.perf_counter() - t0) / max(1, len(group))
                for (i, sample, extraction, claims, seconds), result in zip(group, results):
                    timings = {"extract": seconds, "check": share, "total": seconds + share}
                    if isinstance(result, StageError):
                        reports[i] = self._error_report(sample, extraction, result, timings)
                    else:
                        reports[i] = self._report(sample, extraction, claims, result, timings)
                bar.update(len(group))
        finally:
            bar.close()
        return [r for r in reports if r is not None]

    # ----------------------------------------------------------------- the two stages, one at a time
    def extract_rows(
        self,
        rows: Iterable[Any],
        *,
        context_key: str = "context",
        output_key: str = "output",
        id_key: str = "id",
        config: RunnableConfig | None = None,
        positions: Sequence[int] | None = None,
    ) -> list[Report | ExtractedRow]:
        """Stage 1 alone. See :meth:`aextract_rows`."""
        return run_sync(
            self.aextract_rows(
                rows, context_key=context_key, output_key=output_key, id_key=id_key, config=config,
                positions=positions,
            )
        )

    async def aextract_rows(
        self,
        rows: Iterable[Any],
        *,
        context_key: str = "context",
        output_key: str = "output",
        id_key: str = "id",
        config: RunnableConfig | None = None,
        positions: Sequence[int] | None = None,
    ) -> list[Report | ExtractedRow]:
        """The extraction stage of :meth:`aevaluate_many` on its own, for running the stages apart (e.g. on a cluster).

        Rows are read as in :meth:`aevaluate_many`, with at most ``max_concurrency`` chat-model calls in flight.
        A row that fails here (bad input, the chat model raising on every retry) comes back as its final
        :class:`~grapheval_plugins.types.Report`, the one :meth:`aevaluate_many` gives it; every other row as an
        :class:`~grapheval_plugins.types.ExtractedRow` for :meth:`acheck_rows`. Results are in the order of
        ``rows``. The scorer is not loaded. ``positions``: each row's index in the whole batch, for the messages
        of input errors (``rows[i]``) when ``rows`` is one slice of it (default: 0, 1, …).

        >>> from grapheval_plugins.testing import ScriptedChatModel, KeywordScorer
        >>> ge = GraphEval(llm=ScriptedChatModel(responses=['<python>[["Sky", "is", "green"]]</python>']),
        ...                scorer=KeywordScorer())
        >>> [pending] = ge.extract_rows([{"context": "The sky is blue.", "output": "The sky is green."}])
        >>> pending.claims[0][0]
        'Sky is green'
        >>> ge.check_rows([pending])[0].hallucinated
        True
        """
        rows = list(rows)
        where = list(range(len(rows))) if positions is None else list(positions)
        if len(where) != len(rows):
            raise InputError("positions", f"{len(where)} positions for {len(rows)} rows")
        results: list[Report | ExtractedRow | None] = [None] * len(rows)
        samples: list[tuple[int, Sample]] = []
        for i, row in enumerate(rows):
            try:
                samples.append((i, to_sample(row, where[i], context_key, output_key, id_key)))
            except InputError as exc:
                results[i] = self._input_error_report(row, exc, output_key, id_key)
        semaphore = asyncio.Semaphore(self.max_concurrency)

        async def extract(i: int, sample: Sample) -> None:
            async with semaphore:
                t0 = time.perf_counter()
                extraction, claims, error = await self._extract_claims(sample, config)
                seconds = time.perf_counter() - t0
            if error is not None:
                results[i] = self._error_report(sample, extraction, error, {"extract": seconds, "total": seconds})
            else:
                results[i] = ExtractedRow(
                    id=sample.id, context=sample.context, output=sample.output, extraction=extraction,
                    claims=claims, llm=None if self.mode == "raw" else self.extractor.llm_id,
                    extract_seconds=seconds,
                )

        await asyncio.gather(*(extract(i, s) for i, s in samples))
        return [r for r in results if r is not None]

    def check_rows(self, rows: Sequence[ExtractedRow]) -> list[Report]:
        """Stages 2 and 3 alone. See :meth:`acheck_rows`."""
        return run_sync(self.acheck_rows(rows))

    async def acheck_rows(self, rows: Sequence[ExtractedRow]) -> list[Report]:
        """Score and decide rows extracted by :meth:`aextract_rows` (possibly by another process).

        As in :meth:`aevaluate_many`: the claims of ``check_batch_rows`` rows at a time go to the scorer in one
        pass, a scorer failure fails only its own row, and the reports are those :meth:`aevaluate_many` gives
        (``llm`` names the chat model that extracted the row; the chat model is not loaded here).
        """
        reports: list[Report] = []
        for start in range(0, len(rows), self.check_batch_rows):
            group = rows[start : start + self.check_batch_rows]
            pairs = [(Sample(r.context, r.output, r.id), list(r.claims)) for r in group]
            t0 = time.perf_counter()
            results = await self._check_group(pairs)
            share = (time.perf_counter() - t0) / max(1, len(group))
            for row, (sample, claims), result in zip(group, pairs, results):
                timings = {"extract": row.extract_seconds, "check": share, "total": row.extract_seconds + share}
                if isinstance(result, StageError):
                    report = self._error_report(sample, row.extraction, result, timings)
                else:
                    report = self._report(sample, row.extraction, claims, result, timings)
                reports.append(report if report.llm == row.llm else report.model_copy(update={"llm": row.llm}))
        return reports

    # ----------------------------------------------------------------- stages
    async def _extract_claims(
        self, sample: Sample, config: RunnableConfig | None
    ) -> tuple[Extraction | None, list[tuple[str, Triple | None]], StageError | None]:
        """The claims to score: rendered triples, or the whole output (raw mode, or when nothing parsed)."""
        if self.mode == "raw":
            return None, [(sample.output, None)], None
        try:
            extraction = await self.extractor.aextract(sample.output, config=config)
        except ExtractionError as exc:
            return None, [], StageError(stage="extract", type=type(exc).__name__, message=str(exc))
        except GraphEvalError:
            raise
        if extraction.fallback or not extraction.triples:
            return extraction, [(sample.output, None)], None
        claims: list[tuple[str, Triple | None]] = []
        seen: set[str] = set()
        for triple in extraction.triples:
            claim = self.render_triple(triple)
            if claim not in seen:
                seen.add(claim)
                claims.append((claim, triple))
        return extraction, claims, None

    async def _check_group(
        self, group: Sequence[tuple[Sample, list[tuple[str, Triple | None]]]]
    ) -> list[list[ClaimScore] | StageError]:
        """Score a group of rows in one pass; on failure, row by row so one bad row fails alone."""
        contexts = [s.context for s, claims in group for _ in claims]
        claim_texts = [c for _, claims in group for c, _ in claims]
        try:
            scores = await self.scorer.acheck(contexts, claim_texts)
        except ScoringError:
            out: list[list[ClaimScore] | StageError] = []
            for sample, claims in group:
                try:
                    out.append(await self.scorer.acheck([sample.context] * len(claims), [c for c, _ in claims]))
                except ScoringError as exc:
                    out.append(StageError(stage="check", type=type(exc).__name__, message=str(exc)))
            return out
        results: list[list[ClaimScore] | StageError] = []
        start = 0
        for _, claims in group:
            results.append(scores[start : start + len(claims)])
            start += len(claims)
        return results

    # ----------------------------------------------------------------- reports
    def _names(self) -> tuple[str | None, str | None]:
        llm = None if self.mode == "raw" else (self._extractor.llm_id if self._extractor else None)
        scorer = self._scorer.name if self._scorer is not None else None
        return llm, scorer

    def _report(
        self,
        sample: Sample,
        extraction: Extraction | None,
        claims: list[tuple[str, Triple | None]],
        scores: list[ClaimScore],
        timings: dict[str, float],
    ) -> Report:
        checks: list[ClaimCheck] = []
        for (claim, triple), score in zip(claims, scores):
            span = None
            if self.locate:
                span = locate_triple(sample.output, triple) if triple is not None else (0, len(sample.output))
            checks.append(
                ClaimCheck(
                    claim=claim,
                    triple=triple,
                    p_unsupported=score.p_unsupported,
                    unsupported=score.p_unsupported > self.threshold,
                    evidence=score.chunk,
                    evidence_index=score.chunk_index,
                    span=span,
                )
            )
        ps = [c.p_unsupported for c in checks]
        llm, scorer = self._names()
        return Report(
            output=sample.output,
            mode=self.mode,
            threshold=self.threshold,
            hallucinated=aggregate.any_above(ps, self.threshold),
            score=aggregate.faithfulness_score(ps),
            claims=checks,
            extraction=extraction,
            llm=llm,
            scorer=scorer,
            timings=timings,
            id=sample.id,
        )

    def _input_error_report(self, row: Any, exc: InputError, output_key: str, id_key: str) -> Report:
        rid = row.get(id_key) if isinstance(row, dict) else None
        output = row.get(output_key) if isinstance(row, dict) else None
        return Report(
            output=output if isinstance(output, str) else "",
            mode=self.mode,
            threshold=self.threshold,
            id=None if rid is None else str(rid),
            errors=[StageError(stage="input", type="InputError", message=str(exc))],
        )

    def _error_report(
        self, sample: Sample, extraction: Extraction | None, error: StageError, timings: dict[str, float]
    ) -> Report:
        llm, scorer = self._names()
        return Report(
            output=sample.output,
            mode=self.mode,
            threshold=self.threshold,
            extraction=extraction,
            llm=llm,
            scorer=scorer,
            timings=timings,
            errors=[error],
            id=sample.id,
        )

    def __repr__(self) -> str:
        return f"GraphEval(mode={self.mode!r}, threshold={self.threshold})"
