"""GraphEval as a LangSmith evaluator, called the way ``langsmith.evaluate`` calls its evaluators (offline)."""

from __future__ import annotations

import asyncio
import datetime
import uuid
from typing import Any

import pytest
from langchain_core.documents import Document
from langsmith.evaluation import EvaluationResult, RunEvaluator
from langsmith.schemas import Example, Run

from grapheval_plugins import GraphEval, InputError, Report
from grapheval_plugins.integrations.langsmith import GraphEvalEvaluator
from grapheval_plugins.testing import KeywordScorer, ScriptedChatModel

TRIPLES = '<python>[["The Eiffel Tower", "is in", "Rome"]]</python>'
FAITHFUL = '<python>[["The Eiffel Tower", "is in", "Paris"]]</python>'


def _run(outputs: dict[str, Any], inputs: dict[str, Any] | None = None) -> Run:
    return Run(id=uuid.uuid4(), name="rag", run_type="chain", trace_id=uuid.uuid4(),
               start_time=datetime.datetime.now(datetime.timezone.utc), inputs=inputs or {}, outputs=outputs)


def _example(inputs: dict[str, Any], outputs: dict[str, Any] | None = None) -> Example:
    return Example(id=uuid.uuid4(), dataset_id=uuid.uuid4(), inputs=inputs, outputs=outputs)


def _evaluator(*responses: str) -> GraphEvalEvaluator:
    return GraphEvalEvaluator(GraphEval(llm=ScriptedChatModel(responses=list(responses)), scorer=KeywordScorer()))


def test_is_a_run_evaluator_langsmith_takes_as_is() -> None:
    # langsmith.evaluate wraps plain functions with run_evaluator(); a RunEvaluator is used as given.
    evaluator = _evaluator(TRIPLES)
    assert isinstance(evaluator, RunEvaluator)
    assert evaluator.feedback_keys == ["grapheval_faithfulness"]


def test_scores_a_run_with_the_explanation_as_comment() -> None:
    evaluator = _evaluator(TRIPLES)
    run = _run({"answer": "The Eiffel Tower is in Rome.",
                "context": [Document(page_content="The Eiffel Tower is in Paris.")]})
    # the keyword call langsmith's runner makes
    result = evaluator.evaluate_run(run=run, example=_example({"question": "Where?"}), evaluator_run_id=uuid.uuid4())
    assert isinstance(result, EvaluationResult)
    report = Report.model_validate(result.extra["report"])  # type: ignore[index]
    assert result.key == "grapheval_faithfulness"
    assert report.hallucinated is True
    assert result.score == report.score and result.score is not None and result.score < 0.5
    assert result.comment == report.explain()
    assert "['The Eiffel Tower', 'is in', 'Rome']" in result.comment


def test_grounding_from_the_example_and_a_string_target() -> None:
    # a target returning a string: LangSmith stores it under "output"; the documents are in the dataset example
    evaluator = _evaluator(FAITHFUL)
    run = _run({"output": "The Eiffel Tower is in Paris."}, inputs={"question": "Where?"})
    example = _example({"question": "Where?", "documents": ["The Eiffel Tower is in Paris."]})
    result = evaluator.evaluate_run(run=run, example=example)
    assert result.score is not None and result.score > 0.5
    assert result.comment is not None and result.comment.startswith("faithful")


def test_async_path_langsmith_aevaluate_uses() -> None:
    evaluator = _evaluator(TRIPLES)
    run = _run({"answer": "The Eiffel Tower is in Rome.", "context": "The Eiffel Tower is in Paris."})
    result = asyncio.run(evaluator.aevaluate_run(run=run, example=None))
    assert result.score is not None and result.score < 0.5


def test_missing_grounding_raises_for_langsmith_to_record() -> None:
    evaluator = _evaluator(TRIPLES)
    with pytest.raises(InputError, match="context"):
        evaluator.evaluate_run(run=_run({"answer": "The Eiffel Tower is in Rome."}))
    with pytest.raises(InputError, match="answer"):
        evaluator.evaluate_run(run=_run({"text": "x", "context": "y"}))


def test_stage_failure_is_error_feedback_without_score() -> None:
    evaluator = _evaluator(RuntimeError("provider down"))  # type: ignore[arg-type]
    evaluator.engine.max_retries = 0
    result = evaluator.evaluate_run(run=_run({"answer": "The Eiffel Tower is in Rome.", "context": "Paris."}))
    assert result.score is None
    assert result.extra is not None and result.extra["error"] is True
    assert result.comment is not None and result.comment.startswith("error:")


def test_models_take_the_shared_engine() -> None:
    llm, scorer = ScriptedChatModel(responses=[TRIPLES]), KeywordScorer()
    assert GraphEvalEvaluator(llm=llm, scorer=scorer).engine is GraphEval.shared(llm, scorer)
    with pytest.raises(InputError):
        GraphEvalEvaluator(GraphEval.shared(llm, scorer), llm=llm)
