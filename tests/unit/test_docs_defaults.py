"""Every default the documentation states is the code's: a drifting default fails here.

The pages state defaults in tables whose second column is ``default``. Each such table is preceded by a marker
naming what it documents, and every row is checked against that:

* ``<!-- defaults: package.module.Name -->``: a class or function; the first column names its parameters
  (``inspect.signature``). A documented default for a parameter whose code default is ``None`` ("the engine's")
  is checked against the engine's own default (``GraphEval``'s signature, ``aggregate.DEFAULT_THRESHOLD``).
* ``<!-- defaults: cli <command> -->``: a ``grapheval`` command; the first column names its options.
* ``<!-- defaults: constants package.module -->``: module constants; the first column names them.

A cell is read as: the first backticked literal(s) (``"constrained"``, ``0.5``, ``None``, or a bare word such as
``graph``), else the leading number(s), else one of the phrases in ``PHRASES`` (``off``, ``the offline default``
…). A table with a ``default`` column and no marker, or a cell this test cannot read, fails: state the default so
that it can be checked.

It also holds two more things the pages promise: every figure in the README's "What to expect" table is one that
``docs/benchmarks.md`` states (with its command), and statements found false before do not come back.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "examples").glob("*/README.md"))]
MARKER = re.compile(r"^\s*<!--\s*defaults:\s*(?P<target>.+?)\s*-->\s*$")
HEADER = re.compile(r"^\|[^|]*\|\s*default\s*\|")
SEPARATOR = re.compile(r"^\|\s*:?-{3,}")
UNSET = object()

# What a phrase in a default cell means in the code (matched at the start of the cell, lower case).
PHRASES: dict[str, Any] = {
    "the offline default": None,  # None: the engine resolves DEFAULT_LLM / DEFAULT_SCORER
    "the engine's": None,  # None: the engine's own default (checked against it below)
    "none": None,
    "all rows": None,
    "unlimited": None,
    "sniffed": None,
    "in memory": None,  # the CLI's --cache None: the engine's in-memory cache
    "as `": None,  # "as $VARIABLE, else ...": None reads the variable
    "a running ray": None,
    "off": False,
    "on": True,
}


@dataclass
class Row:
    page: Path
    line: int
    target: str
    names: list[str]
    cell: str

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}:{','.join(self.names)}"


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def tables(page: Path) -> list[tuple[int, str | None, list[tuple[int, list[str]]]]]:
    """The page's tables with a ``default`` column: (header line, marker target or None, [(line, cells)])."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found = []
    for i, line in enumerate(lines):
        if not (HEADER.match(line) and i + 1 < len(lines) and SEPARATOR.match(lines[i + 1])):
            continue
        k = i - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        marker = MARKER.match(lines[k]) if k >= 0 else None
        rows = []
        j = i + 2
        while j < len(lines) and lines[j].startswith("|"):
            rows.append((j + 1, _cells(lines[j])))
            j += 1
        found.append((i + 1, marker["target"] if marker else None, rows))
    return found


def _names(cell: str, cli: bool) -> list[str]:
    tokens = re.findall(r"`([^`]+)`", cell)
    if cli:
        return [t for t in tokens if t.startswith("-") and not t.startswith("--no-")]
    return [t.split("(")[0].strip() for t in tokens]


ALL_TABLES = [(page, *table) for page in PAGES for table in tables(page)]
ROWS = [
    Row(page, line, target, _names(cells[0], target.startswith("cli ")), cells[1])
    for page, _, target, rows in ALL_TABLES
    if target is not None
    for line, cells in rows
]


