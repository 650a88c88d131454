"""Reading rows (:func:`read_rows`: JSONL or CSV) and resumable JSONL output (:class:`JsonlStore`): one JSON object
per line, keyed by an id, appended as each row is done; what the command line and the benchmark harness use.

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

import contextlib
import csv
import itertools
import json
import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO

from .exceptions import InputError

__all__ = ["JsonlStore", "NotAStoreError", "SameFileError", "numbered_rows", "read_rows", "refuse_same_files"]

logger = logging.getLogger(__name__)


class NotAStoreError(InputError):
    """An output file holds a line a :class:`JsonlStore` cannot key: refused (left as it is), never written to."""


class SameFileError(InputError):
    """A file a command writes is also one it reads (or another it writes), directly or through a link."""


def _same(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet): compare where they lead
        return a.resolve() == b.resolve()


def refuse_same_files(reads: Mapping[str, Path | None], writes: Mapping[str, Path | None]) -> None:
    """Raise :class:`SameFileError` when a file to write is a file to read or another one to write (docs/cli.md).

    >>> from pathlib import Path
    >>> refuse_same_files({"INPUT": Path("rows.jsonl")}, {"--output": Path("./rows.jsonl")})
    Traceback (most recent call last):
    ...
    grapheval_plugins.jsonl.SameFileError: --output: is the same file as INPUT (rows.jsonl): it would be overwritten; write elsewhere
    """
    given = [(name, Path(p)) for name, p in writes.items() if p is not None]
    for i, (name, path) in enumerate(given):
        for other, seen in [(n, Path(p)) for n, p in reads.items() if p is not None] + given[:i]:
            if _same(path, seen):
                raise SameFileError(name, f"is the same file as {other} ({seen}): it would be overwritten; "
                                          "write elsewhere")


def numbered_rows(path: str | Path) -> Iterator[tuple[int, dict[str, Any] | None, str | None]]:
    """``(line number, row, problem)`` for each non-blank line of a JSONL file: the row, or why there is none (one bad
    byte costs its line, not the file; a UTF-8 byte-order mark on the first line is dropped).

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
            if not (raw.removeprefix(b"\xef\xbb\xbf") if number == 1 else raw).strip():
                continue
            row, problem = _parse(raw, bom=number == 1)
            yield number, row, problem


def _parse(raw: bytes, *, bom: bool = False) -> tuple[dict[str, Any] | None, str | None]:
    try:
        line = raw.decode("utf-8-sig" if bom else "utf-8")
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8 text (byte {exc.start}: {exc.reason})"
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        return None, f"invalid JSON: {exc.msg} (column {exc.colno})"
    if not isinstance(row, dict):
        return None, "not a JSON object"
    return row, None


CSV_DELIMITERS = ",;\t|"
"""The delimiters a CSV header is sniffed for when ``--delimiter`` is not given (a ``.tsv`` file: a tab)."""

_CSV_FIELD_LIMIT = 2**31 - 1  # a CSV field may be as long as a JSONL line (the csv module's default: 128 KiB)


def read_rows(
    path: str | Path, *, delimiter: str | None = None
) -> Iterator[tuple[int, dict[str, Any] | None, str | None]]:
    r"""Yield ``(line number, row, error)`` for each record of a JSONL or CSV file, streamed (a CSV record's number
    is the line it starts on; its delimiter ``delimiter``, a tab for ``.tsv``, else sniffed from the header).

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "rows.csv"
    >>> _ = path.write_text('id;context;output\n1;"Two\nlines.";ok\n2;too;many;fields\n3;A.;B.\n')
    >>> for number, row, error in read_rows(path):
    ...     print(number, row or error)
    2 {'id': '1', 'context': 'Two\nlines.', 'output': 'ok'}
    4 CSV record has 4 fields, the header has 3
    5 {'id': '3', 'context': 'A.', 'output': 'B.'}
    """
    is_csv = Path(path).suffix.lower() in (".csv", ".tsv")
    return _read_csv(Path(path), delimiter) if is_csv else numbered_rows(path)


def _read_csv(path: Path, delimiter: str | None) -> Iterator[tuple[int, dict[str, Any] | None, str | None]]:
    undecodable: dict[int, str] = {}

    def lines() -> Iterator[str]:  # decoded line by line, like JSONL: a bad byte costs the record it is in
        with path.open("rb") as fh:
            for number, raw in enumerate(fh, start=1):
                try:
                    yield raw.decode("utf-8-sig" if number == 1 else "utf-8")
                except UnicodeDecodeError as exc:
                    undecodable[number] = f"not UTF-8 text (line {number}, byte {exc.start}: {exc.reason})"
                    yield raw.decode("utf-8", errors="replace")

    source = lines()
    first = next(source, None)
    if first is None:
        return
    if delimiter is None and path.suffix.lower() == ".tsv":
        delimiter = "\t"
    elif delimiter is None:
        try:
            delimiter = csv.Sniffer().sniff(first, delimiters=CSV_DELIMITERS).delimiter
        except csv.Error:  # one column: nothing to sniff
            delimiter = ","
    csv.field_size_limit(max(csv.field_size_limit(), _CSV_FIELD_LIMIT))
    reader = csv.reader(itertools.chain([first], source), delimiter=delimiter, strict=True)
    header: list[str] | None = None
    while True:
        start = reader.line_num + 1
        try:
            record = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:  # the reader starts afresh on the next line
            yield start, None, f"CSV error: {exc}"
            continue
        bad = [undecodable.pop(n) for n in range(start, reader.line_num + 1) if n in undecodable]
        if header is None:
            if bad:
                yield start, None, f"CSV header: {bad[0]}"
                return
            header = record
            continue
        if not record:  # a blank line
            continue
        if bad:
            yield start, None, bad[0]
        elif len(record) != len(header):
            yield start, None, f"CSV record has {len(record)} fields, the header has {len(header)}"
        else:
            yield start, dict(zip(header, record)), None


