"""Saved prefixes on the real Qwen2.5-Coder-0.5B GGUF: a session that returns to a context it evaluated earlier (after
another prompt took its KV cache) puts the saved cells back instead of evaluating the context again, and reads the
same logits as a session whose context never left the cache, and the same judge scores and greedy answers as a
session that saves nothing.

This module runs in a child process (``isolated``), like every integration module.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("llama_cpp")

from grapheval_plugins.extract.prompts import KG_PROMPT  # noqa: E402
from grapheval_plugins.local.chat import ChatLocalLlama  # noqa: E402
from grapheval_plugins.local.judge import LocalJudgeScorer  # noqa: E402
from grapheval_plugins.local.runtime import SNAPSHOT_MIN_TOKENS, LlamaSession, clear_sessions, get_session  # noqa: E402

MODEL = "qwen2.5-coder-0.5b"  # the conftest's model_path

FALLBACK = [
    {
        "context": " ".join(["Marie Curie was born in Warsaw in 1867 and moved to Paris in 1891."] * 12),
        "output": "Marie Curie was born in Warsaw in 1867.",
    },
    {
        "context": " ".join(["The council of Riverton voted 7 to 2 on Tuesday to build a new library."] * 12),
        "output": "The council voted 9 to 0 on Tuesday.",
    },
]


@pytest.fixture()
def rows(qags_c_rows: list[dict[str, str]]) -> list[dict[str, str]]:
    return qags_c_rows[:2] or FALLBACK


@pytest.fixture()
def sessions(model_path: Path) -> Iterator[dict[str, LlamaSession]]:
    clear_sessions()
    made = {
        "saving": get_session(MODEL, model_path, role="saving", n_threads=1),
        "plain": get_session(MODEL, model_path, role="plain", n_threads=1),
    }
    made["plain"].prefix_slots = 0
    yield made
    clear_sessions()


def test_a_context_left_and_returned_to_is_restored_with_the_same_logits(
    sessions: dict[str, LlamaSession], rows: list[dict[str, str]],
) -> None:
    """The saving session alternates between the two contexts, so it returns to each through its saved cells; the
    plain one reads each context's two claims one after the other, so its context never leaves the KV cache. Both
    then evaluate the same tokens after the same cached prefix. (Against a context evaluated again in one batch
    with the claim the logits may differ: llama.cpp's CPU kernels can give a token inside a larger batch other
    logits, on AVX2 CPUs by up to about 0.2 here.)"""
    saving, plain = sessions["saving"], sessions["plain"]
    first, second = (saving.tokenize(row["context"]) for row in rows)
    assert len(first) >= SNAPSHOT_MIN_TOKENS and len(second) >= SNAPSHOT_MIN_TOKENS
    claim_a, claim_b = saving.tokenize(" Claim one."), saving.tokenize(" Claim two.")
    prompts = {("first", "a"): first + claim_a, ("second", "a"): second + claim_a,
               ("first", "b"): first + claim_b, ("second", "b"): second + claim_b}
    orders = {"saving": [("first", "a"), ("second", "a"), ("first", "b"), ("second", "b")],
              "plain": [("first", "a"), ("first", "b"), ("second", "a"), ("second", "b")]}
    readings: dict[str, dict[tuple[str, str], np.ndarray]] = {}
    for name, session in sessions.items():
        readings[name] = {}
        for key in orders[name]:
            session.prefill(prompts[key])
            readings[name][key] = session.logits()
    for key in prompts:
        np.testing.assert_array_equal(readings["saving"][key], readings["plain"][key])
    assert saving.stats.restored_tokens >= len(first) + len(second)
    assert plain.stats.restored_tokens == 0 and plain.stats.snapshots == 0
    # alternating, it evaluated no more than the session whose contexts never left the cache
    assert saving.stats.evaluated_tokens == plain.stats.evaluated_tokens


def test_judge_scores_and_greedy_answers_do_not_change(model_path: Path, rows: list[dict[str, str]]) -> None:
    """The order of a correction run: the judge scores claims against the context, then against the output (the
    fidelity pass), then a corrected claim against the context again; the chat model extracts, answers a prompt
    holding the context, then extracts the next output."""
    results = {}
    stats = {}
    for slots in (2, 0):
        clear_sessions()
        judge_session = get_session(MODEL, model_path, role=f"judge-{slots}", n_threads=1)
        chat_session = get_session(MODEL, model_path, role=f"chat-{slots}", n_threads=1)
        judge_session.prefix_slots = chat_session.prefix_slots = slots
        judge = LocalJudgeScorer(MODEL, session=judge_session)
        chat = ChatLocalLlama.from_session(chat_session, model=MODEL, max_tokens=32)
        scores, answers = [], []
        for row in rows:
            scores += [s.p_unsupported for s in judge.check([row["context"]] * 2, [row["output"], "It rained."])]
            scores += [s.p_unsupported for s in judge.check([row["output"]], [row["output"]])]
            scores += [s.p_unsupported for s in judge.check([row["context"]], ["The claim was corrected."])]
            answers.append(chat.invoke(KG_PROMPT.messages(row["output"])).content)
            answers.append(chat.invoke(f"Context: {row['context']}\nSay which city it names.").content)
        results[slots] = (scores, answers)
        stats[slots] = (judge_session.stats, chat_session.stats)
    clear_sessions()
    assert results[2] == results[0]
    judge_stats, chat_stats = stats[2]
    assert judge_stats.restored_tokens > 0 and chat_stats.restored_tokens > 0
    assert judge_stats.evaluated_tokens < stats[0][0].evaluated_tokens
