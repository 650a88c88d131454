"""One engine shared by many threads and many asyncio tasks gives the results of sequential use; cancelled tasks
never leave it stuck.

The chat model and the scorer inject seeded faults (30 % of chat-model calls fail, some claims poison their scorer
pass) whose draws depend only on the prompt and how often that prompt was sent before, never on timing, so a row
evaluated once ends the same way in any runner. Every row is evaluated once per run; a run is compared, row by row,
with a fresh engine evaluating the same rows one at a time. Waits are bounded, so a deadlock fails a test instead of
hanging it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import random
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from chaos_models import ChaosChatModel, ChaosScorer
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult

from grapheval_plugins import GraphEval, Report, registry
from grapheval_plugins._async import background_loop
from grapheval_plugins.retry import RetryPolicy
from grapheval_plugins.testing import KeywordScorer, ScriptedChatModel, _naive_triples

WAIT_S = 120.0
FAST_RETRY = RetryPolicy(attempts=2, initial_s=0.0, max_wait_s=0.0, jitter_s=0.0)
SEED = 7
CITIES = ["Paris", "Rome", "Vienna", "Oslo", "Lima", "Cairo", "Quito", "Delhi"]


def rows(n: int, tag: str = "row") -> list[dict[str, str]]:
    out = []
    for i in range(n):
        city = CITIES[i % len(CITIES)]
        place = city if i % 3 else CITIES[(i + 1) % len(CITIES)]
        out.append({
            "id": f"{tag}-{i}",
            "context": f"The old {tag} bridge number {i} stands in {city}. It was built long ago.",
            "output": f"The old {tag} bridge number {i} stands in {place}. Visitors of {tag} {i} like it a lot.",
        })
    return out


class SlowChaos(ChaosChatModel):
    """Seeded faults, and a few milliseconds per call so that concurrent calls overlap."""

    latency_s: float = 0.002

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        time.sleep(self.latency_s)
        return super()._generate(messages, stop, run_manager, **kwargs)

    async def _agenerate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                         **kwargs: Any) -> ChatResult:
        await asyncio.sleep(self.latency_s)
        return await super()._agenerate(messages, stop, run_manager, **kwargs)


class SlowScorer(ChaosScorer):
    """Seeded scorer faults, and a pass that takes a little time (it runs in a worker thread)."""

    def predict_support(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        time.sleep(0.001)
        return super().predict_support(pairs)


def chaos_engine(cache: Any = False) -> GraphEval:
    return GraphEval(
        llm=SlowChaos(failure_rate=0.3, seed=SEED), scorer=SlowScorer(failure_rate=0.05, seed=SEED), cache=cache,
        retry=FAST_RETRY, max_concurrency=8, show_progress=False,
    )


def outcome(report: Report) -> tuple[Any, ...]:
    """Everything a row's verdict is made of (not its timings)."""
    extraction = report.extraction
    return (
        report.id, report.hallucinated, report.score,
        tuple((c.claim, c.p_unsupported, c.unsupported, c.evidence) for c in report.claims),
        tuple((e.stage, e.type, e.message) for e in report.errors),
        None if extraction is None else (extraction.attempts, extraction.fallback, tuple(map(str, extraction.triples))),
    )


def sequential(batch: list[dict[str, str]], make: Callable[[], GraphEval] = chaos_engine) -> dict[str, tuple[Any, ...]]:
    engine = make()
    return {r["id"]: outcome(engine.evaluate(r["context"], r["output"], id=r["id"])) for r in batch}


def run_threads(work: Sequence[Callable[[], Any]]) -> list[Any]:
    """Run each callable in its own (daemon) thread at once; bounded wait; re-raise the first error."""
    results: list[Any] = [None] * len(work)
    errors: list[BaseException] = []
    start = threading.Barrier(len(work))

    def target(i: int) -> None:
        try:
            start.wait(WAIT_S)
            results[i] = work[i]()
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            errors.append(exc)

    threads = [threading.Thread(target=target, args=(i,), daemon=True) for i in range(len(work))]
    for t in threads:
        t.start()
    deadline = time.monotonic() + WAIT_S
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    stuck = [t for t in threads if t.is_alive()]
    assert not stuck, f"{len(stuck)} thread(s) still running after {WAIT_S} s: a deadlock"
    if errors:
        raise errors[0]
    return results


