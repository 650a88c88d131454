"""GraphEval as a DeepEval metric: :class:`GraphEvalMetric` (how to use it: the DeepEval guide; the ``deepeval``
extra)."""

from __future__ import annotations

import threading
import warnings
from typing import Any, Literal

from .. import (
    ExtractionError,
    GraphEval,
    GraphEvalError,
    InputError,
    MissingDependencyError,
    Report,
    ScoringError,
    registry,
)
from .._async import run_sync
from ..aggregate import RuleLike, check_threshold, rule_argument, threshold_for_min_score
from ..inputs import normalize_output, normalize_passages
from ..report import JSON_MARKER
from ..report.view import snippet
from ..types import Mode, claim_text, usage_cost
from ..usage import metered
from .host_models import Costed, PromptChatModel, openai_client, openai_completion

try:
    from deepeval.errors import MissingTestCaseParamsError
    from deepeval.metrics import BaseMetric
    from deepeval.metrics.indicator import metric_progress_indicator
    from deepeval.metrics.utils import construct_verbose_logs
    from deepeval.models import DeepEvalBaseLLM
    from deepeval.test_case import LLMTestCase, SingleTurnParams
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError("deepeval", "deepeval", "GraphEvalMetric") from exc

__all__ = ["ContextField", "GraphEvalMetric", "clear_shared_engines", "deepeval_chat_model", "shared_engine"]

ContextField = Literal["auto", "context", "retrieval_context"]
"""Where the grounding comes from (``"auto"``: ``context`` when it has text, else ``retrieval_context``)."""

_CONTEXT_FIELDS = ("auto", "context", "retrieval_context")


def shared_engine(llm: Any = None, scorer: Any = None, mode: Mode = "graph") -> GraphEval:
    """Deprecated: use :meth:`GraphEval.shared <grapheval_plugins.GraphEval.shared>`.

    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     shared_engine(None, "hhem") is GraphEval.shared(None, "hhem")
    True
    """
    warnings.warn(
        "grapheval_plugins.integrations.deepeval.shared_engine is deprecated: use GraphEval.shared(llm, scorer, "
        "mode=...)", DeprecationWarning, stacklevel=2,
    )
    return GraphEval.shared(llm, scorer, mode=mode)


def clear_shared_engines() -> None:
    """Deprecated: use :func:`grapheval_plugins.registry.clear_shared` (forgets every shared engine and scorer)."""
    warnings.warn(
        "clear_shared_engines is deprecated: use grapheval_plugins.registry.clear_shared()",
        DeprecationWarning, stacklevel=2,
    )
    registry.clear_shared()


# --------------------------------------------------------------------- DeepEval's model= convention
def _costed(answer: Any) -> Costed:
    """A ``generate`` answer as text and cost: DeepEval's own models return ``(text, usd)``, custom ones the text."""
    cost = None
    if isinstance(answer, tuple) and len(answer) == 2 and isinstance(answer[1], (int, float, type(None))):
        answer, cost = answer
    if not isinstance(answer, str):
        raise ExtractionError(f"the DeepEval model answered {type(answer).__name__}, not text")
    return Costed(answer, None if cost is None or isinstance(cost, bool) else float(cost))


