"""The SQLite knowledge-graph cache closes every connection it opens (one per operation), even on an error."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from grapheval_plugins import cache as cache_module
from grapheval_plugins.cache import CachedKG, SQLiteKGCache


class _Tracked:
    """A real connection that records whether it was closed."""

    opened: list[_Tracked] = []

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self.closed = False
        _Tracked.opened.append(self)

    def close(self) -> None:
        self.closed = True
        self._conn.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    def __enter__(self) -> sqlite3.Connection:
        return self._conn.__enter__()

    def __exit__(self, *exc: Any) -> Any:
        return self._conn.__exit__(*exc)


@pytest.fixture
def tracked(monkeypatch: pytest.MonkeyPatch) -> list[_Tracked]:
    real_connect = sqlite3.connect
    _Tracked.opened = []
    monkeypatch.setattr(cache_module.sqlite3, "connect", lambda *a, **k: _Tracked(real_connect(*a, **k)))
    return _Tracked.opened


def test_every_connection_is_closed(tmp_path: Path, tracked: list[_Tracked]) -> None:
    cache = SQLiteKGCache(tmp_path / "kg.sqlite")
    for i in range(20):
        cache.set("llm", "v1", f"text {i}", CachedKG([["a", "b", str(i)]]))
        assert cache.get("llm", "v1", f"text {i}") is not None
    assert len(cache) == 20
    assert len(tracked) == 42  # create + 20 set + 20 get + len
    assert all(c.closed for c in tracked)


def test_a_failed_write_is_rolled_back_and_closed(tmp_path: Path, tracked: list[_Tracked]) -> None:
    cache = SQLiteKGCache(tmp_path / "kg.sqlite")
    with pytest.raises(TypeError):
        cache.set("llm", "v1", "text", CachedKG([["a", "b", object()]]))  # type: ignore[list-item]
    assert all(c.closed for c in tracked)
    assert len(cache) == 0
