"""A chaos run: 200 rows, 30 % of chat-model calls failing (timeouts, throttling, 5xx, empty, cut and
wrong-format answers) and a scorer that raises, returns NaN or out-of-range values or runs out of memory. Every
row ends scored or carrying its error with its kind, with the same figures through the core and each adapter."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from chaos_models import CHAOS_LLM_FAULTS, CHAOS_SCORER_FAULTS, ChaosChatModel, ChaosScorer

from grapheval_plugins import GraphEval, Report
from grapheval_plugins.retry import RetryPolicy

N_ROWS = 200
LLM_FAILURE_RATE = 0.3
SEED = 19
FAST_RETRY = RetryPolicy(attempts=2, initial_s=0.0, max_wait_s=0.0, jitter_s=0.0)

CITIES = ["Paris", "Rome", "Vienna", "Oslo", "Lima", "Cairo", "Quito", "Delhi", "Seoul", "Accra"]
THINGS = ["museum", "bridge", "tower", "library", "market", "harbour", "stadium", "garden", "palace", "station"]


def rows() -> list[dict[str, str]]:
    """Distinct rows (the chaos draws depend on the prompt text); about a third of the outputs are unsupported."""
    out = []
    for i in range(N_ROWS):
        city, thing = CITIES[i % 10], THINGS[(i // 10) % 10]
        context = f"The old {thing} number {i} stands in {city}. It was built long ago."
        place = city if i % 3 else CITIES[(i + 1) % 10]
        output = f"The old {thing} number {i} stands in {place}. Visitors of row {i} like it very much."
        out.append({"id": f"row-{i}", "context": context, "output": output})
    return out


def engine() -> GraphEval:
    """A fresh engine (no cache, fresh fault counters) over the same seeded chaos."""
    return GraphEval(
        llm=ChaosChatModel(failure_rate=LLM_FAILURE_RATE, seed=SEED),
        scorer=ChaosScorer(failure_rate=0.03, seed=SEED),
        cache=False,
        retry=FAST_RETRY,
        max_concurrency=8,
        show_progress=False,
    )


def figure(report: Report) -> tuple[Any, ...]:
    """What a row ended as: its score, or the stage and kind of its error."""
    if report.ok:
        return ("scored", round(report.score or 0.0, 9), report.hallucinated)
    return ("error", report.errors[0].stage, report.errors[0].type)


@pytest.fixture(scope="module")
def core() -> tuple[GraphEval, list[Report]]:
    grapheval = engine()
    return grapheval, grapheval.evaluate_many(rows())


def test_every_row_is_scored_or_carries_its_error(core: tuple[GraphEval, list[Report]]) -> None:
    grapheval, reports = core
    assert [r.id for r in reports] == [r["id"] for r in rows()]  # none lost, none duplicated, in order
    outcomes = Counter[str]()
    for report in reports:
        if report.ok:
            assert report.score is not None and 0.0 <= report.score <= 1.0 and not math.isnan(report.score)
            assert all(0.0 <= c.p_unsupported <= 1.0 for c in report.claims)  # no NaN / out-of-range as a score
            outcomes["fallback" if report.extraction and report.extraction.fallback else "scored"] += 1
        else:
            assert report.hallucinated is None and report.score is None
            assert report.errors, f"{report.id} has neither a verdict nor an error"
            error = report.errors[0]
            assert error.stage in ("extract", "check") and error.type and error.message
            if error.stage == "extract":
                assert error.type == "ExtractionError" and "injected" in error.message
            else:
                assert error.type == "ScoringError" and "invalid probability" in error.message or (
                    "injected" in error.message
                )
            outcomes[f"error:{error.stage}"] += 1
    assert sum(outcomes.values()) == N_ROWS
    # The run exercised every path: recovered rows, fallbacks, permanent extraction and scoring failures.
    assert outcomes["scored"] > N_ROWS // 2
    assert outcomes["fallback"] > 0 and outcomes["error:extract"] > 0 and outcomes["error:check"] > 0
    retried = [r for r in reports if r.ok and r.extraction and r.extraction.attempts > 1 and r.extraction.triples]
    assert retried, "no row recovered on a retry"
    llm = grapheval.llm
    assert isinstance(llm, ChaosChatModel)
    injected = llm.faults_injected
    assert set(injected) == set(CHAOS_LLM_FAULTS)
    assert 0.2 < sum(injected.values()) / llm.calls < 0.4  # about the share asked for


def test_scorer_faults_fail_their_rows_only(core: tuple[GraphEval, list[Report]]) -> None:
    grapheval, reports = core
    scorer = grapheval.scorer
    assert isinstance(scorer, ChaosScorer)
    poisoned = set()
    kinds = set()
    signs = {"nan": "probability: nan", "out_of_range": "probability: 1.5", "oom": "out of memory",
             "raise": "backend crashed"}
    for row, report in zip(rows(), reports):
        claims = [c.claim for c in report.claims]
        faults = {scorer.fault_of(row["context"], c) for c in claims}
        assert faults == {None} or not claims, f"{report.id}: a faulty score was taken as a verdict"
        if not report.ok and report.errors[0].stage == "check":
            poisoned.add(report.id)
            kinds |= {kind for kind, sign in signs.items() if sign in report.errors[0].message}
    assert kinds == set(CHAOS_SCORER_FAULTS)  # each fault kind hit some row and was recorded as its error
    assert len(poisoned) < N_ROWS // 5  # a poisoned claim fails its row, not its batch


def test_the_same_figures_through_the_langchain_runnable(core: tuple[GraphEval, list[Report]]) -> None:
    from grapheval_plugins.integrations.langchain import GraphEvalRunnable

    _, reports = core
    out = GraphEvalRunnable(engine(), report_only=True).batch(rows(), config={"max_concurrency": 8},
                                                             return_exceptions=True)
    assert len(out) == N_ROWS and all(isinstance(r, Report) for r in out)  # a stage failure is not raised
    assert [figure(r) for r in out] == [figure(r) for r in reports]


def test_the_same_figures_through_deepeval_evaluate(
    core: tuple[GraphEval, list[Report]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("deepeval")
    from deepeval import evaluate
    from deepeval.evaluate.configs import AsyncConfig, DisplayConfig, ErrorConfig
    from deepeval.test_case import LLMTestCase

    from grapheval_plugins.integrations.deepeval import GraphEvalMetric

    monkeypatch.chdir(tmp_path)  # DeepEval's .deepeval folder
    _, reports = core
    cases = [LLMTestCase(input=r["id"], actual_output=r["output"], context=[r["context"]]) for r in rows()]
    result = evaluate(
        cases,
        [GraphEvalMetric(grapheval=engine())],
        display_config=DisplayConfig(show_indicator=False, print_results=False, inspect_after_run=False),
        error_config=ErrorConfig(ignore_errors=True),
        async_config=AsyncConfig(max_concurrent=20),
    )
    by_id = {t.input: t.metrics_data[0] for t in result.test_results}
    assert len(by_id) == N_ROWS
    for report in reports:
        data = by_id[report.id]
        if report.ok:
            assert data.error is None and data.score == pytest.approx(report.score)
        else:
            assert data.error is not None and data.success is False
            assert report.errors[0].message[:40] in data.error


def test_the_same_figures_through_ragas_evaluate(core: tuple[GraphEval, list[Report]]) -> None:
    pytest.importorskip("ragas")
    from ragas import EvaluationDataset, SingleTurnSample, evaluate

    from grapheval_plugins.integrations.ragas import GraphEvalFaithfulness

    _, reports = core
    dataset = EvaluationDataset(
        samples=[SingleTurnSample(user_input=r["id"], response=r["output"], retrieved_contexts=[r["context"]])
                 for r in rows()]
    )
    metric = GraphEvalFaithfulness(grapheval=engine())
    result = evaluate(dataset, metrics=[metric], raise_exceptions=False, show_progress=False)
    got = [row[metric.name] for row in result.scores]
    assert len(got) == N_ROWS
    for report, value in zip(reports, got):
        if report.ok:
            assert value == pytest.approx(report.score)
        else:
            assert isinstance(value, float) and math.isnan(value)
