"""GraphEval as Ragas metrics: :class:`GraphEvalFaithfulness` for ``ragas.evaluate()``, :class:`GraphEvalRagasMetric`
for ``ragas.metrics.collections`` (how to use them: the Ragas guide; the ``ragas`` extra)."""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import InitVar, dataclass, field
from typing import Any

from .. import GraphEval, InputError, MissingDependencyError, Report, registry
from ..aggregate import RuleLike, rule_argument
from ..exceptions import renamed
from ..inputs import normalize_output, normalize_passages
from ..types import Mode, StageUsage, total_usage
from .host_models import Costed, PromptChatModel, StructuredTriplesChatModel, openai_client, openai_completion

try:
    from langchain_core.callbacks import Callbacks
    from langchain_core.prompt_values import StringPromptValue
    from ragas.callbacks import ChainType, new_group
    from ragas.dataset_schema import SingleTurnSample
    from ragas.llms.base import BaseRagasLLM, InstructorBaseRagasLLM, LangchainLLMWrapper
    from ragas.metrics.base import MetricOutputType, MetricType, MetricWithLLM, SingleTurnMetric
    from ragas.metrics.collections.base import BaseMetric
    from ragas.metrics.result import MetricResult
    from ragas.run_config import RunConfig
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError("ragas", "ragas", "the Ragas metrics") from exc

__all__ = ["GraphEvalFaithfulness", "GraphEvalFaithfulnessWithLLM", "GraphEvalRagasMetric", "cost",
    "ragas_chat_model", "reasons", "report_value", "usage"]

logger = logging.getLogger(__name__)

DEFAULT_NAME = "grapheval_faithfulness"

# Every column a Ragas SingleTurnSample has: ascore accepts them all (a sample's model_dump() passes as is).
_SAMPLE_FIELDS = frozenset(SingleTurnSample.model_fields)


# --------------------------------------------------------------------------- shared helpers
def report_value(report: Report, binary: bool = False) -> float:
    """The Ragas score of a report: ``report.score`` (1 − P(hallucination)), or with ``binary`` 0.0 / 1.0 from
    the verdict; NaN when the report has no verdict (a stage failed).

    >>> from grapheval_plugins import Report
    >>> report = Report(output="x", mode="raw", hallucination_threshold=0.5, hallucinated=True, score=0.3)
    >>> report_value(report), report_value(report, binary=True)
    (0.3, 0.0)
    """
    if not report.ok or report.score is None:
        return math.nan
    if binary:
        return 0.0 if report.hallucinated else 1.0
    return float(report.score)


def _validated(response: Any, retrieved_contexts: Any) -> tuple[tuple[str, ...], str]:
    """``(passages, output)`` for the engine; :class:`InputError` naming the Ragas column when one is unusable."""
    context = normalize_passages(retrieved_contexts, field="retrieved_contexts")
    return context, normalize_output(response, field="response")


def _arguments(
    owner: str, name: str, grapheval: Any, llm: Any, scorer: Any, check_mode: Any, binary: Any, rule: Any,
    method: Any, hallucination_threshold: Any, threshold: Any, stacklevel: int,
) -> tuple[RuleLike | None, float | None, registry.EngineOptions]:
    """A metric's arguments checked, deprecated ones applied: ``(rule, hallucination_threshold, engine options)``."""
    rule = rule_argument(rule, method, owner, default=None, stacklevel=stacklevel + 1)
    hallucination_threshold = renamed(owner, "threshold", threshold, "hallucination_threshold",
                                      hallucination_threshold, stacklevel=stacklevel + 1)
    if hallucination_threshold is not None:
        warnings.warn(
            f"{owner}(hallucination_threshold=...) is deprecated: the Ragas score is continuous (1 - P(hallucination))"
            " and no threshold changes it; for binary=True's verdict, give the engine its threshold: "
            "grapheval=GraphEval(hallucination_threshold=...)", DeprecationWarning, stacklevel=stacklevel,
        )
    if not isinstance(binary, bool):
        raise InputError("binary", f"must be True or False, got {binary!r}")
    options = registry.engine_options(
        grapheval, llm=llm, scorer=scorer, mode=check_mode, rule=rule, hallucination_threshold=hallucination_threshold,
        fields={"mode": "check_mode"},
    )
    if grapheval is None:
        _extraction_model(llm, name)  # refuse an unusable model now, not at the first sample
    return rule, hallucination_threshold, options


def _ragas_text(result: Any) -> str:
    generations = getattr(result, "generations", None)
    try:
        return str(generations[0][0].text)  # type: ignore[index]
    except (TypeError, IndexError, AttributeError) as exc:
        raise InputError("llm", f"the Ragas LLM returned no text generation: {result!r}") from exc


