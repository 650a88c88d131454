"""What a report page shows, computed from the typed results: plain data for the template, no HTML (the template
escapes every string: docs/report.md, "Design choices").

>>> from grapheval_plugins.types import ClaimCheck, Report, Triple
>>> t = Triple(subject="Ann", relation="won", object="gold")
>>> r = Report(output="Ann won gold.", mode="graph", hallucination_threshold=0.5, hallucinated=True, score=0.2,
...            claims=[ClaimCheck(claim=t.sentence(), triple=t, p_unsupported=0.8, unsupported=True, span=(0, 12))])
>>> view = row_view(r)
>>> view.status, [(s.text, s.verdict) for s in view.segments]
('hallucinated', [('Ann won gold', 'unsupported'), ('.', None)])
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from ..locate import locate_triple
from ..text import best_sentence, diff_words
from ..types import Report, StageUsage, Triple, total_usage
from .layout import layout

if TYPE_CHECKING:
    from ..correct.types import CorrectionReport, TripleChange

__all__ = ["ClaimView", "ContextPiece", "CorrectionRunView", "CorrectionView", "GraphView", "Passage",
    "RowView", "RunView", "Segment", "correction_run_view", "correction_view", "diff_excerpt", "row_view",
    "run_view"]

Verdict = Literal["unsupported", "supported"]
Status = Literal["hallucinated", "faithful", "error", "unreadable"]

MAX_CONTEXT_CHARS = 20_000
"""Longer contexts show the deciding passages in full and :data:`KEEP_AROUND` characters on each side of them."""
KEEP_AROUND = 400
_LABEL_CHARS = 26
_EDGE_LABEL_CHARS = 22
_SNIPPET_CHARS = 220


def shorten(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters with an ellipsis.

    >>> shorten("a long entity name", 8)
    'a long …'
    """
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + " …"


def snippet(passage: str, claim: str, limit: int = _SNIPPET_CHARS) -> str:
    """The sentence of ``passage`` sharing most words with ``claim`` (the whole passage when short).

    >>> snippet("Ann is tall. Ann won silver in 2012.", "Ann won gold", limit=24)
    '…Ann won silver in 2012.…'
    """
    if len(" ".join(passage.split())) <= limit:
        return " ".join(passage.split())
    span = best_sentence(passage, claim)
    best = passage[span[0] : span[1]] if span else passage
    return "…" + shorten(best, limit) + "…"


# ------------------------------------------------------------------------------------------ per row
@dataclass
class ClaimView:
    """One checked claim, numbered from 1 in the row."""

    number: int
    claim: str
    triple: Triple | None
    p_unsupported: float
    verdict: Verdict
    span: tuple[int, int] | None
    span_note: str = ""
    """Empty when the span was recorded; else how it was found (or that it was not)."""
    passage: int | None = None
    """Number of the deciding passage in :attr:`RowView.passages` (``None`` when not recorded)."""
    evidence_snippet: str = ""
    changed: str = ""
    """For a correction report: what the correction did to this claim's triple."""


@dataclass
class Segment:
    """A stretch of the output covered by the same claims; ``verdict`` is the worst of theirs."""

    text: str
    claims: list[int] = field(default_factory=list)
    verdict: Verdict | None = None
    ends: list[int] = field(default_factory=list)
    """Claims whose span ends here (their number is printed after the stretch)."""


@dataclass
class Passage:
    """A context passage (chunk) that decided one or more claims."""

    number: int
    chunk: int | None
    text: str
    claims: list[int]
    verdict: Verdict
    """``unsupported`` when some claim it decided is unsupported."""
    found: bool = False
    """True when the passage was found verbatim in the context (and is marked there)."""


@dataclass
class ContextPiece:
    """A stretch of the context: plain, part of deciding passage(s), or an elision."""

    text: str = ""
    passages: list[int] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)
    """Passages that begin with this stretch (their anchor is put here)."""
    hits: list[int] = field(default_factory=list)
    """Claims whose best-matching sentence of their deciding passage covers this stretch."""
    hit_starts: list[int] = field(default_factory=list)
    hit_verdict: Verdict | None = None
    elided: int = 0


