"""The judge reading a row's context while the chat model extracts its triples, on the real Qwen2.5-Coder-0.5B GGUF:
two llama.cpp contexts over one loaded model, evaluated at once from two threads, give the reports of an engine
that runs them one after the other, to the bit; and a batch whose rows are checked while the next ones are
extracted, the two sharing the cores under the thread policy, gives the reports of ``evaluate`` row by row.

This module runs in a child process (``isolated``), like every integration module.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("llama_cpp")

from grapheval_plugins import GraphEval, Report  # noqa: E402
from grapheval_plugins.local import runtime  # noqa: E402
from grapheval_plugins.local.chat import ChatLocalLlama  # noqa: E402
from grapheval_plugins.local.judge import LocalJudgeScorer  # noqa: E402
from grapheval_plugins.local.threads import LEDGER, CpuLoad  # noqa: E402

FALLBACK = [
    {"context": "Marie Curie was born in Warsaw in 1867 and moved to Paris in 1891. " * 6,
     "output": "Marie Curie was born in Warsaw in 1867. She moved to Paris in 1901."},
    {"context": "The council of Riverton voted 7 to 2 on Tuesday to build a new library. " * 6,
     "output": "The council of Riverton voted 9 to 0 on Tuesday to build a library."},
    {"context": "The bridge over the Vltava was opened in 1402 by the city of Prague. " * 6,
     "output": "The bridge over the Vltava was opened in 1402."},
]


@pytest.fixture()
def rows(qags_c_rows: list[dict[str, str]]) -> list[dict[str, str]]:
    return qags_c_rows[:3] or FALLBACK


@pytest.fixture()
def free_cores(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A load reading with cores free, so that the judge's reservation does not depend on the test machine's load
    (the evaluations themselves run for real, one thread each)."""
    monkeypatch.setattr(runtime, "read_cpu_load", lambda: CpuLoad(procs_running=1, own_running=1, online=4, allowed=4))
    monkeypatch.setattr(runtime, "allowed_cpus", lambda: 4)
    runtime.clear_sessions()
    yield
    runtime.clear_sessions()


def _verdicts(
    model_path: Path, rows: list[dict[str, str]], monkeypatch: pytest.MonkeyPatch, ahead: bool
) -> tuple[list[Any], int]:
    runtime.clear_sessions()
    chat = ChatLocalLlama(model=str(model_path), max_tokens=96, n_threads=1, hub=False)
    judge = LocalJudgeScorer(str(model_path), n_threads=1, hub=False)
    if not ahead:
        monkeypatch.setattr(judge, "prepare", lambda context: None)
    original = judge.session.prefill
    prepared = []

    def prefill(tokens: Any, what: str = "prompt", **options: Any) -> int:
        if options.get("threads") is not None:
            prepared.append(len(tokens))
        return original(tokens, what, **options)

    monkeypatch.setattr(judge.session, "prefill", prefill)
    engine = GraphEval(llm=chat, scorer=judge, cache=False, show_progress=False)
    reports: list[Report] = [engine.evaluate(row["context"], row["output"]) for row in rows]
    out = [(r.score, [(c.claim, c.p_unsupported, c.evidence_index) for c in r.claims],
            None if r.extraction is None else r.extraction.raw_text, [e.message for e in r.errors]) for r in reports]
    return out, len(prepared)


def test_judging_beside_the_extraction_gives_the_same_reports(
    model_path: Path, rows: list[dict[str, str]], free_cores: None, monkeypatch: pytest.MonkeyPatch,
) -> None:
    one_after_the_other, none = _verdicts(model_path, rows, monkeypatch, ahead=False)
    beside, prepared = _verdicts(model_path, rows, monkeypatch, ahead=True)
    assert none == 0 and prepared == len(rows) - 1  # every row once the judge is loaded (by the first row)
    assert all(v[0] is not None and v[1] for v in one_after_the_other)
    assert beside == one_after_the_other
    assert LEDGER.held_by_others(object()) == 0


def test_a_batch_checked_beside_its_extraction_gives_the_reports_of_evaluate(
    model_path: Path, rows: list[dict[str, str]], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Under the thread policy (no ``n_threads``) on two free cores: the chat model and the judge each take both
    when alone and one each when both evaluate (the thread count changes inside generations), with the numbers of
    one row at a time."""
    monkeypatch.setattr(runtime, "read_cpu_load", lambda: CpuLoad(procs_running=1, own_running=1, online=2, allowed=2))
    monkeypatch.setattr(runtime, "allowed_cpus", lambda: 2)
    monkeypatch.setattr(runtime, "_default_threads", lambda: 2)

    def engine() -> tuple[GraphEval, ChatLocalLlama]:
        runtime.clear_sessions()
        chat = ChatLocalLlama(model=str(model_path), max_tokens=96, hub=False)
        judge = LocalJudgeScorer(str(model_path), hub=False)
        return GraphEval(llm=chat, scorer=judge, cache=False, show_progress=False), chat

    def verdicts(reports: list[Report]) -> list[Any]:
        return [(r.score, [(c.claim, c.p_unsupported, c.evidence_index) for c in r.claims],
                 None if r.extraction is None else r.extraction.raw_text, [e.message for e in r.errors])
                for r in reports]

    one_by_one, _ = engine()
    expected = verdicts([one_by_one.evaluate(row["context"], row["output"]) for row in rows])
    batch, chat = engine()
    got = verdicts(batch.evaluate_many(rows))
    switches = chat.session.stats.thread_switches
    runtime.clear_sessions()
    assert all(v[0] is not None and v[1] for v in expected)
    assert got == expected
    assert switches > 0  # the chat model did change its thread count inside the batch
    assert LEDGER.held_by_others(object()) == 0