# --------------------------------------------------------------------------- threads and tasks
def test_many_threads_on_one_engine_match_sequential_use() -> None:
    batch = rows(96)
    expected = sequential(batch)
    engine = chaos_engine()

    def one(row: dict[str, str]) -> Callable[[], tuple[Any, ...]]:
        return lambda: outcome(engine.evaluate(row["context"], row["output"], id=row["id"]))

    got = run_threads([one(r) for r in batch])  # 96 threads, all on the background loop at once
    assert {o[0]: o for o in got} == expected
    kinds = {o[4][0][:2] if o[4] else ("scored",) for o in got}
    assert ("extract", "ExtractionError") in kinds and ("scored",) in kinds  # faults were hit, and survived


def test_many_tasks_on_one_loop_match_sequential_use() -> None:
    batch = rows(96)
    expected = sequential(batch)
    engine = chaos_engine()

    async def run() -> list[Report]:
        calls = [engine.aevaluate(r["context"], r["output"], id=r["id"]) for r in batch]
        return await asyncio.wait_for(asyncio.gather(*calls), WAIT_S)

    got = asyncio.run(run())
    assert {r.id: outcome(r) for r in got} == expected


@pytest.mark.parametrize("cache", ["none", "memory", "sqlite"])
def test_every_way_in_at_once_on_one_engine(cache: str, tmp_path: Any) -> None:
    """Sync calls from threads (the background loop), tasks on a caller's own loop, a batch and a Runnable batch,
    all at the same time on one engine, its scorer and its knowledge-graph cache."""
    from grapheval_plugins.integrations.langchain import GraphEvalRunnable

    batch = rows(120)
    expected = sequential(batch)
    store = {"none": False, "memory": True, "sqlite": tmp_path / "kg.sqlite"}[cache]
    engine = chaos_engine(cache=store)
    parts = [batch[i::5] for i in range(5)]

    def sync_calls(part: list[dict[str, str]]) -> Callable[[], list[Report]]:
        return lambda: [engine.evaluate(r["context"], r["output"], id=r["id"]) for r in part]

    def own_loop(part: list[dict[str, str]]) -> Callable[[], list[Report]]:
        async def run() -> list[Report]:
            calls = [engine.aevaluate(r["context"], r["output"], id=r["id"]) for r in part]
            return await asyncio.wait_for(asyncio.gather(*calls), WAIT_S)

        return lambda: asyncio.run(run())

    def many(part: list[dict[str, str]]) -> Callable[[], list[Report]]:
        return lambda: engine.evaluate_many(part)

    def runnable(part: list[dict[str, str]]) -> Callable[[], list[Report]]:
        chain = GraphEvalRunnable(engine, report_only=True)
        return lambda: chain.batch(part, config={"max_concurrency": 8}, return_exceptions=True)

    got = run_threads([sync_calls(parts[0]), sync_calls(parts[1]), own_loop(parts[2]), many(parts[3]),
                       runnable(parts[4])])
    for part, reports in zip(parts, got):
        assert len(reports) == len(part) and all(isinstance(r, Report) for r in reports)
        for row, report in zip(part, reports):  # (a Runnable's report has no row id: compare the rest)
            assert outcome(report)[1:] == expected[row["id"]][1:], row["id"]
    if engine.cache is not None:  # every extraction that parsed went through the shared cache
        assert len(engine.cache) == sum(1 for o in expected.values() if o[5] is not None and not o[5][1])  # type: ignore[arg-type]


