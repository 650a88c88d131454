"""HTML reports: see where an answer went wrong, for one row, a whole run, or a correction run.

One self-contained file, no network: the output with each claim's span highlighted by verdict (hover or focus a
stretch for P(unsupported) and the deciding passage), the knowledge graph drawn as static SVG (layout by networkx),
the context with the deciding passages marked; for a run, the hallucination rate, a score histogram, the most
frequent unsupported relations, errors by kind and a sortable, filterable table of rows. Every string from a model
or the data is escaped by the Jinja2 templates (autoescape). Needs the ``report`` extra (jinja2, networkx).

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
from .render import (
    DEFAULT_INLINE_ROWS,
    render_correction_page,
    render_correction_run_page,
    render_row_page,
    render_run_page,
)
from .view import (
    CorrectionRunView,
    CorrectionView,
    RowView,
    RunView,
    correction_run_view,
    correction_view,
    row_view,
    run_view,
)

__all__ = [
    "DEFAULT_INLINE_ROWS",
    "JSON_MARKER",
    "CorrectionRunView",
    "LoadedRow",
    "RunView",
    "load_inputs",
    "correction_run_html",
    "load_rows",
    "render_json",
    "report_from_json",
    "report_html",
    "run_html",
    "write_run_report",
]

JSON_MARKER = "GraphEval report JSON:"
"""The line prefix under which DeepEval's ``verbose_logs`` carry the report (one JSON object after it)."""


def report_html(report: Any, *, context: str | None = None, document: bool = True) -> str:
    """The HTML of one :class:`~grapheval_plugins.types.Report` or
    :class:`~grapheval_plugins.correct.CorrectionReport`.

    Args:
        report: the result to draw.
        context: the grounding context, shown with the deciding passages marked (reports do not store it;
            without it the deciding passages are shown on their own).
        document: a whole page (default), or a fragment with its own scoped style (what ``_repr_html_`` gives
            a notebook).
    """
    from ..correct.types import CorrectionReport

    if isinstance(report, CorrectionReport):
        return render_correction_page(correction_view(report, context=context), document=document)
    if not isinstance(report, Report):
        raise TypeError(f"expected a Report or a CorrectionReport, got {type(report).__name__}")
    return render_row_page(row_view(report, context=context), document=document)


def report_from_json(data: str | bytes | Mapping[str, Any]) -> Any:
    """A :class:`Report` or :class:`CorrectionReport` from what an adapter carries: the report's JSON (text or
    dict), DeepEval's ``metric.verbose_logs`` (the line after :data:`JSON_MARKER`), or a Ragas trace output
    (``{"report": {...}}``).

    Raises:
        ValueError: no report could be found in ``data``.
    """
    from ..correct.types import CorrectionReport

    if isinstance(data, bytes):
        data = data.decode("utf-8")
    if isinstance(data, str):
        text = data
        at = text.find(JSON_MARKER)
        if at >= 0:
            text = text[at + len(JSON_MARKER):]
        start = text.find("{")
        if start < 0:
            raise ValueError("no JSON object found")
        obj, _ = json.JSONDecoder().raw_decode(text[start:])
        data = obj
    if not isinstance(data, Mapping):
        raise ValueError(f"expected a JSON object, got {type(data).__name__}")
    if isinstance(data.get("report"), Mapping):
        data = data["report"]
    if "original" in data and "corrected" in data:
        return CorrectionReport.model_validate(data)
    return Report.model_validate(data)


def render_json(data: str | bytes | Mapping[str, Any], *, context: str | None = None, document: bool = True) -> str:
    """One call from an adapter's output to a page: :func:`report_from_json` then :func:`report_html`.

    For DeepEval: ``render_json(metric.verbose_logs)``; for Ragas: ``render_json(result.traces["output"])``.
    """
    return report_html(report_from_json(data), context=context, document=document)


def _row_of(item: Any, index: int, context: str | None = None) -> RowView:
    from ..correct.types import CorrectionReport

    anchor = f"row-{index}"
    if isinstance(item, LoadedRow):
        if item.report is None:
            view = RowView(anchor=anchor, id=item.id, status="unreadable", output=item.output,
                           problems=list(item.problems), line=item.line)
            if item.output:
                view.segments = row_view(Report(output=item.output, mode="graph", hallucination_threshold=0.5)).segments
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
    notes: Sequence[str] = (),
    source: str | None = None,
) -> str:
    """The page of a run from reports (or rows from :func:`load_rows`).

    ``contexts`` gives each row's context: a list aligned with ``items``, or a mapping from row id.
    """
    views = []
    for i, item in enumerate(items, start=1):
        context = None
        if isinstance(contexts, Mapping):
            rid = getattr(item, "id", None)
            context = contexts.get(rid) if rid is not None else None
        elif contexts is not None:
            context = contexts[i - 1]
        views.append(_row_of(item, i, context))
    return render_run_page(run_view(views, title=title, notes=notes), inline_rows=inline_rows, source=source)