class JsonlStore:
    """An append-only JSONL file of rows, at most one per id, that a re-run resumes (docs/cli.md, "Nothing you had
    is erased"); a line it cannot key raises :class:`NotAStoreError`. Appends are ``fsync``-ed every ``fsync_every_s``.

    Args:
        path: the file (created with its folder when missing).
        key: the field holding each row's id (compared as strings), or a function giving a row's id (``None``: none).
        redo: rows of the existing file for which this is true do not count as done (the new row is appended).
        keep_rows: hold every row in :attr:`rows`; ``False`` keeps only the ids, so memory does not grow with a run.
        replace: start with no row done, writing ``.<name>.partial`` beside ``path``, which :meth:`close` renames
            over it (not after an exception inside the ``with``).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        key: str | Callable[[Mapping[str, Any]], str | None] = "id",
        redo: Callable[[Mapping[str, Any]], bool] | None = None,
        fsync_every_s: float = 1.0,
        keep_rows: bool = True,
        replace: bool = False,
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
        self.replace = replace
        self.rows: dict[str, dict[str, Any]] = {}
        self._ids: set[str] = set()
        self._fh: BinaryIO | None = None
        self._last_sync = time.monotonic()
        self._end: int | None = None  # bytes of the file that are whole lines (a torn tail is cut there)
        self._size = 0  # the size the file had when read
        self._newline = False  # the last line is whole but lacks its newline
        self._load(redo)
        if replace:
            self.rows.clear()
            self._ids.clear()

    @property
    def partial(self) -> Path:
        return self.path.with_name(f".{self.path.name}.partial")

    def _load(self, redo: Callable[[Mapping[str, Any]], bool] | None) -> None:
        try:
            fh = self.path.open("rb")
        except FileNotFoundError:
            return
        offset = 0
        with fh:
            for number, raw in enumerate(fh, start=1):
                whole = raw.endswith(b"\n")
                if not raw.strip():
                    offset += len(raw)
                    continue
                row, problem = _parse(raw)
                rid = self._key(row) if row is not None else None
                if rid is None and not whole and row is None and raw.lstrip().startswith(b'{"'):
                    self._end = offset  # a torn last line: cut off before the next append
                    logger.info("%s: a torn last line (%d bytes) is dropped", self.path, len(raw))
                    break
                if row is None or rid is None:
                    why = problem or "no id"
                    raise NotAStoreError(
                        str(self.path), f"line {number} is not a row this tool wrote ({why}); refusing to change "
                                        "the file: give another output path, or move this file away")
                offset += len(raw)
                self._newline = not whole
                if redo is not None and redo(row):
                    self._ids.discard(rid)
                    self.rows.pop(rid, None)
                    continue
                self._ids.add(rid)
                if self.keep_rows:
                    self.rows.pop(rid, None)  # the last one wins, in the order it was written
                    self.rows[rid] = row
        self._size = self.path.stat().st_size

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
    def _open(self) -> BinaryIO:
        if self._fh is not None:
            return self._fh
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.replace:
            self._fh = self.partial.open("wb")
            return self._fh
        fh = self.path.open("ab")
        try:
            size = os.fstat(fh.fileno()).st_size
            if (self._end is not None or self._newline) and size != self._size:
                raise NotAStoreError(str(self.path), "changed since it was read (another writer?); not appending")
            if self._end is not None:
                fh.truncate(self._end)  # the torn last line, and nothing else
            elif self._newline:
                fh.write(b"\n")
        except BaseException:
            fh.close()
            raise
        self._end, self._newline, self._fh = None, False, fh
        return fh

    def append(self, row: Mapping[str, Any]) -> None:
        """Write ``row`` as one line and flush it (``ValueError``: it has no id, or its id is already there)."""
        rid = self._key(row)
        if rid is None:
            raise ValueError(f"row has no id ({self.key!r})")
        if rid in self._ids:
            raise ValueError(f"row {rid!r} is already in {self.path}")
        line = (json.dumps(row, ensure_ascii=False) + "\n").encode("utf-8")
        fh = self._open()
        fh.write(line)
        fh.flush()
        self._ids.add(rid)
        if self.keep_rows:
            self.rows[rid] = dict(row)
        now = time.monotonic()
        if now - self._last_sync >= self.fsync_every_s:
            os.fsync(fh.fileno())
            self._last_sync = now

    def close(self) -> None:
        """``fsync`` and close the file (appending again reopens it); with ``replace=True``, the new file (empty
        when nothing was appended) replaces ``path``."""
        if self.replace:
            self._open()
        if self._fh is not None:
            try:
                self._fh.flush()
                os.fsync(self._fh.fileno())
            finally:
                self._fh.close()
                self._fh = None
        if self.replace:
            os.replace(self.partial, self.path)
            with contextlib.suppress(OSError):  # the folder's entry made durable too (not on every platform)
                fd = os.open(self.path.parent, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            self.replace = False
            self._size = self.path.stat().st_size

    def discard(self) -> None:
        """Close without replacing: with ``replace=True``, the partial file is removed and ``path`` kept."""
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        if self.replace:
            self.partial.unlink(missing_ok=True)
            self.replace = False

    def __enter__(self) -> JsonlStore:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is not None and self.replace:
            self.discard()
        else:
            self.close()

    def __del__(self) -> None:  # a store dropped without close() still closes its file
        fh = self.__dict__.get("_fh")
        if fh is not None:
            with contextlib.suppress(Exception):  # never raise from a finaliser
                fh.close()
