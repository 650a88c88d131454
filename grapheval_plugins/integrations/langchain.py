"""GraphEval as LangChain runnables at the end of a RAG chain (how to use them: the LangChain guide).

>>> from langchain_core.documents import Document
>>> from grapheval_plugins import GraphEval
>>> from grapheval_plugins.integrations.langchain import GraphEvalRunnable
>>> from grapheval_plugins.testing import KeywordScorer, ScriptedChatModel
>>> llm = ScriptedChatModel(responses=['<python>[["The Eiffel Tower", "located in", "Rome"]]</python>'])
>>> check = GraphEvalRunnable(GraphEval(llm=llm, scorer=KeywordScorer()))
>>> out = check.invoke({"question": "Where is the Eiffel Tower?",
...                     "context": [Document(page_content="The Eiffel Tower is in Paris.")],
...                     "answer": "The Eiffel Tower is located in Rome."})
>>> sorted(out), out["grapheval"].hallucinated
(['answer', 'context', 'grapheval', 'question'], True)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, cast

from langchain_core.runnables import (
    Runnable,
    RunnableBranch,
    RunnableConfig,
    RunnableLambda,
    RunnablePassthrough,
    RunnableSerializable,
)
from langchain_core.runnables.config import get_config_list, patch_config
from pydantic import ConfigDict
from typing_extensions import Self

from .. import GraphCorrect, GraphEval, InputError, Report, registry
from .._async import run_sync
from ..aggregate import RuleLike, rule_argument
from ..inputs import normalize_output, normalize_passages
from ..types import Mode

__all__ = ["GraphCorrectRunnable", "GraphEvalRunnable", "route_on_hallucination"]


def _keys(value: Any, field: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = (value,)
    if not isinstance(value, Sequence) or not value or not all(isinstance(k, str) and k for k in value):
        raise InputError(field, f"expected a key name or a non-empty list of key names, got {value!r}")
    return tuple(value)


def _pick(row: Mapping[str, Any], keys: tuple[str, ...], what: str) -> tuple[str, Any]:
    for key in keys:
        if key in row:
            return key, row[key]
    raise InputError(
        "input",
        f"no {what} found: expected one of the keys {list(keys)}, got {sorted(map(str, row))}. "
        f"Set {'answer_keys' if what == 'answer' else 'context_keys'}=... to the key your chain uses.",
    )


class _RowRunnable(RunnableSerializable[dict[str, Any], Any]):
    """Shared plumbing: reading rows, one traced run per row, batches on one event loop."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    answer_keys: tuple[str, ...] = ("answer", "output")
    context_keys: tuple[str, ...] = ("context", "documents")

    @staticmethod
    def _check_options(kwargs: dict[str, Any]) -> None:
        for field in ("answer_keys", "context_keys"):
            if field in kwargs:
                kwargs[field] = _keys(kwargs[field], field)
        for field in ("report_key", "correction_key"):
            if field in kwargs and not (isinstance(kwargs[field], str) and kwargs[field]):
                raise InputError(field, f"expected a non-empty key name, got {kwargs[field]!r}")
        if kwargs.get("output", "row") not in ("row", "answer", "report"):
            raise InputError("output", f"must be 'row', 'answer' or 'report', got {kwargs['output']!r}")

    def with_options(self, **changes: Any) -> Self:
        """A copy with some options changed, sharing the same engine (and its loaded models).

        >>> from grapheval_plugins.testing import KeywordScorer
        >>> r = GraphEvalRunnable(scorer=KeywordScorer())
        >>> r2 = r.with_options(report_only=True, answer_keys="response")
        >>> r2.grapheval is r.grapheval, r2.report_only, r2.answer_keys
        (True, True, ('response',))
        """
        self._check_options(changes)
        return self.model_copy(update=changes)

    # ----------------------------------------------------------------- rows
    def _read(self, row: Any) -> tuple[tuple[str, ...], str, str]:
        """``(context passages, answer, answer key)`` of one input row, validated."""
        if not isinstance(row, Mapping):
            raise InputError(
                "input",
                f"expected a dict with one of {list(self.answer_keys)} and one of {list(self.context_keys)}, "
                f"got {type(row).__name__}",
            )
        answer_key, answer = _pick(row, self.answer_keys, "answer")
        context_key, context = _pick(row, self.context_keys, "context")
        return normalize_passages(context, context_key), normalize_output(answer, answer_key), answer_key

    async def _arow(self, row: dict[str, Any], config: RunnableConfig) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def _max_concurrency(self) -> int:  # pragma: no cover - overridden
        return 4

    # LangChain passes the child config (callbacks of this run) as ``config``: the chat-model calls nest under it.
    def invoke(self, input: dict[str, Any], config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        return self._call_with_config(lambda row, config: run_sync(self._arow(row, config)), input, config, **kwargs)

    async def ainvoke(self, input: dict[str, Any], config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        return await self._acall_with_config(lambda row, run_manager, config: self._arow(row, config), input, config,
                                             **kwargs)

    def batch(
        self,
        inputs: list[dict[str, Any]],
        config: RunnableConfig | list[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> list[Any]:
        """Many rows concurrently on one event loop (:meth:`abatch`); results in input order, each its own run."""
        return run_sync(self.abatch(inputs, config, return_exceptions=return_exceptions, **kwargs))

    async def abatch(
        self,
        inputs: list[dict[str, Any]],
        config: RunnableConfig | list[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> list[Any]:
        """LangChain's ``abatch`` with at most ``max_concurrency`` rows in flight (the config's, else the engine's)."""
        configs = [patch_config(c, max_concurrency=c.get("max_concurrency") or self._max_concurrency())
                   for c in get_config_list(config, len(inputs))]
        return await super().abatch(inputs, configs, return_exceptions=return_exceptions, **kwargs)


class GraphEvalRunnable(_RowRunnable):
    """Adds GraphEval's report of a RAG chain's answer to the row (rows and options: the LangChain guide).

    A stage failure does not raise (the report carries it); a row without an answer or context raises
    :class:`~grapheval_plugins.exceptions.InputError`. ``method`` is the deprecated name of ``rule``.
    """

    name: str | None = "GraphEval"
    grapheval: GraphEval
    report_key: str = "grapheval"
    report_only: bool = False

    def __init__(
        self,
        grapheval: GraphEval | None = None,
        *,
        llm: Any = None,
        scorer: Any = None,
        mode: Mode | None = None,
        rule: RuleLike | None = None,
        hallucination_threshold: float | None = None,
        method: RuleLike | None = None,
        **kwargs: Any,
    ) -> None:
        rule = rule_argument(rule, method, "GraphEvalRunnable", default=None)
        grapheval = registry.engine_options(
            grapheval, llm=llm, scorer=scorer, mode=mode, rule=rule, hallucination_threshold=hallucination_threshold
        ).engine()
        self._check_options(kwargs)
        super().__init__(grapheval=grapheval, **kwargs)  # type: ignore[call-arg]

    def _max_concurrency(self) -> int:
        return self.grapheval.max_concurrency

    async def _arow(self, row: dict[str, Any], config: RunnableConfig) -> Any:
        context, answer, _ = self._read(row)
        report = await self.grapheval.aevaluate(context, answer, config=config)
        return report if self.report_only else {**row, self.report_key: report}


class GraphCorrectRunnable(_RowRunnable):
    """Corrects the answer of a RAG chain with GraphCorrect (rows, ``output=`` and reuse of a report: the LangChain
    guide). Chat-model failures are recorded, not raised; with no ``corrector``, ``GraphCorrect(grapheval, llm)``.

    >>> from grapheval_plugins import GraphEval
    >>> from grapheval_plugins.correct import GraphCorrect
    >>> from grapheval_plugins.testing import KeywordScorer, ScriptedChatModel
    >>> def respond(messages):
    ...     text = messages[-1].content
    ...     if "<old_triple>" in text:
    ...         return "<context>Tom lives in Bergen.</context>"
    ...     if "<triple>" in text:
    ...         return '["Tom", "lives in", "Bergen"]'
    ...     return '<python>[["Tom", "lives in", "%s"]]</python>' % ("Bergen" if "Bergen" in text else "Oslo")
    >>> grapheval = GraphEval(llm=ScriptedChatModel(respond=respond), scorer=KeywordScorer())
    >>> fix = GraphCorrectRunnable(GraphCorrect(grapheval, rouge=False))
    >>> out = fix.invoke({"context": "Tom lives in Bergen.", "answer": "Tom lives in Oslo."})
    >>> out["answer"], out["correction"].status
    ('Tom lives in Bergen.', 'corrected')
    """

    name: str | None = "GraphCorrect"
    corrector: GraphCorrect
    report_key: str = "grapheval"
    correction_key: str = "correction"
    output: Literal["row", "answer", "report"] = "row"

    def __init__(
        self,
        corrector: GraphCorrect | None = None,
        *,
        grapheval: GraphEval | None = None,
        llm: Any = None,
        **kwargs: Any,
    ) -> None:
        if corrector is None:
            if grapheval is not None and not isinstance(grapheval, GraphEval):
                raise InputError("grapheval", f"expected a GraphEval engine, got {type(grapheval).__name__}", reason="type")
            corrector = GraphCorrect(grapheval if grapheval is not None else GraphEval.shared(), llm)
        elif grapheval is not None or llm is not None:
            raise InputError("grapheval", "pass either a GraphCorrect engine or grapheval/llm, not both")
        if not isinstance(corrector, GraphCorrect):
            raise InputError("corrector", f"expected a GraphCorrect engine, got {type(corrector).__name__}", reason="type")
        self._check_options(kwargs)
        super().__init__(corrector=corrector, **kwargs)  # type: ignore[call-arg]

    def _max_concurrency(self) -> int:
        return cast(int, self.corrector.max_concurrency or self.corrector.grapheval.max_concurrency)

    async def _arow(self, row: dict[str, Any], config: RunnableConfig) -> Any:
        context, answer, answer_key = self._read(row)
        known = row.get(self.report_key)
        detection = known if isinstance(known, Report) and known.output == answer else None
        result = await self.corrector.acorrect(context, answer, report=detection, config=config)
        if self.output == "answer":
            return result.corrected
        if self.output == "report":
            return result
        out = {**row, answer_key: result.corrected, self.correction_key: result}
        if self.report_key in row:
            out[self.report_key] = result.recheck or result.detection
        return out


def _when(key: str, test: Callable[[Report], bool]) -> RunnableLambda[Mapping[str, Any], bool]:
    return RunnableLambda(lambda row: isinstance(row.get(key), Report) and test(row[key]))


def route_on_hallucination(
    checker: GraphEvalRunnable,
    on_hallucination: Runnable[Any, Any] | Callable[[Any], Any],
    *,
    otherwise: Runnable[Any, Any] | Callable[[Any], Any] | None = None,
    on_error: Runnable[Any, Any] | Callable[[Any], Any] | None = None,
) -> Runnable[dict[str, Any], Any]:
    """Check the answer, then send the row (with its report) to ``on_hallucination`` when flagged, to ``on_error``
    (if given) when no verdict was reached, else to ``otherwise`` (default: the row unchanged).

    >>> from grapheval_plugins import GraphEval
    >>> from grapheval_plugins.testing import KeywordScorer, ScriptedChatModel
    >>> llm = ScriptedChatModel(respond=lambda messages: '<python>[["Tom", "lives in", "Oslo"]]</python>')
    >>> chain = route_on_hallucination(
    ...     GraphEvalRunnable(GraphEval(llm=llm, scorer=KeywordScorer())),
    ...     on_hallucination=lambda row: {**row, "answer": "I don't know."})
    >>> chain.invoke({"context": "Tom lives in Bergen.", "answer": "Tom lives in Oslo."})["answer"]
    "I don't know."
    >>> chain.invoke({"context": "Tom lives in Oslo.", "answer": "Tom lives in Oslo."})["answer"]
    'Tom lives in Oslo.'
    """
    key = checker.report_key
    check = checker.with_options(report_only=False)
    flagged = _when(key, lambda report: report.hallucinated is True).with_config(run_name="hallucinated")
    branches: list[Any] = [(flagged, on_hallucination)]
    if on_error is not None:
        branches.append((_when(key, lambda report: not report.ok).with_config(run_name="no_verdict"), on_error))
    branches.append(otherwise if otherwise is not None else RunnablePassthrough())
    branch = RunnableBranch(*branches).with_config(run_name="route_on_hallucination")
    return cast("Runnable[dict[str, Any], Any]", check | branch)
