"""Reading a run back: the per-row JSONL that ``grapheval evaluate`` (or ``correct``) writes, without any model.

Every line becomes a row, an unreadable one with its problem (docs/report.md, "Bad input").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..jsonl import numbered_rows, read_rows
from ..types import Report

__all__ = ["LoadedRow", "load_inputs", "load_rows"]


@dataclass
class LoadedRow:
    """One line of a result file: its report (or correction report), or the problems that kept it from being one."""

    line: int
    source: str
    id: str | None = None
    report: Any = None
    """A :class:`~grapheval_plugins.types.Report` or :class:`~grapheval_plugins.correct.CorrectionReport`."""
    output: str | None = None
    context: str | None = None
    problems: list[str] = field(default_factory=list)


def load_inputs(
    path: str | Path, *, id_field: str = "id", context_field: str = "context", output_field: str = "output"
) -> dict[str, dict[str, str]]:
    """``{id: {"context": …, "output": …}}`` from an input file (JSONL or CSV read as ``grapheval evaluate`` reads
    it, ids as it gives them: the id field, else the line number)."""
    out: dict[str, dict[str, str]] = {}
    for number, row, _ in read_rows(path):
        if row is None:
            continue
        rid = str(row.get(id_field, number))
        entry = {k: row[f] for k, f in (("context", context_field), ("output", output_field))
                 if isinstance(row.get(f), str)}
        if isinstance(row.get(context_field), list):  # a list of passages, as the pipeline accepts
            entry["context"] = "\n\n".join(str(p) for p in row[context_field])
        out.setdefault(rid, entry)
    return out


def load_rows(
    paths: str | Path | Iterable[str | Path],
    *,
    inputs: Mapping[str, Mapping[str, str]] | None = None,
    limit: int | None = None,
) -> tuple[list[LoadedRow], list[str]]:
    """``(rows, notes)`` of one or more result files, in file order (a repeated id: the first wins); ``notes`` says
    what was skipped, ``inputs`` (from :func:`load_inputs`) adds each row's context."""
    from ..correct.types import CorrectionReport

    if isinstance(paths, (str, Path)):
        paths = [paths]
    inputs = inputs or {}
    rows: list[LoadedRow] = []
    seen: set[str] = set()
    duplicates = 0
    for path in map(Path, paths):
        for number, row, problem in numbered_rows(path):
            if limit is not None and len(rows) >= limit:
                break
            if row is None:  # "invalid JSON: <why>" → "unreadable: not valid JSON: line N (<why>)"
                kind, _, detail = str(problem).partition(": ")
                kind = "not valid JSON" if kind == "invalid JSON" else kind
                problem = f"unreadable: {kind}: line {number}" + (f" ({detail})" if detail else "")
                rows.append(LoadedRow(line=number, source=str(path), problems=[problem]))
                continue
            rid = None if row.get("id") is None else str(row["id"])
            given = inputs.get(rid, {}) if rid is not None else {}
            loaded = LoadedRow(line=number, source=str(path), id=rid, context=given.get("context"))
            correction = "original" in row and "corrected" in row
            try:
                loaded.report = (CorrectionReport if correction else Report).model_validate(row)
            except ValidationError as exc:
                for err in exc.errors()[:8]:
                    where = ".".join(str(p) for p in err.get("loc", ())) or "row"
                    kind = "missing field" if err.get("type") == "missing" else err.get("msg", "invalid")
                    loaded.problems.append(f"unreadable: {kind}: {where}" if kind == "missing field"
                                           else f"unreadable: {where}: {kind}")
                output = row.get("original" if correction else "output")
                loaded.output = output if isinstance(output, str) else given.get("output")
            if loaded.id is not None:
                if loaded.id in seen:
                    duplicates += 1
                    continue
                seen.add(loaded.id)
            rows.append(loaded)
    notes = [f"{duplicates} row(s) skipped: their id was already read from an earlier line or file."] if duplicates else []
    return rows, notes