def _adapt(model: Any) -> PromptChatModel:
    resolved = [] if isinstance(model, str) else [model]
    lock = threading.Lock()

    def get() -> Any:  # a model name is resolved by DeepEval (initialize_model) on the first call, once
        with lock:
            if not resolved:
                from deepeval.metrics.utils import initialize_model

                resolved.append(initialize_model(model)[0])
        return resolved[0]

    def generate(prompt: str) -> Costed:
        return _costed(get().generate(prompt))

    async def agenerate(prompt: str) -> Costed:
        return _costed(await get().a_generate(prompt))

    async def agenerate_raw(prompt: str, top_logprobs: int) -> Costed:
        """G-Eval's call; for DeepEval's other OpenAI-client models (``LocalModel``: vLLM, llama.cpp, Ollama) its
        request through their own client; else ``AttributeError`` (asked plainly from then on, as in G-Eval)."""
        found = get()
        if hasattr(found, "a_generate_raw_response"):
            return Costed(*await found.a_generate_raw_response(prompt, top_logprobs=top_logprobs))
        own = getattr(type(found).load_model, "__module__", "").startswith("deepeval.")  # not a custom loader
        client = openai_client(found.load_model(async_mode=True)) if own else None
        if client is None:
            raise AttributeError(f"{type(found).__name__} answers without log-probabilities")
        completion = await openai_completion(client, found.name, prompt, top_logprobs,
            temperature=getattr(found, "temperature", 0.0), **(getattr(found, "generation_kwargs", None) or {}))
        usage, price = completion.usage, getattr(found, "calculate_cost", None)  # LocalModel's own cost is 0
        return Costed(completion, price(usage.prompt_tokens, usage.completion_tokens) if price and usage else 0.0)

    name = model if isinstance(model, str) else model.get_model_name()  # abstract in DeepEvalBaseLLM
    return PromptChatModel(complete=generate, acomplete=agenerate, acomplete_raw=agenerate_raw,
                           label=f"deepeval:{name}")


def deepeval_chat_model(model: Any) -> PromptChatModel:
    """A ``DeepEvalBaseLLM`` or a model name DeepEval resolves as the chat model GraphEval's extractor calls.

    Raises:
        InputError: ``model`` is neither a ``DeepEvalBaseLLM`` nor a name.
    """
    if isinstance(model, str):
        if not model.strip():
            raise InputError("model", "is an empty model name")
    elif not isinstance(model, DeepEvalBaseLLM):
        raise InputError(
            "model",
            f"expected a DeepEvalBaseLLM or a model name DeepEval resolves, got {type(model).__name__}; "
            "a LangChain chat model or a GraphEval spec goes to llm=",
        )
    return registry.shared_adapter("deepeval", model, _adapt)


