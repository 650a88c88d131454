"""Caches of claim scores (:class:`CachedScorer` in front of any scorer; ``GraphEval(score_cache=...)``), so
re-deciding or re-rendering a run only scores what changed (the key: docs/benchmarks.md, "The claim-score cache").

>>> from grapheval_plugins.testing import KeywordScorer
>>> scorer = CachedScorer(KeywordScorer(), MemoryScoreCache())
>>> [round(s.p_unsupported, 2) for s in scorer.check(["Paris is in France."], ["Paris is in France"])]
[0.0]
>>> scorer.check(["Paris is in France."], ["Paris is in France"])[0].p_unsupported, scorer.hits, scorer.misses
(0.0, 1, 1)
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from .cache import LRU, SQLiteStore, cache_key, open_store
from .check.base import ClaimScore, Scorer

__all__ = ["CachedScorer", "MemoryScoreCache", "SQLiteScoreCache", "ScoreCache", "ScoreKey",
    "make_score_cache", "premise_hash"]


def premise_hash(premise: str | Sequence[str]) -> str:
    """A stable hex digest of a premise: a string, or a sequence of passages (each counts on its own).

    >>> premise_hash("A.") == premise_hash(["A."])
    True
    >>> premise_hash(["A.", "B."]) == premise_hash(["A.\\n\\nB."])
    False
    """
    passages = [premise] if isinstance(premise, str) else list(premise)
    return hashlib.sha256(json.dumps(passages, ensure_ascii=False).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class ScoreKey:
    """What one claim score depends on."""

    scorer: str
    fingerprint: str
    premise: str
    """:func:`premise_hash` of the premise."""
    claim: str

    def digest(self) -> str:
        return cache_key(self.scorer, self.fingerprint, self.premise, self.claim)


@runtime_checkable
class ScoreCache(Protocol):
    """What :class:`CachedScorer` needs of a store: batched look-ups and writes."""

    def get_many(self, keys: Sequence[ScoreKey]) -> dict[ScoreKey, ClaimScore]: ...

    def set_many(self, items: Mapping[ScoreKey, ClaimScore]) -> None: ...


class MemoryScoreCache(LRU[ClaimScore]):
    """A bounded in-process LRU cache of claim scores."""

    def get_many(self, keys: Sequence[ScoreKey]) -> dict[ScoreKey, ClaimScore]:
        found = ((key, self.get(key.digest())) for key in keys)
        return {key: value for key, value in found if value is not None}

    def set_many(self, items: Mapping[ScoreKey, ClaimScore]) -> None:
        for key, value in items.items():
            if value.error is None:
                self.put(key.digest(), value)


class SQLiteScoreCache(SQLiteStore):
    """A persistent cache of claim scores in one SQLite file, shared by threads and processes.

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "scores.sqlite")
    >>> key = ScoreKey("s", "f", premise_hash("ctx"), "claim")
    >>> SQLiteScoreCache(path).set_many({key: ClaimScore(0.25, 0, "ctx")})
    >>> SQLiteScoreCache(path).get_many([key])[key].p_unsupported
    0.25
    """

    TABLE = "scores"
    COLUMNS = ("key TEXT PRIMARY KEY, scorer TEXT, fingerprint TEXT, premise TEXT, claim TEXT, "
               "p_unsupported REAL NOT NULL, chunk_index INTEGER NOT NULL, chunk TEXT NOT NULL, "
               "passage_index INTEGER NOT NULL")

    def get_many(self, keys: Sequence[ScoreKey]) -> dict[ScoreKey, ClaimScore]:
        if not keys:
            return {}
        by_digest = {key.digest(): key for key in keys}
        digests = list(by_digest)
        out: dict[ScoreKey, ClaimScore] = {}
        with self._lock, self._connect() as conn:
            for start in range(0, len(digests), 500):  # below SQLite's limit on bound parameters
                part = digests[start : start + 500]
                rows = conn.execute(
                    "SELECT key, p_unsupported, chunk_index, chunk, passage_index FROM scores WHERE key IN "
                    f"({','.join('?' * len(part))})",
                    part,
                ).fetchall()
                for digest, p, index, chunk, passage in rows:
                    out[by_digest[digest]] = ClaimScore(p_unsupported=float(p), chunk_index=int(index), chunk=chunk,
                                                        passage_index=int(passage))
        return out

    def set_many(self, items: Mapping[ScoreKey, ClaimScore]) -> None:
        rows = [
            (key.digest(), key.scorer, key.fingerprint, key.premise, key.claim, value.p_unsupported,
             value.chunk_index, value.chunk, value.passage_index)
            for key, value in items.items()
            if value.error is None
        ]
        if not rows:
            return
        with self._lock, self._connect() as conn:
            conn.executemany("INSERT OR REPLACE INTO scores VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)


def make_score_cache(cache: ScoreCache | str | Path | bool | None) -> ScoreCache | None:
    """The store behind ``GraphEval(score_cache=...)``: ``True`` in memory, a path an SQLite file, ``False`` or
    ``None`` none, a :class:`ScoreCache` itself.

    >>> make_score_cache(None) is None, type(make_score_cache(True)).__name__
    (True, 'MemoryScoreCache')
    """
    store = open_store(cache, MemoryScoreCache, SQLiteScoreCache)
    if store is not None and not isinstance(store, ScoreCache):
        raise TypeError(f"score_cache: expected a bool, a path or a ScoreCache, got {type(cache).__name__}")
    return store


class CachedScorer(Scorer):
    """A scorer that serves claim scores from ``cache`` and asks ``inner`` (whose name, chunking and fingerprint it
    keeps, read on every call) only for the claims it lacks; ``hits`` and ``misses`` count them."""

    def __init__(self, inner: Scorer, cache: ScoreCache) -> None:
        super().__init__()
        self.inner = inner
        self.cache = cache
        self.name = inner.name
        self.hits = 0
        self.misses = 0

    @property
    def max_premise_tokens(self) -> int | None:  # type: ignore[override]
        return self.inner.max_premise_tokens

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def chunks(self, context: str) -> list[str]:
        return self.inner.chunks(context)

    def fingerprint(self) -> str:
        return self.inner.fingerprint()

    def predict_support(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """``inner``'s, uncached (the cache holds whole claim scores)."""
        return self.inner.predict_support(pairs)

    def _plan(
        self, contexts: Sequence[str | Sequence[str]], claims: Sequence[str]
    ) -> tuple[list[ScoreKey], dict[ScoreKey, ClaimScore], list[int]]:
        """The keys, the scores found, and the positions to score (one per missing key)."""
        if len(contexts) != len(claims):
            raise ValueError("contexts and claims must have the same length")
        name, fingerprint = self.inner.name, self.inner.fingerprint()
        keys = [ScoreKey(name, fingerprint, premise_hash(context), claim)
                for context, claim in zip(contexts, claims)]
        found = self.cache.get_many(list(dict.fromkeys(keys)))
        todo: dict[ScoreKey, int] = {}
        for i, key in enumerate(keys):
            if key not in found and key not in todo:
                todo[key] = i
        with self.lock:
            self.hits += sum(1 for key in keys if key in found)
            self.misses += len(todo)
        return keys, found, list(todo.values())

    def _finish(self, keys: list[ScoreKey], found: dict[ScoreKey, ClaimScore], todo: list[int],
                scored: Sequence[ClaimScore]) -> list[ClaimScore]:
        new = {keys[i]: score for i, score in zip(todo, scored)}
        self.cache.set_many(new)
        merged = {**found, **new}
        return [merged[key] for key in keys]

    def check(self, contexts: Sequence[str | Sequence[str]], claims: Sequence[str]) -> list[ClaimScore]:
        keys, found, todo = self._plan(contexts, claims)
        scored = self.inner.check([contexts[i] for i in todo], [claims[i] for i in todo]) if todo else []
        return self._finish(keys, found, todo, scored)

    async def acheck(self, contexts: Sequence[str | Sequence[str]], claims: Sequence[str]) -> list[ClaimScore]:
        keys, found, todo = await asyncio.to_thread(self._plan, contexts, claims)
        scored = await self.inner.acheck([contexts[i] for i in todo], [claims[i] for i in todo]) if todo else []
        return await asyncio.to_thread(self._finish, keys, found, todo, scored)

    def __repr__(self) -> str:
        return f"CachedScorer({self.inner!r})"