def _correction_views(
    items: Sequence[Any], contexts: Sequence[str | None]
) -> tuple[list[CorrectionView], list[str], int]:
    """The correction views of ``items`` (correction reports, or loaded rows holding them), the notes on lines
    that hold none, and how many of those there are."""
    from ..correct.types import CorrectionReport

    views: list[CorrectionView] = []
    notes: list[str] = []
    skipped = 0
    for i, (item, context) in enumerate(zip(items, contexts), start=1):
        where = f"row {i}"
        if isinstance(item, LoadedRow):
            where = f"line {item.line} of {item.source}" if item.source else f"line {item.line}"
            context = item.context if context is None else context
            if item.report is None:
                skipped += 1
                notes.append(f"{where}: " + ("; ".join(item.problems) or "unreadable"))
                continue
            item = item.report
        if not isinstance(item, CorrectionReport):
            skipped += 1
            notes.append(f"{where}: not a correction report, left out")
            continue
        views.append(correction_view(item, context=context, anchor=f"row-{i}"))
    return views, notes, skipped


def _holds_corrections(rows: Sequence[LoadedRow]) -> bool:
    """Whether the readable rows of a file are correction reports (and at least one is)."""
    from ..correct.types import CorrectionReport

    readable = [r.report for r in rows if r.report is not None]
    return bool(readable) and all(isinstance(r, CorrectionReport) for r in readable)


def correction_run_html(
    items: Iterable[Any],
    *,
    contexts: Sequence[str | None] | Mapping[str, str] | None = None,
    title: str = "GraphCorrect run",
    notes: Sequence[str] = (),
    source: str | None = None,
) -> str:
    """The page of a correction run from :class:`~grapheval_plugins.correct.CorrectionReport` objects (or rows
    from :func:`load_rows`): the figures of the run, a table of rows with what changed, and each row's original
    and corrected output with the word diff, the triples that changed and the detection and re-check.

    ``contexts`` gives each row's context: a list aligned with ``items``, or a mapping from row id.
    """
    items = list(items)
    if isinstance(contexts, Mapping):
        given = [contexts.get(getattr(item, "id", None) or "") for item in items]
    elif contexts is not None:
        given = list(contexts)
    else:
        given = [None] * len(items)
    views, skipped_notes, skipped = _correction_views(items, given)
    run = correction_run_view(views, title=title, notes=[*notes, *skipped_notes], unreadable=skipped)
    return render_correction_run_page(run, source=source)


def write_run_report(
    results: str | Path | Sequence[str | Path],
    out: str | Path,
    *,
    inputs: str | Path | None = None,
    limit: int | None = None,
    title: str | None = None,
    inline_rows: int = DEFAULT_INLINE_ROWS,
    threshold: float = 0.5,
    id_field: str = "id",
    context_field: str = "context",
    output_field: str = "output",
) -> RunView | CorrectionRunView:
    """Read per-row result file(s) and write the run's HTML page to ``out``; returns the run's figures.

    ``inputs`` (the rows the run was made from: JSONL or CSV, fields named by ``id_field``, ``context_field``,
    ``output_field``) adds each row's context by id. A file of correction reports (``grapheval correct``) gives
    the page of a correction run (:func:`correction_run_html`) and a :class:`CorrectionRunView`; any other, the
    page of a detection run and a :class:`RunView`.
    """
    paths = [results] if isinstance(results, (str, Path)) else list(results)
    given = None
    if inputs is not None:
        given = load_inputs(inputs, id_field=id_field, context_field=context_field, output_field=output_field)
    rows, notes = load_rows(paths, inputs=given, limit=limit, threshold=threshold)
    if _holds_corrections(rows):
        corrections, skipped_notes, skipped = _correction_views(rows, [None] * len(rows))
        if given is None:
            notes.append("No input rows were given (--inputs): the deciding passages are shown without their "
                         "context.")
        corrected = correction_run_view(corrections, title=title or "GraphCorrect run",
                                        notes=[*notes, *skipped_notes], unreadable=skipped)
        page = render_correction_run_page(corrected, source=", ".join(str(p) for p in paths))
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(page, encoding="utf-8")
        return corrected
    views = [_row_of(row, i) for i, row in enumerate(rows, start=1)]
    if given is None:
        notes.append("No input rows were given (--inputs): the deciding passages are shown without their context.")
    run = run_view(views, title=title or "GraphEval run", notes=notes)
    html = render_run_page(run, inline_rows=inline_rows, source=", ".join(str(p) for p in paths))
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(html, encoding="utf-8")
    return run
