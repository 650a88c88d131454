"""Greedy answers of the real Qwen2.5-Coder-0.5B GGUF under the speed settings: the thread count (fixed, or switched
by the policy in the middle of a decode) never changes them; prompt-lookup decoding's batched verification is
compared with one-at-a-time decoding on real extraction prompts.

This module runs in a child process (``isolated``), like every integration module.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("llama_cpp")

from grapheval_plugins.extract.prompts import KG_PROMPT  # noqa: E402
from grapheval_plugins.local.chat import ChatLocalLlama  # noqa: E402
from grapheval_plugins.local.llamacpp import eval_logits, next_logits  # noqa: E402
from grapheval_plugins.local.runtime import LlamaSession, clear_sessions, get_session  # noqa: E402
from grapheval_plugins.local.threads import CpuLoad  # noqa: E402

MODEL = "qwen2.5-coder-0.5b"  # the conftest's model_path
FALLBACK_TEXTS = [
    "Marie Curie was born in Warsaw in 1867. She won the Nobel Prize in Physics in 1903.",
    "The city council of Riverton voted 7 to 2 on Tuesday to build a new library on Elm Street.",
    "Everton captain michael keane says the toffees need to toughen up following criticism from ronald koeman.",
]
MAX_TOKENS = 64


@pytest.fixture(scope="module")
def sessions(model_path: Path) -> Iterator[dict[str, LlamaSession]]:
    clear_sessions()
    made = {
        "1": get_session(MODEL, model_path, role="t1", n_threads=1),
        "2": get_session(MODEL, model_path, role="t2", n_threads=2),
        "policy": get_session(MODEL, model_path, role="policy"),
    }
    yield made
    clear_sessions()


@pytest.fixture(scope="module")
def prompts(sessions: dict[str, LlamaSession], qags_c_rows: list[dict[str, str]]) -> list[list[int]]:
    llm = ChatLocalLlama.from_session(sessions["1"], model=MODEL)
    texts = [row["output"] for row in qags_c_rows[:3]] or FALLBACK_TEXTS
    return [llm.prompt_tokens(KG_PROMPT.messages(text)) for text in texts]


def _generate(session: LlamaSession, prompt: list[int], **kwargs: object) -> list[int]:
    with session.lock:
        return list(session.generate(prompt, max_tokens=MAX_TOKENS, **kwargs))  # type: ignore[arg-type]


def test_the_thread_count_does_not_change_greedy_answers(
    sessions: dict[str, LlamaSession], prompts: list[list[int]]
) -> None:
    policy = sessions["policy"]
    policy.n_threads = policy.governor.max_threads = 2
    readings = itertools.cycle([CpuLoad(2, 1, 2, 2), CpuLoad(1, 1, 2, 2)])  # busy, idle, busy, …
    policy._load_reader = lambda: next(readings)
    policy.governor.reprobe_every = 2  # switch often: the count changes many times inside one answer
    for prompt in prompts:
        one = _generate(sessions["1"], prompt)
        assert one and _generate(sessions["2"], prompt) == one
        before = policy.stats.thread_switches
        assert _generate(policy, prompt) == one
        assert policy.stats.thread_switches > before


def test_batched_logits_of_one_token_are_those_of_a_decode_step(
    sessions: dict[str, LlamaSession], prompts: list[list[int]]
) -> None:
    session = sessions["1"]
    prompt = prompts[0]
    with session.lock:
        session.prefill(prompt[:-1])
        llama = session.llama
        llama.eval(prompt[-1:])
        single = next_logits(llama)
        llama.n_tokens = len(prompt) - 1
        batch = eval_logits(llama, prompt[-1:])
        assert session.cached_tokens() == prompt
    assert batch.shape == (1, single.shape[0])
    np.testing.assert_array_equal(batch[0], single)


def test_prompt_lookup_is_off_by_default(sessions: dict[str, LlamaSession], prompts: list[list[int]]) -> None:
    session = sessions["1"]
    session.reset_stats()
    _generate(session, prompts[0])
    assert not session.prompt_lookup and session.stats.drafted_tokens == 0


@pytest.mark.xfail(
    reason="llama.cpp's CPU kernels give a token evaluated inside a batch slightly different logits than alone "
    "(llama-cpp-python 0.3.36: up to 0.46), so a batched verification can change a greedy answer; prompt lookup "
    "stays off by default while this fails",
    strict=False,
)
def test_prompt_lookup_gives_the_plain_greedy_answers(
    sessions: dict[str, LlamaSession], prompts: list[list[int]]
) -> None:
    session = sessions["1"]
    for prompt in prompts:
        plain = _generate(session, prompt, prompt_lookup=False)
        session.reset_stats()
        fast = _generate(session, prompt, prompt_lookup=True)
        assert session.stats.drafted_tokens > 0
        assert fast == plain
