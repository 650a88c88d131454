"""GraphEval: wires extraction, checking and aggregation. One async path; sync wrappers call it."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Hashable, Iterable, MutableMapping, Sequence
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from typing_extensions import deprecated

from . import aggregate, models
from ._async import run_sync
from ._progress import progress_bar, show_bars
from .cache import KGCache, MemoryKGCache, SQLiteKGCache, open_store
from .check.base import ClaimScore, Scorer
from .exceptions import ExtractionError, GraphEvalError, InputError, ScoringError, renamed
from .extract.extractor import TripleExtractor
from .extract.prompts import KG_PROMPT, KGPrompt
from .inputs import Sample, to_sample
from .locate import locate_triple
from .messages import describe_llm
from .retry import RetryPolicy
from .score_cache import CachedScorer, ScoreCache, make_score_cache
from .types import ClaimCheck, ExtractedRow, Extraction, Mode, Report, StageError, StageUsage, Triple
from .usage import metered, record

__all__ = ["GraphEval"]

Passages = tuple[str, ...]


_Request = tuple[list[Passages], list[str]]
"""One row's scorer input: ``(contexts, claims)``, one context per claim."""


_Scored = tuple[list[ClaimScore] | StageError, StageUsage]


async def _score_metered(scorer: Scorer, requests: Sequence[_Request]) -> list[_Scored]:
    """Per request, its scores or error (one joint pass, each alone if that fails) and its share of the usage."""
    results: list[list[ClaimScore] | StageError] = []
    with metered(detached=True) as meter:
        try:
            scores = await scorer.acheck([c for ctxs, _ in requests for c in ctxs],
                                         [c for _, clms in requests for c in clms])
        except ScoringError as exc:
            if len(requests) == 1:  # a lone request is not scored twice
                results.append(StageError(stage="check", type=type(exc).__name__, message=str(exc)))
            else:
                for ctxs, clms in requests:
                    try:
                        results.append(await scorer.acheck(ctxs, clms))
                    except ScoringError as row_exc:
                        results.append(StageError(stage="check", type=type(row_exc).__name__, message=str(row_exc)))
        else:
            each = iter(scores)
            results += [list(itertools.islice(each, len(ctxs))) for ctxs, _ in requests]
    return list(zip(results, meter.usage().split([len(clms) for _, clms in requests])))


def _p(score: ClaimScore) -> float | None:
    return None if score.error is not None else score.p_unsupported


class _CheckBatcher:
    """Gathers the claims of concurrent calls and of a batch's rows into shared scorer passes, per loop."""

    def __init__(self, scorer: Scorer, max_wait_s: float, max_claims: int) -> None:
        self.scorer = scorer
        self.max_wait_s = max_wait_s
        self.max_claims = max_claims
        self._pending: list[tuple[_Request, asyncio.Future[_Scored]]] = []
        self._pending_claims = 0
        self._full = asyncio.Event()
        self._flush_task: asyncio.Task[None] | None = None

    async def submit(self, contexts: list[Passages], claims: list[str]) -> _Scored:
        future: asyncio.Future[_Scored] = asyncio.get_running_loop().create_future()
        self._pending.append(((contexts, claims), future))
        self._pending_claims += len(claims)
        if self._pending_claims >= self.max_claims:
            self._full.set()
        if self._flush_task is None or self._flush_task.done():
            self._flush_task = asyncio.ensure_future(self._flush())
        return await future

    async def score(self, requests: Sequence[_Request]) -> list[_Scored]:
        return list(await asyncio.gather(*(self.submit(*request) for request in requests)))

    def _take(self) -> list[tuple[_Request, asyncio.Future[_Scored]]]:
        """The next pass: pending requests in order while their claims fit ``max_claims`` (a larger one alone)."""
        pending = [item for item in self._pending if not item[1].done()]  # drop callers that were cancelled
        cut, total = 0, 0
        for (_, claims), _ in pending:
            if cut and total + len(claims) > self.max_claims:
                break
            cut, total = cut + 1, total + len(claims)
        batch, self._pending = pending[:cut], pending[cut:]
        self._pending_claims = sum(len(req[1]) for req, _ in self._pending)
        if self._pending_claims < self.max_claims:
            self._full.clear()
        return batch

    async def _flush(self) -> None:
        # Loops until nothing is pending: no other flush task serves a request submitted meanwhile.
        while self._pending:
            if self._pending_claims < self.max_claims:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._full.wait(), self.max_wait_s)
            batch = self._take()
            if not batch:
                continue
            try:
                results = await _score_metered(self.scorer, [req for req, _ in batch])
            except Exception as exc:  # noqa: BLE001 - never leave a caller waiting on a future nobody resolves
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
            except BaseException:  # cancelled (loop shutdown, KeyboardInterrupt): every waiter is cancelled too
                for _, future in [*batch, *self._pending]:
                    future.cancel()
                self._pending, self._pending_claims = [], 0
                raise
            for (_, future), result in zip(batch, results):
                if not future.done():  # else the caller was cancelled while waiting
                    future.set_result(result)


