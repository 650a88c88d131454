"""HTML pages from view data: Jinja2 templates (package data) with autoescaping on for every template."""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import json
import re
from collections.abc import Sequence
from importlib.resources import files
from typing import Any

from .._imports import require
from .._version import __version__
from .view import CorrectionRunView, CorrectionView, RowView, RunView

__all__ = ["render_correction_run_page", "render_run_page", "render_single_page"]

DEFAULT_INLINE_ROWS = 100
"""Runs of up to this many rows draw every row view in the page; larger runs draw them on demand (docs/report.md)."""
CHUNK_ROWS = 100
PAGE_ROWS = 100
"""Rows of the run table shown at a time (a large run's page carries only the first page as HTML)."""

_UNSAFE_IN_BLOB = re.compile(r"<\s*/?\s*script|<!--", re.IGNORECASE)


@functools.lru_cache(maxsize=1)
def _env() -> Any:
    jinja2 = require("jinja2", "report", "to write HTML reports")
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("grapheval_plugins.report", "templates"),
        autoescape=True,  # every template, whatever its name: model output and data are always escaped
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals.update(css=_markup(_static("report.css")), version=__version__)  # on every page
    return env


@functools.lru_cache(maxsize=4)
def _static(name: str) -> str:
    return files("grapheval_plugins.report").joinpath("static").joinpath(name).read_text(encoding="utf-8")


def _markup(text: str) -> Any:
    """Our own static CSS and JavaScript (package files, never data) marked safe for the template."""
    return require("markupsafe", "report").Markup(text)


def render_single_page(view: RowView | CorrectionView, *, document: bool = True) -> str:
    """A page (or, with ``document=False``, a fragment for a notebook) for one report or correction report."""
    correction = view if isinstance(view, CorrectionView) else None
    title = f"{'GraphCorrect' if correction else 'GraphEval'} report{'' if view.id is None else ': ' + view.id}"
    return str(_env().get_template("single.html.j2").render(
        row=None if correction else view, correction=correction, document=document, title=title))


def render_correction_run_page(run: CorrectionRunView, *, source: str | None = None) -> str:
    """The page of a correction run (no script; what it shows: docs/report.md, "A correction run")."""
    return str(_env().get_template("corrections.html.j2").render(run=run, source=source))


def _pack(data: Any) -> str:
    return base64.b64encode(
        gzip.compress(json.dumps(data, ensure_ascii=False).encode("utf-8"), compresslevel=6, mtime=0)
    ).decode("ascii")


def _checked(html: str, what: str) -> str:
    # Data is escaped and our markup has neither; checked anyway, as the script puts this markup in the page.
    if _UNSAFE_IN_BLOB.search(html):
        raise ValueError(f"{what} holds a script tag or a comment: refusing to pack it")
    return html


def _packed(rows: Sequence[RowView]) -> tuple[list[str], str]:
    """The row views, :data:`CHUNK_ROWS` a block, and the run table's rows, packed (base64 of gzip of JSON)."""
    macros = _env().get_template("macros.html.j2").make_module()
    views = [_checked(str(macros.row_section(row, False, "h2")), f"row view {row.anchor}") for row in rows]
    records = []
    for n, row in enumerate(rows, start=1):
        html = _checked(str(macros.run_row(row, n)).strip(), f"table row {n}")
        worst = row.worst
        text = " ".join([row.id or "", worst.claim if worst else "", *row.problems, "fallback" if row.fallback else ""])
        records.append([n, row.id or "", row.status, -1 if row.score is None else row.score, len(row.claims),
                        len(row.unsupported), text.lower(), html])
    return [_pack(views[i : i + CHUNK_ROWS]) for i in range(0, len(views), CHUNK_ROWS)], _pack(records)


def render_run_page(
    run: RunView, *, inline_rows: int = DEFAULT_INLINE_ROWS, source: str | None = None
) -> str:
    """The page of a whole run (docs/report.md); row views inline up to ``inline_rows`` rows, else drawn on demand."""
    js = _static("report.js")
    digest = base64.b64encode(hashlib.sha256(js.encode("utf-8")).digest()).decode("ascii")
    lazy = len(run.rows) > inline_rows
    blocks, table_block = _packed(run.rows) if lazy else ([], "")
    return str(_env().get_template("run.html.j2").render(
        run=run, lazy=lazy, blocks=blocks, table_block=table_block, first_page=PAGE_ROWS, chunk_rows=CHUNK_ROWS,
        js=_markup(js), script_hash=f"sha256-{digest}", source=source))
