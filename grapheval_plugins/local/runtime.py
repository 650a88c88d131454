"""Sessions: a llama.cpp context that reuses its evaluated token prefix, shared process-wide, safe across threads.

:class:`LlamaSession` owns one ``llama_cpp.Llama`` (loaded lazily on first use). :meth:`LlamaSession.prefill`
evaluates a token sequence, keeping the longest prefix already in the KV cache, so a fixed prompt prefix (prompt
A's instructions and examples; the judge's context) is evaluated once and only the new suffix costs time.
Every use of the model (tokenizing, evaluating, reading logits, generating) holds :attr:`LlamaSession.lock`.

:func:`get_session` keeps one session per (GGUF file, role, settings) in the process. The chat model and the judge
use different roles, hence separate contexts (separate KV caches, so alternating extraction and judging does not
evict each other's prefix). The weights are loaded once per file: a second session over the same file opens a new
llama.cpp context on the already-loaded model (:class:`~grapheval_plugins.local.llamacpp.SharedContext`), so the
model's memory is not paid twice.

Each session has its own lock: one context is entered by one call at a time, from any number of threads and tasks,
while two sessions (the chat model extracting, the judge reading a context) may evaluate at once over the weights
they share (llama.cpp reads a model's weights only; each context has its own KV cache and buffers, and its logits do
not depend on the other running: integration-tested on the real 0.5B GGUF). They share the cores through
:data:`~grapheval_plugins.local.threads.LEDGER`: an evaluation starts when its threads fit beside those of the
sessions already evaluating (without an explicit ``n_threads``, it takes only what they leave), else it waits for
them, as one shared lock would, while a session decoding shrinks to an even part of the free threads at its next
step so that the waiting one can start; an evaluation meant to run beside another reserves its threads first
(:meth:`LlamaSession.reserve_beside`).

Saved prefixes: after a prefill that evaluated at least :data:`SNAPSHOT_MIN_TOKENS` new tokens, a session copies
the KV cells out (:func:`~grapheval_plugins.local.llamacpp.save_sequence`, a few milliseconds and about 28 KB a
token for a 1.5B model), keeping the last ``prefix_slots`` of them. A later prefill that shares a longer prefix with
a saved one than with the KV cache puts those cells back instead of evaluating the prefix again: the judge returns
to a row's context after scoring claims against the output (the extraction-fidelity pass), and the chat model to
the extraction prompt's examples after a correction prompt. A restored prefix gives the same logits as one that
never left the cache (integration-tested on the real 0.5B GGUF).

Threads: without an explicit ``n_threads``, every evaluation uses the cores that are free at that moment
(:func:`~grapheval_plugins.local.threads.free_threads`), and decoding backs off to one thread when that is faster
(:class:`~grapheval_plugins.local.threads.ThreadGovernor`): a thread waiting for a busy core stalls every step.

Prompt-lookup decoding (opt-in: ``prompt_lookup=True`` or ``GRAPHEVAL_PROMPT_LOOKUP=1``) drafts tokens for greedy
decoding from the continuation of the last n-gram's latest earlier occurrence in the prompt or the answer so far
(:func:`draft_tokens`), verifies a draft in one batched evaluation and keeps the drafted tokens that are the
model's argmax there (:func:`accepted_prefix`). It is off by default: llama.cpp's CPU kernels do not give a token
evaluated inside a batch exactly the logits it gets alone (differences up to ~0.4 in the logits with
llama-cpp-python 0.3.36), so the answer can differ from one-at-a-time greedy decoding, and on CPUs where a batch
of k tokens costs about k single steps (compute-bound decoding) it is not faster (docs/benchmarks.md).

Everything that depends on llama-cpp-python's version (loading with or without extra buffer types, the second
context, reading logits, setting threads) is in :mod:`grapheval_plugins.local.llamacpp`; this module only keeps
sessions.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..exceptions import InputError, ModelLoadError
from .cpu import ExtraBuffersDecision, decide_extra_buffers
from .llamacpp import (
    SharedContext,
    batch_logits_supported,
    eval_logits,
    load_llama,
    next_logits,
    restore_sequence,
    save_sequence,
    set_threads,
)
from .probe import confirm_extra_buffers
from .threads import LEDGER, ThreadGovernor, allowed_cpus, free_threads, read_cpu_load

__all__ = [
    "ContextOverflowError",
    "SNAPSHOT_MIN_TOKENS",
    "LlamaSession",
    "SessionStats",
    "SharedContext",
    "accepted_prefix",
    "clear_sessions",
    "draft_tokens",
    "get_session",
]

logger = logging.getLogger(__name__)

#: Qwen2.5 ChatML special tokens that end an assistant turn.
END_OF_TURN = ("<|im_end|>", "<|endoftext|>")

PROMPT_LOOKUP_ENV = "GRAPHEVAL_PROMPT_LOOKUP"
"""Environment variable: ``1`` turns prompt-lookup decoding on where no ``prompt_lookup=`` option is given."""

LOAD_RECHECK_STEPS = 16
"""Decode steps between two readings of the CPU load (:func:`~grapheval_plugins.local.threads.read_cpu_load`)."""


class ContextOverflowError(InputError):
    """A prompt does not fit the model's context window (``field`` names what was too long)."""

    default_reason = "too_long"


