"""GraphEval as a LangSmith evaluator: ``langsmith.evaluate(target, data=..., evaluators=[GraphEvalEvaluator()])``
(how to use it: the LangChain guide).

>>> import datetime, uuid
>>> from langsmith.schemas import Run
>>> from grapheval_plugins import GraphEval
>>> from grapheval_plugins.testing import KeywordScorer, ScriptedChatModel
>>> llm = ScriptedChatModel(responses=['<python>[["The Eiffel Tower", "is in", "Rome"]]</python>'])
>>> evaluator = GraphEvalEvaluator(GraphEval(llm=llm, scorer=KeywordScorer()))
>>> result = evaluator.evaluate_run(Run(id=uuid.uuid4(), name="rag", run_type="chain", trace_id=uuid.uuid4(),
...     start_time=datetime.datetime.now(), inputs={"question": "Where is the Eiffel Tower?"},
...     outputs={"answer": "The Eiffel Tower is in Rome.", "context": "The Eiffel Tower is in Paris."}))
>>> result.key, round(result.score, 3)
('grapheval_faithfulness', 0.333)
>>> print(result.comment)
hallucination (score 0.333): 1 of 1 claim unsupported
- ['The Eiffel Tower', 'is in', 'Rome'] p_unsupported=0.667
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any

from .. import GraphEval, InputError, MissingDependencyError, Report
from ..inputs import normalize_output, normalize_passages

try:
    from langsmith.evaluation import EvaluationResult, RunEvaluator
    from langsmith.schemas import Example, Run
except ImportError as exc:  # pragma: no cover - langsmith comes with langchain-core
    raise MissingDependencyError("langsmith", "langsmith", "the LangSmith evaluator") from exc

__all__ = ["GraphEvalEvaluator"]


def _first(sources: Sequence[Mapping[str, Any] | None], keys: Sequence[str]) -> tuple[str, Any] | None:
    for source in sources:
        for key in keys:
            if source and key in source:
                return key, source[key]
    return None


@dataclass(eq=False)
class GraphEvalEvaluator(RunEvaluator):
    """A LangSmith ``RunEvaluator``: ``score`` is ``1 − P(hallucination)``, ``comment`` the explanation (at most
    ``max_claims`` claims), ``extra`` the whole report (how to use it: the LangChain guide)."""

    grapheval: GraphEval | None = None
    _: KW_ONLY
    llm: Any = None
    scorer: Any = None
    key: str = "grapheval_faithfulness"
    answer_keys: Sequence[str] = ("answer", "output")
    context_keys: Sequence[str] = ("context", "documents")
    max_claims: int = 10

    def __post_init__(self) -> None:
        if self.grapheval is not None and (self.llm is not None or self.scorer is not None):
            raise InputError("grapheval", "give an engine or llm=/scorer=, not both")
        self.answer_keys = tuple(self.answer_keys)
        self.context_keys = tuple(self.context_keys)

    @property
    def engine(self) -> GraphEval:
        """The engine that scores the runs (its models load on first use)."""
        return self.grapheval if self.grapheval is not None else GraphEval.shared(self.llm, self.scorer)

    @property
    def feedback_keys(self) -> list[str]:
        return [self.key]

    def _read(self, run: Run, example: Example | None) -> tuple[tuple[str, ...], str]:
        outputs = run.outputs or {}
        answer = _first([outputs], self.answer_keys)
        if answer is None:
            raise InputError("answer", f"no answer in the run's outputs under {list(self.answer_keys)}")
        sources = [outputs, run.inputs, example.inputs if example else None, example.outputs if example else None]
        grounding = _first(sources, self.context_keys)
        if grounding is None:
            raise InputError(
                "context", f"no grounding under {list(self.context_keys)} in the run or its example"
            )
        return normalize_passages(grounding[1], grounding[0]), normalize_output(answer[1], answer[0])

    def _result(self, report: Report) -> EvaluationResult:
        extra: dict[str, Any] = {"report": report.model_dump(mode="json")}
        if not report.ok:
            extra["error"] = True  # how LangSmith marks an evaluator's failure
        return EvaluationResult(key=self.key, score=report.score, comment=report.explain(self.max_claims), extra=extra)

    def evaluate_run(
        self, run: Run, example: Example | None = None, evaluator_run_id: uuid.UUID | None = None
    ) -> EvaluationResult:
        """Score one run (LangSmith's call)."""
        return self._result(self.engine.evaluate(*self._read(run, example)))

    async def aevaluate_run(
        self, run: Run, example: Example | None = None, evaluator_run_id: uuid.UUID | None = None
    ) -> EvaluationResult:
        """Score one run on the event loop (``langsmith.aevaluate``): concurrent runs share scorer passes."""
        return self._result(await self.engine.aevaluate(*self._read(run, example)))
