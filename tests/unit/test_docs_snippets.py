"""Every code snippet of README.md and docs/ runs here, offline.

A small collector rather than pytest-examples: the snippets of one page build on each other (a page is read top to
bottom, like a notebook), shell snippets need checks of their own (a ``grapheval`` command must name real options, a
``pip install`` real extras), and skips must carry a reason the reader of the page can see. pytest-examples checks
formatting and printed output, which these pages do not promise.

Rules (for authors of the pages):

* ```` ```python ```` blocks are executed in order, in one namespace per page, in a temporary working directory,
  with sockets disabled (``tests/unit/conftest.py``). A block that defines ``test_*`` functions has them called, as
  pytest would. Blocks that may load a local model (``local:`` in their text or in an earlier block of the page)
  are marked ``integration`` and skipped when llama.cpp is not installed.
* ```` ```bash ```` blocks are checked line by line: a ``grapheval`` command must name a real subcommand and real
  options (and its ``--help`` must run); ``pip install`` must name extras that ``pyproject.toml`` defines; a script
  or file it runs must exist. Any other command fails the test unless the block is marked.
* ```` ```json ```` blocks must parse.
* ``<!-- skip: <reason> -->`` on the line(s) before a block skips it, visibly, with that reason (a key, a hub, a
  long install).
"""

from __future__ import annotations