@dataclass
class SessionStats:
    """Token and time counters of one session (cumulative; :meth:`LlamaSession.reset_stats` zeroes them)."""

    calls: int = 0
    prompt_tokens: int = 0
    reused_tokens: int = 0
    evaluated_tokens: int = 0
    generated_tokens: int = 0
    prefill_seconds: float = 0.0
    decode_seconds: float = 0.0
    load_seconds: float = 0.0
    decode_steps: int = 0
    """Evaluations during decoding (one per token without prompt lookup; fewer with it)."""
    drafted_tokens: int = 0
    """Tokens proposed by prompt lookup and verified."""
    accepted_tokens: int = 0
    """Drafted tokens that were the model's own greedy choice (generated without a decode step of their own)."""
    thread_switches: int = 0
    """Times the thread count of the context was changed (load readings and the decode governor)."""
    restored_tokens: int = 0
    """Prompt tokens taken from a saved prefix instead of being evaluated (counted in ``reused_tokens`` too)."""
    snapshots: int = 0
    """Prefixes saved (see ``prefix_slots``)."""
    wait_seconds: float = 0.0
    """Time spent waiting for other sessions of the process to leave threads free before an evaluation
    (:meth:`~grapheval_plugins.local.threads.ThreadLedger.acquire`)."""


SNAPSHOT_MIN_TOKENS = 128
"""A prefill that evaluates at least this many new tokens is saved for later (see ``prefix_slots``); a saved prefix
is restored only when it spares at least this many tokens over the KV cache."""


@dataclass(frozen=True)
class _Snapshot:
    tokens: tuple[int, ...]
    data: bytes


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if int(x) != y:
            break
        n += 1
    return n


def _default_threads() -> int:
    """The most threads a session may use: the cores of this process's affinity mask."""
    return allowed_cpus()


def _env_prompt_lookup() -> bool:
    value = os.environ.get(PROMPT_LOOKUP_ENV, "").strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("", "0", "false", "no", "off"):
        return False
    raise InputError(PROMPT_LOOKUP_ENV, f"expected 0 or 1, got {value!r}")


def draft_tokens(
    context: Sequence[int], *, max_ngram: int = 3, max_draft: int = 10, min_ngram: int = 1
) -> list[int]:
    """Prompt lookup: the tokens that followed the latest earlier occurrence of the last ``n`` tokens of
    ``context``, for ``n`` from ``max_ngram`` down to ``min_ngram`` (at most ``max_draft`` of them; ``[]`` when
    none match).

    >>> draft_tokens([5, 6, 7, 8, 9, 5, 6, 7], max_draft=2)
    [8, 9]
    >>> draft_tokens([1, 2, 3], max_draft=4)
    []
    """
    if max_draft <= 0:
        return []
    size = len(context)
    for n in range(min(max_ngram, size - 1), max(1, min_ngram) - 1, -1):
        tail = list(context[size - n :])
        first = tail[0]
        for start in range(size - n - 1, -1, -1):  # latest occurrence first
            if context[start] == first and list(context[start : start + n]) == tail:
                follow = list(context[start + n : start + n + max_draft])
                if follow:
                    return [int(t) for t in follow]
    return []