ENGINES: dict[Hashable, GraphEval] = {}
"""The engines of :meth:`GraphEval.shared` over spec strings; ``ENGINES_BY_OBJECT``: over model objects."""
ENGINES_BY_OBJECT: weakref.WeakValueDictionary[Hashable, GraphEval] = weakref.WeakValueDictionary()
_ENGINES_LOCK = threading.Lock()


class GraphEval:
    """Knowledge-graph based hallucination detection (GraphEval, Sansford et al. 2024): the output's triples,
    each scored against the context, decided by a rule (the method: ``docs/concepts.md``).

    The defaults and what each option means: ``docs/concepts.md`` ("The defaults, in one place"; which model does
    what; the threshold; extraction fidelity).

    Args:
        llm: a LangChain chat model or a spec (``docs/scorers.md``); resolved on first use.
        scorer: a :class:`~grapheval_plugins.check.Scorer` or a spec; ``None``: an LLM judge over ``llm`` when
            given, else the offline default. Specs load once per process.
        prompt: prompt A; see :mod:`grapheval_plugins.extract.prompts`.
        fidelity: ``"drop"``, ``"off"`` or ``"auto"``: see :meth:`fidelity_in_force`.
        check_batch_rows: rows whose claims go to the scorer together in :meth:`evaluate_many`.
        max_batch_claims: most claims in one scorer pass (a single row's claims are never split).
        render_triple: how a triple becomes the scorer's hypothesis (default: the paper's concatenation).
        locate: find each triple's character span in the output.
        show_progress: progress bars in batch runs (default: on for 2+ rows on a terminal).
        batch_wait_s: how long a scorer pass waits for more claims after the first.
        retry: the backoff of extraction calls that raised (:class:`~grapheval_plugins.retry.RetryPolicy`).

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
        threshold: float | None = None,
        hallucination_threshold: float | None = None,
        mode: Mode = "graph",
        rule: aggregate.RuleLike = "hybrid",
        method: aggregate.RuleLike | None = None,
        hybrid_weights: aggregate.HybridWeights | None = None,
        prompt: KGPrompt = KG_PROMPT,
        max_retries: int = 2,
        cache: KGCache | str | Path | bool | None = True,
        score_cache: ScoreCache | str | Path | bool | None = None,
        fidelity: aggregate.FidelityOption = "auto",
        max_concurrency: int = 4,
        check_batch_rows: int = 32,
        render_triple: Callable[[Triple], str] = Triple.sentence,
        locate: bool = True,
        show_progress: bool | None = None,
        batch_wait_s: float = 0.02,
        max_batch_claims: int = 256,
        retry: RetryPolicy | None = None,
    ) -> None:
        if mode not in ("graph", "raw"):
            raise InputError("mode", f"must be 'graph' or 'raw', got {mode!r}")
        decision_rule = aggregate.get_rule(aggregate.rule_argument(rule, method, "GraphEval"))
        if fidelity not in ("auto", "off", "drop"):
            raise InputError("fidelity", f"must be 'auto', 'off' or 'drop', got {fidelity!r}")
        given = renamed("GraphEval", "threshold", threshold, "hallucination_threshold", hallucination_threshold,
                        note=", the P(unsupported) above which a claim is unsupported (a host's own 'threshold' may "
                        "mean something else)")
        field = "hallucination_threshold" if threshold is None else "threshold"
        value = aggregate.DEFAULT_THRESHOLD if given is None else aggregate.check_threshold(given, field)
        if max_concurrency < 1 or check_batch_rows < 1:
            raise InputError("max_concurrency", "max_concurrency and check_batch_rows must be >= 1")
        if isinstance(max_batch_claims, bool) or not isinstance(max_batch_claims, int) or max_batch_claims < 1:
            raise InputError("max_batch_claims", f"must be an integer >= 1, got {max_batch_claims!r}")
        self._llm_spec = llm
        self._scorer_spec = scorer
        self._hallucination_threshold = value
        self.mode: Mode = mode
        self.rule: aggregate.DecisionRule = decision_rule
        self.hybrid_weights = hybrid_weights
        self.prompt = prompt
        self.max_retries = max_retries
        self.cache = open_store(cache, MemoryKGCache, SQLiteKGCache)
        self.score_cache = make_score_cache(score_cache)
        self.fidelity: aggregate.FidelityOption = fidelity
        self.max_concurrency = max_concurrency
        self.check_batch_rows = check_batch_rows
        self.render_triple = render_triple
        self.locate = locate
        self.show_progress = show_progress
        self.batch_wait_s = batch_wait_s
        self.max_batch_claims = max_batch_claims
        self.retry = retry
        self._resolve_lock = threading.RLock()  # the extractor resolves the llm under it
        self._origin: GraphEval | None = None
        self._views: dict[float, GraphEval] = {}
        self._llm: Any = None
        self._scorer: Scorer | None = None
        self._extractor: TripleExtractor | None = None
        self._batchers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _CheckBatcher] = (
            weakref.WeakKeyDictionary()
        )

    @classmethod
    def shared(
        cls,
        llm: Any = None,
        scorer: Any = None,
        *,
        mode: Mode = "graph",
        rule: aggregate.RuleLike = "hybrid",
        hallucination_threshold: float | None = None,
        method: aggregate.RuleLike | None = None,
    ) -> GraphEval:
        """The process-wide engine for these models and rule, which every host adapter uses; nothing loads yet.

        >>> GraphEval.shared(scorer="hhem") is GraphEval.shared(scorer="hhem:vectara/hallucination_evaluation_model")
        True
        """
        decision_rule = aggregate.get_rule(aggregate.rule_argument(rule, method, "GraphEval.shared"))
        judge = models.scorer_for(llm, scorer)
        key = (
            models.DEFAULT_LLM if llm is None else llm.strip() if isinstance(llm, str) else ("object", id(llm)),
            models.scorer_key(judge) if judge is None or isinstance(judge, str) else ("object", id(judge)),
            mode,
            decision_rule,
        )
        # Over spec strings (compared by value) for the process, over model objects (by identity) while held.
        by_value = all(spec is None or isinstance(spec, str) for spec in (llm, scorer))
        store: MutableMapping[Hashable, GraphEval] = ENGINES if by_value else ENGINES_BY_OBJECT
        with _ENGINES_LOCK:
            engine = store.get(key)
            if engine is None:
                engine = store[key] = cls(llm=llm, scorer=scorer, mode=mode, rule=decision_rule)
        return engine.with_options(hallucination_threshold=hallucination_threshold)

    def with_options(self, *, hallucination_threshold: float | None = None) -> GraphEval:
        """This engine at another hallucination threshold, sharing its models, caches and scorer passes.

        >>> from grapheval_plugins.testing import KeywordScorer
        >>> engine = GraphEval(scorer=KeywordScorer())
        >>> strict = engine.with_options(hallucination_threshold=0.2)
        >>> strict.hallucination_threshold, engine.hallucination_threshold, strict.scorer is engine.scorer
        (0.2, 0.5, True)
        """
        if hallucination_threshold is None:
            return self
        value = aggregate.check_threshold(hallucination_threshold)
        origin = self._origin or self
        if value == origin.hallucination_threshold:
            return origin
        with origin._resolve_lock:
            view = origin._views.get(value)
            if view is None:
                view = copy.copy(origin)  # shares the cache, the resolution lock and the per-loop batchers
                view._hallucination_threshold = value
                view._origin = origin  # models resolve (once) on the origin
                view._views = {}
                origin._views[value] = view
        return view

    @property
    def hallucination_threshold(self) -> float:
        """Read-only (``docs/concepts.md#the-threshold``): another threshold is another view, :meth:`with_options`."""
        return self._hallucination_threshold

    @hallucination_threshold.setter
    def hallucination_threshold(self, value: float) -> None:
        raise AttributeError(
            "GraphEval.hallucination_threshold is read-only (the engine may be shared by several adapters): "
            f"use engine.with_options(hallucination_threshold={value!r}) for an engine deciding at that threshold"
        )

    @property
    @deprecated("GraphEval.threshold is deprecated: read hallucination_threshold")
    def threshold(self) -> float:
        """Deprecated alias of :attr:`hallucination_threshold` (read-only)."""
        return self._hallucination_threshold

    # ----------------------------------------------------------------- models (resolved lazily)
    def _resolved(self, name: str, resolve: Callable[[], Any]) -> Any:
        if getattr(self, f"_{name}") is None:
            if self._origin is not None:
                setattr(self, f"_{name}", getattr(self._origin, name))
            else:
                with self._resolve_lock:
                    if getattr(self, f"_{name}") is None:
                        setattr(self, f"_{name}", resolve())
        return getattr(self, f"_{name}")

    @property
    def llm(self) -> Any:
        """The chat model used for extraction (resolved on first access)."""
        return self._resolved("llm", lambda: models.resolve_llm(self._llm_spec))

    @property
    def scorer(self) -> Scorer:
        """The scorer (resolved on first access)."""
        scorer: Scorer = self._resolved(
            "scorer", lambda: models.shared_scorer(models.scorer_for(self._llm_spec, self._scorer_spec)))
        return scorer

    @property
    def extractor(self) -> TripleExtractor:
        """The triple extractor over :attr:`llm` (made on first access)."""
        extractor: TripleExtractor = self._resolved("extractor", lambda: TripleExtractor(
            self.llm, prompt=self.prompt, max_retries=self.max_retries, cache=self.cache, retry=self.retry))
        return extractor

    async def _aget(self, name: str) -> Any:
        """The model property ``name``, resolved in a worker thread the first time (never blocking the loop)."""
        got = getattr(self, f"_{name}")
        return got if got is not None else await asyncio.to_thread(getattr, self, name)

    async def _batcher(self) -> _CheckBatcher:
        """The running loop's batcher (futures belong to their loop), over :attr:`scorer` behind the score cache."""
        loop = asyncio.get_running_loop()
        batcher = self._batchers.get(loop)
        if batcher is None:
            scorer: Scorer = await self._aget("scorer")
            if self.score_cache is not None:
                scorer = CachedScorer(scorer, self.score_cache)
            new = _CheckBatcher(scorer, self.batch_wait_s, self.max_batch_claims)
            batcher = self._batchers.setdefault(loop, new)  # another call may have made one meanwhile
        return batcher

    def describe(self, *, load: bool = True) -> str:
        """``"<llm> + <scorer>"`` (or ``"raw + <scorer>"``); ``load=False`` names them from the constructor's
        arguments without loading anything (the same before and after first use).

        >>> GraphEval(scorer="hhem").describe(load=False)
        'local:qwen2.5-coder-1.5b + hhem'
        """
        if self.mode == "raw":
            llm = "raw"
        elif load:
            llm = self.extractor.llm_id
        elif self._llm_spec is None or isinstance(self._llm_spec, str):
            llm = self._llm_spec or models.DEFAULT_LLM
        else:
            llm = describe_llm(self._llm_spec)
        if load:
            return f"{llm} + {self.scorer.name}"
        from .check.llm_judge import is_chat_model

        scorer = models.scorer_for(self._llm_spec, self._scorer_spec)
        if isinstance(scorer, str):
            return f"{llm} + {scorer}"
        if not isinstance(scorer, Scorer) and is_chat_model(scorer):  # becomes an LLMJudge of this name
            return f"{llm} + judge:{describe_llm(getattr(scorer, 'bound', scorer))}"
        return f"{llm} + {getattr(scorer, 'name', None) or type(scorer).__name__}"

    @property
    def method(self) -> str:
        """Deprecated (warns): ``decision_rule()[0].name``."""
        warnings.warn("GraphEval.method is deprecated: read engine.decision_rule()[0].name (the rule that decides) "
                      "or engine.rule.name (the rule asked for)", DeprecationWarning, stacklevel=2)
        return self.decision_rule()[0].name

    def decision_rule(self) -> tuple[aggregate.DecisionRule, aggregate.HybridWeights | None]:
        """The rule deciding this engine's rows, and its weights (``docs/concepts.md#which-rule-decides-your-rows``).

        >>> GraphEval(scorer="hhem").decision_rule()[0].name
        'paper'
        """
        weights = self.decision_weights()
        if self.mode == "raw" or (self.rule.needs.weights and weights is None):
            return aggregate.PAPER, None
        return self.rule, weights

    def decision_weights(self) -> aggregate.HybridWeights | None:
        """The weights of this engine's rule (``hybrid_weights``, else fitted for its scorer, prompt and fidelity);
        ``None`` when the rule needs none or none are fitted. Nothing loads.

        >>> GraphEval().decision_weights().fitted_on.startswith("summeval+qags_c+qags_x")
        True
        >>> GraphEval(scorer="hhem").decision_weights() is None
        True
        """
        if self.mode == "raw" or not self.rule.needs.weights:
            return None
        if self.hybrid_weights is not None:
            return self.hybrid_weights
        return aggregate.fitted_weights(self._scorer_name(), self.prompt.version, self.fidelity_in_force(),
                                        self._scorer_fingerprint)

    def _scorer_fingerprint(self) -> str | None:
        try:
            return self.scorer.fingerprint()
        except GraphEvalError:
            return None

    def _scorer_name(self) -> str:
        return self._scorer.name if self._scorer is not None else self.describe(load=False).split(" + ", 1)[1]

    def fidelity_in_force(self) -> aggregate.Fidelity:
        """``fidelity`` here: ``"auto"`` is ``"drop"`` where the weights in force were fitted with it (docs/concepts.md).

        >>> GraphEval().fidelity_in_force(), GraphEval(rule="paper").fidelity_in_force()
        ('drop', 'off')
        >>> GraphEval(scorer="hhem").fidelity_in_force(), GraphEval(fidelity="drop", scorer="hhem").fidelity_in_force()
        ('off', 'drop')
        """
        if self.fidelity != "auto":
            return self.fidelity
        if self.mode == "raw" or not self.rule.needs.weights or self.hybrid_weights is not None:
            return "off"
        fitted = aggregate.fitted_weights(self._scorer_name(), self.prompt.version, "drop", self._scorer_fingerprint)
        return "drop" if fitted is not None else "off"

    # ----------------------------------------------------------------- public API
    def evaluate(
        self, context: Any, output: Any, *, id: str | None = None, config: RunnableConfig | None = None
    ) -> Report:
        """Check one output against its context. See :meth:`aevaluate`."""
        return run_sync(self.aevaluate(context, output, id=id, config=config))

    async def aevaluate(
        self, context: Any, output: Any, *, id: str | None = None, config: RunnableConfig | None = None
    ) -> Report:
        """Check one output against its context; concurrent calls share scorer passes. Stage failures do not
        raise: the report carries them (``errors``, ``hallucinated=None``).

        Raises:
            InputError: the context or output is missing, empty or of the wrong type.
        """
        row = await self._extract_row(Sample.of(context, output, id), config)
        if isinstance(row, Report):
            return row
        [report] = await self._check_group([row])
        return report

    def evaluate_many(self, rows: Iterable[Any], **options: Any) -> list[Report]:
        """Check many rows. See :meth:`aevaluate_many`."""
        return run_sync(self.aevaluate_many(rows, **options))

    async def aevaluate_many(self, rows: Iterable[Any], *, context_key: str = "context", output_key: str = "output",
            id_key: str = "id", show_progress: bool | None = None, config: RunnableConfig | None = None) -> list[Report]:
        """Check many rows (mappings with ``context``/``output``/``id`` keys, or pairs), reports in order.
        Extraction runs ``max_concurrency`` at a time, then ``check_batch_rows`` rows per scorer pass; with a scorer
        that :attr:`~grapheval_plugins.check.Scorer.overlaps_extraction` (the local judge), each row is checked alone
        instead, in order, as soon as it is extracted, while the next rows are. A bad row's report carries its error."""
        rows = list(rows)
        show_progress = show_bars(show_progress, self.show_progress, len(rows))
        options: dict[str, Any] = {"context_key": context_key, "output_key": output_key, "id_key": id_key,
                                   "config": config}
        if self.mode == "graph" and len(rows) > 1 and await self._overlaps_extraction():
            return await self._aevaluate_overlapped(rows, options, show_progress)
        with progress_bar(len(rows), "extract", enabled=show_progress and self.mode == "graph") as bar:
            staged = await self.aextract_rows(rows, **options, on_row=lambda i, result: bar.update(1))
        pending = [r for r in staged if isinstance(r, ExtractedRow)]
        with progress_bar(len(pending), "check", enabled=show_progress) as bar:
            checked = iter(await self.acheck_rows(pending, on_group=bar.update))
        return [next(checked) if isinstance(r, ExtractedRow) else r for r in staged]

    async def _overlaps_extraction(self) -> bool:
        try:
            scorer: Scorer = await self._aget("scorer")
        except Exception:  # noqa: BLE001 - the check stage reports it, row by row
            return False
        return bool(scorer.overlaps_extraction)

    async def _aevaluate_overlapped(self, rows: list[Any], options: dict[str, Any], show_progress: bool) -> list[Report]:
        """:meth:`aevaluate_many` checking each row alone, in order, while the extraction of the next goes on."""
        ready: list[asyncio.Future[Report | ExtractedRow]] = [asyncio.get_running_loop().create_future() for _ in rows]
        reports: list[Report] = []
        with progress_bar(len(rows), "extract", enabled=show_progress) as extract_bar, \
                progress_bar(len(rows), "check", enabled=show_progress) as check_bar:

            def extracted(i: int, result: Report | ExtractedRow) -> None:
                extract_bar.update(1)
                ready[i].set_result(result)

            extraction = asyncio.ensure_future(self.aextract_rows(rows, **options, on_row=extracted))
            try:
                for future in ready:
                    either: list[asyncio.Future[Any]] = [future, extraction]
                    await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
                    if not future.done():
                        extraction.result()  # the error that stopped the extraction (else every row was ready)
                    staged = future.result()
                    reports += await self._check_group([staged]) if isinstance(staged, ExtractedRow) else [staged]
                    check_bar.update(1)
                await extraction
            finally:
                if not extraction.done():
                    extraction.cancel()
                    await asyncio.gather(extraction, return_exceptions=True)
        return reports

    # ----------------------------------------------------------------- the two stages, one at a time
    def extract_rows(self, rows: Iterable[Any], **options: Any) -> list[Report | ExtractedRow]:
        """Stage 1 alone. See :meth:`aextract_rows`."""
        return run_sync(self.aextract_rows(rows, **options))

    async def aextract_rows(
        self,
        rows: Iterable[Any],
        *,
        context_key: str = "context",
        output_key: str = "output",
        id_key: str = "id",
        config: RunnableConfig | None = None,
        positions: Sequence[int] | None = None,
        on_row: Callable[[int, Report | ExtractedRow], Any] | None = None,
    ) -> list[Report | ExtractedRow]:
        """The extraction stage of :meth:`aevaluate_many` alone: a row that fails here comes back as its final
        :class:`~grapheval_plugins.types.Report`, every other as an :class:`~grapheval_plugins.types.ExtractedRow`
        for :meth:`acheck_rows`. ``positions``: the rows' indices in the whole batch, for input-error messages;
        ``on_row(i, result)`` is called as each row ``rows[i]`` is done.

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
                output, rid = (row.get(output_key), row.get(id_key)) if isinstance(row, dict) else (None, None)
                report = results[i] = Report(
                    output=output if isinstance(output, str) else "", mode=self.mode,
                    hallucination_threshold=self.hallucination_threshold, id=None if rid is None else str(rid),
                    errors=[StageError(stage="input", type="InputError", message=str(exc))],
                )
                if on_row is not None:
                    on_row(i, report)
        semaphore = asyncio.Semaphore(self.max_concurrency)

        async def extract(i: int, sample: Sample) -> None:
            async with semaphore:
                result = results[i] = await self._extract_row(sample, config)
            if on_row is not None:
                on_row(i, result)

        tasks = [asyncio.ensure_future(extract(i, s)) for i, s in samples]
        try:
            await asyncio.gather(*tasks)
        except BaseException:  # not a row's error (on_row raised, a model failed to load): stop the other rows
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        return [r for r in results if r is not None]

    def check_rows(self, rows: Sequence[ExtractedRow], **options: Any) -> list[Report]:
        """Stages 2 and 3 alone. See :meth:`acheck_rows`."""
        return run_sync(self.acheck_rows(rows, **options))

    async def acheck_rows(
        self, rows: Sequence[ExtractedRow], *, on_group: Callable[[int], Any] | None = None
    ) -> list[Report]:
        """Score and decide rows from :meth:`aextract_rows` (maybe another process's): the reports
        :meth:`aevaluate_many` gives; ``on_group(n)`` is called after each scorer pass of ``n`` rows."""
        reports: list[Report] = []
        for start in range(0, len(rows), self.check_batch_rows):
            group = rows[start : start + self.check_batch_rows]
            reports += await self._check_group(group)
            if on_group is not None:
                on_group(len(group))
        return reports

    # ----------------------------------------------------------------- stages
    async def _extract_row(self, sample: Sample, config: RunnableConfig | None) -> Report | ExtractedRow:
        """Stage 1 for one row: its claims and extraction usage, or its final report when extraction failed."""
        t0 = time.perf_counter()
        with metered() as meter:
            extraction, claims, error = await self._extract_claims(sample, config)
        seconds = time.perf_counter() - t0
        usage = {} if self.mode == "raw" else {"extract": meter.usage()}
        if error is not None:  # the row never reached the scorer: no scorer named, loaded yet or not
            return self._new_report(sample, extraction, {"extract": seconds, "total": seconds}, errors=[error],
                                    llm=self._extractor.llm_id if self._extractor is not None else None, usage=usage)
        return ExtractedRow(
            id=sample.id, context=sample.context, passages=list(sample.passages), output=sample.output,
            extraction=extraction, claims=claims, llm=None if self.mode == "raw" else self.extractor.llm_id,
            extract_seconds=seconds, usage=usage,
        )

    async def _extract_claims(
        self, sample: Sample, config: RunnableConfig | None
    ) -> tuple[Extraction | None, list[tuple[str, Triple | None]], StageError | None]:
        if self.mode == "raw":
            return None, self.claims_of(sample.output, None), None
        try:
            extractor: TripleExtractor = await self._aget("extractor")
            extraction = await extractor.aextract(sample.output, config=config)
        except ExtractionError as exc:
            return None, [], StageError(stage="extract", type=type(exc).__name__, message=str(exc))
        return extraction, self.claims_of(sample.output, extraction), None

    def claims_of(self, output: str, extraction: Extraction | None) -> list[tuple[str, Triple | None]]:
        """What the check stage scores: each distinct triple rendered, then the whole output when the rule or
        fidelity reads it; the whole output alone when there is no triple.

        >>> from grapheval_plugins.testing import KeywordScorer
        >>> GraphEval(scorer=KeywordScorer(), mode="raw").claims_of("The sky is green.", None)
        [('The sky is green.', None)]
        """
        if extraction is None or extraction.fallback or not extraction.triples:
            return [(output, None)]
        first: dict[str, Triple] = {}
        for triple in extraction.triples:
            first.setdefault(self.render_triple(triple), triple)
        claims: list[tuple[str, Triple | None]] = list(first.items())
        if self.decision_rule()[0].needs.whole_output:
            claims.append((output, None))  # last: the scorer reads it after the triples, context reused
        return self._with_whole_output(output, claims)

    def _with_whole_output(self, output: str, claims: Sequence[tuple[str, Triple | None]]) -> list[tuple[str, Triple | None]]:
        """``claims``, with the whole output added last when fidelity may need it (its fallback) and it is missing."""
        out = list(claims)
        if self.fidelity_in_force() == "drop" and out and all(t is not None for _, t in out):
            out.append((output, None))
        return out

    async def _check_group(self, rows: Sequence[ExtractedRow]) -> list[Report]:
        """Stages 2 and 3 for rows scored together: their claims, then the fidelity round trips."""
        pairs = [(Sample(r.context, r.output, r.id, tuple(r.passages)), self._with_whole_output(r.output, r.claims))
                 for r in rows]
        score = (await self._batcher()).score
        t0 = time.perf_counter()
        scored = await score([([sample.passages] * len(claims), [c for c, _ in claims]) for sample, claims in pairs])
        results: list[tuple[list[ClaimScore], dict[int, ClaimScore]] | StageError] = [
            (scores, {}) if not isinstance(scores, StageError) else scores for scores, _ in scored
        ]
        usages: list[dict[str, StageUsage]] = [{"check": share} for _, share in scored]
        while self.fidelity_in_force() == "drop":  # the triples to score against their output next, per row
            todo: list[tuple[int, list[int]]] = []
            for row, result in enumerate(results):
                if not isinstance(result, StageError):
                    p_context = [None if t is None else _p(score) for (_, t), score in zip(pairs[row][1], result[0])]
                    p_output = {i: _p(score) for i, score in result[1].items()}
                    if indices := aggregate.fidelity_to_check(p_context, p_output, self.hallucination_threshold):
                        todo.append((row, indices))
            if not todo:
                break
            requests: list[_Request] = [
                ([(pairs[row][0].output,)] * len(indices), [pairs[row][1][i][0] for i in indices])
                for row, indices in todo
            ]
            for (row, indices), (got, share) in zip(todo, await score(requests)):
                usages[row]["fidelity"] = usages[row].get("fidelity", StageUsage()) + share
                result = results[row]
                if isinstance(got, StageError):
                    results[row] = got
                elif not isinstance(result, StageError):
                    result[1].update(zip(indices, got))
        seconds = (time.perf_counter() - t0) / max(1, len(rows))
        reports: list[Report] = []
        scorer = self._scorer.name if self._scorer is not None else None
        for extracted, (sample, claims), result, usage in zip(rows, pairs, results, usages):
            record(sum(usage.values(), StageUsage()))
            timings = {"extract": extracted.extract_seconds, "check": seconds, "total": extracted.extract_seconds + seconds}
            named: dict[str, Any] = {"llm": extracted.llm, "scorer": scorer, "usage": {**extracted.usage, **usage}}
            if isinstance(result, StageError):
                reports.append(self._new_report(sample, extracted.extraction, timings, errors=[result], **named))
            else:
                reports.append(self._report(sample, extracted.extraction, claims, *result, timings, **named))
        return reports

    # ----------------------------------------------------------------- reports
    def _report(
        self,
        sample: Sample,
        extraction: Extraction | None,
        claims: list[tuple[str, Triple | None]],
        scores: list[ClaimScore],
        round_trip: dict[int, ClaimScore],
        timings: dict[str, float],
        **named: Any,
    ) -> Report:
        checks: list[ClaimCheck] = []
        unjudged: list[StageError] = []
        dropped: list[str] = []  # fidelity: the triples their own output does not support
        for i, ((claim, triple), score) in enumerate(zip(claims, scores)):
            p_output = _p(round_trip[i]) if i in round_trip else None
            if triple is not None and not aggregate.faithful_to_output(p_output):
                dropped.append(f"fidelity: dropped {triple.as_list()}: the output does not support it "
                               f"(P(unsupported) {p_output:.3f} > {aggregate.FIDELITY_THRESHOLD})")
                continue
            if score.error is not None:  # the scorer could not judge this claim: an error, not a verdict
                unjudged.append(StageError(stage="check", type="ScoringError", message=f"{claim!r}: {score.error}"))
                continue
            span = None
            if self.locate:
                span = locate_triple(sample.output, triple) if triple is not None else (0, len(sample.output))
            checks.append(
                ClaimCheck(
                    claim=claim,
                    triple=triple,
                    p_unsupported=score.p_unsupported,
                    unsupported=score.p_unsupported > self.hallucination_threshold,
                    evidence=score.chunk,
                    evidence_index=score.chunk_index,
                    evidence_passage=score.passage_index,
                    span=span,
                )
            )
        n_triples = sum(1 for _, t in claims if t is not None)
        if dropped and len(dropped) == n_triples:
            dropped.append(f"fidelity: all {n_triples} triple(s) dropped; the whole output is decided as one claim")
        if extraction is not None and dropped:
            extraction = extraction.model_copy(update={"issues": [*extraction.issues, *dropped]})
        rule, weights = self.decision_rule()
        whole_output: ClaimCheck | None = None
        if any(c.triple is not None for c in checks):
            # The whole output's claim is a rule's input, not a claim that explains the verdict.
            whole_output = next((c for c in checks if c.triple is None), None) if rule.needs.whole_output else None
            checks = [c for c in checks if c.triple is not None]
        decision = rule.decide(checks, threshold=self.hallucination_threshold, whole_output=whole_output,
                               weights=weights)
        # An unjudged claim (the whole output's too) leaves the row undecided unless the judged ones flag it.
        hallucinated = None if unjudged and not decision.hallucinated else decision.hallucinated
        return self._new_report(
            sample,
            extraction,
            timings,
            method=None if self.mode == "raw" else rule.name,
            hallucinated=hallucinated,
            score=None if hallucinated is None else 1.0 - decision.p_hallucination,
            decision=None if hallucinated is None else decision,
            claims=checks,
            whole_output=whole_output,
            errors=unjudged,
            **named,
        )

    def _new_report(self, sample: Sample, extraction: Extraction | None, timings: dict[str, float],
                    **fields: Any) -> Report:
        return Report(output=sample.output, mode=self.mode, hallucination_threshold=self.hallucination_threshold,
                      extraction=extraction, timings=timings, id=sample.id, **fields)

    def __repr__(self) -> str:
        return (f"GraphEval(mode={self.mode!r}, rule={self.rule.name!r}, "
                f"hallucination_threshold={self.hallucination_threshold})")
