"""Resumable JSONL output: one JSON object per line, keyed by an id, appended as each row is done.

:class:`JsonlStore` is what the ``grapheval`` command line and the benchmark harness write their per-row results
with. Opening a file reads what an earlier (possibly interrupted) run wrote: a torn last line, a line that is
not a JSON object or has no id, and rows the caller asks to redo are dropped (the file is rewritten without them,
atomically), so a new run skips exactly the ids that are done. Each append is written and flushed at once;
``fsync`` runs at most every ``fsync_every_s`` seconds (and on :meth:`JsonlStore.close`), so a crash loses at most
that much of what the OS had not yet stored, while a long run does not pay for a disk sync per row.

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "out.jsonl")
>>> with JsonlStore(path) as store:
...     store.append({"id": "a", "score": 0.9})
>>> with open(path, "a") as fh:
...     _ = fh.write('{"id": "b", "sco')           # an interrupted write
>>> with JsonlStore(path) as store:
...     sorted(store.ids()), "b" in store
(['a'], False)
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

__all__ = ["JsonlStore", "numbered_rows", "read_jsonl"]

logger = logging.getLogger(__name__)


def numbered_rows(path: str | Path) -> Iterator[tuple[int, dict[str, Any] | None, str | None]]:
    """``(line number, row, problem)`` for each non-blank line of a JSONL file: the row, or why there is none.

    The one JSONL reader of the package. Each line is decoded on its own, so one bad byte costs its line, not the
    file; a UTF-8 byte-order mark on the first line is dropped.

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "rows.jsonl"
    >>> _ = path.write_bytes(b'{"id": 1}\\n\\n[1, 2]\\n{"id": }\\n\\xff\\n')
    >>> for number, row, problem in numbered_rows(path):
    ...     print(number, row or problem)
    1 {'id': 1}
    3 not a JSON object
    4 invalid JSON: Expecting value (column 8)
    5 not UTF-8 text (byte 0: invalid start byte)
    """
    with Path(path).open("rb") as fh:
        for number, raw in enumerate(fh, start=1):
            try:
                line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                yield number, None, f"not UTF-8 text (byte {exc.start}: {exc.reason})"
                continue
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                yield number, None, f"invalid JSON: {exc.msg} (column {exc.colno})"
                continue
            if not isinstance(row, dict):
                yield number, None, "not a JSON object"
                continue
            yield number, row, None


def read_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    """The JSON objects of a JSONL file, in order; unreadable lines (a torn last line) and non-objects skipped.

    A missing file yields nothing.
    """
    if not Path(path).exists():
        return
    for _, row, _problem in numbered_rows(path):
        if row is not None:
            yield row


class JsonlStore:
    """An append-only JSONL file of rows, at most one per id, that a re-run resumes.

    Args:
        path: the file (created with its folder when missing).
        key: the field holding each row's id (ids are compared as strings), or a function giving a row's id
            (``None`` for a row without one), for files keyed by several fields.
        redo: rows of the existing file for which this returns true are dropped on opening, so they are done
            again (e.g. rows that recorded an error). ``None``: every readable row with an id counts as done.
        fsync_every_s: the longest time between a write and the ``fsync`` that makes it durable (0: every row).
        keep_rows: hold every row in :attr:`rows` (the benchmark harness reads them back). ``False`` keeps only the
            ids, so a long run's memory does not grow with what it has written (the command line's choice);
            :attr:`rows` is then empty.

    For an id written twice in an existing file, the last row wins (and the file is rewritten with one row per
    id). :meth:`append` refuses an id that is already there.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        key: str | Callable[[Mapping[str, Any]], str | None] = "id",
        redo: Callable[[Mapping[str, Any]], bool] | None = None,
        fsync_every_s: float = 1.0,
        keep_rows: bool = True,
    ) -> None:
        if fsync_every_s < 0:
            raise ValueError("fsync_every_s must be >= 0")
        self.path = Path(path)
        self.key = key
        self._key: Callable[[Mapping[str, Any]], str | None]
        if callable(key):
            self._key = key
        else:
            field = key
            self._key = lambda row: None if row.get(field) is None else str(row[field])
        self.fsync_every_s = fsync_every_s
        self.keep_rows = keep_rows
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.rows: dict[str, dict[str, Any]] = {}
        self._ids: set[str] = set()
        self._fh: Any = None
        self._last_sync = time.monotonic()
        self._load(redo)

    def _load(self, redo: Callable[[Mapping[str, Any]], bool] | None) -> None:
        if not self.path.exists():
            return
        dropped = lines = 0
        torn_tail = False
        last: dict[str, int] = {}  # id -> number of the line that holds it (the last one wins)
        with self.path.open(encoding="utf-8") as fh:
            for number, line in enumerate(fh):
                lines += 1
                torn_tail = not line.endswith("\n")
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    dropped += 1
                    continue
                rid = self._key(row) if isinstance(row, dict) else None
                if rid is None or (redo is not None and redo(row)):
                    dropped += 1
                    continue
                if rid in last:
                    dropped += 1
                    del last[rid]  # the last one wins, in the order it was written
                    self.rows.pop(rid, None)
                last[rid] = number
                if self.keep_rows:
                    self.rows[rid] = row
        self._ids = set(last)
        if dropped or torn_tail:  # rewrite: one line per done id, each ending in a newline
            kept = set(last.values())
            tmp = self.path.with_suffix(self.path.suffix + ".tmp")
            with self.path.open(encoding="utf-8") as fh, tmp.open("w", encoding="utf-8") as out:
                for number, line in enumerate(fh):
                    if number in kept:
                        out.write(line if line.endswith("\n") else line + "\n")
                out.flush()
                os.fsync(out.fileno())
            tmp.replace(self.path)
            if dropped:
                logger.info("%s: dropped %d torn/redone/duplicate line(s) of %d", self.path, dropped, lines)

    # ---------------------------------------------------------------- reading
    def ids(self) -> set[str]:
        """The ids already done."""
        return set(self._ids)

    done = ids

    def __contains__(self, rid: object) -> bool:
        return str(rid) in self._ids

    def __len__(self) -> int:
        return len(self._ids)

    # ---------------------------------------------------------------- writing
    def append(self, row: Mapping[str, Any]) -> None:
        """Write ``row`` as one line and flush it (``fsync`` at the bounded interval).

        Raises:
            ValueError: the row has no id, or its id is already in the file.
        """
        rid = self._key(row)
        if rid is None:
            raise ValueError(f"row has no id ({self.key!r})")
        if rid in self._ids:
            raise ValueError(f"row {rid!r} is already in {self.path}")
        if self._fh is None:
            self._fh = self.path.open("a", encoding="utf-8")
        self._fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        self._fh.flush()
        self._ids.add(rid)
        if self.keep_rows:
            self.rows[rid] = dict(row)
        now = time.monotonic()
        if now - self._last_sync >= self.fsync_every_s:
            os.fsync(self._fh.fileno())
            self._last_sync = now

    def extend(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """:meth:`append` each row."""
        for row in rows:
            self.append(row)

    def sync(self) -> None:
        """Make everything written so far durable (``fsync``)."""
        if self._fh is not None:
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self._last_sync = time.monotonic()

    def close(self) -> None:
        """``fsync`` and close the file (appending again reopens it)."""
        if self._fh is not None:
            try:
                self.sync()
            finally:
                self._fh.close()
                self._fh = None

    def __enter__(self) -> JsonlStore:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __del__(self) -> None:  # a store dropped without close() still closes its file
        fh = self.__dict__.get("_fh")
        if fh is not None:
            try:
                fh.close()
            except Exception:  # noqa: BLE001 - never raise from a finaliser
                pass

    def __repr__(self) -> str:
        return f"JsonlStore({str(self.path)!r}, rows={len(self._ids)})"
