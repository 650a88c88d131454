"""Sessions: a ``llama_cpp.Llama`` that reuses its evaluated token prefix, shared process-wide (:func:`get_session`),
one evaluation at a time in each, the free cores split evenly between those evaluating at once; see docs/offline.md,
"How it works".

Saved prefixes use the public low-level binding on ``Llama.ctx`` (``Llama.save_state`` would also copy ``n_batch``
rows of logits, some 300 MB). Weights load with ``use_extra_bufts=False`` (the AMX repack crashes on some CPUs).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from .._imports import require
from ..exceptions import InputError, ModelLoadError

__all__ = ["SNAPSHOT_MIN_TOKENS", "ContextOverflowError", "LlamaSession", "SessionStats",
    "clear_sessions", "free_cores", "get_session", "load_llama"]

logger = logging.getLogger(__name__)

END_OF_TURN = ("<|im_end|>", "<|endoftext|>")

_BUSY: set[LlamaSession] = set()
"""The sessions inside an evaluation now: the free cores are split evenly between them."""
_BUSY_LOCK = threading.Lock()

SNAPSHOT_MIN_TOKENS = 128
"""A prefill of at least this many new tokens is saved; a saved prefix is restored when it spares as many."""


class ContextOverflowError(InputError):
    """A prompt does not fit the model's context window (``field`` names what was too long)."""

    default_reason = "too_long"


@dataclass
class SessionStats:
    """Token and time counters of one session (cumulative)."""

    calls: int = 0
    prompt_tokens: int = 0
    reused_tokens: int = 0
    evaluated_tokens: int = 0
    generated_tokens: int = 0
    prefill_seconds: float = 0.0
    decode_seconds: float = 0.0
    load_seconds: float = 0.0
    restored_tokens: int = 0  # from a saved prefix (counted in ``reused_tokens`` too)
    snapshots: int = 0