def _adapt(llm: Any) -> Any:
    model = getattr(llm, "model", None) or getattr(llm, "model_name", None)
    label = f"ragas:{model}" if isinstance(model, str) else f"ragas:{type(llm).__name__}"
    if isinstance(llm, InstructorBaseRagasLLM):
        # Instructor's structured output fills the triples. A sync client has only generate() (agenerate raises).
        acomplete = llm.agenerate if getattr(llm, "is_async", True) else None
        client = openai_client(getattr(getattr(llm, "client", None), "client", None))  # Instructor keeps the SDK's

        async def araw(prompt: str, top_logprobs: int) -> Costed:  # the judge's call, with log-probabilities
            options = {k: v for k, v in (getattr(llm, "model_args", None) or {}).items() if v is not None}
            return Costed(await openai_completion(client, str(model), prompt, top_logprobs,
                                                  getattr(llm, "system_prompt", None), **options), None)

        return StructuredTriplesChatModel(complete=llm.generate, acomplete=acomplete, label=label,
                                          acomplete_raw=araw if client is not None and isinstance(model, str) else None)

    async def agenerate(prompt: str) -> str:
        return _ragas_text(await llm.agenerate_text(StringPromptValue(text=prompt)))

    def generate(prompt: str) -> str:
        return _ragas_text(llm.generate_text(StringPromptValue(text=prompt)))

    return PromptChatModel(complete=generate, acomplete=agenerate, label=label)


def ragas_chat_model(llm: Any) -> Any:
    """A Ragas LLM as the chat model GraphEval's extractor calls: a ``LangchainLLMWrapper``'s chat model, an
    Instructor-based LLM's structured output, another ``BaseRagasLLM``'s text; anything else as is."""
    if isinstance(llm, LangchainLLMWrapper):
        return llm.langchain_llm
    if isinstance(llm, (InstructorBaseRagasLLM, BaseRagasLLM)):
        return registry.shared_adapter("ragas", llm, _adapt)
    return llm


def _extraction_model(llm: Any, owner: str) -> Any:
    """The chat model (or spec) to extract with, Ragas's own LLMs adapted; ``None``: the engine's default."""
    if llm is None or isinstance(llm, str):
        return llm
    model = ragas_chat_model(llm)
    if hasattr(model, "ainvoke") and hasattr(model, "invoke"):
        return model
    raise InputError(
        "llm",
        f"{owner} cannot use {type(llm).__name__}: pass a Ragas LLM, a LangChain chat model, a model spec or an engine",
    )


def _current_engine(metric: Any, options: registry.EngineOptions, grapheval: Any, llm: Any) -> GraphEval:
    """The engine a metric scores with: the given one (seen at the metric's threshold) or the shared one."""
    if grapheval is not None:
        return options.engine()
    engine = options.engine(llm=_extraction_model(llm, metric.name))
    metric.__dict__["_held"] = engine  # the registry holds engines over objects weakly: keep the one in use alive
    return engine


def _trace_output(report: Report) -> dict[str, Any]:
    return {
        "unsupported": [
            {"triple": c.triple.as_list() if c.triple else None, "claim": c.claim, "p_unsupported": c.p_unsupported}
            for c in report.unsupported
        ],
        "reason": report.explain(),
        # The whole report: grapheval_plugins.report.render_json(this dict) gives its HTML page.
        "report": report.model_dump(mode="json"),
    }


