"""What GraphCorrect's batch runner (:meth:`GraphCorrect.acorrect_many`) reports for a row it could not correct,
and the extraction calls behind a detection report.

A failing row never stops the batch (its report has ``status="error"``); configuration errors (a missing extra,
a model that cannot load) do, since every row would fail the same way.
"""

from __future__ import annotations

from typing import Any

from ..types import Report, StageError
from .types import CorrectionMethod, CorrectionReport

__all__ = ["error_report", "extraction_calls"]


def extraction_calls(report: Report | None) -> int:
    """The chat-model calls the extraction behind ``report`` made (0 for none, a cached graph or raw mode)."""
    if report is None or report.extraction is None:
        return 0
    return report.extraction.attempts


def error_report(
    method: CorrectionMethod, prompt_version: str, row: Any, output_key: str, detection: Report,
    error: StageError | None,
) -> CorrectionReport:
    """The report of a row that could not be corrected: the output unchanged, the errors recorded."""
    output = (
        row.get(output_key)
        if isinstance(row, dict)
        else (row[1] if isinstance(row, (tuple, list)) and len(row) == 2 else None)
    )
    text = output.strip() if isinstance(output, str) else detection.output
    errors = list(detection.errors) + ([error] if error is not None else [])
    return CorrectionReport(
        original=text,
        corrected=text,
        method=method,
        status="error",
        flagged=detection.hallucinated,
        detection=detection,
        detection_llm_calls=extraction_calls(detection),
        prompt_version=prompt_version,
        errors=errors,
        id=detection.id,
    )