def test_shared_registry_engines_from_many_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """``GraphEval.shared`` over spec strings, asked for from many threads at two thresholds: one engine, its
    models loaded once, and the verdicts of sequential use at each threshold."""
    from grapheval_plugins import testing

    llm_spec = "py:grapheval_plugins.testing:naive_triples_chat_model"
    scorer_spec = "py:grapheval_plugins.testing:KeywordScorer"
    loads: list[str] = []
    real_llm, real_scorer = testing.naive_triples_chat_model, testing.KeywordScorer

    def counted_llm() -> Any:
        loads.append("llm")
        time.sleep(0.01)  # a slow load: the other threads arrive meanwhile
        return real_llm()

    def counted_scorer() -> Any:
        loads.append("scorer")
        time.sleep(0.01)
        return real_scorer()

    monkeypatch.setattr(testing, "naive_triples_chat_model", counted_llm)  # what the py: specs name
    monkeypatch.setattr(testing, "KeywordScorer", counted_scorer)
    batch = rows(64, "shared")
    thresholds = [0.5 if i % 2 else 0.2 for i in range(len(batch))]

    def baseline(threshold: float) -> Callable[[], GraphEval]:
        return lambda: GraphEval(llm=real_llm(), scorer=real_scorer(), hallucination_threshold=threshold)

    expected = {**sequential(batch[0::2], baseline(0.2)), **sequential(batch[1::2], baseline(0.5))}
    loads.clear()

    def one(row: dict[str, str], threshold: float) -> Callable[[], tuple[GraphEval, Report]]:
        def call() -> tuple[GraphEval, Report]:
            engine = GraphEval.shared(llm_spec, scorer_spec, hallucination_threshold=threshold)
            return engine, engine.evaluate(row["context"], row["output"], id=row["id"])

        return call

    got = run_threads([one(r, t) for r, t in zip(batch, thresholds)])
    assert sorted(loads) == ["llm", "scorer"]  # one load each, for every thread and both thresholds
    engines = {id(engine) for engine, _ in got}
    assert len(engines) == 2  # one engine, and one view of it at the other threshold
    assert len({id(engine.scorer) for engine, _ in got}) == 1
    assert registry.shared_engine(llm_spec, scorer_spec) is GraphEval.shared(llm_spec, scorer_spec)
    assert {r.id: outcome(r) for _, r in got} == expected


