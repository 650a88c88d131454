"""A llama.cpp context is never entered by two calls at once, from any number of threads and tasks: the chat model
and the judge over one GGUF file have a context each (their own KV caches) and a lock each, so each context runs one
evaluation at a time, the two may run together (splitting the free cores), and every result is that of sequential
calls.

The model is a stand-in for ``llama_cpp.Llama`` (byte tokens, logits computed from the evaluated tokens) that
records every entry into each context: tokenizing, evaluating, detokenizing. Nothing is downloaded or loaded.
"""

from __future__ import annotations

import asyncio
import random
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.messages import HumanMessage

from grapheval_plugins import GraphEval, Report
from grapheval_plugins.local import runtime
from grapheval_plugins.local.chat import ChatLocalLlama
from grapheval_plugins.local.judge import LocalJudgeScorer
from grapheval_plugins.testing import _naive_triples

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
from local_fake_llama import FakeLlama, label_logits, scripted_reply  # noqa: E402

WAIT_S = 60.0  # generous: a deadlock fails the test instead of hanging it


class Weights:
    """The loaded model's weights: counts the calls inside each context at once, and the contexts running at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.active: dict[int, int] = {}
        self.most = 0  # the most calls inside one context at once
        self.most_contexts = 0  # the most contexts evaluating at once
        self.evaluating: set[int] = set()
        self.entries = 0
        self.overlaps: list[str] = []

    @contextmanager
    def enter(self, what: str, context: object) -> Iterator[None]:
        key = id(context)
        with self._lock:
            self.active[key] = self.active.get(key, 0) + 1
            self.entries += 1
            self.most = max(self.most, self.active[key])
            if what == "eval":
                self.evaluating.add(key)
                self.most_contexts = max(self.most_contexts, len(self.evaluating))
            if self.active[key] > 1:
                self.overlaps.append(what)
        try:
            time.sleep(0.0002)  # widen the window a second caller would need
            yield
        finally:
            with self._lock:
                self.active[key] -= 1
                if what == "eval":
                    self.evaluating.discard(key)


def answer(prompt: str) -> str:
    """The chat model's answer: a function of the question only, so any mix-up of contexts changes it. Prompt A
    (knowledge-graph extraction) is answered with crude triples of its input."""
    if "<input>" in prompt:
        return _naive_triples([HumanMessage(prompt)])
    question = prompt.rsplit("user\n", 1)[-1][:40]
    return "ans:" + "".join(sorted(set(question.lower())))[:12]


def scores(context: str, claim: str) -> tuple[float, float, float]:
    words = set(context.lower().split())
    share = sum(w in words for w in claim.lower().split()) / max(1, len(claim.split()))
    return 4.0 * share, 4.0 * (1 - share), 0.5


def next_logits(seq: list[int]) -> np.ndarray:
    judged = label_logits(scores)(seq)
    return judged if judged.max() > -5.0 else scripted_reply(answer)(seq)


class RecordingContext(FakeLlama):
    """One llama.cpp context over the shared :class:`Weights` (its own KV cache)."""

    def __init__(self, weights: Weights, **params: Any) -> None:
        super().__init__(next_logits, **params)
        self.weights = weights

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
        with self.weights.enter("tokenize", self):
            return super().tokenize(text, add_bos=add_bos, special=special)

    def detokenize(self, tokens: Sequence[int], prev_tokens: object = None, special: bool = False) -> bytes:
        with self.weights.enter("detokenize", self):
            return super().detokenize(tokens, prev_tokens, special)

    def eval(self, tokens: Sequence[int]) -> None:
        with self.weights.enter("eval", self):
            if len(tokens) > 16:
                time.sleep(0.005)  # a prefill takes a while, as a real one does
            super().eval(tokens)


@pytest.fixture
def weights(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Weights, Path, list[RecordingContext]]]:
    """The real session path (``get_session`` → ``load_llama``) over the stand-in model."""
    shared = Weights()
    made: list[RecordingContext] = []
    path = tmp_path / "tiny.gguf"
    path.write_bytes(b"GGUF stand-in")

    def load(model_path: Any, *, n_ctx: int, **options: Any) -> RecordingContext:
        context = RecordingContext(shared, n_ctx=n_ctx)
        made.append(context)
        return context

    monkeypatch.setattr(runtime, "load_llama", load)
    monkeypatch.setattr(runtime, "_others_running", lambda: 0)  # four idle cores, whatever the machine's load
    monkeypatch.setattr(runtime, "allowed_cpus", lambda: 4)
    runtime.clear_sessions()
    yield shared, path, made
    runtime.clear_sessions()


QUESTIONS = [f"Question {i}: name the {w} of row {i}." for i, w in enumerate(["river", "city", "tower", "king"] * 3)]
CONTEXT = "The river Seine flows through Paris. The Eiffel tower was built in Paris."
CLAIMS = ["Seine flows through Paris", "tower built in Berlin", "Paris holds the tower", "king founded Paris"]


def models(path: Path, max_tokens: int = 24) -> tuple[ChatLocalLlama, LocalJudgeScorer]:
    chat = ChatLocalLlama(model=str(path), max_tokens=max_tokens, n_ctx=8192, n_threads=1, hub=False)
    judge = LocalJudgeScorer(str(path), n_ctx=8192, n_threads=1, hub=False)
    return chat, judge


def test_chat_and_judge_have_a_context_each_and_a_lock_each(
    weights: tuple[Weights, Path, list[RecordingContext]],
) -> None:
    _, path, made = weights
    chat, judge = models(path)
    assert chat.session is not judge.session  # separate contexts (KV caches) …
    assert chat.session.lock is not judge.session.lock  # … each entered by one call at a time
    chat.invoke("warm up")
    judge.load()
    assert len(made) == 2


def test_threads_and_tasks_never_enter_a_context_at_once(
    weights: tuple[Weights, Path, list[RecordingContext]],
) -> None:
    shared, path, _ = weights
    chat, judge = models(path)
    expected_answers = {q: chat.invoke(q).content for q in QUESTIONS}
    expected_scores = judge.predict_support([(CONTEXT, c) for c in CLAIMS])
    runtime.clear_sessions()
    chat, judge = models(path)  # fresh sessions: cold caches, loads racing too
    before = shared.entries

    def talk(question: str) -> tuple[str, Any]:
        return question, chat.invoke(question).content

    def judge_all() -> list[float]:
        return judge.predict_support([(CONTEXT, c) for c in CLAIMS])

    async def tasks() -> tuple[list[Any], list[Any]]:
        answers = asyncio.gather(*(chat.ainvoke(q) for q in QUESTIONS))
        judged = asyncio.gather(*(judge.acheck([CONTEXT] * len(CLAIMS), CLAIMS) for _ in range(3)))
        return await asyncio.wait_for(asyncio.gather(answers, judged), WAIT_S)

    with ThreadPoolExecutor(max_workers=8) as pool:
        threaded_chat = [pool.submit(talk, q) for q in QUESTIONS]
        threaded_judge = [pool.submit(judge_all) for _ in range(4)]
        async_answers, async_scores = asyncio.run(tasks())
        thread_answers = [f.result(timeout=WAIT_S) for f in threaded_chat]
        thread_scores = [f.result(timeout=WAIT_S) for f in threaded_judge]

    assert shared.entries - before > 500, "the calls did not run"
    assert shared.overlaps == [] and shared.most == 1, f"entered at once by {shared.most} calls: {shared.overlaps[:5]}"
    assert shared.most_contexts <= 2  # the chat model's context and the judge's may evaluate at once
    # Serialised per context, each kept its own KV cache intact: the answers are those of sequential calls.
    assert dict(thread_answers) == expected_answers
    assert [m.content for m in async_answers] == [expected_answers[q] for q in QUESTIONS]
    assert all(s == pytest.approx(expected_scores) for s in thread_scores)
    for batch in async_scores:
        assert [1 - s.p_unsupported for s in batch] == pytest.approx(expected_scores)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cancelled_calls_leave_the_model_usable(
    weights: tuple[Weights, Path, list[RecordingContext]], seed: int
) -> None:
    """Tasks cancelled at random points (while waiting for the lock or while generating) release it."""
    shared, path, _ = weights
    chat, judge = models(path)
    expected = chat.invoke(QUESTIONS[0]).content
    rng = random.Random(seed)

    async def run() -> tuple[Any, list[float]]:
        pending = [asyncio.ensure_future(chat.ainvoke(q)) for q in QUESTIONS]
        pending += [asyncio.ensure_future(judge.acheck([CONTEXT] * 2, CLAIMS[:2])) for _ in range(4)]
        for task in rng.sample(pending, k=len(pending) // 2):
            await asyncio.sleep(rng.uniform(0, 0.01))
            task.cancel()
        await asyncio.wait_for(asyncio.gather(*pending, return_exceptions=True), WAIT_S)
        again = await asyncio.wait_for(chat.ainvoke(QUESTIONS[0]), WAIT_S)
        judged = await asyncio.wait_for(judge.acheck([CONTEXT] * len(CLAIMS), CLAIMS), WAIT_S)
        return again.content, [1 - s.p_unsupported for s in judged]

    content, judged = asyncio.run(run())
    assert content == expected
    assert judged == pytest.approx(judge.predict_support([(CONTEXT, c) for c in CLAIMS]))
    assert shared.most == 1


def test_the_engine_over_the_local_chat_model_and_judge(
    weights: tuple[Weights, Path, list[RecordingContext]],
) -> None:
    """The offline default (local extraction model + local judge over the same weights) under the engine's own
    concurrency (extraction and scoring of different rows overlap) and callers' threads: one call in the model at a
    time, and the reports of sequential use."""
    shared, path, _ = weights
    cities = ["Paris", "Rome", "Oslo", "Lima"]
    rows = [{"id": f"r{i}", "context": f"The bridge number {i} stands in {cities[i % 4]}. It is old.",
             "output": f"The bridge number {i} stands in {cities[(i + i % 2) % 4]}. It is very old."}
            for i in range(12)]

    def verdict(report: Report) -> tuple[Any, ...]:
        return (report.id, report.hallucinated, report.score, [(c.claim, c.p_unsupported) for c in report.claims],
                [e.message for e in report.errors])

    def engine() -> GraphEval:
        chat, judge = models(path, max_tokens=400)
        return GraphEval(llm=chat, scorer=judge, cache=False, max_concurrency=4, show_progress=False)

    sequential = engine()
    expected = {r["id"]: verdict(sequential.evaluate(r["context"], r["output"], id=r["id"])) for r in rows}
    assert all(v[1] is not None for v in expected.values()) and any(v[1] for v in expected.values())
    assert all(len(v[3]) == 2 for v in expected.values())  # two triples per row were extracted and judged
    runtime.clear_sessions()
    shared.most = 0
    shared_engine = engine()

    async def tasks() -> list[Report]:
        calls = [shared_engine.aevaluate(r["context"], r["output"], id=r["id"]) for r in rows[:6]]
        return await asyncio.wait_for(asyncio.gather(*calls), WAIT_S)

    with ThreadPoolExecutor(max_workers=4) as pool:
        threaded = [pool.submit(shared_engine.evaluate, r["context"], r["output"], id=r["id"]) for r in rows[6:9]]
        batch = pool.submit(shared_engine.evaluate_many, rows[9:])
        reports = asyncio.run(tasks())
        reports += [f.result(timeout=WAIT_S) for f in threaded] + batch.result(timeout=WAIT_S)
    assert shared.most == 1 and shared.overlaps == [], shared.overlaps[:5]
    assert {r.id: verdict(r) for r in reports} == expected


def test_a_batch_gives_the_reports_of_row_by_row_calls(
    weights: tuple[Weights, Path, list[RecordingContext]],
) -> None:
    """``evaluate_many`` over the local chat model and judge gives the reports of ``evaluate`` called row by row."""
    shared, path, _ = weights
    rows = [{"id": f"r{i}", "context": f"The bridge number {i} stands in Paris. It was built in 18{i}0.",
             "output": f"The bridge number {i} stands in {'Paris' if i % 2 else 'Rome'}. It was built in 18{i}0."}
            for i in range(6)]

    def engine() -> GraphEval:
        chat, judge = models(path, max_tokens=400)
        return GraphEval(llm=chat, scorer=judge, cache=False, show_progress=False)

    def verdict(report: Report) -> tuple[Any, ...]:
        return (report.id, report.hallucinated, report.score, [(c.claim, c.p_unsupported) for c in report.claims])

    one_by_one = engine()
    expected = [verdict(one_by_one.evaluate(r["context"], r["output"], id=r["id"])) for r in rows]
    runtime.clear_sessions()
    shared.most_contexts = 0
    batch = engine()
    assert [verdict(r) for r in batch.evaluate_many(rows)] == expected  # each row checked beside the next's extraction
    assert shared.most == 1 and shared.most_contexts <= 2
