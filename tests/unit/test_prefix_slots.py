"""Saved prefixes of a :class:`~grapheval_plugins.local.runtime.LlamaSession`: which prefill saves one, which
restores one, how many are kept, and what happens where llama-cpp-python cannot copy KV cells (the fake's
"cells" are the token ids it was saved after; the real copy is integration-tested on the 0.5B GGUF)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from local_fake_llama import FakeLlama, byte_tokens

from grapheval_plugins.local import runtime
from grapheval_plugins.local.runtime import SNAPSHOT_MIN_TOKENS, LlamaSession


def _logits(tokens: list[int]) -> Any:
    import numpy as np

    out = np.zeros(266, dtype=np.float32)
    out[10 + len(tokens) % 200] = 1.0
    return out


@pytest.fixture()
def session(monkeypatch: pytest.MonkeyPatch) -> LlamaSession:
    def save(llama: Any) -> bytes:
        return bytes(str(llama.input_ids[: llama.n_tokens].tolist()), "ascii")

    def restore(llama: Any, data: bytes, tokens: Sequence[int]) -> bool:
        assert data == bytes(str(list(tokens)), "ascii"), "the cells restored are those saved after these tokens"
        llama.input_ids[: len(tokens)] = list(tokens)
        llama.n_tokens = len(tokens)
        return True

    monkeypatch.setattr(runtime, "save_sequence", save)
    monkeypatch.setattr(runtime, "restore_sequence", restore)
    return LlamaSession("fake.gguf", n_ctx=4096, n_threads=1, factory=lambda **p: FakeLlama(_logits, **p))


def _text(char: str) -> list[int]:
    return byte_tokens(char * (SNAPSHOT_MIN_TOKENS + 50))


def test_a_prefix_left_for_another_is_restored_not_evaluated_again(session: LlamaSession) -> None:
    a, b, claim = _text("a"), _text("b"), byte_tokens(" claim")
    session.prefill(a + claim)
    session.prefill(b + claim)
    before = session.stats.evaluated_tokens
    reused = session.prefill(a + byte_tokens(" other"))
    assert reused == len(a) + 1  # " claim" and " other" share their first byte, a space
    assert session.stats.evaluated_tokens - before == len(byte_tokens(" other")) - 1
    assert session.stats.restored_tokens == len(a) + 1 and session.stats.snapshots == 2
    assert session.cached_tokens() == a + byte_tokens(" other")


def test_short_prefills_are_not_saved_and_short_gains_not_restored(session: LlamaSession) -> None:
    a = _text("a")
    session.prefill(a)
    session.prefill(a + byte_tokens(" x" * 10))  # 20 new tokens: not worth a copy
    assert session.stats.snapshots == 1
    session.prefill(byte_tokens("short prompt"))
    session.prefill(byte_tokens("short prompt, and again"))
    assert session.stats.restored_tokens == 0  # nothing saved shares enough with it


def test_the_last_two_are_kept_and_a_saved_prefix_of_a_new_one_goes(session: LlamaSession) -> None:
    a, b, c = _text("a"), _text("b"), _text("c")
    for tokens in (a, b, c):
        session.prefill(tokens)
    assert [s.tokens for s in session._snapshots] == [tuple(b), tuple(c)]
    session.prefill(c + _text("d"))  # extends c: c's copy is superseded
    assert [s.tokens for s in session._snapshots] == [tuple(b), tuple(c + _text("d"))]
    session.reset()
    assert session._snapshots == []


def test_no_slots_or_no_support_means_plain_prefix_reuse(session: LlamaSession, monkeypatch: pytest.MonkeyPatch) -> None:
    session.prefix_slots = 0
    a, b = _text("a"), _text("b")
    for tokens in (a, b, a):
        session.prefill(tokens)
    assert session.stats.snapshots == 0 and session.stats.restored_tokens == 0
    monkeypatch.setattr(runtime, "save_sequence", lambda llama: None)
    session.prefix_slots = 2
    session.prefill(b)
    assert session.prefix_slots == 0 and session.stats.snapshots == 0  # cannot copy: stops trying


def test_a_failed_restore_evaluates_everything_again(session: LlamaSession, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = _text("a"), _text("b")
    session.prefill(a)
    session.prefill(b)

    def refuse(llama: Any, data: bytes, tokens: Sequence[int]) -> bool:
        llama.n_tokens = 0  # llama.cpp refused the cells after the cache was cleared
        return False

    monkeypatch.setattr(runtime, "restore_sequence", refuse)
    before = session.stats.evaluated_tokens
    assert session.prefill(a) == 0
    assert session.stats.evaluated_tokens - before == len(a)
    assert session.prefix_slots == 0 and session.cached_tokens() == a