# ---------------------------------------------------------------------- cores
def allowed_cpus() -> int:
    """CPUs this process may run on (its affinity mask, else the CPU count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _others_running(proc: Path = Path("/proc")) -> int:
    """Runnable threads of other processes now (``/proc/stat`` less this process's running threads); 0 without /proc."""
    try:
        line = next(ln for ln in (proc / "stat").read_text().splitlines() if ln.startswith("procs_running"))
        running = int(line.split()[1])
    except (OSError, StopIteration, ValueError, IndexError):
        return 0
    own = 0
    for task in (proc / "self" / "task").glob("*/stat"):
        try:
            fields = task.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        own += bool(fields) and fields[0] == "R"
    return max(0, running - own)


def free_cores(limit: int | None = None) -> int:
    """The cores other processes leave free now (of ``limit``, default :func:`allowed_cpus`), at least one."""
    return max(1, (limit or allowed_cpus()) - _others_running())


# ---------------------------------------------------------------------- llama-cpp-python
@cache
def llama_without_extra_buffers(base: type) -> type:
    """A ``Llama`` subclass that sets ``use_extra_bufts=False`` on the ``model_params`` ``Llama.__init__`` assigns."""

    def _get(self: Any) -> Any:
        return self.__dict__["_grapheval_model_params"]

    def _set(self: Any, params: Any) -> None:
        params.use_extra_bufts = False
        self.__dict__["_grapheval_model_params"] = params

    return type("LlamaNoExtraBuffers", (base,), {"model_params": property(_get, _set), "__module__": __name__})


def load_llama(path: str | Path, *, n_ctx: int, n_threads: int, n_batch: int, seed: int,
        factory: Callable[..., Any] | None = None) -> Any:
    """``llama_cpp.Llama`` (or ``factory``) over ``path`` without extra buffer types."""
    if factory is None:
        llama_cpp = require("llama_cpp", "local", "local llama.cpp models", package="llama-cpp-python")
        fields = {f[0] for f in getattr(getattr(llama_cpp, "llama_model_params", None), "_fields_", ())}
        if "use_extra_bufts" not in fields:
            raise ModelLoadError(
                f"llama-cpp-python {getattr(llama_cpp, '__version__', '?')} has no 'use_extra_bufts' model parameter, "
                "so llama.cpp's weight repacking (which crashes on some CPUs) cannot be turned off: install "
                "llama-cpp-python>=0.3.9,<0.4"
            )
        factory = llama_without_extra_buffers(llama_cpp.Llama)
    try:
        return factory(model_path=str(path), n_ctx=n_ctx, n_threads=n_threads, n_threads_batch=n_threads,
                       n_batch=n_batch, seed=seed, logits_all=False, verbose=False)
    except (ValueError, RuntimeError, OSError) as exc:
        raise ModelLoadError(f"llama.cpp could not load {path}: {exc}") from exc


def check_chatml(llama: Any, path: Path) -> None:
    """Refuse a model whose chat template (``Llama.metadata``) is not ChatML: prompts are rendered in ChatML."""
    metadata = getattr(llama, "metadata", None)
    if metadata is None:  # a test double without metadata
        return
    template = metadata.get("tokenizer.chat_template")
    if not template or "<|im_start|>" not in template:
        found = "no chat template" if not template else f"the chat template {' '.join(template.split())[:60]!r} …"
        raise ModelLoadError(
            f"{path} has {found}; the local runtime renders prompts in ChatML and only runs ChatML models such as "
            "Qwen2.5-Instruct GGUFs"
        )


def _low_level(llama: Any) -> Any:
    """llama-cpp-python's low-level binding when ``llama`` is a real ``Llama`` (with a context), else ``None``."""
    if getattr(llama, "ctx", None) is None:
        return None
    from llama_cpp import llama_cpp

    return llama_cpp


def next_logits(llama: Any) -> Any:
    """A copy of the next-token logits (``llama_get_logits_ith``: without ``logits_all`` ``Llama`` keeps none)."""
    import numpy as np

    low = _low_level(llama)
    if low is None:
        return np.asarray(llama.next_logits_now(), dtype=np.float32).copy()
    return np.ctypeslib.as_array(low.llama_get_logits_ith(llama.ctx, -1), shape=(llama.n_vocab(),)).copy()


def set_threads(llama: Any, n: int) -> None:
    """Let the next evaluations of ``llama`` use ``n`` threads (``llama_set_n_threads``; a no-op on a test double)."""
    low = _low_level(llama)
    if low is not None:
        low.llama_set_n_threads(llama.ctx, int(n), int(n))


def save_sequence(llama: Any) -> bytes | None:
    """The KV cells of sequence 0 (``llama_state_seq_get_data``), or ``None`` where they cannot be copied."""
    low = _low_level(llama)
    if low is None:
        return None
    size = int(low.llama_state_seq_get_size(llama.ctx, 0))
    if size <= 0:
        return None
    buffer = (ctypes.c_uint8 * size)()
    written = int(low.llama_state_seq_get_data(llama.ctx, buffer, size, 0))
    return ctypes.string_at(buffer, written) if 0 < written <= size else None


def restore_sequence(llama: Any, data: bytes, tokens: Sequence[int]) -> bool:
    """Put saved cells back into sequence 0 as ``tokens`` (not the logits); ``False`` (cache emptied) if refused."""
    low = _low_level(llama)
    if low is None or not data:
        return False
    memory = low.llama_get_memory(llama.ctx)
    low.llama_memory_seq_rm(memory, -1, 0, -1)
    buffer = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
    if int(low.llama_state_seq_set_data(llama.ctx, buffer, len(data), 0)) != len(data):
        low.llama_memory_seq_rm(memory, -1, 0, -1)
        llama.n_tokens = 0
        return False
    llama.input_ids[: len(tokens)] = list(tokens)
    llama.n_tokens = len(tokens)
    return True


@dataclass(frozen=True)
class _Snapshot:
    tokens: tuple[int, ...]
    data: bytes


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if int(x) != y), min(len(a), len(b)))