def test_deepeval_ragas_and_langchain_at_once_on_one_engine(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The hosts that run metrics concurrently (DeepEval, Ragas), and a Runnable batch, in three threads at once,
    all scoring with one engine: each gets the figures of sequential use."""
    pytest.importorskip("deepeval")
    pytest.importorskip("ragas")
    from deepeval import evaluate as deepeval_evaluate
    from deepeval.evaluate.configs import AsyncConfig, DisplayConfig, ErrorConfig
    from deepeval.test_case import LLMTestCase
    from ragas import EvaluationDataset, SingleTurnSample
    from ragas import evaluate as ragas_evaluate

    from grapheval_plugins.integrations.deepeval import GraphEvalMetric
    from grapheval_plugins.integrations.langchain import GraphEvalRunnable
    from grapheval_plugins.integrations.ragas import GraphEvalFaithfulness

    monkeypatch.chdir(tmp_path)  # DeepEval's .deepeval folder
    batch = rows(60, "host")
    expected = sequential(batch)
    engine = chaos_engine()
    for_deepeval, for_ragas, for_langchain = batch[0::3], batch[1::3], batch[2::3]

    def deepeval_run() -> dict[str, Any]:
        cases = [LLMTestCase(input=r["id"], actual_output=r["output"], context=[r["context"]]) for r in for_deepeval]
        result = deepeval_evaluate(
            cases, [GraphEvalMetric(grapheval=engine)],
            display_config=DisplayConfig(show_indicator=False, print_results=False, inspect_after_run=False),
            error_config=ErrorConfig(ignore_errors=True), async_config=AsyncConfig(max_concurrent=16),
        )
        return {t.input: t.metrics_data[0] for t in result.test_results}

    def ragas_run() -> list[Any]:
        dataset = EvaluationDataset(samples=[
            SingleTurnSample(user_input=r["id"], response=r["output"], retrieved_contexts=[r["context"]])
            for r in for_ragas
        ])
        metric = GraphEvalFaithfulness(grapheval=engine)
        result = ragas_evaluate(dataset, metrics=[metric], raise_exceptions=False, show_progress=False)
        return [row[metric.name] for row in result.scores]

    def langchain_run() -> list[Report]:
        return GraphEvalRunnable(engine, report_only=True).batch(for_langchain, config={"max_concurrency": 8})

    by_deepeval, by_ragas, by_langchain = run_threads([deepeval_run, ragas_run, langchain_run])
    for row in for_deepeval:
        _, hallucinated, score, _, errors, _ = expected[row["id"]]
        data = by_deepeval[row["id"]]
        if hallucinated is None:
            assert data.error is not None and errors[0][2][:40] in data.error
        else:
            assert data.error is None and data.score == pytest.approx(score)
    for row, value in zip(for_ragas, by_ragas):
        score = expected[row["id"]][2]
        assert value == pytest.approx(score) if score is not None else value != value  # NaN for an error
    assert [outcome(r)[1:] for r in by_langchain] == [expected[r["id"]][1:] for r in for_langchain]


# --------------------------------------------------------------------------- cancellation
def quick_engine() -> GraphEval:
    """Deterministic, no faults, slow enough that cancellations land in every stage."""
    return GraphEval(llm=ScriptedChatModel(respond=_naive_triples, latency_s=0.003),
                     scorer=SlowScorer(failure_rate=0.0, inner=KeywordScorer()), cache=False, show_progress=False,
                     batch_wait_s=0.005, max_batch_claims=16)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_tasks_cancelled_at_random_points_leave_the_engine_answering(seed: int) -> None:
    rng = random.Random(seed)
    batch = rows(60, f"cancel{seed}")
    after = rows(12, f"after{seed}")
    expected = sequential(after, quick_engine)
    engine = quick_engine()

    async def run() -> tuple[list[Any], list[Report]]:
        tasks = [asyncio.ensure_future(engine.aevaluate(r["context"], r["output"], id=r["id"])) for r in batch]
        tasks.append(asyncio.ensure_future(engine.aevaluate_many(rows(20, f"many{seed}"))))
        doomed = rng.sample(tasks, k=len(tasks) // 2)
        for task in doomed:  # at random points: before it starts, in extraction, the batcher's wait, a scorer pass
            task.cancel()
            await asyncio.sleep(rng.uniform(0.0, 0.004))
        settled = await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), WAIT_S)
        answers = await asyncio.wait_for(
            asyncio.gather(*(engine.aevaluate(r["context"], r["output"], id=r["id"]) for r in after)), WAIT_S
        )
        batcher = engine._batchers[asyncio.get_running_loop()]
        flush = batcher._flush_task
        if flush is not None:
            await asyncio.wait_for(asyncio.shield(flush), WAIT_S)
        assert batcher._pending == []  # nothing left waiting on a pass that will never come
        return settled, answers

    settled, answers = asyncio.run(run())
    cancelled = sum(isinstance(s, asyncio.CancelledError) for s in settled)
    finished = [s for s in settled if isinstance(s, Report)]
    assert cancelled > 0 and finished, (cancelled, len(finished))
    assert all(r.ok for r in finished)  # a neighbour's cancellation never fails a row
    assert {r.id: outcome(r) for r in answers} == expected


@pytest.mark.parametrize("seed", [0, 1])
def test_calls_cancelled_on_the_background_loop_while_threads_use_it(seed: int) -> None:
    """Coroutines cancelled on the persistent background loop, while other threads make sync calls on it."""
    rng = random.Random(seed)
    engine = quick_engine()
    loop = background_loop()
    doomed_rows = rows(40, f"bg{seed}")
    live = rows(24, f"live{seed}")
    expected = sequential(live, quick_engine)

    def canceller() -> int:
        futures = [asyncio.run_coroutine_threadsafe(engine.aevaluate(r["context"], r["output"], id=r["id"]), loop)
                   for r in doomed_rows]
        cancelled = 0
        for future in rng.sample(futures, k=len(futures) // 2):
            # cancel first, then wait: the first cancel lands right after the submissions, so at least one call is
            # cancelled however fast the machine finishes the rest
            cancelled += future.cancel()
            time.sleep(rng.uniform(0.0, 0.004))
        assert cancelled > 0
        done = 0
        for future in futures:
            try:
                future.result(timeout=WAIT_S)
                done += 1
            except (asyncio.CancelledError, concurrent.futures.CancelledError):
                pass
        assert done == len(futures) - cancelled
        return done

    def sync_calls(part: list[dict[str, str]]) -> Callable[[], list[Report]]:
        return lambda: [engine.evaluate(r["context"], r["output"], id=r["id"]) for r in part]

    got = run_threads([canceller, sync_calls(live[0::3]), sync_calls(live[1::3]), sync_calls(live[2::3])])
    assert 0 < got[0] < len(doomed_rows)
    reports = [r for part in got[1:] for r in part]
    assert {r.id: outcome(r) for r in reports} == expected
    # and the loop still serves a plain call afterwards
    last = rows(1, f"last{seed}")[0]
    assert outcome(engine.evaluate(last["context"], last["output"], id=last["id"])) == sequential([last], quick_engine)[
        last["id"]
    ]