class GraphEvalMetric(BaseMetric):  # type: ignore[no-untyped-call]  # untyped in DeepEval
    """GraphEval as a DeepEval metric: ``score = 1 − P(hallucination)``, passing iff ``score >= threshold`` (its
    arguments: the DeepEval guide's options table; ``method`` is the deprecated name of ``rule``, ``async_mode``
    is kept for DeepEval's display only).

    Example:
        >>> from deepeval.test_case import LLMTestCase
        >>> from grapheval_plugins.testing import KeywordScorer, ScriptedChatModel
        >>> llm = ScriptedChatModel(responses=['<python>[["The Eiffel Tower", "located in", "Rome"]]</python>'])
        >>> metric = GraphEvalMetric(llm=llm, scorer=KeywordScorer())
        >>> case = LLMTestCase(input="Where is the Eiffel Tower?", actual_output="The Eiffel Tower is in Rome.",
        ...                    retrieval_context=["The Eiffel Tower is located in Paris."])
        >>> metric.measure(case, _show_indicator=False)
        0.375
        >>> metric.is_successful()
        False
        >>> print(metric.reason)
        hallucination: 1 of 1 claim unsupported (score 0.375 < threshold 0.500; grounding: retrieval_context)
        - ['The Eiffel Tower', 'located in', 'Rome'] P(unsupported)=0.625; evidence: "The Eiffel Tower is located in Paris."
    """

    _required_params = [SingleTurnParams.ACTUAL_OUTPUT]  # type: ignore[assignment]
    threshold: float  # the minimum passing score, always set (DeepEval's base allows None)

    def __init__(
        self,
        threshold: float = 0.5,
        grapheval: GraphEval | None = None,
        *,
        model: Any = None,
        llm: Any = None,
        scorer: Any = None,
        mode: Mode | None = None,
        rule: RuleLike | None = None,
        context_field: ContextField = "auto",
        include_reason: bool = True,
        strict_mode: bool = False,
        async_mode: bool = True,
        verbose_mode: bool = False,
        suggest_correction: Any = False,
        prices: dict[str, float] | None = None,
        method: RuleLike | None = None,
    ) -> None:
        # DeepEval copies a metric by calling this constructor with ``vars(metric)``: keep the names.
        min_score = 1.0 if strict_mode else check_threshold(threshold, "threshold")  # strict: the engine's own
        if context_field not in _CONTEXT_FIELDS:
            raise InputError("context_field", f"must be one of {_CONTEXT_FIELDS}, got {context_field!r}")
        if model is not None and llm is not None:
            raise InputError("model", "give either model= (DeepEval's) or llm= (a LangChain chat model or spec)")
        if model is not None and grapheval is not None:
            raise InputError("model", "give either grapheval= or model=, not both (the engine has its own)")
        rule = rule_argument(rule, method, "GraphEvalMetric", default=None)
        options = registry.engine_options(
            grapheval,
            llm=deepeval_chat_model(model) if model is not None else llm,
            scorer=deepeval_chat_model(scorer) if isinstance(scorer, DeepEvalBaseLLM) else scorer,  # judges
            mode=mode,
            rule=rule,
            hallucination_threshold=None if strict_mode else threshold_for_min_score(min_score),
            fields={"hallucination_threshold": "threshold", "llm": "model" if model is not None else "llm"},
        )
        self.threshold = min_score
        self.grapheval = grapheval
        self.model = model
        self.llm = llm
        self.scorer = scorer
        self.mode = mode
        self.rule = rule
        self.context_field: ContextField = context_field
        self.include_reason = include_reason
        self.strict_mode = strict_mode
        self.async_mode = async_mode
        self.verbose_mode = verbose_mode
        if not isinstance(suggest_correction, bool) and not hasattr(suggest_correction, "acorrect"):
            raise InputError("suggest_correction", f"expected a bool or a GraphCorrect, got {suggest_correction!r}")
        self.suggest_correction = suggest_correction
        self.prices = _check_prices(prices)
        self._engine = options.engine()
        self.evaluation_model = self._engine.describe(load=False)
        self.score = self.success = self.reason = self.error = self.verbose_logs = self.evaluation_cost = None

    @property
    def engine(self) -> GraphEval:
        """The engine this metric and its copies share (cases are decided by a view of it at ``1 - threshold``)."""
        return self.grapheval if self.grapheval is not None else self._engine

    def warm_up(self) -> Report:
        """Load the models now (outside DeepEval's per-case timeout) and check one tiny sample; its report."""
        report = self._engine.evaluate("The sky is blue.", "The sky is blue.")
        _raise_for_report(report)
        return report

    @property
    def __name__(self) -> str:
        return "GraphEval (raw)" if self._engine.mode == "raw" else "GraphEval"

    # ----------------------------------------------------------------- DeepEval's interface
    def measure(
        self,
        test_case: LLMTestCase,
        *args: Any,
        _show_indicator: bool = True,
        _in_component: bool = False,
        **kwargs: Any,
    ) -> float:
        """Score one test case (see :meth:`a_measure`); works inside a running event loop too."""
        return run_sync(self.a_measure(test_case, _show_indicator=_show_indicator, _in_component=_in_component))

    async def a_measure(
        self,
        test_case: LLMTestCase,
        *args: Any,
        _show_indicator: bool = True,
        _in_component: bool = False,
        **kwargs: Any,
    ) -> float:
        """Score one test case; sets ``score``, ``success``, ``reason``, ``verbose_logs``.

        Raises:
            MissingTestCaseParamsError: no ``actual_output``, or no grounding in the chosen field(s).
            GraphEvalError: a model could not be loaded or a stage failed (``metric.error`` says which).
        """
        self.score = self.success = self.reason = self.error = self.verbose_logs = self.evaluation_cost = None
        with metric_progress_indicator(
            self, async_mode=True, _show_indicator=_show_indicator, _in_component=_in_component
        ):
            try:
                output, context, source = _read_test_case(test_case, self.context_field, self.__name__)
                report = await self._engine.aevaluate(context, output, id=getattr(test_case, "name", None))
                _raise_for_report(report)
            except Exception as exc:
                self.error = str(exc)
                self.success = False
                raise
            correction = None
            usage = dict(report.usage)
            fails = report.score is not None and report.score < self.threshold
            if self.suggest_correction and self.include_reason and report.hallucinated and fails:
                # The engine flags at 1 - threshold (hallucinated); the case fails in DeepEval's score space.
                with metered() as correcting:
                    correction = await self._suggest(context, output, report)
                usage["correct"] = correcting.usage()
            self.evaluation_cost = usage_cost(usage, self.prices)
            return self._apply(report, source, correction)

    def is_successful(self) -> bool:
        self.success = self.error is None and self.score is not None and self.score >= self.threshold
        return self.success

    # ----------------------------------------------------------------- results
    async def _suggest(self, context: str | tuple[str, ...], output: str, report: Report) -> str:
        """GraphCorrect's suggestion for a flagged output, as lines for the reason."""
        corrector = self.suggest_correction
        if corrector is True:
            from ..correct import GraphCorrect

            corrector = GraphCorrect(self._engine, rouge=False)
        try:
            result = await corrector.acorrect(context, output, report=report)
        except GraphEvalError as exc:
            return f"suggested correction: none ({type(exc).__name__}: {exc})"
        if not result.changed:
            why = [c.reason for c in result.rejected if c.reason] + [e.message for e in result.errors]
            return f"suggested correction: none ({'; '.join(why) or result.status})"
        verdict = {"corrected": " (passes the re-check)", "still_flagged": " (still flagged by the re-check)",
                   "recheck_failed": " (not verified: the re-check failed)"}.get(result.status, "")
        return f"suggested correction{verdict}: {result.corrected}\nchanges: {result.diff}"

    def _apply(self, report: Report, source: str, correction: str | None = None) -> float:
        threshold = self.threshold
        score = float(report.score or 0.0)  # not None: checked by _raise_for_report
        shown = threshold  # the minimum score the claims are shown against
        if self.strict_mode:
            shown = round(1.0 - report.hallucination_threshold, 12)
            # Strict: 1 only when neither the output, a claim nor the whole output (where scored) is unsupported.
            whole_unsupported = report.whole_output is not None and report.whole_output.unsupported
            supported = report.hallucinated is False and not report.unsupported and not whole_unsupported
            score = 1.0 if supported else 0.0
        self.score = score
        self.success = score >= threshold
        self.reason = _format_reason(report, float(report.score or 0.0), shown, source) if self.include_reason else None
        if self.reason is not None and self.strict_mode:
            self.reason = (f"strict mode: score {score:.0f}, "
                           f"{'every claim is' if score else 'not every claim is'} supported\n{self.reason}")
        if self.reason is not None and correction:
            self.reason += "\n" + correction
        steps = [
            _format_graph(report, shown, source),
            (f"Score: {score:.0f} (strict mode: 1 only when every claim has P(unsupported) <= {report.hallucination_threshold:.3f}; "
             f"1 - P(hallucination) = {float(report.score or 0.0):.3f}, {report.method or 'raw'} rule)"
             if self.strict_mode else f"Score: {score:.3f} = 1 - P(hallucination) ({report.method or 'raw'} rule)")
            + f"; threshold {threshold:.3f} -> {'pass' if self.success else 'fail'}\nReason: {self.reason}",
        ]
        # The whole report last (stored, not printed): grapheval_plugins.report.render_json(verbose_logs) -> HTML.
        self.verbose_logs = construct_verbose_logs(self, steps=steps) + f" \n \n{JSON_MARKER} {report.model_dump_json()}"
        return score