def accepted_prefix(draft: Sequence[int], choices: Sequence[int]) -> int:
    """How many leading drafted tokens greedy decoding would have produced: ``choices[i]`` is the model's argmax
    after the context and ``draft[:i]``, so ``draft[i]`` is kept while it equals ``choices[i]``.

    >>> accepted_prefix([4, 5, 6], [4, 5, 9, 1])
    2
    """
    count = 0
    for drafted, chosen in zip(draft, choices):
        if int(drafted) != int(chosen):
            break
        count += 1
    return count


_MODELS: dict[tuple[str, bool], Any] = {}
"""Loaded ``llama_cpp.Llama`` objects by (resolved file path, extra buffers); cleared by :func:`clear_sessions`."""
_MODELS_LOCK = threading.Lock()


class LlamaSession:
    """One llama.cpp context over a GGUF file, with prefix reuse and a lock.

    Args:
        model_path: the GGUF file, or a function returning it or a
            :class:`~grapheval_plugins.local.weights.ResolvedWeights` (called on first load: weights are resolved
            then, and where they came from is kept in :attr:`weights`).
        n_ctx: context window in tokens (prompt + generated).
        n_threads: CPU threads, fixed. Default (``None``): at most the cores this process may use, at each
            evaluation those that other processes leave free, and during decoding one thread when that is faster
            (:mod:`~grapheval_plugins.local.threads`).
        n_batch: tokens evaluated per llama.cpp batch.
        seed: llama.cpp seed (sampling here is greedy, so results do not depend on it).
        extra_buffers: let llama.cpp repack the weights into extra buffer types (AMX, interleaved layouts).
            ``None`` (default) reads ``GRAPHEVAL_LLAMA_EXTRA_BUFFERS``, else off; see
            :func:`~grapheval_plugins.local.cpu.decide_extra_buffers`.
        factory: builds the ``Llama`` object (default: :func:`~grapheval_plugins.local.llamacpp.load_llama`, which
            validates the file first; tests pass a fake taking ``Llama``'s keyword arguments).
        lock: the re-entrant lock every use of this session's context holds (default: a lock of its own).
        prompt_lookup: draft tokens by prompt lookup in greedy decoding and verify them in one batch (fewer decode
            steps; the answer may differ slightly from one-at-a-time greedy decoding, see the module's docstring).
            ``None`` (default) reads ``GRAPHEVAL_PROMPT_LOOKUP`` (``1`` turns it on), else off.
        lookup_ngram: the longest n-gram prompt lookup matches (then shorter ones, down to ``lookup_min_ngram``).
        lookup_tokens: the most tokens drafted per step.
        lookup_min_ngram: the shortest n-gram prompt lookup matches.
        prefix_slots: how many evaluated prefixes are kept to return to (see the module's docstring; ``0``: none,
            only the KV cache's own prefix is reused).
    """

    def __init__(
        self,
        model_path: str | Path | Callable[[], Any],
        *,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        n_batch: int = 512,
        seed: int = 0,
        extra_buffers: bool | None = None,
        factory: Callable[..., Any] | None = None,
        lock: threading.RLock | None = None,
        prompt_lookup: bool | None = None,
        lookup_ngram: int = 3,
        lookup_tokens: int = 10,
        lookup_min_ngram: int = 1,
        prefix_slots: int = 2,
    ) -> None:
        if n_ctx < 64:
            raise InputError("n_ctx", f"must be at least 64, got {n_ctx}")
        self._model_path = model_path
        self.n_ctx = n_ctx
        self.threads_fixed = bool(n_threads)
        """Whether the thread count was given (then every evaluation uses it) or follows the load."""
        self.n_threads = n_threads or _default_threads()
        self.prompt_lookup = _env_prompt_lookup() if prompt_lookup is None else bool(prompt_lookup)
        self.lookup_ngram = max(1, lookup_ngram)
        self.lookup_min_ngram = max(1, min(lookup_min_ngram, self.lookup_ngram))
        self.lookup_tokens = max(0, min(lookup_tokens, n_batch - 1))
        self.governor = ThreadGovernor(self.n_threads)
        """Chooses the decode steps' thread count when it is not fixed."""
        self._threads_now = self.n_threads
        self._threads_settable = True
        self._load_reader: Callable[[], Any] = read_cpu_load
        self.n_batch = n_batch
        self.seed = seed
        self.extra_buffers = extra_buffers
        self._factory = factory
        self.lock: threading.RLock = lock if lock is not None else threading.RLock()
        """The re-entrant lock held by every use of this session's context."""
        self._llama: Any = None
        self._stop_ids: frozenset[int] = frozenset()
        self.path: Path | None = None
        self.weights: Any = None
        """The :class:`~grapheval_plugins.local.weights.ResolvedWeights` the model was loaded from, when known."""
        self.decision: ExtraBuffersDecision | None = None
        """How ``use_extra_bufts`` was decided for this session's model (set on load)."""
        self.stats = SessionStats()
        self.prefix_slots = max(0, int(prefix_slots))
        self._snapshots: list[_Snapshot] = []  # most recently used last
        self._depth = 0  # nested evaluations under way (see _begin)

    # ------------------------------------------------------------------ loading
    @property
    def loaded(self) -> bool:
        return self._llama is not None

    def load(self) -> Any:
        """Resolve the weights and create the llama.cpp context (once); return the ``Llama`` object.

        Raises:
            ModelLoadError: the weights cannot be resolved, are not a complete ChatML GGUF, or llama.cpp refuses
                them.
            InputError: ``GRAPHEVAL_LLAMA_EXTRA_BUFFERS`` holds something other than a yes/no value.
        """
        if self._llama is not None:
            return self._llama
        with self.lock:
            if self._llama is not None:
                return self._llama
            self.decision = decide_extra_buffers(self.extra_buffers)
            resolved = self._model_path() if callable(self._model_path) else self._model_path
            if isinstance(resolved, (str, Path)):
                self.path = Path(resolved)
            else:  # ResolvedWeights
                self.weights = resolved
                self.path = Path(resolved.path)
            started = time.perf_counter()
            if self._factory is not None:
                try:
                    llama = self._factory(
                        model_path=str(self.path), n_ctx=self.n_ctx, n_threads=self.n_threads,
                        n_threads_batch=self.n_threads, n_batch=self.n_batch, seed=self.seed,
                        logits_all=False, verbose=False,
                    )
                except (ValueError, RuntimeError, OSError) as exc:
                    raise ModelLoadError(f"llama.cpp could not load {self.path}: {exc}") from exc
            else:
                llama = self._shared_context()
                if llama is None:
                    # Opted in to extra buffer types: a child process loads and decodes with them first, so a CPU
                    # where that path crashes gets a ModelLoadError here instead of a crashed process.
                    self.decision = confirm_extra_buffers(self.decision, self.path)
                    if self.decision.risky:
                        logger.warning(
                            "loading %s with llama.cpp's extra buffer types on a CPU with AMX (%s): this path is "
                            "known to crash in llama_decode", self.path, self.decision.reason,
                        )
                    llama = load_llama(
                        self.path, n_ctx=self.n_ctx, n_threads=self.n_threads, n_batch=self.n_batch,
                        seed=self.seed, extra_buffers=self.decision.enabled,
                    )
                    with _MODELS_LOCK:
                        _MODELS.setdefault(self._model_key(), llama)
            self.stats.load_seconds += time.perf_counter() - started
            stop = {int(llama.token_eos())}
            for text in END_OF_TURN:
                ids = llama.tokenize(text.encode("utf-8"), add_bos=False, special=True)
                if len(ids) == 1:
                    stop.add(int(ids[0]))
            self._stop_ids = frozenset(stop)
            self._llama = llama
            logger.info(
                "loaded %s (n_ctx=%d, threads=%d, extra buffers %s) in %.1f s", self.path, self.n_ctx,
                self.n_threads, "on" if self.decision.enabled else "off", self.stats.load_seconds,
            )
            return llama

    def _model_key(self) -> tuple[str, bool]:
        assert self.path is not None and self.decision is not None
        return str(self.path.resolve()), self.decision.enabled

    def _shared_context(self) -> SharedContext | None:
        """A new context over a model this process already loaded from the same file (same settings), if any."""
        if self.path is None:
            return None
        with _MODELS_LOCK:
            base = _MODELS.get(self._model_key())
        if base is None:
            return None
        try:
            return SharedContext(base, n_ctx=self.n_ctx, n_batch=self.n_batch, n_threads=self.n_threads)
        except ModelLoadError as exc:  # a llama-cpp-python without these internals
            logger.info("cannot share the loaded model (%s); loading %s again", exc, self.path)
            return None

    def describe_weights(self) -> str:
        """Where the loaded weights came from, e.g. ``qwen2.5-coder-0.5b-instruct-q4_k_m.gguf (parts, sha256 1d96…)``."""
        if self.weights is not None:
            return str(self.weights.describe())
        return str(self.path) if self.path is not None else "(not loaded)"

    @property
    def llama(self) -> Any:
        return self.load()

    @property
    def stop_ids(self) -> frozenset[int]:
        """Token ids that end generation (end of turn / end of text)."""
        self.load()
        return self._stop_ids

    # ------------------------------------------------------------------ tokens
    def tokenize(self, text: str, *, special: bool = False) -> list[int]:
        """Token ids of ``text`` (no BOS). ``special=True`` parses control tokens such as ``<|im_start|>``."""
        with self.lock:
            return list(self.llama.tokenize(text.encode("utf-8"), add_bos=False, special=special))

    def detokenize(self, tokens: Sequence[int]) -> bytes:
        with self.lock:
            return bytes(self.llama.detokenize(list(tokens)))

    def cached_tokens(self) -> list[int]:
        """The token sequence currently held in the KV cache."""
        with self.lock:
            llama = self.llama
            return [int(t) for t in llama.input_ids[: llama.n_tokens]]

    def reset(self) -> None:
        """Forget the KV cache (the next prefill evaluates everything)."""
        with self.lock:
            self._snapshots.clear()
            if self._llama is not None:
                self._llama.reset()

    def reset_stats(self) -> None:
        self.stats = SessionStats(load_seconds=self.stats.load_seconds)

    # ------------------------------------------------------------------ threads
    @property
    def threads_now(self) -> int:
        """The thread count the context evaluates with now."""
        return self._threads_now

    def _use_threads(self, n: int) -> None:
        """Evaluate with ``n`` threads from now on (one-token steps and batches), where the context allows it."""
        if n == self._threads_now or not self._threads_settable:
            return
        if set_threads(self.llama, n, n):
            self._threads_now = n
            self.stats.thread_switches += 1
        else:  # a llama-cpp-python or fake without llama_set_n_threads: keep the count it was loaded with
            self._threads_settable = False

    @property
    def _governed(self) -> bool:
        return not self.threads_fixed and self._threads_settable

    def _free_now(self) -> int:
        """Threads this session may take now: those other processes leave free, less those the other sessions of
        this process hold, and no more than an even part while another session waits to start
        (:meth:`~grapheval_plugins.local.threads.ThreadLedger.share`), at least one."""
        return LEDGER.share(self, free_threads(self._load_reader(), self.n_threads))

    def _begin(self) -> None:
        """Start an evaluation (the outermost of nested ones: a prompt inside a generation is one): wait until its
        threads fit beside the other sessions' (:meth:`~grapheval_plugins.local.threads.ThreadLedger.acquire`),
        then use the threads the load leaves free (the decode governor's choice when that is fewer)."""
        if self._depth == 0:
            limit = self.n_threads if self._governed else allowed_cpus()
            started = time.perf_counter()
            threads = LEDGER.acquire(self, lambda: free_threads(self._load_reader(), limit),
                                     None if self._governed else self._threads_now)
            self.stats.wait_seconds += time.perf_counter() - started
            try:
                if self._governed:
                    self.governor.set_cap(threads)
                    self._use_threads(min(self.governor.cap, self.governor.preferred))
                    LEDGER.hold(self, self._threads_now)
            except BaseException:
                LEDGER.release(self)
                raise
        self._depth += 1

    def _end(self) -> None:
        """End an evaluation :meth:`_begin` started; the outermost gives its threads back."""
        self._depth -= 1
        if self._depth == 0:
            LEDGER.release(self)

    def _step_threads(self, step: int) -> None:
        """Before decode step ``step``: the governor's thread count (the load re-read every few steps, and at
        once when another session of the process waits for threads this one holds), held in the ledger."""
        if self._governed:
            if (step and step % LOAD_RECHECK_STEPS == 0) or (self._threads_now > 1 and LEDGER.waiting(self)):
                self.governor.set_cap(self._free_now())
            self._use_threads(self.governor.threads())
        LEDGER.hold(self, self._threads_now)

    def reserve_beside(self) -> int | None:
        """Reserve threads for an evaluation that is to run beside another session's (the judge reading a context
        while the chat model extracts), before that other one starts: half of the threads that other processes
        and sessions leave free, or this session's fixed ``n_threads``; ``None`` when that would not leave as many
        for the other evaluation (then running both at once would only contend for the cores). Pass the count to
        :meth:`prefill` (``threads=``) and call :meth:`release_beside` afterwards."""
        limit = allowed_cpus() if self.threads_fixed else self.n_threads
        free = free_threads(self._load_reader(), limit)
        return LEDGER.reserve(self, free, self.n_threads if self.threads_fixed else None)

    def release_beside(self) -> None:
        """Give back the threads :meth:`reserve_beside` reserved."""
        LEDGER.release(self)

    def _observe(self, seconds: float, tokens: int) -> None:
        if self._governed and self._threads_now == self.governor.current:
            self.governor.observe(seconds, tokens)

    # ------------------------------------------------------------------ evaluation
    def prefill(
        self, tokens: Sequence[int], what: str = "prompt", *, threads: int | None = None, logits: bool = True
    ) -> int:
        """Evaluate ``tokens``, reusing the longest prefix already in the KV cache; return the tokens reused.

        Afterwards :meth:`logits` are those of the position after the last token; with ``logits=False`` (a prefix
        evaluated for later prompts) tokens already in the cache are not evaluated again for them. ``threads``: the
        count :meth:`reserve_beside` reserved (default: the threads free now, see the class).

        Raises:
            ContextOverflowError: ``tokens`` do not fit the context window.
        """
        tokens = [int(t) for t in tokens]
        if not tokens:
            raise InputError(what, "nothing to evaluate (empty token sequence)")
        if len(tokens) > self.n_ctx:
            raise ContextOverflowError(
                what, f"{len(tokens)} tokens do not fit the model's context window of {self.n_ctx} tokens"
            )
        with self.lock:
            llama = self.llama
            common = _common_prefix(llama.input_ids[: llama.n_tokens], tokens)
            if self._restore_longer(tokens, common):  # the KV cache now holds a saved prefix (or, failing, nothing)
                common = _common_prefix(llama.input_ids[: llama.n_tokens], tokens)
            if common == len(tokens):
                if not logits:
                    return common
                common -= 1  # all cached: re-evaluate the last token to refresh its logits
            if threads is None:
                self._begin()
            elif self._governed:
                self._use_threads(threads)
            started = time.perf_counter()
            llama.n_tokens = common
            try:
                llama.eval(tokens[common:])  # drops the stale KV cells past `common` first
            except Exception:
                llama.reset()
                raise
            finally:
                if threads is None:
                    self._end()
            self.stats.prefill_seconds += time.perf_counter() - started
            self.stats.calls += 1
            self.stats.prompt_tokens += len(tokens)
            self.stats.reused_tokens += common
            self.stats.evaluated_tokens += len(tokens) - common
            if len(tokens) - common >= SNAPSHOT_MIN_TOKENS:
                self._save(tokens)
            return common

    def _restore_longer(self, tokens: Sequence[int], cached: int) -> bool:
        """Put back the saved prefix sharing the most tokens with ``tokens`` when it spares at least
        :data:`SNAPSHOT_MIN_TOKENS` over the ``cached`` ones. ``True`` when the KV cache was touched (restored, or
        emptied by a failed restore): the caller then reads the cached tokens again."""
        best, shared = None, cached + SNAPSHOT_MIN_TOKENS - 1
        for snapshot in self._snapshots:
            n = _common_prefix(snapshot.tokens, tokens)
            if n > shared:
                best, shared = snapshot, n
        if best is None:
            return False
        if not restore_sequence(self.llama, best.data, best.tokens):
            self._snapshots.clear()  # this llama-cpp-python cannot: stop saving
            self.prefix_slots = 0
            return True
        self._snapshots.remove(best)
        self._snapshots.append(best)
        self.stats.restored_tokens += shared
        return True

    def _save(self, tokens: Sequence[int]) -> None:
        """Keep the KV cells of ``tokens`` (just evaluated) to return to later, in one of ``prefix_slots``."""
        if self.prefix_slots <= 0:
            return
        data = save_sequence(self.llama)
        if data is None:  # a llama-cpp-python (or fake) that cannot copy KV cells
            self.prefix_slots = 0
            return
        saved = tuple(int(t) for t in tokens)
        # a saved prefix of the new one is superseded by it
        self._snapshots = [s for s in self._snapshots if _common_prefix(s.tokens, saved) < len(s.tokens)]
        self._snapshots.append(_Snapshot(tokens=saved, data=data))
        del self._snapshots[: -self.prefix_slots]
        self.stats.snapshots += 1

    def logits(self) -> Any:
        """A copy of the next-token logits (numpy float32 vector over the vocabulary)."""
        with self.lock:
            return next_logits(self.llama)

    def generate(
        self,
        prompt: Sequence[int],
        *,
        max_tokens: int,
        temperature: float = 0.0,
        seed: int | None = None,
        prompt_lookup: bool | None = None,
    ) -> Iterator[int]:
        """Yield generated token ids after ``prompt`` (greedy when ``temperature`` is 0) until an end-of-turn token,
        ``max_tokens``, or the end of the context window. The caller must hold :attr:`lock` while iterating.

        Greedy decoding uses prompt lookup when :attr:`prompt_lookup` (or ``prompt_lookup`` for this call) is on
        and llama-cpp-python can evaluate a batch with every token's logits.
        """
        self._begin()
        try:
            self.prefill(prompt)
            llama = self.llama
            room = min(max_tokens, self.n_ctx - len(prompt))
            lookup = self.prompt_lookup if prompt_lookup is None else prompt_lookup
            if temperature <= 0 and lookup and self.lookup_tokens > 0 and batch_logits_supported(llama):
                yield from self._decode_lookup(llama, [int(t) for t in prompt], room)
            else:
                yield from self._decode_plain(llama, room, temperature, self.seed if seed is None else seed)
        finally:
            self._end()

    def _decode_plain(self, llama: Any, room: int, temperature: float, seed: int) -> Iterator[int]:
        """One evaluation per generated token."""
        import numpy as np

        rng = np.random.default_rng(seed)
        stop_ids = self._stop_ids
        for i in range(room):
            started = time.perf_counter()
            logits = self.logits()
            if temperature <= 0:
                token = int(np.argmax(logits))
            else:
                scaled = (logits - logits.max()) / temperature
                probs = np.exp(scaled.astype(np.float64))
                token = int(rng.choice(len(probs), p=probs / probs.sum()))
            if token in stop_ids:
                self.stats.decode_seconds += time.perf_counter() - started
                return
            if i + 1 < room:
                self._step_threads(i)
                step_started = time.perf_counter()
                llama.eval([token])
                self._observe(time.perf_counter() - step_started, 1)
                self.stats.decode_steps += 1
            self.stats.decode_seconds += time.perf_counter() - started
            self.stats.generated_tokens += 1
            yield token

    def _decode_lookup(self, llama: Any, context: list[int], room: int) -> Iterator[int]:
        """Greedy decoding with prompt lookup: each step evaluates the last token and a draft in one batch, and
        keeps the draft's prefix that matches the model's argmax at every position (then the argmax after it).

        The KV cache is rolled back past the kept tokens by setting ``n_tokens`` (the next evaluation drops the
        rejected cells first, as in :meth:`prefill`); an end-of-turn token is never kept in the cache.
        """
        import numpy as np

        stop_ids = self._stop_ids
        started = time.perf_counter()
        token = int(np.argmax(self.logits()))
        produced = step = 0
        while True:
            if token in stop_ids:
                self.stats.decode_seconds += time.perf_counter() - started
                return
            produced += 1
            self.stats.generated_tokens += 1
            self.stats.decode_seconds += time.perf_counter() - started
            yield token
            if produced >= room:
                return
            started = time.perf_counter()
            context.append(token)
            draft = draft_tokens(
                context, max_ngram=self.lookup_ngram, min_ngram=self.lookup_min_ngram,
                max_draft=min(self.lookup_tokens, room - produced - 1),
            )
            self._step_threads(step)
            base = int(llama.n_tokens)
            step_started = time.perf_counter()
            try:
                rows = eval_logits(llama, [token, *draft])
            except Exception:
                llama.reset()
                raise
            self._observe(time.perf_counter() - step_started, 1 + len(draft))
            choices = [int(c) for c in np.argmax(rows, axis=1)]
            kept = accepted_prefix(draft, choices)
            ended = next((j for j in range(kept) if draft[j] in stop_ids), None)
            keep = kept if ended is None else ended
            llama.n_tokens = base + 1 + keep
            step += 1
            self.stats.decode_steps += 1
            self.stats.drafted_tokens += len(draft)
            self.stats.accepted_tokens += kept
            for drafted in draft[:keep]:
                produced += 1
                self.stats.generated_tokens += 1
                context.append(drafted)
                self.stats.decode_seconds += time.perf_counter() - started
                yield drafted
                started = time.perf_counter()
            if ended is not None:
                return
            token = choices[kept]