# --------------------------------------------------------------------------- legacy API: ragas.evaluate()
@dataclass(kw_only=True)
class GraphEvalFaithfulness(SingleTurnMetric):
    """GraphEval as a Ragas metric for ``ragas.evaluate()``, 1 = faithful (parameters: the Ragas guide's options
    table; ``engine``, ``method``, ``hallucination_threshold`` and ``threshold`` are deprecated).

    Example:
        >>> from ragas import SingleTurnSample
        >>> from grapheval_plugins import GraphEval
        >>> from grapheval_plugins.testing import KeywordScorer, ScriptedChatModel
        >>> llm = ScriptedChatModel(responses=['<python>[["Marie Curie", "won", "three Nobel Prizes"]]</python>'])
        >>> metric = GraphEvalFaithfulness(grapheval=GraphEval(llm=llm, scorer=KeywordScorer()), binary=True)
        >>> metric.single_turn_score(SingleTurnSample(
        ...     response="Marie Curie won three Nobel Prizes.",
        ...     retrieved_contexts=["Marie Curie won two Nobel Prizes."]))
        0.0
    """

    name: str = DEFAULT_NAME
    _required_columns: dict[MetricType, set[str]] = field(
        default_factory=lambda: {MetricType.SINGLE_TURN: {"response", "retrieved_contexts", "user_input:optional"}}
    )
    grapheval: GraphEval | None = None
    engine: InitVar[GraphEval | None] = None
    llm: Any = None
    scorer: Any = None
    binary: bool = False
    check_mode: Mode | None = None
    rule: RuleLike | None = None
    method: InitVar[RuleLike | None] = None
    hallucination_threshold: float | None = None
    threshold: float | None = None
    output_type: MetricOutputType | None = field(default=None, init=False, repr=False)
    """``BINARY`` with ``binary=True``, else ``CONTINUOUS`` (as Ragas's LLM metrics declare it)."""
    _options: registry.EngineOptions = field(init=False, repr=False, compare=False)

    def __post_init__(self, engine: GraphEval | None = None, method: RuleLike | None = None) -> None:
        owner = type(self).__name__
        if isinstance(self.llm, GraphEval):
            raise TypeError(f"{owner} takes its engine as grapheval=GraphEval(...) (formerly engine=GraphEval(...)), not llm=")
        # engine= wins over grapheval=: dataclasses.replace carries the old one along
        self.grapheval = renamed(owner, "engine", engine, "grapheval", self.grapheval, note=", a GraphEval(...)",
                                 same=lambda *_: True, stacklevel=4)
        super().__post_init__()  # type: ignore[no-untyped-call]  # Ragas's metric base is untyped
        self.rule, self.hallucination_threshold, self._options = _arguments(
            owner, self.name, self.grapheval, self.llm, self.scorer, self.check_mode, self.binary, self.rule, method,
            self.hallucination_threshold, self.threshold, stacklevel=4,
        )
        self.threshold = self.hallucination_threshold  # the deprecated name still reads
        self.output_type = MetricOutputType.BINARY if self.binary else MetricOutputType.CONTINUOUS
        self.__dict__["engine"] = self.grapheval  # the deprecated name still reads

    def init(self, run_config: RunConfig) -> None:
        """Called by ``ragas.evaluate()`` before scoring: nothing to set up (models load on first use)."""

    def current_engine(self) -> GraphEval:
        """The engine the next sample is scored with (shared, built on first use; model loading stays lazy)."""
        return _current_engine(self, self._options, self.grapheval, self.llm)

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


@dataclass(kw_only=True)
class GraphEvalFaithfulnessWithLLM(GraphEvalFaithfulness, MetricWithLLM):
    """:class:`GraphEvalFaithfulness` as a Ragas LLM metric: ``ragas.evaluate(dataset, metrics=[...], llm=model)``
    hands it that model, as it does to ``Faithfulness()`` (with none, Ragas builds its OpenAI default)."""