# ---------------------------------------------------------------------- sessions
class LlamaSession:
    """One ``llama_cpp.Llama`` over a GGUF file (``model_path``, or a function returning it or a ``ResolvedWeights``,
    called on first load), with prefix reuse, ``prefix_slots`` saved prefixes and its :attr:`lock` (one evaluation at
    a time); ``n_threads`` ``None``: :func:`free_cores` at each call, split evenly with the sessions evaluating at the
    same time (re-split at each step); ``factory`` builds the ``Llama`` (default :func:`load_llama`)."""

    def __init__(self, model_path: str | Path | Callable[[], Any], *, n_ctx: int = 4096,
            n_threads: int | None = None, n_batch: int = 512, seed: int = 0,
            factory: Callable[..., Any] | None = None, lock: threading.RLock | None = None,
            prefix_slots: int = 2) -> None:
        if n_ctx < 64:
            raise InputError("n_ctx", f"must be at least 64, got {n_ctx}")
        self._model_path = model_path
        self.n_ctx = n_ctx
        self.threads_fixed = bool(n_threads)
        self.n_threads = n_threads or allowed_cpus()
        self.threads_now = self.n_threads
        self.n_batch = n_batch
        self.seed = seed
        self._factory = factory
        self.lock: threading.RLock = lock if lock is not None else threading.RLock()
        self._llama: Any = None
        self._stop_ids: frozenset[int] = frozenset()
        self.path: Path | None = None
        self.weights: Any = None  # the ResolvedWeights loaded, when known
        self.stats = SessionStats()
        self.prefix_slots = max(0, int(prefix_slots))
        self._snapshots: list[_Snapshot] = []  # most recently used last
        self._depth = 0  # nested calls under way: the free cores are read by the outermost
        self._free = self.n_threads

    # ------------------------------------------------------------------ loading
    @property
    def loaded(self) -> bool:
        return self._llama is not None

    def load(self) -> Any:
        """Resolve the weights and load the model (once; ``ModelLoadError`` unless a ChatML GGUF); the ``Llama``."""
        if self._llama is not None:
            return self._llama
        with self.lock:
            if self._llama is not None:
                return self._llama
            resolved = self._model_path() if callable(self._model_path) else self._model_path
            if not isinstance(resolved, (str, Path)):  # ResolvedWeights
                self.weights, resolved = resolved, resolved.path
            self.path = Path(resolved)
            started = time.perf_counter()
            llama = load_llama(self.path, n_ctx=self.n_ctx, n_threads=self.n_threads, n_batch=self.n_batch,
                               seed=self.seed, factory=self._factory)
            check_chatml(llama, self.path)
            self.stats.load_seconds += time.perf_counter() - started
            ends = [llama.tokenize(text.encode("utf-8"), add_bos=False, special=True) for text in END_OF_TURN]
            self._stop_ids = frozenset({int(llama.token_eos()), *(int(ids[0]) for ids in ends if len(ids) == 1)})
            self._llama = llama
            logger.info("loaded %s (n_ctx=%d) in %.1f s", self.path, self.n_ctx, self.stats.load_seconds)
            return llama

    @property
    def llama(self) -> Any:
        return self.load()

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
        """Forget the KV cache and the saved prefixes (the next prefill evaluates everything)."""
        with self.lock:
            self._snapshots.clear()
            if self._llama is not None:
                self._llama.reset()

    def reset_stats(self) -> None:
        self.stats = SessionStats(load_seconds=self.stats.load_seconds)

    @contextlib.contextmanager
    def busy(self) -> Iterator[None]:
        """A span of evaluations (under :attr:`lock`): the outermost reads the free cores and counts this session
        among those evaluating, whose number splits them (:meth:`share_cores`)."""
        if self._depth == 0:
            self._free = self.n_threads if self.threads_fixed else free_cores(self.n_threads)
            with _BUSY_LOCK:
                _BUSY.add(self)
        self._depth += 1
        try:
            self.share_cores()
            yield
        finally:
            self._depth -= 1
            if self._depth == 0:
                with _BUSY_LOCK:
                    _BUSY.discard(self)

    def share_cores(self) -> None:
        """Set this session's threads to its even part of the free cores, if that changed (``n_threads`` fixed: no)."""
        if self.threads_fixed:
            return
        with _BUSY_LOCK:
            threads = max(1, self._free // max(1, len(_BUSY)))
        if threads != self.threads_now:
            set_threads(self.llama, threads)
            self.threads_now = threads

    # ------------------------------------------------------------------ evaluation
    def prefill(self, tokens: Sequence[int], what: str = "prompt", *, logits: bool = True) -> int:
        """Evaluate ``tokens``, reusing the longest prefix in the KV cache (or a saved one); return the tokens
        reused. ``logits=False``: a fully cached sequence is not evaluated again to refresh :meth:`logits`."""
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
            with self.busy():
                started = time.perf_counter()
                llama.n_tokens = common
                try:
                    llama.eval(tokens[common:])  # drops the stale KV cells past `common` first
                except Exception:
                    llama.reset()
                    raise
            self.stats.prefill_seconds += time.perf_counter() - started
            self.stats.calls += 1
            self.stats.prompt_tokens += len(tokens)
            self.stats.reused_tokens += common
            self.stats.evaluated_tokens += len(tokens) - common
            if len(tokens) - common >= SNAPSHOT_MIN_TOKENS:
                self._save(tokens)
            return common

    def _restore_longer(self, tokens: Sequence[int], cached: int) -> bool:
        """Put back the saved prefix sparing the most over the ``cached`` tokens; ``True`` if the cache was touched."""
        best, shared = None, cached + SNAPSHOT_MIN_TOKENS - 1
        for snapshot in self._snapshots:
            n = _common_prefix(snapshot.tokens, tokens)
            if n > shared:
                best, shared = snapshot, n
        if best is None:
            return False
        if not restore_sequence(self.llama, best.data, best.tokens):
            self._snapshots.clear()  # llama.cpp refused the cells: stop saving
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
        if data is None:  # a test double that cannot copy KV cells
            self.prefix_slots = 0
            return
        saved = tuple(tokens)
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
        self, prompt: Sequence[int], *, max_tokens: int, temperature: float = 0.0, seed: int | None = None
    ) -> Iterator[int]:
        """Yield token ids after ``prompt`` from ``Llama.generate`` (greedy at temperature 0) until an end of turn,
        ``max_tokens`` or the end of the window; the caller holds :attr:`lock` while iterating."""
        with self.busy():
            self.prefill(prompt)  # the prompt's cached prefix (or a saved one) is kept; Llama.generate samples at once
            llama = self.llama
            room = min(max_tokens, self.n_ctx - len(prompt))
            if temperature > 0:
                llama.set_seed(self.seed if seed is None else seed)
            tokens = llama.generate(list(prompt), temp=max(0.0, temperature), top_k=0, top_p=1.0, min_p=0.0)
            started, produced = time.perf_counter(), 0
            try:
                for token in tokens if room > 0 else ():
                    if int(token) in self._stop_ids:
                        break
                    produced += 1
                    self.stats.decode_seconds += time.perf_counter() - started
                    self.stats.generated_tokens += 1
                    yield int(token)
                    if produced >= room:  # the last token is not evaluated
                        break
                    self.share_cores()  # another session may have started or ended an evaluation
                    started = time.perf_counter()
            finally:
                tokens.close()
                self.stats.decode_seconds += time.perf_counter() - started


# ---------------------------------------------------------------------- process-wide registry
_SESSIONS: dict[tuple[Any, ...], LlamaSession] = {}
_SESSIONS_LOCK = threading.Lock()


def get_session(key: str, model_path: str | Path | Callable[[], Any], *, role: str, n_ctx: int = 4096,
        n_threads: int | None = None, seed: int = 0) -> LlamaSession:
    """The process-wide session for ``(key, role, settings)``, created (not loaded) on first request."""
    threads = n_threads or None
    ident = (key, role, n_ctx, threads, seed)
    with _SESSIONS_LOCK:
        if ident not in _SESSIONS:
            _SESSIONS[ident] = LlamaSession(model_path, n_ctx=n_ctx, n_threads=threads, seed=seed)
        return _SESSIONS[ident]


def clear_sessions() -> None:
    """Drop every shared session (their llama.cpp contexts are freed when no longer referenced)."""
    with _SESSIONS_LOCK:
        _SESSIONS.clear()
