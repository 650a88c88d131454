"""Prompt-lookup decoding in LlamaSession.generate over a fake Llama with llama-cpp-python's batch internals: the
drafting, the acceptance of the longest matching prefix, the KV roll-back, and the same tokens as plain greedy
(the fake's logits do not depend on how tokens are batched, unlike llama.cpp's CPU kernels)."""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence

import numpy as np
import pytest
from local_fake_llama import ASSISTANT, N_VOCAB, FakeLlama, byte_tokens, one_hot, scripted_reply

from grapheval_plugins.exceptions import InputError
from grapheval_plugins.local.llamacpp import batch_logits_supported, eval_logits
from grapheval_plugins.local.runtime import (
    PROMPT_LOOKUP_ENV,
    LlamaSession,
    accepted_prefix,
    draft_tokens,
    get_session,
)


class _Batch:
    def __init__(self) -> None:
        self.tokens: list[int] = []
        self.n_past = 0
        self.logits_all = False

    def set_batch(self, batch: Sequence[int], n_past: int, logits_all: bool) -> None:
        self.tokens, self.n_past, self.logits_all = [int(t) for t in batch], n_past, logits_all


class _BatchCtx:
    """llama-cpp-python's ``LlamaContext`` calls that :func:`eval_logits` makes, over the fake's logits function."""

    def __init__(self, owner: BatchFakeLlama) -> None:
        self.owner = owner

    def kv_cache_seq_rm(self, seq_id: int, p0: int, p1: int) -> None:
        self.owner.kept_cells.append(p0)

    def decode(self, batch: _Batch) -> None:
        owner = self.owner
        assert batch.n_past == owner.n_tokens, "a batch must start where the cache ends"
        seq = owner.input_ids[: batch.n_past].tolist()
        rows = []
        for token in batch.tokens:
            seq.append(token)
            rows.append(np.asarray(owner.next_logits(list(seq)), dtype=np.float32))
        owner.rows = np.ascontiguousarray(np.stack(rows))
        owner.batches.append(list(batch.tokens))

    def get_logits_ith(self, i: int):  # noqa: ANN201 - a ctypes float pointer, like llama.cpp's
        row = self.owner.rows[i]
        return row.ctypes.data_as(ctypes.POINTER(ctypes.c_float))

    def set_n_threads(self, n_threads: int, n_threads_batch: int) -> None:
        self.owner.threads.append((n_threads, n_threads_batch))


class BatchFakeLlama(FakeLlama):
    """:class:`FakeLlama` with the batch internals (``_ctx.decode``, ``_batch``, ``get_logits_ith(i)``)."""

    def __init__(self, next_logits: Callable[[list[int]], np.ndarray], **params: object) -> None:
        super().__init__(next_logits, **params)  # type: ignore[arg-type]
        self._ctx = _BatchCtx(self)  # type: ignore[assignment]
        self._batch = _Batch()
        self.n_batch = 512
        self.rows = np.zeros((1, N_VOCAB), dtype=np.float32)
        self.batches: list[list[int]] = []
        self.kept_cells: list[int] = []
        self.threads: list[tuple[int, int]] = []

    def eval(self, tokens: Sequence[int]) -> None:
        super().eval(tokens)
        self.rows = np.ascontiguousarray(self._logits[None, :])


def session_over(answer: Callable[[str], str], **kwargs: object) -> tuple[LlamaSession, list[BatchFakeLlama]]:
    fakes: list[BatchFakeLlama] = []

    def factory(**params: object) -> BatchFakeLlama:
        fake = BatchFakeLlama(scripted_reply(answer), **params)
        fakes.append(fake)
        return fake

    kwargs.setdefault("prompt_lookup", True)
    return LlamaSession("fake.gguf", factory=factory, n_threads=1, **kwargs), fakes  # type: ignore[arg-type]


def prompt_for(text: str) -> list[int]:
    return [1, *byte_tokens(f"user\nCopy: {text}"), 2, *ASSISTANT]