# --------------------------------------------------------------------------- new API: ragas.metrics.collections
class GraphEvalRagasMetric(BaseMetric):
    """GraphEval as a ``ragas.metrics.collections`` metric, 1 = faithful, with :class:`GraphEvalFaithfulness`'s
    parameters (``llm`` stored as ``extraction_llm``; ``mode`` and a positional engine are deprecated).

    Example:
        >>> from grapheval_plugins import GraphEval
        >>> from grapheval_plugins.testing import KeywordScorer, ScriptedChatModel
        >>> llm = ScriptedChatModel(responses=['<python>[["Marie Curie", "won", "three Nobel Prizes"]]</python>'])
        >>> metric = GraphEvalRagasMetric(grapheval=GraphEval(llm=llm, scorer=KeywordScorer()))
        >>> result = metric.score(response="Marie Curie won three Nobel Prizes.",
        ...                       retrieved_contexts=["Marie Curie won two Nobel Prizes."])
        >>> round(result.value, 3)
        0.417
        >>> print(result.reason)
        hallucination (score 0.417): 1 of 1 claim unsupported
        - ['Marie Curie', 'won', 'three Nobel Prizes'] p_unsupported=0.583
    """

    def __init__(
        self,
        positional_grapheval: GraphEval | None = None,
        /,
        *,
        grapheval: GraphEval | None = None,
        engine: GraphEval | None = None,
        llm: Any = None,
        scorer: Any = None,
        binary: bool = False,
        check_mode: Mode | None = None,
        rule: RuleLike | None = None,
        hallucination_threshold: float | None = None,
        threshold: float | None = None,
        name: str = DEFAULT_NAME,
        max_reason_claims: int = 10,
        mode: Mode | None = None,
        method: RuleLike | None = None,
    ) -> None:
        owner = type(self).__name__
        if positional_grapheval is not None:
            warnings.warn(f"{owner}(engine) is deprecated: pass the engine by keyword, grapheval=GraphEval(...), as "
                          "GraphEvalFaithfulness takes it", DeprecationWarning, stacklevel=2)
            if grapheval is not None:
                raise InputError("grapheval", "give the engine once")
            grapheval = positional_grapheval
        grapheval = renamed(owner, "engine", engine, "grapheval", grapheval, note=", a GraphEval(...)",
                            same=lambda *_: False)
        check_mode = renamed(owner, "mode", mode, "check_mode", check_mode, note=" (the name GraphEvalFaithfulness "
                             "takes: ragas.evaluate() renames the column of a metric with a `mode` attribute)")
        self.rule, self.hallucination_threshold, self._options = _arguments(
            owner, name, grapheval, llm, scorer, check_mode, binary, rule, method, hallucination_threshold,
            threshold, stacklevel=3,
        )
        self.threshold = self.hallucination_threshold  # the deprecated name still reads
        self.grapheval = grapheval
        self.extraction_llm = llm
        self.scorer = scorer
        self.binary = binary
        self.check_mode = check_mode
        self.max_reason_claims = max_reason_claims
        super().__init__(name=name, allowed_values=(0.0, 1.0))

    @property
    def engine(self) -> GraphEval | None:
        """Deprecated name of :attr:`grapheval`."""
        return self.grapheval

    def current_engine(self) -> GraphEval:
        """The engine this metric scores with (shared, built on first use; model loading stays lazy)."""
        return _current_engine(self, self._options, self.grapheval, self.extraction_llm)

    def _result(self, report: Report) -> MetricResult:
        value = report_value(report, self.binary)
        reason = report.explain(self.max_reason_claims)
        if math.isnan(value):
            logger.warning("%s: NaN for a sample: %s", self.name, reason)
        return MetricResult(value=value, reason=reason, traces={"output": report.model_dump(mode="json")})

    def _invalid(self, exc: Exception) -> MetricResult:
        logger.warning("%s: NaN for a sample without usable input: %s", self.name, exc)
        return MetricResult(value=math.nan, reason=f"error: {exc}")

    async def ascore(
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

    async def abatch_score(self, inputs: list[dict[str, Any]]) -> list[MetricResult]:
        """Score many rows (keyword dicts as for :meth:`ascore`) in one engine batch; a bad row gets a NaN result."""
        results: list[MetricResult | None] = [None] * len(inputs)
        rows: list[dict[str, Any]] = []
        where: list[int] = []
        for i, row in enumerate(inputs):
            try:
                if not isinstance(row, Mapping):
                    raise InputError(f"inputs[{i}]", f"expected a dict of keyword arguments, got {type(row).__name__}", reason="type")
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
        how = repr(self.grapheval) if self.grapheval is not None else f"llm={self.extraction_llm!r}, scorer={self.scorer!r}"
        return f"{type(self).__name__}({how}, binary={self.binary}, name={self.name!r})"


# --------------------------------------------------------------------------- the reasons and cost of an evaluate() result
def _outputs(result: Any, name: str) -> list[dict[str, Any] | None]:
    """The metric's trace output (``result.traces[i][name]["grapheval"]["output"]``) of each sample, in order."""
    out: list[dict[str, Any] | None] = []
    for trace in result.traces:
        try:
            out.append(trace[name]["grapheval"]["output"])
        except (KeyError, TypeError):
            out.append(None)
    return out


def reasons(result: Any, name: str = DEFAULT_NAME) -> list[str | None]:
    """Each sample's reason from a ``ragas.evaluate()`` result, in table order (``None``: no report); ``name``: the
    metric's column."""
    return [None if output is None else output["reason"] for output in _outputs(result, name)]


def _reports(result: Any, name: str) -> list[Report]:
    return [Report.model_validate(output["report"]) for output in _outputs(result, name) if output is not None]


def usage(result: Any, name: str = DEFAULT_NAME) -> StageUsage:
    """The chat-model calls and tokens of a ``ragas.evaluate()`` result, every report and stage added up."""
    return total_usage(report.usage for report in _reports(result, name))


def cost(result: Any, prices: Mapping[str, float] | None = None, name: str = DEFAULT_NAME) -> float | None:
    """US dollars of a ``ragas.evaluate()`` result: each report's :meth:`~grapheval_plugins.types.Report.cost`
    added up (``prices``: ``{"input": usd_per_1M_tokens, "output": usd_per_1M_tokens}``); ``None`` when a report
    has no cost."""
    costs = [report.cost(prices) for report in _reports(result, name)]
    return None if any(c is None for c in costs) else round(sum(c for c in costs if c is not None), 12)


def __getattr__(name: str) -> Any:
    if name == "GraphEvalMetric":
        warnings.warn(
            "grapheval_plugins.integrations.ragas.GraphEvalMetric is deprecated: it is GraphEvalRagasMetric "
            "(grapheval_plugins.GraphEvalMetric is the DeepEval metric)",
            DeprecationWarning, stacklevel=2,
        )
        return GraphEvalRagasMetric
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
