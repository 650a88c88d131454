"""HTML reports of one row, a run or a correction run (docs/report.md; the ``report`` extra).

>>> from grapheval_plugins.types import ClaimCheck, Report, Triple
>>> t = Triple(subject="Ann", relation="won", object="<script>gold</script>")
>>> r = Report(output="Ann won <script>gold</script>.", mode="graph", hallucination_threshold=0.5, hallucinated=True,
...            score=0.1, claims=[ClaimCheck(claim=t.sentence(), triple=t, p_unsupported=0.9, unsupported=True)])
>>> page = report_html(r, context="Ann won silver.")
>>> "<script>gold" in page, "&lt;script&gt;gold" in page
(False, True)
>>> render_json(r.model_dump_json()) == report_html(r)
True
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..types import Report
from .load import LoadedRow, load_inputs, load_rows
from .render import DEFAULT_INLINE_ROWS, render_correction_run_page, render_run_page, render_single_page
from .view import (
    CorrectionRunView,
    CorrectionView,
    RowView,
    RunView,
    Segment,
    correction_run_view,
    correction_view,
    row_view,
    run_view,
)

__all__ = ["DEFAULT_INLINE_ROWS", "JSON_MARKER", "CorrectionRunView", "LoadedRow", "RunView", "load_inputs",
    "correction_run_html", "load_rows", "render_json", "report_from_json", "report_html", "run_html",
    "write_run_report"]

JSON_MARKER = "GraphEval report JSON:"
"""The line prefix under which DeepEval's ``verbose_logs`` carry the report (one JSON object after it)."""


def report_html(report: Any, *, context: str | None = None, document: bool = True) -> str:
    """The HTML page (``document=False``: a fragment with its own style, a notebook's) of one
    :class:`~grapheval_plugins.types.Report` or :class:`~grapheval_plugins.correct.CorrectionReport`, with
    ``context`` (reports do not store it) shown and its deciding passages marked."""
    from ..correct.types import CorrectionReport

    if isinstance(report, CorrectionReport):
        return render_single_page(correction_view(report, context=context), document=document)
    if not isinstance(report, Report):
        raise TypeError(f"expected a Report or a CorrectionReport, got {type(report).__name__}")
    return render_single_page(row_view(report, context=context), document=document)


def report_from_json(data: str | bytes | Mapping[str, Any]) -> Any:
    """A :class:`Report` or :class:`CorrectionReport` from what an adapter carries (docs/report.md): its JSON (text
    or dict), DeepEval's ``verbose_logs`` or a Ragas trace output; ``ValueError`` when it holds no report."""
    from ..correct.types import CorrectionReport

    if isinstance(data, bytes):
        data = data.decode("utf-8")
    if isinstance(data, str):
        _, marker, after = data.partition(JSON_MARKER)
        text = after if marker else data
        start = text.find("{")
        if start < 0:
            raise ValueError("no JSON object found")
        data, _ = json.JSONDecoder().raw_decode(text[start:])
    if not isinstance(data, Mapping):
        raise ValueError(f"expected a JSON object, got {type(data).__name__}")
    if isinstance(data.get("report"), Mapping):
        data = data["report"]
    if "original" in data and "corrected" in data:
        return CorrectionReport.model_validate(data)
    return Report.model_validate(data)


def render_json(data: str | bytes | Mapping[str, Any], *, context: str | None = None, document: bool = True) -> str:
    """One call from an adapter's output to a page (see docs/report.md): :func:`report_from_json`, :func:`report_html`."""
    return report_html(report_from_json(data), context=context, document=document)


def _row_of(item: Any, index: int, context: str | None = None) -> RowView:
    from ..correct.types import CorrectionReport

    anchor = f"row-{index}"
    if isinstance(item, LoadedRow):
        if item.report is None:
            view = RowView(anchor=anchor, id=item.id, status="unreadable", output=item.output,
                           problems=list(item.problems), line=item.line)
            if item.output:
                view.segments = [Segment(text=item.output)]
                view.notes.append("The output is shown as read, without verdicts.")
            return view
        view = _row_of(item.report, index, item.context if context is None else context)
        view.line = item.line
        return view
    if isinstance(item, CorrectionReport):
        if item.detection is None:
            return RowView(anchor=anchor, id=item.id, status="error", output=item.original,
                           problems=[f"{e.stage} stage failed: {e.type}: {e.message}" for e in item.errors]
                           or ["No detection report was recorded."])
        detected = correction_view(item, context=context, anchor=anchor).detection
        assert detected is not None
        detected.anchor, detected.id = anchor, item.id
        detected.notes.insert(0, f"Correction: {item.status}"
                              + (f"; corrected output: {item.corrected}" if item.changed else ""))
        return detected
    if isinstance(item, Report):
        return row_view(item, context=context, anchor=anchor)
    raise TypeError(f"expected a Report, CorrectionReport or LoadedRow, got {type(item).__name__}")