def _literal(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text  # a bare word: graph, constrained, qwen2.5-coder-1.5b


def read_cell(cell: str, count: int, positive: str | None = None) -> list[Any]:
    """The documented value(s) of a default cell, one per name of the row."""
    text = cell.strip()
    literals = re.findall(r"`([^`]+)`", text)
    if literals and text.startswith("`"):
        values = [_literal(v) for v in literals]
        return values[:count] if len(values) >= count else values * count if len(values) == 1 else values
    numbers = re.match(r"^(-?\d+(?:\.\d+)?)((?:\s*,\s*-?\d+(?:\.\d+)?)*)", text)
    if numbers:
        values = [_literal(v) for v in re.findall(r"-?\d+(?:\.\d+)?", numbers.group(0))]
        return values if len(values) == count else values * count if len(values) == 1 else values
    lowered = text.lower()
    if positive is not None and lowered.split(" ")[0] == positive:  # "--resume / --no-resume | resume"
        return [True] * count
    for phrase, value in PHRASES.items():
        if lowered == phrase or lowered.startswith(phrase + " ") or lowered.startswith(phrase + ",") or (
            phrase.endswith("`") and lowered.startswith(phrase)
        ):
            return [value] * count
    raise AssertionError(f"cannot read the default cell {cell!r}: state it as a literal, a number or a known phrase")


def _engine_default(name: str) -> Any:
    from grapheval_plugins import GraphEval, aggregate

    if name in ("hallucination_threshold", "threshold"):
        return aggregate.DEFAULT_THRESHOLD
    key = {"check_mode": "mode"}.get(name, name)
    parameters = inspect.signature(GraphEval).parameters
    return parameters[key].default if key in parameters else UNSET


def code_defaults(row: Row) -> list[Any]:
    """The code's default for each name of the row."""
    kind, _, rest = row.target.partition(" ")
    if kind == "cli":
        import typer

        from grapheval_plugins.cli import app

        command = typer.main.get_command(app).commands[rest]  # type: ignore[attr-defined]
        by_opt = {opt: p for p in command.params for opt in p.opts}
        values = []
        for name in row.names:
            assert name in by_opt, f"{row.id}: `grapheval {rest}` has no option {name}"
            default = by_opt[name].default
            values.append(str(default) if isinstance(default, Path) else default)
        return values
    if kind == "constants":
        module = importlib.import_module(rest)
        values = []
        for name in row.names:
            assert hasattr(module, name), f"{row.id}: {rest} has no {name}"
            values.append(getattr(module, name))
        return values
    module_name, _, attr = row.target.rpartition(".")
    obj = getattr(importlib.import_module(module_name), attr)
    parameters = inspect.signature(obj).parameters
    values = []
    for name in row.names:
        assert name in parameters, f"{row.id}: {row.target} takes no parameter {name}"
        values.append(parameters[name].default)
    return values


def test_every_defaults_table_names_what_it_documents() -> None:
    unmarked = [f"{page.relative_to(ROOT)}:{line}" for page, line, target, _ in ALL_TABLES if target is None]
    assert not unmarked, f"tables with a default column and no <!-- defaults: ... --> marker: {unmarked}"
    assert len(ROWS) >= 40, len(ROWS)  # the CLI, the DeepEval and Ragas options, GraphEval, GraphCorrect, constants


@pytest.mark.parametrize("row", [pytest.param(r, id=r.id) for r in ROWS])
def test_a_documented_default_is_the_code_default(row: Row) -> None:
    assert row.names, f"{row.id}: no `name` in the first column"
    positive = row.names[0].lstrip("-") if row.target.startswith("cli ") else None
    documented = read_cell(row.cell, len(row.names), positive)
    actual = code_defaults(row)
    assert len(documented) == len(actual), f"{row.id}: {len(row.names)} names, cell {row.cell!r}"
    for name, doc, code in zip(row.names, documented, actual):
        if code is None and doc is not None and not row.target.startswith(("cli ", "constants ")):
            code = _engine_default(name)  # None: the engine's default, which the page states
        assert doc == code, f"{row.id}: the page says {name} defaults to {doc!r}, the code to {code!r}"


def test_the_readme_figures_are_the_benchmarks_page_figures() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## What to expect", 1)[1].split("\n## ", 1)[0]
    table = "\n".join(line for line in section.splitlines() if line.startswith("|"))
    benchmarks = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    stated = set(re.findall(r"\d[\d,]*(?:\.\d+)?", benchmarks))
    figures = [f for f in re.findall(r"\d[\d,]*(?:\.\d+)?", table) if f.strip(",")]
    missing = sorted({f.strip(",") for f in figures} - stated)
    assert table and not missing, f"figures in the README's table that docs/benchmarks.md does not state: {missing}"


# Statements found false, each once true of an older default or never true.
STALE = {
    r"−2\.0 points": "the paper's rule's change, not the shipped default's",
    r"0\.5B (?:model )?is (?:lighter and )?quicker": "the 0.5B is not quicker per row (docs/offline.md)",
    r"faster 0\.5B|0\.5B[^.\n]*quicker": "the 0.5B is not quicker per row (docs/offline.md)",
    r"`--method` \| `graph`": "grapheval correct's default method is constrained",
    r"\(method=\"graph\"\)?: the paper's procedure\s*$": "GraphCorrect's default is constrained",
    r"score = 1 − max P\(unsupported\)": "the score is 1 − P(hallucination) of the rule in force",
}


@pytest.mark.parametrize("pattern", list(STALE))
def test_no_stale_statement_comes_back(pattern: str) -> None:
    pages = [p for p in PAGES if p.name not in ("benchmarks.md", "research-history.md")]
    hits = [f"{p.relative_to(ROOT)}" for p in pages if re.search(pattern, p.read_text(encoding="utf-8"), re.M)]
    assert not hits, f"{STALE[pattern]}: {hits}"


def test_the_reader_reads_cells_as_documented() -> None:
    assert read_cell('`"constrained"`', 1) == ["constrained"]
    assert read_cell("`None` (offline default)", 2) == [None, None]
    assert read_cell("`context`, `output`, `id`", 3) == ["context", "output", "id"]
    assert read_cell("1.5, 0.5", 2) == [1.5, 0.5]
    assert read_cell("1 (the paper)", 1) == [1]
    assert read_cell("resume", 1, positive="resume") == [True]
    assert read_cell("the engine's, 0.5", 1) == [None]
    with pytest.raises(AssertionError, match="cannot read"):
        read_cell("whatever the model likes", 1)