def _check_prices(prices: Any) -> dict[str, float] | None:
    """``prices`` checked: ``None``, or non-negative US dollars per million tokens under ``input`` and ``output``."""
    if prices is None:
        return None
    ok = isinstance(prices, dict) and set(prices) == {"input", "output"} and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in prices.values())
    if not ok:
        raise InputError("prices", f'expected {{"input": usd_per_1M_tokens, "output": usd_per_1M_tokens}}, '
                                   f"got {prices!r}")
    return {"input": float(prices["input"]), "output": float(prices["output"])}


# --------------------------------------------------------------------- reading test cases
def _read_test_case(
    test_case: Any, context_field: ContextField, name: str
) -> tuple[str, tuple[str, ...], str]:
    """``(output, context, source field)`` of a test case, or the error DeepEval users expect."""
    if not isinstance(test_case, LLMTestCase):
        raise ValueError(
            f"Unable to evaluate test cases that are not of type 'LLMTestCase' using the '{name}' metric."
        )
    if getattr(test_case, "multimodal", False):
        raise ValueError(f"The '{name}' metric checks text only; multimodal test cases are not supported.")
    output = test_case.actual_output
    if output is None:
        raise MissingTestCaseParamsError(f"'actual_output' cannot be None for the '{name}' metric")
    try:
        output_text = normalize_output(output, "actual_output")
    except InputError as exc:
        raise MissingTestCaseParamsError(f"'actual_output' cannot be empty for the '{name}' metric") from exc

    fields = ("context", "retrieval_context") if context_field == "auto" else (context_field,)
    problems: list[str] = []
    for field in fields:
        value = getattr(test_case, field)
        if value is None:
            problems.append(f"'{field}' is None")
            continue
        if not isinstance(value, str):  # DeepEval's RetrievedContextData items give their text
            value = [getattr(item, "context", item) for item in value]
        try:
            return output_text, normalize_passages(value, field), field
        except InputError as exc:
            if exc.reason != "empty":
                raise
            problems.append(f"'{field}' is empty")
    wanted = " or ".join(f"'{f}'" for f in fields)
    raise MissingTestCaseParamsError(
        f"{wanted} cannot be None or empty for the '{name}' metric ({'; '.join(problems)})"
    )