@dataclass
class Node:
    label: str
    full: str
    x: float
    y: float
    verdict: Verdict
    label_x: float = 0.0


@dataclass
class Edge:
    claim: int
    path: str
    label_x: float
    label_y: float
    label: str
    full: str
    verdict: Verdict


@dataclass
class GraphView:
    width: int
    height: int
    nodes: list[Node]
    edges: list[Edge]


@dataclass
class RowView:
    """One report, ready to draw."""

    anchor: str
    id: str | None
    status: Status
    output: str | None
    score: float | None = None
    threshold: float | None = None
    mode: str | None = None
    llm: str | None = None
    scorer: str | None = None
    segments: list[Segment] = field(default_factory=list)
    claims: list[ClaimView] = field(default_factory=list)
    graph: GraphView | None = None
    passages: list[Passage] = field(default_factory=list)
    context: list[ContextPiece] | None = None
    context_chars: int = 0
    notes: list[str] = field(default_factory=list)
    """What the reader should know: a fallback, parser repairs, spans located when drawing."""
    problems: list[str] = field(default_factory=list)
    """What went wrong: stage errors, an unreadable line, missing fields."""
    fallback: bool = False
    line: int | None = None
    usage: dict[str, StageUsage] = field(default_factory=dict)
    """The report's chat-model calls and tokens per stage."""

    @property
    def unsupported(self) -> list[ClaimView]:
        return [c for c in self.claims if c.verdict == "unsupported"]

    @property
    def worst(self) -> ClaimView | None:
        return max(self.claims, key=lambda c: c.p_unsupported, default=None)


def _worst(verdicts: Sequence[Verdict]) -> Verdict | None:
    return None if not verdicts else "unsupported" if "unsupported" in verdicts else "supported"


Spans = Sequence[tuple[int, int, int]]


def _stretches(length: int, *groups: Spans) -> list[tuple[int, int]]:
    """``[start, end)`` of the stretches of a text cut at both ends of every span."""
    points = sorted({0, length, *(x for spans in groups for s, e, _ in spans for x in (s, e))})
    return list(zip(points, points[1:]))


def _covering(spans: Spans, a: int, b: int) -> list[int]:
    return [n for s, e, n in spans if s <= a and b <= e]


def _segments(text: str, claims: Sequence[ClaimView]) -> list[Segment]:
    spans = [(c.span[0], c.span[1], c.number) for c in claims if c.span is not None]
    out = []
    for a, b in _stretches(len(text), spans):
        covering = _covering(spans, a, b)
        out.append(Segment(text=text[a:b], claims=covering, verdict=_worst([claims[n - 1].verdict for n in covering]),
                           ends=[n for _, e, n in spans if e == b]))
    return [s for s in out if s.text]


def _context_pieces(context: str, passages: list[Passage], claims: Sequence[ClaimView]) -> list[ContextPiece]:
    marks: list[tuple[int, int, int]] = []
    hits: list[tuple[int, int, int]] = []
    for p in passages:
        text = p.text if p.text in context else p.text.strip()  # verbatim, else without its outer spaces
        start = context.find(text) if text else -1
        if start >= 0:
            p.found = True
            marks.append((start, start + len(text), p.number))
            for number in p.claims:  # within the passage, the sentence that best matches each claim it decided
                span = best_sentence(context[start : start + len(text)], claims[number - 1].claim)
                if span is not None:
                    hits.append((start + span[0], start + span[1], number))
    pieces = []
    for a, b in _stretches(len(context), marks, hits):
        covering = _covering(hits, a, b)
        pieces.append(ContextPiece(
            text=context[a:b], passages=_covering(marks, a, b), starts=[n for s, _, n in marks if s == a],
            hits=covering, hit_starts=[n for s, _, n in hits if s == a],
            hit_verdict=_worst([claims[n - 1].verdict for n in covering])))
    if len(context) <= MAX_CONTEXT_CHARS:
        return [p for p in pieces if p.text]
    trimmed: list[ContextPiece] = []
    for piece in pieces:
        n = len(piece.text)
        if piece.passages or n <= 2 * KEEP_AROUND + 100:
            trimmed.append(piece)
            continue
        # A long stretch with no deciding passage: its first and last characters stay, the middle is elided.
        trimmed.append(ContextPiece(text=piece.text[:KEEP_AROUND]))
        trimmed.append(ContextPiece(elided=n - 2 * KEEP_AROUND))
        trimmed.append(ContextPiece(text=piece.text[-KEEP_AROUND:]))
    return [p for p in trimmed if p.text or p.elided]