def run(session: LlamaSession, prompt: list[int], **kwargs: object) -> list[int]:
    with session.lock:
        return list(session.generate(prompt, **kwargs))  # type: ignore[arg-type]


SOURCE = "Marie Curie was born in Warsaw. Marie Curie won the Nobel Prize."


def copy_with_changes(prompt: str) -> str:
    """An answer that copies long stretches of the prompt, with changes the drafts cannot predict."""
    return SOURCE.replace("born in", "born, in").replace("Nobel", "Nobel (physics)")


# ---------------------------------------------------------------------- the pure parts
def test_draft_continues_the_latest_occurrence_of_the_longest_ngram() -> None:
    context = [7, 1, 2, 3, 40, 41, 9, 1, 2, 3, 50, 51, 52, 8, 1, 2, 3]
    assert draft_tokens(context, max_draft=2) == [50, 51]  # the later "1 2 3" wins
    assert draft_tokens(context, max_draft=10) == [50, 51, 52, 8, 1, 2, 3]
    assert draft_tokens([5, 6, 9, 6], max_draft=3) == [9, 6]  # no 3- or 2-gram match: the 1-gram "6"
    assert draft_tokens([5, 6, 9, 6], max_draft=3, min_ngram=2) == []
    assert draft_tokens([1, 2, 3, 4], max_draft=3) == []
    assert draft_tokens([1, 2, 1, 2], max_draft=0) == []
    assert draft_tokens([], max_draft=3) == [] and draft_tokens([4], max_draft=3) == []


def test_accepted_prefix_stops_at_the_first_disagreement() -> None:
    assert accepted_prefix([], [9]) == 0
    assert accepted_prefix([1, 2, 3], [1, 2, 3, 4]) == 3
    assert accepted_prefix([1, 2, 3], [1, 5, 3, 4]) == 1
    assert accepted_prefix([1, 2, 3], [0, 2, 3, 4]) == 0


def test_eval_logits_returns_a_row_per_token_and_needs_the_internals() -> None:
    fake = BatchFakeLlama(lambda seq: one_hot(seq[-1] % N_VOCAB))
    fake.eval([11, 12])
    rows = eval_logits(fake, [13, 14, 15])
    assert rows.shape == (3, N_VOCAB) and [int(np.argmax(r)) for r in rows] == [13, 14, 15]
    assert fake.n_tokens == 5 and fake.input_ids[:5].tolist() == [11, 12, 13, 14, 15]
    assert fake.kept_cells == [2] and fake._batch.logits_all
    assert batch_logits_supported(fake) and not batch_logits_supported(FakeLlama(lambda seq: one_hot(3)))
    with pytest.raises(ValueError, match="internals|batch"):
        eval_logits(FakeLlama(lambda seq: one_hot(3)), [1])
    with pytest.raises(ValueError, match="at least one"):
        eval_logits(fake, [])


# ---------------------------------------------------------------------- generation
@pytest.mark.parametrize("max_tokens", [1, 2, 7, 40, 200])
def test_lookup_gives_the_plain_greedy_tokens_in_fewer_steps(max_tokens: int) -> None:
    prompt = prompt_for(SOURCE)
    plain_session, plain_fakes = session_over(copy_with_changes)
    lookup_session, lookup_fakes = session_over(copy_with_changes)
    plain = run(plain_session, prompt, max_tokens=max_tokens, prompt_lookup=False)
    fast = run(lookup_session, prompt, max_tokens=max_tokens)
    assert fast == plain
    assert len(plain) == min(max_tokens, len(byte_tokens(copy_with_changes(""))))
    # the cache holds the same tokens after both (the last token is evaluated only when generation goes on)
    assert lookup_session.cached_tokens() == plain_session.cached_tokens()
    if max_tokens >= 40:
        stats = lookup_session.stats
        assert stats.accepted_tokens > 0 and stats.drafted_tokens >= stats.accepted_tokens
        assert stats.decode_steps < plain_session.stats.decode_steps
        assert stats.generated_tokens == plain_session.stats.generated_tokens == len(plain)
        assert all(len(b) <= 1 + lookup_session.lookup_tokens for b in lookup_fakes[0].batches[1:])
    assert not plain_fakes[0].batches  # the plain loop never asks for a batch of logits


