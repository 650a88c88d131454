"""Stage 2: the scorer interface. A backend implements :meth:`Scorer.predict_support`; the base chunks long
contexts, scores every claim against every chunk in one call, keeps its best chunk and checks the numbers."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
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
"""The settings :meth:`Scorer.fingerprint` reads from every scorer (and from the ``backend`` it wraps)."""


@dataclass(frozen=True)
class ClaimScore:
    """One claim's verdict: P(unsupported), the chunk that decided it (numbered over all passages) and its passage.
    ``error`` is set (``p_unsupported`` NaN, ``chunk_index`` -1) when the scorer could not judge the claim."""

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
    """Overlapping chunks of at most ``max_tokens`` (paragraphs, sentences, words kept whole where they fit).

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
    """The value at dotted ``path`` of ``owner``, read without running a property; ``None`` if missing."""
    return functools.reduce(lambda obj, name: inspect.getattr_static(obj, name, None), path.split("."), owner)


def _plain(value: object) -> bool:
    return isinstance(value, (str, int, float, tuple, list, dict, PurePath)) or (
        dataclasses.is_dataclass(value) and not isinstance(value, type))


class Scorer(ABC):
    """Scores claims against a grounding context: P(unsupported) per claim. A bounded model sets
    ``max_premise_tokens`` (in :meth:`count_tokens` units) and overrides :meth:`count_tokens`.

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
    chunk_overlap_tokens: int = 48
    fingerprint_fields: ClassVar[tuple[str, ...]] = ()  # more settings (dotted paths) that decide the numbers
    overlaps_extraction: bool = False
    """Whether :meth:`GraphEval.evaluate_many <grapheval_plugins.GraphEval.evaluate_many>` checks each row while
    the next are extracted (the local judge, which splits the cores with a local chat model)."""

    @property
    def lock(self) -> threading.RLock:
        """Serialises model access across threads (made on first use)."""
        lock: threading.RLock = self.__dict__.setdefault("_lock", threading.RLock())
        return lock

    def count_tokens(self, text: str) -> int:
        """Token count used for chunking. Default: an estimate from whitespace words."""
        return _approx_tokens(text)

    def fingerprint(self) -> str:
        """A digest of what, besides :attr:`name`, decides this scorer's numbers (claim-score caches and fitted
        hybrid weights key on it): the class, the plain or dataclass settings named by :data:`FINGERPRINT_FIELDS`
        and :attr:`fingerprint_fields`, and the wrapped ``backend``'s. Nothing is loaded.

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
        """:meth:`fingerprint`'s digest with ``computed`` values in place of the settings of the same names."""
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
        """Score ``claims[i]`` against ``contexts[i]`` (a string or passages, each chunked on its own) in one
        batched pass; each claim keeps its best chunk (highest P(supported)).

        Raises ``ScoringError`` when a context could not be chunked, the backend raised, or it returned an
        invalid number."""
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
        """``(passage index, chunk)`` of every chunk of every passage."""
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
        """:meth:`check` in a worker thread."""
        return await asyncio.to_thread(self.check, contexts, claims)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"