def _graph(claims: Sequence[ClaimView]) -> GraphView | None:
    triples = [(c, c.triple) for c in claims if c.triple is not None]
    if not triples:
        return None
    keys: dict[str, str] = {}
    verdicts: dict[str, Verdict] = {}
    pairs: list[tuple[str, str]] = []
    for c, t in triples:
        a, b = t.subject.strip().casefold(), t.object.strip().casefold()
        keys.setdefault(a, t.subject.strip())
        keys.setdefault(b, t.object.strip())
        for k in (a, b):
            if c.verdict == "unsupported" or k not in verdicts:
                verdicts[k] = c.verdict
        pairs.append((a, b))
    n = len(keys)
    width, height = 600, 300 if n <= 4 else 400 if n <= 9 else 520
    pos = layout(pairs, width=width, height=height, margin=80)
    nodes = [Node(label=shorten(keys[k], _LABEL_CHARS), full=keys[k], x=round(x, 1), y=round(y, 1),
                  verdict=verdicts[k]) for k, (x, y) in pos.items()]
    seen: Counter[tuple[str, str]] = Counter()
    edges: list[Edge] = []
    radius = 9.0
    for (c, t), (a, b) in zip(triples, pairs):
        pair = (min(a, b), max(a, b))
        nth = seen[pair]
        seen[pair] += 1
        x1, y1 = pos[a]
        x2, y2 = pos[b]
        full = f"{c.number}. {t.subject} | {t.relation} | {t.object} · P(unsupported) {c.p_unsupported:.2f}"
        label = f"{c.number}. {shorten(t.relation, _EDGE_LABEL_CHARS)}"
        if a == b:  # a self-loop above the node
            r = 26 + 12 * nth
            path = (f"M {x1 - 6:.1f} {y1 - radius:.1f} C {x1 - r:.1f} {y1 - 2.5 * r:.1f} "
                    f"{x1 + r:.1f} {y1 - 2.5 * r:.1f} {x1 + 6:.1f} {y1 - radius:.1f}")
            edges.append(Edge(c.number, path, round(x1, 1), round(y1 - 2 * r, 1), label, full, c.verdict))
            continue
        dx, dy = x2 - x1, y2 - y1
        dist = math.hypot(dx, dy) or 1.0
        ux, uy = dx / dist, dy / dist
        bend = 0.0 if nth == 0 else (52.0 * ((nth + 1) // 2)) * (1 if nth % 2 else -1)
        mx, my = (x1 + x2) / 2 - uy * bend, (y1 + y2) / 2 + ux * bend
        # End short of the target node so the arrow head stays visible.
        tx, ty = x2 - (x2 - mx) / (math.hypot(x2 - mx, y2 - my) or 1.0) * (radius + 3), \
            y2 - (y2 - my) / (math.hypot(x2 - mx, y2 - my) or 1.0) * (radius + 3)
        path = f"M {x1:.1f} {y1:.1f} Q {mx:.1f} {my:.1f} {tx:.1f} {ty:.1f}"
        lx, ly = 0.25 * x1 + 0.5 * mx + 0.25 * x2, 0.25 * y1 + 0.5 * my + 0.25 * y2
        edges.append(Edge(c.number, path, round(lx, 1), round(ly + 4, 1), label, full, c.verdict))
    _spread_labels(nodes, edges, width, height)
    return GraphView(width=width, height=height, nodes=nodes, edges=edges)


def _spread_labels(nodes: Sequence[Node], edges: Sequence[Edge], width: int, height: int) -> None:
    """Labels kept inside the drawing; edge labels moved up or down until they overlap nothing (greedy)."""
    char_w, line_h = 7.2, 15.0
    boxes: list[tuple[float, float, float, float]] = []
    for n in nodes:
        boxes.append((n.x - 10, n.y - 10, n.x + 10, n.y + 10))
        half = len(n.label) * char_w / 2
        n.label_x = round(min(max(n.x, half + 2), width - half - 2), 1)
        boxes.append((n.label_x - half, n.y + 12, n.label_x + half, n.y + 12 + line_h))

    def hits(box: tuple[float, float, float, float]) -> bool:
        return any(box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3] for b in boxes)

    for e in edges:
        half = (len(e.label) + 2) * char_w / 2
        e.label_x = round(min(max(e.label_x, half + 2), width - half - 2), 1)
        for step in (0, 1, -1, 2, -2, 3, -3, 4, -4, 5, -5):
            y = e.label_y + step * line_h
            box = (e.label_x - half, y - line_h + 3, e.label_x + half, y + 3)
            if 0 < box[1] and box[3] < height and not hits(box):
                e.label_y = round(y, 1)
                break
        boxes.append((e.label_x - half, e.label_y - line_h + 3, e.label_x + half, e.label_y + 3))


def _tokens(n: int | None) -> str:
    return "not reported" if n is None else f"{n:,}"


def row_view(
    report: Report,
    *,
    context: str | None = None,
    anchor: str = "row",
    changed: dict[Triple, str] | None = None,
) -> RowView:
    """The view of one :class:`~grapheval_plugins.types.Report` (``context``, when given, is shown marked)."""
    output = report.output
    status: Status = "error" if not report.ok else "hallucinated" if report.hallucinated else "faithful"
    view = RowView(
        anchor=anchor, id=report.id, status=status, output=output, score=report.score,
        threshold=report.hallucination_threshold, mode=report.mode, llm=report.llm, scorer=report.scorer, usage=dict(report.usage),
    )
    view.problems = [f"{e.stage} stage failed: {e.type}: {e.message}" for e in report.errors]
    extraction = report.extraction
    if extraction is not None:
        view.fallback = extraction.fallback or (not extraction.triples and report.mode == "graph" and bool(report.claims))
        if view.fallback:
            why = "No knowledge graph could be extracted" if extraction.fallback else "The knowledge graph has no triple"
            cached = " (served from the cache)" if extraction.cached and not extraction.fallback else ""
            view.notes.append(f"{why}{cached}: the whole output was checked as one claim.")
        view.notes.extend(f"Extraction: {issue}" for issue in extraction.issues)
    if report.mode == "raw":
        view.notes.append("Raw mode: the whole output was checked as one claim (no knowledge graph).")
    if report.usage:
        view.notes.append("Chat-model calls: " + "; ".join(
            f"{stage} {u.calls} ({_tokens(u.input_tokens)} prompt / {_tokens(u.output_tokens)} completion tokens)"
            for stage, u in report.usage.items()))
    passages: dict[tuple[int | None, str], Passage] = {}
    located = missing = 0
    for number, claim in enumerate(report.claims, start=1):
        verdict: Verdict = "unsupported" if claim.unsupported else "supported"
        span = None
        if claim.span is not None:  # clamped to the output
            start, end = (max(0, min(int(x), len(output))) for x in claim.span)
            span = (start, end) if end > start else None
        note = ""
        if span is None and claim.triple is None:
            span = (0, len(output)) if output else None
        elif span is None and claim.triple is not None:
            span = locate_triple(output, claim.triple)
            note = "span located when the report was drawn" if span else "not found in the output"
            located += span is not None
            missing += span is None
        cv = ClaimView(number=number, claim=claim.claim, triple=claim.triple, p_unsupported=claim.p_unsupported,
                       verdict=verdict, span=span, span_note=note,
                       changed=(changed or {}).get(claim.triple, "") if claim.triple is not None else "")
        if claim.evidence:
            passage = passages.setdefault((claim.evidence_index, claim.evidence), Passage(
                number=len(passages) + 1, chunk=claim.evidence_index, text=claim.evidence, claims=[], verdict="supported"))
            passage.claims.append(number)
            if verdict == "unsupported":
                passage.verdict = "unsupported"
            cv.passage = passage.number
            cv.evidence_snippet = snippet(claim.evidence, claim.claim)
        view.claims.append(cv)
    if located:
        view.notes.append(f"{located} claim span(s) were not recorded and were located when the report was drawn.")
    if missing:
        view.notes.append(f"{missing} claim(s) could not be located in the output.")
    if report.ok and not report.claims:
        view.problems.append("No claim was checked (no triples and no whole-output claim).")
    if report.claims and not passages:
        view.notes.append("The deciding passages were not recorded for this row.")
    view.passages = list(passages.values())
    view.segments = _segments(output, view.claims)
    view.graph = _graph(view.claims)
    if context is not None:
        view.context_chars = len(context)
        view.context = _context_pieces(context, view.passages, view.claims)
    return view


# ------------------------------------------------------------------------------------ corrections
@dataclass
class CorrectionView:
    anchor: str
    id: str | None
    status: str
    summary: str
    flagged: bool | None
    passed: bool | None
    original: str
    corrected: str
    diff: list[tuple[Literal["same", "del", "ins"], str]]
    changes: list[TripleChange]
    detection: RowView | None
    recheck: RowView | None
    rouge: dict[str, float] | None
    llm: str | None
    problems: list[str]
    issues: list[str]
    excerpt: list[tuple[Literal["same", "del", "ins", "gap"], str]] = field(default_factory=list)
    """The diff with long unchanged stretches shortened (the run table's column)."""
    applied: int = 0
    attempted: int = 0
    """Changes attempted (applied or refused)."""
    llm_calls: int = 0
    """Chat-model calls of the correction (detection and re-check aside)."""
    method_label: str = ""
    """How the page names the method: ``GraphCorrect``, ``Direct Prompt``, … (an unknown method by its name)."""


_METHOD_TEXT = {
    "paper": "GraphCorrect",
    "graph": "GraphCorrect",
    "evidence": "GraphCorrect (evidence)",
    "constrained": "GraphCorrect (constrained)",
    "direct": "Direct Prompt",
}


_STATUS_TEXT = {
    "unflagged": "nothing to correct: detection found no unsupported claim",
    "corrected": "corrected: the re-check passes",
    "still_flagged": "changed, but the re-check still flags it",
    "unchanged": "flagged, but no correction could be applied: the original is kept",
    "recheck_failed": "changed, but the re-check failed",
    "error": "error: detection failed, nothing was corrected",
}


def correction_view(result: CorrectionReport, *, context: str | None = None, anchor: str = "row") -> CorrectionView:
    """The view of one :class:`~grapheval_plugins.correct.CorrectionReport`: original vs corrected."""
    changed: dict[Triple, str] = {}
    for ch in result.changes:
        if ch.old is None:
            continue
        if ch.applied:
            changed[ch.old] = "corrected to " + (" | ".join(ch.new.as_list()) if ch.new else "a rewrite")
        else:
            changed.setdefault(ch.old, f"correction not applied ({ch.reason or 'no reason recorded'})")
    diff = diff_words(result.original, result.corrected)
    return CorrectionView(
        anchor=anchor, id=result.id, status=result.status, summary=_STATUS_TEXT.get(result.status, result.status),
        method_label=_METHOD_TEXT.get(result.method, result.method), flagged=result.flagged, passed=result.passed,
        original=result.original,
        corrected=result.corrected, diff=diff, excerpt=diff_excerpt(diff),
        changes=list(result.changes),
        detection=row_view(result.detection, context=context, anchor=f"{anchor}-det", changed=changed)
        if result.detection is not None else None,
        recheck=row_view(result.recheck, anchor=f"{anchor}-re")
        if result.recheck is not None and result.recheck is not result.detection and result.changed else None,
        rouge=result.rouge.model_dump() if result.rouge is not None else None, llm=result.llm,
        problems=[f"{e.stage} stage failed: {e.type}: {e.message}" for e in result.errors],
        issues=list(result.issues),
        applied=sum(c.applied for c in result.changes), attempted=len(result.changes), llm_calls=result.llm_calls,
    )


def diff_excerpt(
    diff: Sequence[tuple[Literal["same", "del", "ins"], str]], keep: int = 4
) -> list[tuple[Literal["same", "del", "ins", "gap"], str]]:
    """A word diff with each unchanged stretch cut to ``keep`` words beside a change (``("gap", "…")`` where words
    were left out); no change at all gives an empty list.

    >>> diff_excerpt([("same", "a b c d e f g "), ("del", "x "), ("ins", "y "), ("same", "h i j k l m")], keep=2)
    [('gap', '…'), ('same', 'f g '), ('del', 'x '), ('ins', 'y '), ('same', 'h i'), ('gap', '…')]
    """
    if all(op == "same" for op, _ in diff):
        return []
    out: list[tuple[Literal["same", "del", "ins", "gap"], str]] = []
    last = len(diff) - 1
    for i, (op, text) in enumerate(diff):
        if op != "same":
            out.append((op, text))
            continue
        words = text.split()
        head = i > 0  # words after a change
        tail = i < last  # words before a change
        if len(words) <= keep * (head + tail):
            out.append(("same", text))
            continue
        if head:
            out.append(("same", " ".join(words[:keep])))
        out.append(("gap", "…"))
        if tail:
            out.append(("same", " ".join(words[-keep:]) + " "))
    return out


@dataclass
class CorrectionRunView:
    """A correction run: figures over its rows and each row's correction view."""

    title: str
    rows: list[CorrectionView]
    total: int
    flagged: int
    changed: int
    passed: int
    errors: int
    unreadable: int
    statuses: list[tuple[str, int]]
    methods: list[str]
    llm_calls: int
    triples_applied: int
    triples_attempted: int
    notes: list[str] = field(default_factory=list)


def correction_run_view(
    rows: Sequence[CorrectionView], *, title: str = "GraphCorrect run", notes: Sequence[str] = (),
    unreadable: int = 0,
) -> CorrectionRunView:
    """Run-level figures of corrections: how many rows were flagged, changed and pass the re-check, by status."""
    flagged = [r for r in rows if r.flagged]
    counts = Counter(r.status for r in rows)
    order = ["corrected", "still_flagged", "unchanged", "recheck_failed", "unflagged", "error"]
    statuses = [(s, counts[s]) for s in order if counts[s]] + [(s, n) for s, n in counts.items() if s not in order]
    return CorrectionRunView(
        title=title, rows=list(rows), total=len(rows) + unreadable, flagged=len(flagged),
        changed=sum(r.corrected != r.original for r in rows), passed=sum(bool(r.passed) for r in flagged),
        errors=counts["error"], unreadable=unreadable, statuses=statuses,
        methods=sorted({r.method_label + (f" by {r.llm}" if r.llm else "") for r in flagged}),
        llm_calls=sum(r.llm_calls for r in rows), triples_applied=sum(r.applied for r in rows),
        triples_attempted=sum(r.attempted for r in rows), notes=list(notes),
    )


# ----------------------------------------------------------------------------------------- per run
@dataclass
class Bar:
    low: float
    high: float
    count: int
    side: Literal["flagged", "faithful", "mixed"]
    x: float
    y: float
    height: float


@dataclass
class Histogram:
    bars: list[Bar]
    width: int
    height: int
    threshold_x: float | None
    base_y: float


@dataclass
class Ranked:
    label: str
    count: int
    anchors: list[tuple[str, str]]
    """``(anchor, row label)`` of a few rows where it occurs."""


@dataclass
class RunView:
    title: str
    rows: list[RowView]
    total: int
    ok: int
    flagged: int
    faithful: int
    errors: int
    unreadable: int
    fallback: int
    rate: float | None
    histogram: Histogram
    relations: list[Ranked]
    error_kinds: list[Ranked]
    models: list[str]
    thresholds: list[float]
    claims: int
    unsupported_claims: int
    notes: list[str] = field(default_factory=list)
    usage: dict[str, StageUsage] = field(default_factory=dict)
    """The run's chat-model calls and tokens per stage, over every row (empty: no report recorded any)."""

    @property
    def usage_total(self) -> StageUsage:
        """Every stage's calls and tokens added up."""
        return total_usage([self.usage])


def _histogram(scores: Sequence[float], threshold: float | None, bins: int = 10) -> Histogram:
    counts = [0] * bins
    for s in scores:
        counts[min(bins - 1, max(0, int(s * bins)))] += 1
    width, height, left, base = 520, 210, 40, 170.0
    inner = width - left - 20
    top = max(counts, default=0) or 1
    cut = None if threshold is None else 1.0 - threshold
    bars = []
    for i, count in enumerate(counts):
        low, high = i / bins, (i + 1) / bins
        side: Literal["flagged", "faithful", "mixed"] = "mixed"
        if cut is not None:
            side = "flagged" if high <= cut + 1e-9 else "faithful" if low >= cut - 1e-9 else "mixed"
        h = 140.0 * count / top
        bars.append(Bar(low, high, count, side, x=left + i * inner / bins + 2, y=base - h, height=h))
    tx = None if cut is None else left + cut * inner
    return Histogram(bars=bars, width=width, height=height, threshold_x=tx, base_y=base)


def run_view(rows: Sequence[RowView], title: str = "GraphEval run", notes: Sequence[str] = ()) -> RunView:
    """Run-level figures from row views: rates, the score histogram, frequent unsupported relations, errors."""
    ok = [r for r in rows if r.status in ("hallucinated", "faithful")]
    flagged = sum(r.status == "hallucinated" for r in rows)
    thresholds = sorted({r.threshold for r in ok if r.threshold is not None})
    relations: dict[str, Ranked] = {}
    kinds: dict[str, Ranked] = {}

    def tally(table: dict[str, Ranked], key: str, label: str, r: RowView, again: bool = False) -> None:
        entry = table.setdefault(key, Ranked(label, 0, []))
        entry.count += 1
        place = (r.anchor, r.id if r.id is not None else r.anchor)
        if len(entry.anchors) < 3 and (again or place not in entry.anchors):
            entry.anchors.append(place)

    for r in rows:
        for c in r.unsupported:
            if c.triple is not None:
                tally(relations, " ".join(c.triple.relation.casefold().split()), " ".join(c.triple.relation.split()), r)
        # The kind of a problem: "extract stage failed", "unreadable: missing field", "unreadable: not valid JSON" …
        row_kinds = [":".join(p.split(":", 2)[:2]) if p.startswith("unreadable:") else p.split(":", 1)[0]
                     for p in r.problems]
        if r.fallback:
            row_kinds.append("fallback: whole output checked as one claim")
        for kind in dict.fromkeys(row_kinds):
            tally(kinds, kind, kind, r, again=True)
    models = sorted({f"{r.llm or 'raw'} + {r.scorer or '?'}" for r in ok})
    usage: dict[str, StageUsage] = {}
    for r in rows:
        for stage, counted in r.usage.items():
            usage[stage] = usage.get(stage, StageUsage()) + counted
    return RunView(
        title=title, rows=list(rows), total=len(rows), ok=len(ok), flagged=flagged, faithful=len(ok) - flagged,
        errors=sum(r.status == "error" for r in rows), unreadable=sum(r.status == "unreadable" for r in rows),
        fallback=sum(r.fallback for r in rows), rate=flagged / len(ok) if ok else None,
        histogram=_histogram([r.score for r in ok if r.score is not None],
                             thresholds[0] if len(thresholds) == 1 else None),
        relations=sorted(relations.values(), key=lambda x: -x.count)[:10],
        error_kinds=sorted(kinds.values(), key=lambda x: -x.count), models=models, thresholds=thresholds,
        claims=sum(len(r.claims) for r in rows), unsupported_claims=sum(len(r.unsupported) for r in rows),
        notes=list(notes),
        usage=usage,
    )