# ---------------------------------------------------------------------- process-wide registry
_SESSIONS: dict[tuple[Any, ...], LlamaSession] = {}
_SESSIONS_LOCK = threading.Lock()


def get_session(
    key: str,
    model_path: str | Path | Callable[[], Any],
    *,
    role: str,
    n_ctx: int = 4096,
    n_threads: int | None = None,
    n_batch: int = 512,
    seed: int = 0,
    extra_buffers: bool | None = None,
    factory: Callable[..., Any] | None = None,
    prompt_lookup: bool | None = None,
) -> LlamaSession:
    """The process-wide session for ``(key, role, settings)``, created (not loaded) on first request.

    ``key`` identifies the weights (a model name or a path); ``role`` separates contexts that should not share a KV
    cache (``"chat"``, ``"judge"``). ``extra_buffers`` is decided here (option, else environment variable), so a
    bad ``GRAPHEVAL_LLAMA_EXTRA_BUFFERS`` value fails before anything loads. Sessions over one file share its
    loaded weights, each with its own context and lock. ``n_threads=None`` (default) lets the session follow the load
    (see :class:`LlamaSession`); ``prompt_lookup`` is :class:`LlamaSession`'s.

    Raises:
        InputError: ``GRAPHEVAL_LLAMA_EXTRA_BUFFERS`` or ``GRAPHEVAL_PROMPT_LOOKUP`` holds something other than a
            yes/no value.
    """
    threads = n_threads or None
    enabled = decide_extra_buffers(extra_buffers).enabled
    lookup = _env_prompt_lookup() if prompt_lookup is None else bool(prompt_lookup)
    ident = (key, role, n_ctx, threads, n_batch, seed, enabled, factory, lookup)
    with _SESSIONS_LOCK:
        session = _SESSIONS.get(ident)
        if session is None:
            session = LlamaSession(
                model_path, n_ctx=n_ctx, n_threads=threads, n_batch=n_batch, seed=seed,
                extra_buffers=extra_buffers, factory=factory, prompt_lookup=lookup,
            )
            _SESSIONS[ident] = session
        return session


def clear_sessions() -> None:
    """Drop every shared session (their llama.cpp contexts are freed when no longer referenced)."""
    with _SESSIONS_LOCK:
        _SESSIONS.clear()
    with _MODELS_LOCK:
        _MODELS.clear()
