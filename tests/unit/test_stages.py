"""The two stages run apart (``extract_rows`` then ``check_rows``, through JSON) give ``evaluate_many``'s reports."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from grapheval_plugins import ExtractedRow, GraphEval, Report
from grapheval_plugins.exceptions import GraphEvalError
from grapheval_plugins.testing import KeywordScorer, ScriptedChatModel, naive_triples_chat_model


def _respond(messages: list[Any]) -> str:
    text = str(messages[-1].content)
    if "provider-down" in text:
        raise RuntimeError("provider unavailable")
    if "garbled" in text:
        return "no graph here"
    respond = naive_triples_chat_model().respond
    assert respond is not None
    return respond(messages)


def _engine(**options: Any) -> GraphEval:
    return GraphEval(llm=ScriptedChatModel(respond=_respond, model_label="fake"), scorer=KeywordScorer(),
                     max_retries=1, show_progress=False, **options)


ROWS = [
    {"id": "a", "context": "Alice Smith lives in Paris. She works at Acme.", "output": "Alice Smith lives in Paris."},
    {"id": "b", "context": "Alice Smith lives in Paris.", "output": "Alice Smith lives in Rome now."},
    {"id": "c", "context": "Some context.", "output": "This is garbled output."},
    {"id": "d", "context": "Some context.", "output": "This says provider-down today."},
    {"id": "e", "context": "Some context.", "output": ""},
    {"id": "f", "context": "Bob Jones was born in 1970.", "output": "Bob Jones was born in 1970."},
]


def _strip(report: Report) -> dict[str, Any]:
    return report.model_dump(mode="json", exclude={"timings"})


def test_stages_apart_give_the_reports_of_evaluate_many() -> None:
    expected = _engine(check_batch_rows=2).evaluate_many(ROWS)
    extracted = _engine().extract_rows(ROWS)
    assert [type(r).__name__ for r in extracted] == ["ExtractedRow"] * 3 + ["Report"] * 2 + ["ExtractedRow"]
    # across a process boundary the pending rows travel as JSON; the checking engine has no chat model
    pending = [ExtractedRow.model_validate_json(r.model_dump_json()) for r in extracted if isinstance(r, ExtractedRow)]
    checker = GraphEval(llm="never-loaded:model", scorer=KeywordScorer(), check_batch_rows=2, show_progress=False)
    checked = iter(checker.check_rows(pending))
    reports = [r if isinstance(r, Report) else next(checked) for r in extracted]
    assert [_strip(r) for r in reports] == [_strip(r) for r in expected]
    assert checker._llm is None
    assert {r.llm for r in reports if r.ok} == {"fake"}
    assert set(reports[0].timings) == {"extract", "check", "total"}


def test_positions_name_the_row_in_the_whole_batch() -> None:
    [report] = _engine().extract_rows([ROWS[4]], positions=[41])
    assert isinstance(report, Report)
    assert report.errors[0].message == "rows[41].output: is empty"


def test_ray_is_imported_only_when_the_ray_engine_runs() -> None:
    import subprocess
    import sys

    code = (
        "import sys, grapheval_plugins, grapheval_plugins.ratelimit, grapheval_plugins.integrations.ray, "
        "grapheval_plugins.cli; print('ray' in sys.modules, 'pyarrow' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


class _LoggedKeywordScorer(KeywordScorer):
    """The keyword scorer, logging each of its passes."""

    def __init__(self, log: list[str]) -> None:
        super().__init__()
        self.log = log

    def predict_support(self, pairs: Any) -> list[float]:
        self.log.append("check")
        return super().predict_support(pairs)


def _logged_engine(log: list[str], scorer: Any = None) -> GraphEval:
    def respond(messages: list[Any]) -> str:
        log.append("extract")
        return _respond(messages)

    return GraphEval(llm=ScriptedChatModel(respond=respond, model_label="fake"),
                     scorer=_LoggedKeywordScorer(log) if scorer is None else scorer, max_retries=1, max_concurrency=1,
                     show_progress=False)


class _OverlappingScorer(_LoggedKeywordScorer):
    """A scorer that asks to be run beside the extraction, as the local judge does; ``first_check`` is set once it
    has checked something."""

    overlaps_extraction = True

    def __init__(self, log: list[str]) -> None:
        super().__init__(log)
        self.first_check = threading.Event()

    def predict_support(self, pairs: Any) -> list[float]:
        try:
            return super().predict_support(pairs)
        finally:
            self.first_check.set()


def test_a_scorer_beside_the_extraction_checks_each_row_while_the_next_are_extracted() -> None:
    """With a scorer that ``overlaps_extraction``, the first row is checked while the last is still being extracted
    (its extraction waits for that check: run one stage after the other, it would time out), and the reports are
    those of the two stages."""
    log: list[str] = []
    scorer = _OverlappingScorer(log)
    seen: list[bool] = []
    last = ROWS[-1]["output"]

    def respond(messages: list[Any]) -> str:
        if last in str(messages[-1].content):
            seen.append(scorer.first_check.wait(10))
        log.append("extract")
        return _respond(messages)

    engine = GraphEval(llm=ScriptedChatModel(respond=respond, model_label="fake"), scorer=scorer, max_retries=1,
                       max_concurrency=1, show_progress=False)
    reports = engine.evaluate_many(ROWS)
    assert seen == [True] and log.index("check") < len(log) - 1 - log[::-1].index("extract")
    assert [_strip(r) for r in reports] == [_strip(r) for r in _engine().evaluate_many(ROWS)]


@pytest.mark.parametrize("overlapped", [False, True])
def test_an_error_that_ends_the_extraction_ends_the_batch(monkeypatch: pytest.MonkeyPatch, overlapped: bool) -> None:
    """An error the batch cannot report per row (here a configuration error from the extraction stage) is raised
    by ``evaluate_many`` instead of leaving it waiting for rows that never come."""
    engine = _logged_engine([], scorer=_OverlappingScorer([]) if overlapped else None)
    extract = engine._extract_claims

    async def failing(sample: Any, config: Any) -> Any:
        if sample.id == "c":
            raise GraphEvalError("the chat model is misconfigured")
        return await extract(sample, config)

    monkeypatch.setattr(engine, "_extract_claims", failing)
    with pytest.raises(GraphEvalError, match="misconfigured"):
        asyncio.run(asyncio.wait_for(engine.aevaluate_many(ROWS), 10))