def _raise_for_report(report: Report) -> None:
    """A report that reached no verdict becomes the error of the stage that failed."""
    if report.ok and report.score is not None:
        return
    if not report.errors:
        raise GraphEvalError("no verdict was reached")
    error = report.errors[0]
    kind = {"extract": ExtractionError, "check": ScoringError}.get(error.stage, GraphEvalError)
    raise kind(f"{error.stage}: {error.message}")


# --------------------------------------------------------------------- reason and verbose logs
_MAX_LISTED = 8


def _format_reason(report: Report, score: float, threshold: float, source: str) -> str:
    """:meth:`Report.explanation` in DeepEval's terms: the score against the minimum, claims with their evidence."""
    ex = report.explanation(_MAX_LISTED, min_score=threshold)
    sign = ">=" if score >= threshold else "<"
    lines = [f"{ex.verdict}: {ex.summary} (score {score:.3f} {sign} threshold {threshold:.3f}; grounding: {source})"]
    for claim in ex.claims:
        evidence = snippet(claim.evidence or "", claim.claim)
        line = f"- {claim_text(claim)} P(unsupported)={claim.p_unsupported:.3f}"
        lines.append(line + (f'; evidence: "{evidence}"' if evidence else ""))
    if ex.more:
        lines.append(f"- … {ex.more} more")
    if ex.note:
        lines.append(f"({ex.note})")
    return "\n".join(lines)


def _format_graph(report: Report, threshold: float, source: str) -> str:
    extraction = report.extraction
    head = f"Grounding: {source}. Models: {report.llm or 'raw'} + {report.scorer}."
    if extraction is None:
        lines = [head, "Mode raw: the whole output was scored as one claim."]
    else:
        n = len(report.triples)
        lines = [
            head,
            f"Knowledge graph: {n} triple{'' if n == 1 else 's'} (chat-model calls: {extraction.attempts}, "
            f"cached: {'yes' if extraction.cached else 'no'}, fallback: {'yes' if extraction.fallback else 'no'})",
        ]
    for i, claim in enumerate(report.claims, 1):
        verdict = "UNSUPPORTED" if 1.0 - claim.p_unsupported < threshold else "supported"
        span = f" span=[{claim.span[0]}, {claim.span[1]})" if claim.span else ""
        lines.append(
            f"{i:>3}. {claim_text(claim)} P(unsupported)={claim.p_unsupported:.3f} {verdict}{span} "
            f"evidence chunk #{claim.evidence_index}"
        )
    if extraction is not None and extraction.issues:
        lines.append("Parser notes: " + "; ".join(extraction.issues))
    if report.timings:
        lines.append("Seconds: " + ", ".join(f"{k} {v:.2f}" for k, v in report.timings.items()))
    if report.usage:
        lines.append("Chat-model calls (prompt / completion tokens): " + ", ".join(
            f"{stage} {u.calls} ({u.input_tokens} / {u.output_tokens})" for stage, u in report.usage.items()))
    return "\n".join(lines)
