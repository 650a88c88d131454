"""A fake ``llama_cpp.Llama`` for the local-model unit tests: byte-level tokens, scripted logits, no weights.

Tokens: control tokens ``<|im_start|>`` = 1, ``<|im_end|>`` = 2 (end of turn), ``<|endoftext|>`` = 3 (parsed only
with ``special=True``); every other byte ``b`` is token ``b + 10``. The next-token logits come from a function of
the evaluated token sequence, so a test scripts answers (chat) or label scores (judge). Every ``eval`` call is
recorded, and entering ``eval`` from two threads at once raises, so tests can check prefix reuse and locking.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence

import numpy as np

SPECIAL = {"<|im_start|>": 1, "<|im_end|>": 2, "<|endoftext|>": 3}
N_VOCAB = 266
ASSISTANT = [1, *(b + 10 for b in b"assistant\n")]


def byte_tokens(text: str) -> list[int]:
    return [b + 10 for b in text.encode("utf-8")]


class FakeLlama:
    """Implements the subset of ``llama_cpp.Llama`` that the local runtime uses."""

    def __init__(
        self,
        next_logits: Callable[[list[int]], np.ndarray],
        *,
        n_ctx: int = 4096,
        eval_delay: float = 0.0,
        **params: object,
    ) -> None:
        self.next_logits = next_logits
        self.params = dict(params, n_ctx=n_ctx)
        self._n_ctx = n_ctx
        self.input_ids = np.zeros(n_ctx, dtype=np.intc)
        self.n_tokens = 0
        self.eval_calls: list[list[int]] = []
        self._logits = np.zeros(N_VOCAB, dtype=np.float32)
        self._busy = threading.Lock()
        self.eval_delay = eval_delay

    # tokenizer
    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
        decoded = text.decode("utf-8")
        out: list[int] = []
        i = 0
        while i < len(decoded):
            if special:
                hit = next((s for s in SPECIAL if decoded.startswith(s, i)), None)
                if hit is not None:
                    out.append(SPECIAL[hit])
                    i += len(hit)
                    continue
            out += byte_tokens(decoded[i])
            i += 1
        return out

    def detokenize(self, tokens: Sequence[int], prev_tokens: object = None, special: bool = False) -> bytes:
        names = {v: k.encode() for k, v in SPECIAL.items()}
        return b"".join(bytes([t - 10]) if t >= 10 else (names[t] if special else b"") for t in tokens)

    def token_eos(self) -> int:
        return 2

    def n_vocab(self) -> int:
        return N_VOCAB

    def n_ctx(self) -> int:
        return self._n_ctx

    # evaluation
    def eval(self, tokens: Sequence[int]) -> None:
        if not self._busy.acquire(blocking=False):
            raise RuntimeError("FakeLlama.eval entered from two threads at once")
        try:
            tokens = list(tokens)
            if self.n_tokens + len(tokens) > self._n_ctx:
                raise RuntimeError("llama_decode returned 1")
            if self.eval_delay:
                time.sleep(self.eval_delay)
            self.eval_calls.append(tokens)
            self.input_ids[self.n_tokens : self.n_tokens + len(tokens)] = tokens
            self.n_tokens += len(tokens)
            self._logits = np.asarray(self.next_logits(self.input_ids[: self.n_tokens].tolist()), dtype=np.float32)
        finally:
            self._busy.release()

    def reset(self) -> None:
        self.n_tokens = 0

    def next_logits_now(self) -> np.ndarray:
        return self._logits

    def set_seed(self, seed: int) -> None:
        self.seed = seed

    def generate(self, tokens: Sequence[int], temp: float = 0.8, **_: object) -> Iterator[int]:
        """As ``Llama.generate``: the cached prefix reused, then one sampled token at a time (greedy at
        ``temp`` 0, else drawn with ``seed`` from the softmax), each evaluated when the next is asked for."""
        tokens = list(tokens)
        cached = self.input_ids[: self.n_tokens].tolist()
        if cached != tokens:
            common = 0
            while common < min(len(cached), len(tokens) - 1) and cached[common] == tokens[common]:
                common += 1
            self.n_tokens = common
            self.eval(tokens[common:])
        rng = np.random.default_rng(getattr(self, "seed", 0))
        while True:
            logits = self._logits.astype(np.float64)
            if temp <= 0:
                token = int(np.argmax(logits))
            else:
                probs = np.exp((logits - logits.max()) / temp)
                token = int(rng.choice(len(probs), p=probs / probs.sum()))
            yield token
            self.eval([token])

    @property
    def evaluated(self) -> int:
        return sum(len(c) for c in self.eval_calls)


def one_hot(token: int, value: float = 10.0) -> np.ndarray:
    logits = np.zeros(N_VOCAB, dtype=np.float32)
    logits[token] = value
    return logits


def scripted_reply(answer: Callable[[str], str]) -> Callable[[list[int]], np.ndarray]:
    """Next-token logits that spell ``answer(prompt text)`` after the last assistant header, then end the turn."""

    def next_logits(seq: list[int]) -> np.ndarray:
        start = None
        for i in range(len(seq) - len(ASSISTANT), -1, -1):
            if seq[i : i + len(ASSISTANT)] == ASSISTANT:
                start = i + len(ASSISTANT)
                break
        if start is None:
            return one_hot(3)
        prompt = bytes(t - 10 for t in seq[:start] if t >= 10).decode("utf-8", errors="replace")
        target = byte_tokens(answer(prompt))
        done = len(seq) - start
        return one_hot(target[done] if done < len(target) else 2)

    return next_logits


def label_logits(score: Callable[[str, str], tuple[float, float, float]]) -> Callable[[list[int]], np.ndarray]:
    """Judge logits: ``score(context, claim) -> (supported, contradicted, unknown)`` logits on the labels' first
    bytes ('s', 'c', 'u'), read from the judge prompt in the sequence."""

    def next_logits(seq: list[int]) -> np.ndarray:
        text = bytes(t - 10 for t in seq if t >= 10).decode("utf-8", errors="replace")
        logits = np.full(N_VOCAB, -5.0, dtype=np.float32)
        if "Claim: " not in text or not seq or seq[-len(ASSISTANT):] != ASSISTANT:
            return logits
        context = text.split("Context:\n", 1)[1].split("\n\nClaim: ", 1)[0]
        # the claim ends where the question after it starts, if the wording asks one there, else at the turn's end
        claim = text.split("Claim: ", 1)[1].rsplit("\nassistant\n", 1)[0].split("\n\nIs the claim", 1)[0]
        s, c, u = score(context, claim)
        logits[ord("s") + 10], logits[ord("c") + 10], logits[ord("u") + 10] = s, c, u
        return logits

    return next_logits