def test_a_rejected_draft_is_rolled_back() -> None:
    session, fakes = session_over(copy_with_changes)
    prompt = prompt_for(SOURCE)
    out = run(session, prompt, max_tokens=200)
    fake = fakes[0]
    assert session.stats.accepted_tokens < session.stats.drafted_tokens  # "born, in" is not in the prompt
    # every batch starts where the kept tokens end: the rejected cells were dropped before it
    assert fake.n_tokens == len(prompt) + len(out)
    assert fake.input_ids[len(prompt) : fake.n_tokens].tolist() == out


def test_an_end_of_turn_inside_a_draft_ends_generation_without_entering_the_cache() -> None:
    # the answer is the prompt's text, and in the prompt that text is followed by <|im_end|>: drafts carry it
    session, fakes = session_over(lambda prompt: SOURCE)
    prompt = prompt_for(SOURCE)
    out = run(session, prompt, max_tokens=500)
    assert out == byte_tokens(SOURCE)
    assert 2 not in session.cached_tokens()[len(prompt) :]
    plain_session, _ = session_over(lambda prompt: SOURCE)
    assert run(plain_session, prompt, max_tokens=500, prompt_lookup=False) == out
    assert plain_session.cached_tokens() == session.cached_tokens()


def test_the_context_window_bounds_drafts_as_it_bounds_plain_decoding() -> None:
    prompt = prompt_for(SOURCE)
    n_ctx = len(prompt) + 9
    fast, _ = session_over(copy_with_changes, n_ctx=n_ctx)
    plain, _ = session_over(copy_with_changes, n_ctx=n_ctx)
    out = run(fast, prompt, max_tokens=100)
    assert out == run(plain, prompt, max_tokens=100, prompt_lookup=False) and len(out) == 9


def test_sampling_and_the_off_switches_use_the_plain_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    prompt = prompt_for(SOURCE)
    sampled, fakes = session_over(copy_with_changes)
    run(sampled, prompt, max_tokens=30, temperature=0.7)
    assert not fakes[0].batches and sampled.stats.drafted_tokens == 0
    off, fakes = session_over(copy_with_changes, prompt_lookup=False)
    run(off, prompt, max_tokens=30)
    assert not fakes[0].batches
    monkeypatch.delenv(PROMPT_LOOKUP_ENV, raising=False)
    assert not session_over(copy_with_changes, prompt_lookup=None)[0].prompt_lookup  # off by default
    monkeypatch.setenv(PROMPT_LOOKUP_ENV, "1")
    assert session_over(copy_with_changes, prompt_lookup=None)[0].prompt_lookup
    assert not session_over(copy_with_changes, prompt_lookup=False)[0].prompt_lookup
    monkeypatch.setenv(PROMPT_LOOKUP_ENV, "maybe")
    with pytest.raises(InputError, match=PROMPT_LOOKUP_ENV):
        get_session("k", "fake.gguf", role="chat")


def test_a_fake_without_batch_internals_falls_back_to_the_plain_loop() -> None:
    fakes: list[FakeLlama] = []

    def factory(**params: object) -> FakeLlama:
        fakes.append(FakeLlama(scripted_reply(copy_with_changes), **params))  # type: ignore[arg-type]
        return fakes[-1]

    session = LlamaSession("fake.gguf", factory=factory, prompt_lookup=True)
    out = run(session, prompt_for(SOURCE), max_tokens=200)
    assert out == byte_tokens(copy_with_changes("")) and session.stats.drafted_tokens == 0
    assert all(len(call) == 1 for call in fakes[0].eval_calls[1:])