def run_html(
    items: Iterable[Any],
    *,
    contexts: Sequence[str | None] | Mapping[str, str] | None = None,
    title: str = "GraphEval run",
    inline_rows: int = DEFAULT_INLINE_ROWS,
) -> str:
    """The page of a run from reports (or rows from :func:`load_rows`); ``contexts``: a list aligned with ``items``,
    or a mapping from row id."""
    return _run_page(list(items), contexts, False, title, (), None, inline_rows)[1]


def correction_run_html(
    items: Iterable[Any],
    *,
    contexts: Sequence[str | None] | Mapping[str, str] | None = None,
    title: str = "GraphCorrect run",
) -> str:
    """The page of a correction run from :class:`~grapheval_plugins.correct.CorrectionReport` objects (or rows
    from :func:`load_rows`); ``contexts`` as for :func:`run_html`."""
    return _run_page(list(items), contexts, True, title, (), None, DEFAULT_INLINE_ROWS)[1]


def _run_page(
    items: Sequence[Any], given: Sequence[str | None] | Mapping[str, str] | None, corrections: bool, title: str,
    notes: Sequence[str], source: str | None, inline_rows: int,
) -> tuple[RunView | CorrectionRunView, str]:
    """The figures and the page of a run of reports, or of corrections (a line of no correction report left out)."""
    from ..correct.types import CorrectionReport

    if isinstance(given, Mapping):  # by id
        contexts = [given.get(getattr(item, "id", None) or "") for item in items]
    else:
        contexts = list(given) if given is not None else [None] * len(items)

    if not corrections:
        run = run_view([_row_of(item, i, contexts[i - 1]) for i, item in enumerate(items, start=1)], title=title,
                       notes=notes)
        return run, render_run_page(run, inline_rows=inline_rows, source=source)
    views: list[CorrectionView] = []
    skipped: list[str] = []
    for i, (item, context) in enumerate(zip(items, contexts), start=1):
        where = f"row {i}"
        if isinstance(item, LoadedRow):
            where = f"line {item.line} of {item.source}" if item.source else f"line {item.line}"
            context = item.context if context is None else context
            if item.report is None:
                skipped.append(f"{where}: " + ("; ".join(item.problems) or "unreadable"))
                continue
            item = item.report
        if not isinstance(item, CorrectionReport):
            skipped.append(f"{where}: not a correction report, left out")
            continue
        views.append(correction_view(item, context=context, anchor=f"row-{i}"))
    corrected = correction_run_view(views, title=title, notes=[*notes, *skipped], unreadable=len(skipped))
    return corrected, render_correction_run_page(corrected, source=source)


def write_run_report(
    results: str | Path | Sequence[str | Path],
    out: str | Path,
    *,
    inputs: str | Path | None = None,
    limit: int | None = None,
    title: str | None = None,
    inline_rows: int = DEFAULT_INLINE_ROWS,
    id_field: str = "id",
    context_field: str = "context",
    output_field: str = "output",
) -> RunView | CorrectionRunView:
    """Read per-row result file(s) and write the run's HTML page to ``out`` (see docs/report.md); the run's figures.

    ``inputs``: the rows the run was made from (JSONL or CSV), for each row's context by id."""
    from ..correct.types import CorrectionReport

    paths = [results] if isinstance(results, (str, Path)) else list(results)
    given = (load_inputs(inputs, id_field=id_field, context_field=context_field, output_field=output_field)
             if inputs is not None else None)
    rows, notes = load_rows(paths, inputs=given, limit=limit)
    if given is None:
        notes.append("No input rows were given (--inputs): the deciding passages are shown without their context.")
    readable = [r.report for r in rows if r.report is not None]
    corrections = bool(readable) and all(isinstance(r, CorrectionReport) for r in readable)
    title = title or ("GraphCorrect run" if corrections else "GraphEval run")
    run, page = _run_page(rows, None, corrections, title, notes, ", ".join(map(str, paths)), inline_rows)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(page, encoding="utf-8")
    return run