import json
import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from grapheval_plugins import aggregate

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^`\n]*)$")
SKIP = re.compile(r"^\s*<!--\s*skip:\s*(?P<reason>.+?)\s*-->\s*$")
SHELL_LANGS = {"bash", "sh", "shell", "console"}


@dataclass
class Snippet:
    page: Path
    line: int
    lang: str
    code: str
    skip: str | None = None

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def parse_snippets(page: Path) -> list[Snippet]:
    """The fenced code blocks of a Markdown page, with their skip markers."""
    lines = page.read_text(encoding="utf-8").splitlines()
    snippets: list[Snippet] = []
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        indent, fence, info = match["indent"], match["fence"], match["info"].strip()
        lang = info.split()[0].lower() if info else ""
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not (lines[j].strip().startswith(fence) and lines[j].strip().strip(fence[0]) == ""):
            body.append(lines[j][len(indent):] if lines[j].startswith(indent) else lines[j].lstrip())
            j += 1
        skip = None
        k = i - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        if k >= 0 and (marker := SKIP.match(lines[k])):
            skip = marker["reason"]
        snippets.append(Snippet(page, i + 1, lang, "\n".join(body) + "\n", skip))
        i = j + 1
    return snippets


ALL = [s for page in PAGES for s in parse_snippets(page)]
PYTHON = [s for s in ALL if s.lang in ("python", "py")]
SHELL = [s for s in ALL if s.lang in SHELL_LANGS]
JSON = [s for s in ALL if s.lang == "json"]


def _uses_local_model(snippet: Snippet) -> bool:
    """True when the block, or an earlier block of its page whose objects it may use, names a local model."""
    for earlier in PYTHON:
        if earlier.page == snippet.page and earlier.line <= snippet.line and not earlier.skip and "local:" in earlier.code:
            return True
    return False


def _param(snippet: Snippet) -> Any:
    marks = [pytest.mark.integration] if _uses_local_model(snippet) else []
    return pytest.param(snippet, id=snippet.id, marks=marks)


# ----------------------------------------------------------------------------------------------- python
@dataclass
class PageRun:
    """The state of one page's Python snippets: its namespace and how many of its blocks have run."""

    namespace: dict[str, Any] = field(default_factory=lambda: {"__name__": "__snippet__"})
    done: int = 0


_RUNS: dict[Path, PageRun] = {}


def _execute(snippet: Snippet, namespace: dict[str, Any], *, call_tests: bool = True) -> None:
    before = set(namespace)
    exec(compile(snippet.code, snippet.id, "exec"), namespace)  # noqa: S102 - our own documentation's code
    for name in sorted(set(namespace) - before) if call_tests else ():
        if name.startswith("test_") and callable(namespace[name]):
            namespace[name]()


@pytest.mark.parametrize("snippet", [_param(s) for s in PYTHON])
def test_python_snippet_runs(snippet: Snippet, tmp_path_factory: pytest.TempPathFactory,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    if snippet.skip:
        pytest.skip(f"{snippet.id}: {snippet.skip}")
    if _uses_local_model(snippet):
        pytest.importorskip("llama_cpp", reason="the snippet loads a local model: needs the 'local' extra")
    monkeypatch.setenv("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")
    monkeypatch.setenv("RAGAS_DO_NOT_TRACK", "true")
    page = [s for s in PYTHON if s.page == snippet.page]
    run = _RUNS.setdefault(snippet.page, PageRun())
    workdir = tmp_path_factory.mktemp("snippets")
    monkeypatch.chdir(workdir)
    index = page.index(snippet)
    rules = dict(aggregate.RULES)  # a page may register a decision rule: it stays that page's own
    try:
        for earlier in page[run.done : index]:  # the page's earlier blocks, when this one was selected alone
            if not earlier.skip:
                _execute(earlier, run.namespace, call_tests=False)
        run.done = max(run.done, index)
        _execute(snippet, run.namespace)
        run.done = index + 1
    finally:
        aggregate.RULES.clear()
        aggregate.RULES.update(rules)


# ----------------------------------------------------------------------------------------------- shell
def _extras() -> set[str]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return set(data["project"]["optional-dependencies"])


def _commands(code: str) -> list[list[str]]:
    """Shell commands of a block: continuation lines joined, comments dropped, split on && || ; |."""
    text = re.sub(r"\\\n", " ", code)
    commands: list[list[str]] = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("$ "):
            line = line[2:]
        if not line or line.startswith("#"):
            continue
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        current: list[str] = []
        for token in lexer:
            if token.startswith("#"):
                break
            if token in ("&&", "||", ";", "|", "&"):
                if current:
                    commands.append(current)
                current = []
            else:
                current.append(token)
        if current:
            commands.append(current)
    return commands


def _check_grapheval(args: list[str]) -> None:
    import typer
    from typer.testing import CliRunner

    from grapheval_plugins.cli import app

    commands = getattr(typer.main.get_command(app), "commands", {})
    if not args or args[0] in ("--help", "-h"):
        result = CliRunner().invoke(app, ["--help"])
        assert result.exit_code == 0, result.output
        return
    name = args[0]
    command = commands.get(name)
    assert command is not None, f"`grapheval {name}`: no such command (known: {sorted(commands)})"
    known = {"--help"}
    for param in command.params:
        known.update(getattr(param, "opts", []))
        known.update(getattr(param, "secondary_opts", []))
    for token in args[1:]:
        if token.startswith("-") and token != "-":
            option = token.split("=", 1)[0]
            assert option in known, f"`grapheval {name}`: unknown option {option} (known: {sorted(known)})"
    result = CliRunner().invoke(app, [name, "--help"])
    assert result.exit_code == 0, result.output


def _check_command(words: list[str], extras: set[str]) -> None:
    while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):  # VAR=value prefixes
        words = words[1:]
    if not words:
        return
    program = os.path.basename(words[0])
    if program in ("grapheval",):
        _check_grapheval(words[1:])
    elif program in ("export", "cd", "nice", "time"):
        if program in ("nice", "time") and len(words) > 1:
            rest = words[1:]
            while rest and rest[0].startswith("-"):
                rest = rest[2:] if rest[0] == "-n" else rest[1:]
            _check_command(rest, extras)
    elif program in ("bash", "sh"):
        assert len(words) > 1 and (ROOT / words[1]).is_file(), f"`{' '.join(words)}`: no such script"
    elif program in ("pip", "pip3") or words[1:3] == ["-m", "pip"]:
        requirements = [w for w in words if "[" in w and ("grapheval" in w or w.startswith(".["))]
        for requirement in requirements:
            named = re.search(r"\[([^\]]*)\]", requirement)
            assert named, requirement
            unknown = {e.strip() for e in named.group(1).split(",")} - extras
            assert not unknown, f"`{' '.join(words)}`: no such extra {sorted(unknown)} (pyproject: {sorted(extras)})"
    elif program.startswith("python"):
        if words[1:3] == ["-m", "pytest"] or words[1:2] == ["-c"]:
            return
        if words[1:2] == ["-m"]:
            assert words[2] in ("grapheval_plugins.cli", "build", "mkdocs", "twine", "http.server"), f"unchecked: {words}"
            return
        assert len(words) > 1 and (ROOT / words[1]).is_file(), f"`{' '.join(words)}`: no such script"
    elif program == "mkdocs":
        assert (ROOT / "mkdocs.yml").is_file()
    elif program in ("pytest", "deepeval"):
        paths = [w for w in words[1:] if not w.startswith("-") and "/" in w]
        for path in paths:
            assert (ROOT / path.split("::")[0]).exists(), f"`{' '.join(words)}`: no such path {path}"
    else:
        raise AssertionError(
            f"unchecked shell command `{' '.join(words)}`: mark its block with <!-- skip: <reason> -->"
        )


@pytest.mark.parametrize("snippet", [pytest.param(s, id=s.id) for s in SHELL])
def test_shell_snippet_is_valid(snippet: Snippet) -> None:
    if snippet.skip:
        pytest.skip(f"{snippet.id}: {snippet.skip}")
    extras = _extras()
    commands = _commands(snippet.code)
    assert commands, "empty shell block"
    for words in commands:
        _check_command(words, extras)


@pytest.mark.parametrize("snippet", [pytest.param(s, id=s.id) for s in JSON])
def test_json_snippet_parses(snippet: Snippet) -> None:
    if snippet.skip:
        pytest.skip(f"{snippet.id}: {snippet.skip}")
    try:
        json.loads(snippet.code)
    except json.JSONDecodeError:  # JSON Lines: one document a line
        for line in snippet.code.splitlines():
            if line.strip():
                json.loads(line)


def test_the_collector_finds_the_pages_snippets() -> None:
    assert (ROOT / "README.md") in PAGES and len(PAGES) > 5
    assert len(PYTHON) >= 10 and SHELL
    assert all(s.code.strip() for s in ALL), [s.id for s in ALL if not s.code.strip()]
