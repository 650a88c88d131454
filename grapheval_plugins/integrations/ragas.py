"""GraphEval as Ragas metrics: both of Ragas 0.4's metric APIs.

* :class:`GraphEvalFaithfulness`: the legacy API (a ``SingleTurnMetric`` dataclass), the one
  ``ragas.evaluate()`` / ``ragas.aevaluate()`` accept. Reads ``response`` and ``retrieved_contexts``
  (``user_input`` is optional) and returns a float: 1 = faithful.
* :class:`GraphEvalMetric`: the ``ragas.metrics.collections`` API. ``score`` / ``ascore`` / ``batch_score`` /
  ``abatch_score`` return ``MetricResult(value, reason)``, the unsupported triples in the reason. Exported at the
  package top level as ``GraphEvalRagasMetric`` (``grapheval_plugins.GraphEvalMetric`` is the DeepEval metric).

The score is ``1 − max P(unsupported)`` over the triples extracted from the response, or with ``binary=True``
the paper's verdict: 0 when some triple's P(unsupported) exceeds the threshold, else 1.

Both take a :class:`~grapheval_plugins.GraphEval` engine by reference (its models load once and are shared by
every sample and every copy of the metric), or model specs from which an engine is built on first use. Samples
scored concurrently (``ragas.evaluate()`` runs them so) share scorer passes: the engine gathers their claims into
one batch; :meth:`GraphEvalMetric.abatch_score` sends the whole batch through
:meth:`~grapheval_plugins.GraphEval.aevaluate_many`.

Bad samples follow Ragas's convention: a sample without a response or contexts, or one whose extraction or scoring
failed, scores NaN and the reason is logged (warning, logger ``grapheval_plugins.integrations.ragas``); the other
samples are scored as usual.

Requires the ``ragas`` extra (``pip install 'grapheval-plugins[ragas]'``). ragas 0.4.3 does not import with
langchain-community 0.4.2 or later: the extra pins ``langchain-community<0.4.2``.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._imports import require

require("ragas", "ragas", "the Ragas metrics")

from langchain_core.callbacks import Callbacks  # noqa: E402
from ragas.callbacks import ChainType, new_group  # noqa: E402
from ragas.dataset_schema import SingleTurnSample  # noqa: E402
from ragas.llms.base import BaseRagasLLM, InstructorBaseRagasLLM, LangchainLLMWrapper  # noqa: E402
from ragas.metrics.base import (  # noqa: E402
    MetricOutputType,
    MetricType,
    MetricWithLLM,
    SingleTurnMetric,
)
from ragas.metrics.collections.base import BaseMetric  # noqa: E402
from ragas.metrics.result import MetricResult  # noqa: E402
from ragas.run_config import RunConfig  # noqa: E402

from ..exceptions import InputError  # noqa: E402
from ..inputs import normalize_context, normalize_output  # noqa: E402
from ..pipeline import GraphEval  # noqa: E402
from ..types import Mode, Report  # noqa: E402

__all__ = ["GraphEvalFaithfulness", "GraphEvalMetric", "GraphEvalRagasMetric", "report_value"]

logger = logging.getLogger(__name__)

DEFAULT_NAME = "grapheval_faithfulness"

# Every column a Ragas SingleTurnSample has: GraphEvalMetric.ascore accepts them all (a sample's model_dump() can be
# passed as is) and reads only response, retrieved_contexts and user_input.
_SAMPLE_FIELDS = frozenset(SingleTurnSample.model_fields)


# --------------------------------------------------------------------------- shared helpers
def report_value(report: Report, binary: bool = False) -> float:
    """The Ragas score of a report: ``report.score`` (1 − max P(unsupported)), or with ``binary`` 0.0 / 1.0 from
    the paper's verdict; NaN when the report has no verdict (a stage failed).

    >>> from grapheval_plugins import Report
    >>> report = Report(output="x", mode="raw", threshold=0.5, hallucinated=True, score=0.3)
    >>> report_value(report), report_value(report, binary=True)
    (0.3, 0.0)
    """
    if not report.ok or report.score is None:
        return math.nan
    if binary:
        return 0.0 if report.hallucinated else 1.0
    return float(report.score)


def _validated(response: Any, retrieved_contexts: Any) -> tuple[str, str]:
    """``(context, output)`` for the engine; :class:`InputError` naming the Ragas column when one is unusable."""
    if retrieved_contexts is None:
        raise InputError("retrieved_contexts", "is missing (None)")
    output = normalize_output(response, field="response")
    context = normalize_context(retrieved_contexts, field="retrieved_contexts")
    return context, output


def _check_options(engine: Any, mode: Any, threshold: Any, binary: Any, mode_field: str = "mode") -> None:
    if engine is not None and not isinstance(engine, GraphEval):
        raise InputError("engine", f"expected a GraphEval engine, got {type(engine).__name__}")
    if mode is not None and mode not in ("graph", "raw"):
        raise InputError(mode_field, f"must be 'graph' or 'raw', got {mode!r}")
    if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, (int, float))
                                  or not 0.0 <= threshold <= 1.0):
        raise InputError("threshold", f"must be a number in [0, 1], got {threshold!r}")
    if not isinstance(binary, bool):
        raise InputError("binary", f"must be True or False, got {binary!r}")
    if engine is not None:
        if mode is not None and mode != engine.mode:
            raise InputError(mode_field, f"{mode!r} differs from the engine's mode {engine.mode!r}: set it on the engine")
        if threshold is not None and threshold != engine.threshold:
            raise InputError(
                "threshold", f"{threshold!r} differs from the engine's threshold {engine.threshold!r}: set it on the engine"
            )


def _extraction_model(llm: Any, owner: str) -> Any:
    """The chat model (or spec) to extract with, from what a metric holds; Ragas's LangChain wrapper is unwrapped.

    ``None`` means the engine's own default (offline, local). Ragas LLMs that are not LangChain models are refused:
    among them is the OpenAI model ``ragas.evaluate()`` builds for a metric when it is given no ``llm=``.
    """
    if llm is None or isinstance(llm, str):
        return llm
    if isinstance(llm, LangchainLLMWrapper):
        return llm.langchain_llm
    if isinstance(llm, (InstructorBaseRagasLLM, BaseRagasLLM)):
        model = getattr(llm, "model", None) or getattr(llm, "model_name", None)
        what = f"{type(llm).__name__}({model})" if isinstance(model, str) else type(llm).__name__
        raise InputError(
            "llm",
            f"{owner} cannot extract triples with {what}: it needs a LangChain chat model (or a model spec such as "
            "'local:qwen2.5-coder-1.5b'). When ragas.evaluate() gets no llm=, Ragas builds an OpenAI gpt-4o-mini "
            "model for every metric without one; GraphEval never uses a paid API it was not explicitly given. "
            "Pass llm=<a LangChain chat model> to evaluate(), or give the metric its own model: "
            "llm='local:qwen2.5-coder-1.5b' (offline) or engine=GraphEval(...).",
        )
    if hasattr(llm, "ainvoke") and hasattr(llm, "invoke"):
        return llm
    raise InputError(
        "llm", f"{owner} cannot use {type(llm).__name__}: pass a LangChain chat model, a model spec or an engine"
    )


class _Engines:
    """The engines a metric scores with: the engine it was given, or engines built on first use from specs.

    Built engines are kept per extraction model (an ``llm=`` handed to ``ragas.evaluate()`` may differ from run to
    run) and share one scorer, so each model loads once. Copies of a metric share this object.
    """

    def __init__(self, engine: GraphEval | None, scorer: Any, mode: Mode | None, threshold: float | None) -> None:
        self.settings = (engine, scorer, mode, threshold)
        self.engine = engine
        self.scorer = scorer
        self.mode: Mode = mode or "graph"
        self.threshold = 0.5 if threshold is None else float(threshold)
        self._lock = threading.Lock()
        self._built: dict[Any, tuple[Any, GraphEval]] = {}

    def serves(self, engine: Any, scorer: Any, mode: Any, threshold: Any) -> bool:
        """True when built for these settings (a copy of a metric with other settings needs its own)."""
        return all(a is b or a == b for a, b in zip(self.settings, (engine, scorer, mode, threshold)))

    def get(self, model: Any) -> GraphEval:
        if self.engine is not None:
            return self.engine
        key = model if model is None or isinstance(model, str) else ("object", id(model))
        with self._lock:
            hit = self._built.get(key)
            if hit is None:
                first = next(iter(self._built.values()), None)
                scorer = first[1].scorer if first is not None else self.scorer
                hit = (model, GraphEval(llm=model, scorer=scorer, mode=self.mode, threshold=self.threshold))
                self._built[key] = hit
        return hit[1]


def _trace_output(report: Report) -> dict[str, Any]:
    return {
        "score": report.score,
        "hallucinated": report.hallucinated,
        "unsupported": [
            {"triple": c.triple.as_list() if c.triple else None, "claim": c.claim, "p_unsupported": c.p_unsupported}
            for c in report.unsupported
        ],
        "reason": report.explain(),
        "models": f"{report.llm or 'raw'} + {report.scorer}",
        "errors": [e.model_dump() for e in report.errors],
        # The whole report: grapheval_plugins.report.render_json(this dict) gives its HTML page.
        "report": report.model_dump(mode="json"),
    }


# --------------------------------------------------------------------------- legacy API: ragas.evaluate()
@dataclass(kw_only=True)
class GraphEvalFaithfulness(MetricWithLLM, SingleTurnMetric):
    """GraphEval as a Ragas metric for ``ragas.evaluate()``: 1 = faithful, 0 = some triple unsupported.

    Reads ``response`` and ``retrieved_contexts`` (``user_input`` is optional and unused: GraphEval checks the
    response alone against the contexts). The score is ``1 − max P(unsupported)`` over the response's triples;
    ``binary=True`` gives the paper's verdict instead (0.0 if some P(unsupported) > threshold, else 1.0).

    Which chat model extracts the triples:

    1. ``engine=``: the engine's own (its models are shared by reference and load once).
    2. ``llm=``: a LangChain chat model or a spec (``"local:qwen2.5-coder-1.5b"``, ``"bedrock:<model id>"``).
    3. neither: the ``llm=`` handed to ``ragas.evaluate()`` (Ragas wraps a LangChain model in its
       ``LangchainLLMWrapper``; it is unwrapped). Scored outside ``evaluate()``: the engine's offline default.

    A Ragas LLM that is not a LangChain model is refused with a clear error (:class:`~grapheval_plugins.InputError`
    when ``evaluate()`` starts). That includes the OpenAI model Ragas builds when ``evaluate()`` gets no ``llm=``:
    never used silently. (Without an ``OPENAI_API_KEY`` Ragas fails earlier, building that model: give the metric
    ``llm=`` or ``engine=`` or pass ``llm=`` to ``evaluate()``.)

    Args:
        engine: a :class:`~grapheval_plugins.GraphEval` to score with; its mode and threshold apply.
        llm: the extraction chat model or spec when no engine is given.
        scorer: the scorer or scorer spec when no engine is given (``None``: the offline default).
        binary: return the paper's 0/1 verdict instead of the continuous score.
        check_mode: ``"graph"`` (default) or ``"raw"`` (whole response as one claim) when no engine is given.
            (Not ``mode``: ``ragas.evaluate()`` renames the result column of any metric with a ``mode`` attribute
            to ``"<name>(mode=...)"``.)
        threshold: the decision threshold on P(unsupported) (default 0.5) when no engine is given.
        name: the column name in Ragas's result table.

    ``EvaluationResult.traces[i][name]["grapheval"]["output"]`` holds each sample's unsupported triples and
    reason (Ragas's result table carries floats only).

    Example:
        >>> from ragas import SingleTurnSample
        >>> from grapheval_plugins import GraphEval
        >>> from grapheval_plugins.testing import KeywordScorer, ScriptedChatModel
        >>> llm = ScriptedChatModel(responses=['<python>[["Marie Curie", "won", "three Nobel Prizes"]]</python>'])
        >>> metric = GraphEvalFaithfulness(engine=GraphEval(llm=llm, scorer=KeywordScorer()), binary=True)
        >>> metric.single_turn_score(SingleTurnSample(
        ...     response="Marie Curie won three Nobel Prizes.",
        ...     retrieved_contexts=["Marie Curie won two Nobel Prizes."]))
        0.0

    With ``ragas.evaluate(dataset, metrics=[GraphEvalFaithfulness(llm="local:qwen2.5-coder-1.5b")])`` the whole
    dataset is scored offline; see ``examples/ragas/``.
    """

    name: str = DEFAULT_NAME
    _required_columns: dict[MetricType, set[str]] = field(
        default_factory=lambda: {MetricType.SINGLE_TURN: {"response", "retrieved_contexts", "user_input:optional"}}
    )
    engine: GraphEval | None = None
    scorer: Any = None
    binary: bool = False
    check_mode: Mode | None = None
    threshold: float | None = None
    _engines: _Engines | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.engine is None and isinstance(self.llm, GraphEval):  # GraphEvalFaithfulness(engine) positionally
            raise TypeError(f"{type(self).__name__} takes keyword arguments: engine=GraphEval(...), not llm=")
        super().__post_init__()
        _check_options(self.engine, self.check_mode, self.threshold, self.binary, mode_field="check_mode")
        if self.engine is not None:
            if isinstance(self.llm, GraphEval):  # a copy (dataclasses.replace) given another engine
                self.llm = None
            if self.llm is not None:
                raise InputError("llm", "give either engine= or llm=/scorer=, not both (the engine has its own)")
            if self.scorer is not None:
                raise InputError("scorer", "give either engine= or llm=/scorer=, not both (the engine has its own)")
            # A metric whose llm is None gets ragas.evaluate()'s llm= (or Ragas's OpenAI default): mark it as
            # having one, the engine.
            self.llm = self.engine  # type: ignore[assignment]
        else:
            _extraction_model(self.llm, self.name)  # refuse an unusable model now, not at the first sample
        self.output_type = MetricOutputType.BINARY if self.binary else MetricOutputType.CONTINUOUS
        if self._engines is None or not self._engines.serves(self.engine, self.scorer, self.check_mode, self.threshold):
            self._engines = _Engines(self.engine, self.scorer, self.check_mode, self.threshold)

    def init(self, run_config: RunConfig) -> None:
        """Called by ``ragas.evaluate()`` once the metric has its ``llm``: refuses one GraphEval cannot use.

        Raises:
            InputError: the LLM is not a LangChain chat model (e.g. Ragas's implicit OpenAI default). The metric's
                ``llm`` is reset first, so the metric stays usable.
        """
        if self.engine is not None and self.llm is self.engine:
            return
        try:
            _extraction_model(self.llm, self.name)
        except InputError:
            self.llm = None  # evaluate() set it and does not reset it when init() raises
            raise

    def current_engine(self) -> GraphEval:
        """The engine the next sample is scored with (built on first use; model loading stays lazy)."""
        if self.engine is not None:
            return self.engine
        if self._engines is None:
            self._engines = _Engines(None, self.scorer, self.check_mode, self.threshold)
        return self._engines.get(_extraction_model(self.llm, self.name))

    async def _single_turn_ascore(self, sample: SingleTurnSample, callbacks: Callbacks) -> float:
        try:
            context, output = _validated(sample.response, sample.retrieved_contexts)
        except InputError as exc:
            logger.warning("%s: NaN for a sample without usable input: %s", self.name, exc)
            return math.nan
        engine = self.current_engine()
        data = {
            "user_input": sample.user_input,
            "response": output,
            "n_retrieved_contexts": len(sample.retrieved_contexts or []),
        }
        run, group = new_group(
            "grapheval", inputs={"data": data}, callbacks=callbacks or [],
            metadata={"type": ChainType.RAGAS_PROMPT},
        )
        try:
            report = await engine.aevaluate(context, output, config={"callbacks": group})
        except BaseException as exc:
            run.on_chain_error(exc)
            raise
        run.on_chain_end({"output": _trace_output(report)})
        value = report_value(report, self.binary)
        if math.isnan(value):
            logger.warning("%s: NaN for a sample: %s", self.name, report.explain())
        return value


# --------------------------------------------------------------------------- new API: ragas.metrics.collections
class GraphEvalMetric(BaseMetric):
    """GraphEval as a ``ragas.metrics.collections`` metric: ``MetricResult(value, reason)``, 1 = faithful.

    ``ascore(response=..., retrieved_contexts=[...], user_input=None)``; ``score`` is its sync form;
    ``abatch_score(inputs)`` / ``batch_score(inputs)`` score a list of such keyword dicts in one engine batch
    (extraction calls run concurrently, scorer calls are batched across rows). Other Ragas sample columns
    (``reference`` …) are accepted and ignored, so ``sample.model_dump()`` can be passed as is.

    The reason lists the unsupported triples with their P(unsupported). A row without a response or contexts, or
    whose extraction or scoring failed, gets ``value=nan`` and the reason (logged as a warning too).

    Args:
        engine: a :class:`~grapheval_plugins.GraphEval` to score with, shared by reference.
        llm: the extraction chat model or spec when no engine is given (``None``: the offline default). Stored as
            ``extraction_llm``: Ragas reserves ``llm`` for its own LLM type.
        scorer: the scorer or scorer spec when no engine is given.
        binary: the paper's 0/1 verdict instead of ``1 − max P(unsupported)``.
        mode, threshold: for an engine built from specs (an engine's own apply otherwise).
        name: the metric name.
        max_reason_claims: unsupported claims listed in a reason at most.

    Not accepted by ``ragas.evaluate()`` (no collections metric is): use :class:`GraphEvalFaithfulness` there.

    Example:
        >>> from grapheval_plugins import GraphEval
        >>> from grapheval_plugins.testing import KeywordScorer, ScriptedChatModel
        >>> llm = ScriptedChatModel(responses=['<python>[["Marie Curie", "won", "three Nobel Prizes"]]</python>'])
        >>> metric = GraphEvalMetric(GraphEval(llm=llm, scorer=KeywordScorer()))
        >>> result = metric.score(response="Marie Curie won three Nobel Prizes.",
        ...                       retrieved_contexts=["Marie Curie won two Nobel Prizes."])
        >>> round(result.value, 3)
        0.417
        >>> print(result.reason)
        hallucination (score 0.417): 1 unsupported claim(s)
        - ['Marie Curie', 'won', 'three Nobel Prizes'] p_unsupported=0.583
    """

    def __init__(
        self,
        engine: GraphEval | None = None,
        *,
        llm: Any = None,
        scorer: Any = None,
        binary: bool = False,
        mode: Mode | None = None,
        threshold: float | None = None,
        name: str = DEFAULT_NAME,
        max_reason_claims: int = 10,
    ) -> None:
        _check_options(engine, mode, threshold, binary)
        if engine is not None and (llm is not None or scorer is not None):
            raise InputError("engine", "give either engine= or llm=/scorer=, not both (the engine has its own)")
        _extraction_model(llm, name)
        self.engine = engine
        self.extraction_llm = llm
        self.scorer = scorer
        self.binary = binary
        self.mode = mode
        self.threshold = threshold
        self.max_reason_claims = max_reason_claims
        self._engines = _Engines(engine, scorer, mode, threshold)
        super().__init__(name=name, allowed_values=(0.0, 1.0))

    def current_engine(self) -> GraphEval:
        """The engine this metric scores with (built on first use; model loading stays lazy)."""
        return self._engines.get(_extraction_model(self.extraction_llm, self.name))

    def _result(self, report: Report) -> MetricResult:
        value = report_value(report, self.binary)
        reason = report.explain(self.max_reason_claims)
        if math.isnan(value):
            logger.warning("%s: NaN for a sample: %s", self.name, reason)
        return MetricResult(value=value, reason=reason, traces={"output": report.model_dump(mode="json")})

    def _invalid(self, exc: Exception) -> MetricResult:
        logger.warning("%s: NaN for a sample without usable input: %s", self.name, exc)
        return MetricResult(value=math.nan, reason=f"error: {exc}")

    async def ascore(  # type: ignore[override]
        self,
        response: str | None = None,
        retrieved_contexts: Sequence[str] | str | None = None,
        user_input: str | None = None,
        **columns: Any,
    ) -> MetricResult:
        """Score one response against its retrieved contexts.

        Raises:
            TypeError: a keyword that is not a Ragas sample column.
        """
        unknown = sorted(set(columns) - _SAMPLE_FIELDS)
        if unknown:
            raise TypeError(f"{self.name}.ascore() got unexpected keyword arguments {unknown}")
        try:
            context, output = _validated(response, retrieved_contexts)
        except InputError as exc:
            return self._invalid(exc)
        report = await self.current_engine().aevaluate(context, output)
        return self._result(report)

    async def abatch_score(self, inputs: list[dict[str, Any]]) -> list[MetricResult]:  # type: ignore[override]
        """Score many rows (keyword dicts as for :meth:`ascore`) in one engine batch; results in input order.

        A bad row (not a mapping, an unknown key, no response or contexts) gets a NaN result with the reason;
        the other rows are scored as usual.
        """
        results: list[MetricResult | None] = [None] * len(inputs)
        rows: list[dict[str, str]] = []
        where: list[int] = []
        for i, row in enumerate(inputs):
            try:
                if not isinstance(row, Mapping):
                    raise InputError(f"inputs[{i}]", f"expected a dict of keyword arguments, got {type(row).__name__}")
                unknown = sorted(set(row) - _SAMPLE_FIELDS)
                if unknown:
                    raise InputError(f"inputs[{i}]", f"unknown keys {unknown}")
                context, output = _validated(row.get("response"), row.get("retrieved_contexts"))
            except InputError as exc:
                results[i] = self._invalid(exc)
                continue
            rows.append({"context": context, "output": output})
            where.append(i)
        if rows:
            reports = await self.current_engine().aevaluate_many(rows)
            for i, report in zip(where, reports):
                results[i] = self._result(report)
        return [r for r in results if r is not None]

    def __repr__(self) -> str:
        how = repr(self.engine) if self.engine is not None else f"llm={self.extraction_llm!r}, scorer={self.scorer!r}"
        return f"{type(self).__name__}({how}, binary={self.binary}, name={self.name!r})"


GraphEvalRagasMetric = GraphEvalMetric
"""The name under which :class:`GraphEvalMetric` is exported by ``grapheval_plugins`` (whose ``GraphEvalMetric``
is the DeepEval metric)."""
