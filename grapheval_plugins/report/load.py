"""Reading a run back: the per-row JSONL that ``grapheval evaluate`` (or ``correct``) writes, without any model.

Every line becomes a row of the report, whatever its state: a report, a correction report, a detection-study
result row (rebuilt into a report when the input rows give its output), or a *problem row* that says why the line
could not be read (invalid JSON, a missing field, a wrong type). One bad line never stops the report.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..aggregate import PAPER, HybridWeights, RuleLike, fitted_weights, get_rule, rule_argument
from ..exceptions import InputError
from ..jsonl import numbered_rows, read_rows
from ..types import ClaimCheck, Extraction, Report, Triple

__all__ = ["LoadedRow", "load_inputs", "load_rows", "report_from_detection_row"]


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


def _validation_problems(exc: ValidationError) -> list[str]:
    problems = []
    for err in exc.errors()[:8]:
        where = ".".join(str(p) for p in err.get("loc", ())) or "row"
        kind = "missing field" if err.get("type") == "missing" else err.get("msg", "invalid")
        problems.append(f"unreadable: {kind}: {where}" if kind == "missing field" else f"unreadable: {where}: {kind}")
    return problems


def _read_row(row: dict[str, Any], inputs: Mapping[str, Mapping[str, str]], threshold: float) -> LoadedRow:
    rid = None if row.get("id") is None else str(row["id"])
    given = inputs.get(rid, {}) if rid is not None else {}
    loaded = LoadedRow(line=0, source="", id=rid, context=given.get("context"))
    if "output" not in row and "p_graph" in row and "triples" in row:  # a detection-study result row
        if "output" not in given:
            loaded.problems = ["unreadable: missing field: output (a detection-study row: give the data set's rows "
                               "with --inputs to show it)"]
            return loaded
        from ..exceptions import GraphEvalError

        try:
            loaded.report = report_from_detection_row(row, given["output"], threshold=threshold)
        except GraphEvalError as exc:
            loaded.problems = [f"unreadable: {exc}"]
            loaded.output = given["output"]
        return loaded
    from ..correct.types import CorrectionReport

    correction = "original" in row and "corrected" in row
    try:
        loaded.report = (CorrectionReport if correction else Report).model_validate(row)
    except ValidationError as exc:
        loaded.problems = _validation_problems(exc)
        output = row.get("original" if correction else "output")
        loaded.output = output if isinstance(output, str) else given.get("output")
    return loaded


def load_rows(
    paths: str | Path | Iterable[str | Path],
    *,
    inputs: Mapping[str, Mapping[str, str]] | None = None,
    limit: int | None = None,
    threshold: float = 0.5,
) -> tuple[list[LoadedRow], list[str]]:
    """The rows of one or more result files, in file order; a row id seen before is skipped (the first wins).

    Returns ``(rows, notes)``; ``notes`` says what was skipped. ``inputs`` (from :func:`load_inputs`) adds each
    row's context, and the output of detection-study rows. ``threshold`` only applies to detection-study rows.
    """
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
            loaded = _read_row(row, inputs, threshold)
            loaded.line, loaded.source = number, str(path)
            if loaded.id is not None:
                if loaded.id in seen:
                    duplicates += 1
                    continue
                seen.add(loaded.id)
            rows.append(loaded)
    notes = [f"{duplicates} row(s) skipped: their id was already read from an earlier line or file."] if duplicates else []
    return rows, notes


def report_from_detection_row(
    row: Mapping[str, Any], output: str, threshold: float = 0.5, *, rule: RuleLike = "hybrid",
    weights: HybridWeights | None = None, method: RuleLike | None = None,
) -> Report:
    """GraphEval's report on ``output``, rebuilt from a detection-study result row (no model is called), decided as
    ``GraphEval(rule=rule, fidelity="off")`` would (``method``: deprecated alias of ``rule``, warns); without
    weights or ``p_raw`` where the rule needs them, the paper's rule decides. Only ``concat`` rows qualify.

    >>> row = {"id": "r1", "p_graph": 0.8, "fallback": False, "llm_calls": 1, "cached": False, "p_raw": 0.3,
    ...        "render": "concat", "triples": [["Ann", "won", "gold", 0.8], ["Ann", "is", "a swimmer", 0.1]]}
    >>> report = report_from_detection_row(row, "Ann, a swimmer, won gold.")
    >>> report.method, report.hallucinated, [c.claim for c in report.unsupported]
    ('paper', True, ['Ann won gold'])
    >>> whole = HybridWeights(whole=1.0, claims=0.0, bias=0.0, fitted_on="the whole output alone")
    >>> report = report_from_detection_row(row, "Ann, a swimmer, won gold.", weights=whole)
    >>> report.method, report.hallucinated, round(report.score, 3)
    ('hybrid', False, 0.7)

    Raises:
        InputError: the row recorded an error, has no graph score, or used another rendering.
    """
    if row.get("error") or row.get("p_graph") is None:
        raise InputError("row", f"detection row {row.get('id')!r} has no graph verdict ({row.get('error')})")
    if row.get("render", "concat") != "concat":
        raise InputError("row", f"detection row {row.get('id')!r} used render {row.get('render')!r}, not concat")
    triples = [(Triple.from_list(list(t[:3])), float(t[3])) for t in row.get("triples") or []]
    if triples:
        claims = [
            ClaimCheck(claim=t.sentence(), triple=t, p_unsupported=p, unsupported=p > threshold) for t, p in triples
        ]
    else:
        p = float(row["p_graph"])
        claims = [ClaimCheck(claim=output, p_unsupported=p, unsupported=p > threshold)]
    decider = get_rule(rule_argument(rule, method, "report_from_detection_row"))
    if decider.needs.weights:
        weights = weights or fitted_weights(row.get("scorer"), row.get("prompt"), "off")
    whole = None
    if decider.needs.whole_output and triples and row.get("p_raw") is not None:
        p_raw = float(row["p_raw"])
        whole = ClaimCheck(claim=output, p_unsupported=p_raw, unsupported=p_raw > threshold)
    if (decider.needs.weights and weights is None) or (decider.needs.whole_output and triples and whole is None):
        decider, weights, whole = PAPER, None, None
    decision = decider.decide(claims, threshold=threshold, whole_output=whole, weights=weights)
    extraction = Extraction(
        triples=[t for t, _ in triples],
        attempts=int(row.get("llm_calls") or 0),
        cached=bool(row.get("cached")),
        fallback=not triples,
    )
    return Report(
        output=output, mode="graph", method=decider.name, hallucination_threshold=threshold,
        hallucinated=decision.hallucinated,
        score=1.0 - decision.p_hallucination, decision=decision, claims=claims, whole_output=whole,
        extraction=extraction, llm=row.get("llm"), scorer=row.get("scorer"),
        id=None if row.get("id") is None else str(row["id"]),
    )
