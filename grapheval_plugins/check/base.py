"""Stage 2: the scorer interface.

A backend implements one method, :meth:`Scorer.predict_support` — P(supported) for a list of
``(premise, hypothesis)`` pairs, batched however suits it. The base class does the rest for every backend:
empty input, splitting a context longer than the model's window into overlapping chunks (never silent
truncation), scoring every claim against every chunk of its context in one call, keeping each claim's best chunk
(max P(supported)) as its evidence, validating the numbers, and serialising access from threads.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import inspect
import math
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import TYPE_CHECKING, Any, ClassVar

from ..exceptions import ScoringError

if TYPE_CHECKING:
    from langchain_text_splitters import RecursiveCharacterTextSplitter

__all__ = ["FINGERPRINT_FIELDS", "ClaimScore", "Scorer", "split_context"]

FINGERPRINT_FIELDS: tuple[str, ...] = (
    "prompt", "calibration", "labels", "verdict_p_unsupported", "claim_budget_tokens", "chunk_overlap_tokens",
    "model", "revision",
)
"""The settings :meth:`Scorer.fingerprint` reads from every scorer (and from the ``backend`` it wraps, if any);
a scorer class names more in :attr:`Scorer.fingerprint_fields`."""


@dataclass(frozen=True)
class ClaimScore:
    """One claim's verdict: P(unsupported), the chunk of the context that decided it, and that chunk's passage.

    ``chunk_index`` counts the chunks of all the context's passages in order; ``passage_index`` is the passage
    (a context given as a list of documents has one per document; a string is one passage).

    ``error`` is set when the scorer could not judge this claim (an LLM judge gave no usable verdict); then
    ``p_unsupported`` is NaN, ``chunk_index`` -1 and ``chunk`` empty, and the pipeline reports the claim as an
    error instead of a verdict.
    """

    p_unsupported: float
    chunk_index: int
    chunk: str
    passage_index: int = 0
    error: str | None = None


def _approx_tokens(text: str) -> int:
    return max(1, math.ceil(len(text.split()) * 4 / 3))


def _splitter(max_tokens: int, overlap: int, counter: Callable[[str], int]) -> RecursiveCharacterTextSplitter:
    # Built per call (cheap): caching it would keep scorers, and their models, alive through ``counter``.
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    return RecursiveCharacterTextSplitter(
        chunk_size=max_tokens,
        chunk_overlap=min(overlap, max_tokens // 2),
        length_function=counter,
        separators=["\n\n", "\n", ". ", "? ", "! ", "; ", ", ", " ", ""],
        keep_separator="end",
    )


def split_context(
    context: str, max_tokens: int | None, count_tokens: Callable[[str], int] = _approx_tokens, overlap: int = 48
) -> list[str]:
    """Split ``context`` into overlapping chunks of at most ``max_tokens`` (by ``count_tokens``).

    Paragraphs, then sentences, then words are kept whole where they fit. ``max_tokens=None`` returns the
    context as one chunk.

    >>> split_context("One. Two. Three.", max_tokens=None)
    ['One. Two. Three.']
    >>> len(split_context(" ".join(["word"] * 300), max_tokens=100)) > 3
    True
    """
    if max_tokens is None or count_tokens(context) <= max_tokens:
        return [context]
    if max_tokens < 8:
        raise ValueError("max_tokens must be at least 8")
    chunks = [c.strip() for c in _splitter(max_tokens, overlap, count_tokens).split_text(context)]
    return [c for c in chunks if c] or [context]


def _static_path(owner: Any, path: str) -> Any:
    """The value at attribute ``path`` (dotted) of ``owner``, read without running a property (nothing loads);
    ``None`` where a step is missing."""
    value = owner
    for part in path.split("."):
        value = inspect.getattr_static(value, part, None)
        if value is None:
            return None
    return value


def _plain(value: object) -> bool:
    """A setting :meth:`Scorer.fingerprint` digests: a plain value, a path or a dataclass instance."""
    return isinstance(value, (str, int, float, tuple, list, dict, PurePath)) or (
        dataclasses.is_dataclass(value) and not isinstance(value, type))


class Scorer(ABC):
    """Scores claims against a grounding context: P(unsupported) per claim.

    Subclasses implement :meth:`predict_support`, and set ``max_premise_tokens`` (and override
    :meth:`count_tokens`) when the model has a bounded window.

    Example:
        >>> class ContainsScorer(Scorer):
        ...     name = "contains"
        ...     def predict_support(self, pairs):
        ...         return [1.0 if h.lower() in p.lower() else 0.0 for p, h in pairs]
        >>> s = ContainsScorer()
        >>> [round(c.p_unsupported, 2) for c in s.check(["Paris is in France."], ["Paris is in France"])]
        [0.0]
    """

    name: str = "scorer"
    max_premise_tokens: int | None = None
    """Largest premise, in :meth:`count_tokens` units, the model reads without truncation; ``None``: unbounded."""
    chunk_overlap_tokens: int = 48
    fingerprint_fields: ClassVar[tuple[str, ...]] = ()
    """Settings besides :data:`FINGERPRINT_FIELDS` that decide this class's numbers, read by :meth:`fingerprint`:
    attribute names or dotted paths (``"hub.revision"``, ``"session.n_ctx"``)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()

    @property
    def lock(self) -> threading.RLock:
        """Serialises model access across threads (created on first use for subclasses that skip ``__init__``)."""
        lock: threading.RLock | None = self.__dict__.get("_lock")
        if lock is None:
            lock = self.__dict__.setdefault("_lock", threading.RLock())
        return lock

    def count_tokens(self, text: str) -> int:
        """Token count used for chunking. Default: an estimate from whitespace words."""
        return _approx_tokens(text)

    def fingerprint(self) -> str:
        """A digest of what, besides :attr:`name`, decides this scorer's numbers; claim-score caches key on it
        (:mod:`grapheval_plugins.score_cache`), and so do the hybrid rule's fitted weights
        (:attr:`HybridWeights.fingerprint <grapheval_plugins.aggregate.HybridWeights.fingerprint>`).

        Default: the class and the ``repr`` of the settings in :data:`FINGERPRINT_FIELDS` and
        :attr:`fingerprint_fields` that the scorer holds as plain values or dataclasses (its judge prompt,
        calibration, label words, chunking budget, model revision, token window …), and the fingerprint of the
        ``backend`` it wraps, if any (or that backend's :data:`FINGERPRINT_FIELDS`); other objects (a loaded model)
        are left out. Nothing is loaded. Override it (with :meth:`_fingerprint`) when other state changes the
        scores.

        >>> class Fixed(Scorer):
        ...     def predict_support(self, pairs):
        ...         return [1.0] * len(pairs)
        >>> Fixed().fingerprint() == Fixed().fingerprint()
        True
        >>> wide = Fixed()
        >>> wide.chunk_overlap_tokens = 96
        >>> wide.fingerprint() == Fixed().fingerprint()
        False
        """
        return self._fingerprint()

    def _fingerprint(self, **computed: object) -> str:
        """The digest :meth:`fingerprint` gives, with ``computed`` settings (a value a subclass works out, e.g. the
        weights file it will read) in place of those read under the same names."""
        h = hashlib.sha256(f"{type(self).__module__}.{type(self).__qualname__}".encode())
        fields = dict.fromkeys((*FINGERPRINT_FIELDS, *type(self).fingerprint_fields, *computed))
        for field in fields:
            value = computed[field] if field in computed else _static_path(self, field)
            if _plain(value):
                h.update(f"\x00{field}={value!r}".encode())
        backend = self.__dict__.get("backend")
        if isinstance(backend, Scorer):
            h.update(f"\x00backend={backend.fingerprint()}".encode())
        elif backend is not None:
            for field in (*FINGERPRINT_FIELDS, *getattr(type(backend), "fingerprint_fields", ())):
                value = _static_path(backend, field)
                if _plain(value):
                    h.update(f"\x00backend.{field}={value!r}".encode())
        return h.hexdigest()[:16]

    @abstractmethod
    def predict_support(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """P(supported) in [0, 1] for each ``(premise, hypothesis)`` pair, in order."""

    def chunks(self, context: str) -> list[str]:
        """The chunks ``context`` is scored in."""
        return split_context(context, self.max_premise_tokens, self.count_tokens, self.chunk_overlap_tokens)

    def check(self, contexts: Sequence[str | Sequence[str]], claims: Sequence[str]) -> list[ClaimScore]:
        """Score ``claims[i]`` against ``contexts[i]`` for every i, in one batched model pass.

        A context is a string or a sequence of passages (strings). Each passage is chunked on its own (a chunk
        never spans two passages), each distinct context once; every claim is scored against every chunk of its
        context and keeps its best chunk (the one with the highest P(supported)) and that chunk's passage.

        Raises:
            ScoringError: a context could not be chunked (the tokenizer failed to load, the splitter raised), the
                backend raised, or it returned an invalid number.
        """
        if len(contexts) != len(claims):
            raise ValueError("contexts and claims must have the same length")
        if not claims:
            return []
        chunked: dict[tuple[str, ...], list[tuple[int, str]]] = {}
        keys: list[tuple[str, ...]] = []
        pair_index: dict[tuple[str, str], int] = {}
        pairs: list[tuple[str, str]] = []
        for context, claim in zip(contexts, claims):
            key = (context,) if isinstance(context, str) else tuple(context)
            keys.append(key)
            if key not in chunked:
                chunked[key] = self._chunk_passages(key)
            for _, chunk in chunked[key]:
                pair = (chunk, claim)
                if pair not in pair_index:
                    pair_index[pair] = len(pairs)
                    pairs.append(pair)
        with self.lock:
            try:
                support = list(self.predict_support(pairs))
            except ScoringError:
                raise
            except Exception as exc:  # noqa: BLE001 - translated at this boundary
                raise ScoringError(f"scorer {self.name!r} failed on {len(pairs)} pair(s): {exc}") from exc
        if len(support) != len(pairs):
            raise ScoringError(f"scorer {self.name!r} returned {len(support)} scores for {len(pairs)} pairs")
        for value in support:
            if not isinstance(value, (int, float)) or math.isnan(value) or not -1e-6 <= value <= 1 + 1e-6:
                raise ScoringError(f"scorer {self.name!r} returned an invalid probability: {value!r}")
        results: list[ClaimScore] = []
        for key, claim in zip(keys, claims):
            options = [(support[pair_index[(chunk, claim)]], i, passage, chunk)
                       for i, (passage, chunk) in enumerate(chunked[key])]
            best, index, passage, chunk = max(options, key=lambda o: (o[0], -o[1]))
            p_unsupported = min(1.0, max(0.0, 1.0 - float(best)))
            results.append(ClaimScore(p_unsupported=p_unsupported, chunk_index=index, chunk=chunk,
                                      passage_index=passage))
        return results

    def _chunk_passages(self, passages: tuple[str, ...]) -> list[tuple[int, str]]:
        """``(passage index, chunk)`` of every chunk of every passage; a failure is this context's ScoringError."""
        if not passages or not all(isinstance(p, str) for p in passages):
            raise ScoringError(f"scorer {self.name!r}: a context must be a string or a sequence of strings")
        out: list[tuple[int, str]] = []
        for index, passage in enumerate(passages):
            try:
                chunks = self.chunks(passage)
            except ScoringError:
                raise
            except Exception as exc:  # noqa: BLE001 - translated at this boundary (one row, not the batch)
                raise ScoringError(
                    f"scorer {self.name!r} could not split passage {index} into chunks: {type(exc).__name__}: {exc}"
                ) from exc
            out.extend((index, chunk) for chunk in chunks)
        if not out:
            raise ScoringError(f"scorer {self.name!r}: the context has no chunk to score")
        return out

    async def acheck(self, contexts: Sequence[str | Sequence[str]], claims: Sequence[str]) -> list[ClaimScore]:
        """:meth:`check` in a worker thread, so the event loop is never blocked by model inference."""
        return await asyncio.to_thread(self.check, contexts, claims)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"
