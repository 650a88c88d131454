"""The batch runner of GraphCorrect: detection batched over all rows, then bounded concurrent corrections.

A failing row never stops the batch (its report has ``status="error"``); configuration errors (a missing extra,
a model that cannot load) do, since every row would fail the same way.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig

from .._progress import progress_bar
from ..exceptions import MissingDependencyError, ModelLoadError
from ..inputs import to_sample
from ..types import Report, StageError
from .types import CorrectionReport

if TYPE_CHECKING:
    from .corrector import GraphCorrect

__all__ = ["correct_rows", "error_report", "extraction_calls"]

logger = logging.getLogger(__name__)


def extraction_calls(report: Report | None) -> int:
    """The chat-model calls the extraction behind ``report`` made (0 for none, a cached graph or raw mode)."""
    if report is None or report.extraction is None:
        return 0
    return report.extraction.attempts


def error_report(
    fixer: GraphCorrect, row: Any, output_key: str, detection: Report, error: StageError | None
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
        method=fixer.method,
        status="error",
        flagged=detection.hallucinated,
        detection=detection,
        detection_llm_calls=extraction_calls(detection),
        prompt_version=fixer.prompts.version,
        errors=errors,
        id=detection.id,
    )


async def correct_rows(
    fixer: GraphCorrect,
    rows: Iterable[Any],
    *,
    context_key: str = "context",
    output_key: str = "output",
    id_key: str = "id",
    show_progress: bool | None = None,
    config: RunnableConfig | None = None,
) -> list[CorrectionReport]:
    """What :meth:`GraphCorrect.acorrect_many` does; see there."""
    rows = list(rows)
    if rows:
        await asyncio.to_thread(fixer.rouge_enabled)  # a missing extra asked for fails once, before any model work
    if show_progress is None:
        show_progress = fixer.show_progress
    if show_progress is None:
        show_progress = len(rows) > 1 and sys.stderr.isatty()
    detections = await fixer.grapheval.aevaluate_many(
        rows, context_key=context_key, output_key=output_key, id_key=id_key, show_progress=show_progress,
        config=config,
    )
    if len(detections) != len(rows):  # pragma: no cover - GraphEval returns one report per row
        raise RuntimeError("GraphEval.aevaluate_many returned a report count different from the row count")
    semaphore = asyncio.Semaphore(fixer.max_concurrency or fixer.grapheval.max_concurrency)
    bar = progress_bar(len(rows), "correct", enabled=bool(show_progress))

    async def one(index: int, row: Any, detection: Report) -> CorrectionReport:
        try:
            if not detection.ok:
                return error_report(fixer, row, output_key, detection, None)
            sample = to_sample(row, index, context_key, output_key, id_key)
            async with semaphore:
                return await fixer.acorrect(
                    list(sample.passages), sample.output, report=detection, id=sample.id, config=config
                )
        except (MissingDependencyError, ModelLoadError):
            raise  # configuration errors: every row would fail the same way
        except Exception as exc:  # noqa: BLE001 - one failing row never stops the batch
            logger.warning("correction of row %d failed: %s", index, exc)
            error = StageError(stage="correct", type=type(exc).__name__, message=str(exc))
            return error_report(fixer, row, output_key, detection, error)
        finally:
            bar.update(1)

    try:
        return list(await asyncio.gather(*(one(i, r, d) for i, (r, d) in enumerate(zip(rows, detections)))))
    finally:
        bar.close()
