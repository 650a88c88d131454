"""Caches of extracted knowledge graphs, so a re-run costs no LLM call (``docs/concepts.md#cost``), keyed by
``(llm id, prompt id, output text)`` (:attr:`~grapheval_plugins.extract.prompts.KGPrompt.cache_id`).

>>> cache = MemoryKGCache()
>>> cache.set("llm", "v1", "text", CachedKG(triples=[["a", "b", "c"]], raw_text="<python>...</python>"))
>>> cache.get("llm", "v1", "text").triples
[['a', 'b', 'c']]
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Generic, Protocol, TypeVar, runtime_checkable

__all__ = ["LRU", "CachedKG", "KGCache", "MemoryKGCache", "SQLiteKGCache", "SQLiteStore", "cache_key",
    "open_store"]

T = TypeVar("T")
V = TypeVar("V")


class LRU(Generic[V]):
    """A bounded, thread-safe least-recently-used map: the store under the in-memory caches.

    >>> lru: LRU[int] = LRU(2)
    >>> lru.put("a", 1); lru.put("b", 2); _ = lru.get("a"); lru.put("c", 3)
    >>> lru.get("b") is None, lru.get("a"), len(lru)
    (True, 1, 2)
    """

    def __init__(self, max_entries: int = 100_000) -> None:
        self.max_entries = max_entries
        self._data: OrderedDict[str, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> V | None:
        with self._lock:
            value = self._data.get(key)
            if value is not None:
                self._data.move_to_end(key)
            return value

    def put(self, key: str, value: V) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.max_entries:
                self._data.popitem(last=False)

    def __len__(self) -> int:
        return len(self._data)


class SQLiteStore:
    """One table (``TABLE``, of ``COLUMNS``) in one SQLite file, a connection per operation: the on-disk caches."""

    TABLE: ClassVar[str]
    COLUMNS: ClassVar[str]

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        with self._connect() as conn:
            conn.execute(f"CREATE TABLE IF NOT EXISTS {self.TABLE} ({self.COLUMNS})")

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """One connection for one operation, committed (or rolled back) and closed (not left to the collector)."""
        with closing(sqlite3.connect(self.path, timeout=30)) as conn:
            conn.execute("PRAGMA journal_mode=WAL")
            with conn:  # the transaction: commit on success, roll back on an exception
                yield conn

    def __len__(self) -> int:
        with self._lock, self._connect() as conn:
            return int(conn.execute(f"SELECT COUNT(*) FROM {self.TABLE}").fetchone()[0])


def open_store(
    cache: T | str | Path | bool | None, memory: Callable[[], T], sqlite: Callable[[Path | str], T]
) -> T | None:
    """A cache option read one way: ``True`` is ``memory()``, a path ``sqlite(path)``, ``False`` or ``None`` no
    cache, anything else the store itself."""
    if cache is True:
        return memory()
    if cache is False or cache is None:
        return None
    return sqlite(cache) if isinstance(cache, (str, Path)) else cache


@dataclass(frozen=True)
class CachedKG:
    """A cached extraction: the parsed triples and the answer they came from."""

    triples: list[list[str]]
    raw_text: str | None = None


def cache_key(*parts: str) -> str:
    """A stable hex digest of ``parts`` (e.g. ``(llm id, prompt id, text)``)."""
    return hashlib.sha256("".join(f"{part}\x00" for part in parts).encode("utf-8")).hexdigest()


@runtime_checkable
class KGCache(Protocol):
    """What the extractor needs of a cache."""

    def get(self, llm_id: str, prompt_version: str, text: str) -> CachedKG | None: ...

    def set(self, llm_id: str, prompt_version: str, text: str, value: CachedKG) -> None: ...


class MemoryKGCache:
    """A bounded in-process LRU cache."""

    def __init__(self, max_entries: int = 10_000) -> None:
        self.max_entries = max_entries
        self._data: LRU[CachedKG] = LRU(max_entries)

    def get(self, llm_id: str, prompt_version: str, text: str) -> CachedKG | None:
        return self._data.get(cache_key(llm_id, prompt_version, text))

    def set(self, llm_id: str, prompt_version: str, text: str, value: CachedKG) -> None:
        self._data.put(cache_key(llm_id, prompt_version, text), value)

    def __len__(self) -> int:
        return len(self._data)


class SQLiteKGCache(SQLiteStore):
    """A persistent cache in one SQLite file, shared by threads and processes.

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "kg.sqlite")
    >>> SQLiteKGCache(path).set("m", "v", "t", CachedKG([["x", "y", "z"]]))
    >>> SQLiteKGCache(path).get("m", "v", "t").triples
    [['x', 'y', 'z']]
    """

    TABLE = "kg"
    COLUMNS = "key TEXT PRIMARY KEY, llm TEXT, prompt TEXT, triples TEXT NOT NULL, raw_text TEXT"

    def get(self, llm_id: str, prompt_version: str, text: str) -> CachedKG | None:
        key = cache_key(llm_id, prompt_version, text)
        with self._lock, self._connect() as conn:
            row = conn.execute("SELECT triples, raw_text FROM kg WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        return CachedKG(triples=json.loads(row[0]), raw_text=row[1])

    def set(self, llm_id: str, prompt_version: str, text: str, value: CachedKG) -> None:
        key = cache_key(llm_id, prompt_version, text)
        with self._lock, self._connect() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO kg (key, llm, prompt, triples, raw_text) VALUES (?, ?, ?, ?, ?)",
                (key, llm_id, prompt_version, json.dumps(value.triples), value.raw_text),
            )
