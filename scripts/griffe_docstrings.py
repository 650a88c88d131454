"""A griffe extension for the API reference (mkdocs.yml): the package's docstrings, written for both ``help()`` and
doctest, rendered as Markdown.

* Doctest blocks (``>>>`` lines and their output) outside a section become ``pycon`` code blocks; inside an
  ``Example:`` / ``Example (note):`` section, the section is renamed ``Examples:`` so that griffe renders them as
  code (a bare ``>>>`` in Markdown is a block quote).
* reST leftovers: ``.. code-block:: lang`` and ``Title::`` literal blocks become fenced code blocks; roles such as
  ``:class:`~grapheval_plugins.types.Report``` become code spans (``Report``).
* An ``Args:`` item whose names wrap onto a second line (``a, b, c,`` / ``d: as for ...``) is joined into one,
  and an item naming several parameters (``a, b: text``) becomes one item per name, each finding its type and
  default; the Args of a pydantic model are its fields (``Attributes:``: griffe does not read their defaults).
* reST simple tables (rows between ``====  ====`` borders) become Markdown tables; a row whose first cell is empty
  continues the row above.

Nothing here changes the source files: the rewrite applies to the docstrings griffe has loaded.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|data|mod|attr|exc|obj|const|type):`(~?)([^`]+)`")
_EXAMPLE = re.compile(r"^(?P<indent>\s*)Examples?(?:\s*\((?P<note>[^)]*)\))?:\s*$")
_CODE_BLOCK = re.compile(r"^(?P<indent>\s*)\.\. code-block::\s*(?P<lang>[\w+-]*)\s*$")
_LITERAL = re.compile(r"^(?P<indent>\s*)(?P<text>\S.*?)::\s*$")
_NAMES = re.compile(r"^(?P<indent>\s+)(?P<names>\w+(?:,\s*\w+)+):\s+(?P<text>.*)$")
_TABLE_BORDER = re.compile(r"^\s*=+(?:\s+=+)+\s*$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _role(match: re.Match[str]) -> str:
    target = match.group(2)
    return f"`{target.rsplit('.', 1)[-1] if match.group(1) else target}`"


def _indented_block(lines: list[str], start: int, base: int) -> tuple[list[str], int]:
    """The lines from ``start`` that are blank or indented deeper than ``base`` (trailing blanks excluded)."""
    end = start
    while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > base):
        end += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return lines[start:end], end


def _fence(block: list[str], indent: str, lang: str) -> list[str]:
    deepest = min((_indent(x) for x in block if x.strip()), default=0)
    return [f"{indent}```{lang}", *[indent + x[deepest:] if x.strip() else "" for x in block], f"{indent}```"]


def _simple_table(lines: list[str], start: int) -> tuple[list[str], int] | None:
    """The reST simple table whose top border is ``lines[start]`` as Markdown lines, and the index after it.

    ``lines`` are the docstring's own (roles not yet rewritten: the columns are where the source puts them)."""
    border = lines[start]
    columns = [m.start() for m in re.finditer(r"=+", border)]
    borders = [start]
    i = start + 1
    while i < len(lines) and len(borders) < 3:
        if _TABLE_BORDER.match(lines[i]) and lines[i].strip() == border.strip():
            borders.append(i)
            if i + 1 >= len(lines) or not lines[i + 1].strip():
                break
        i += 1
    if len(borders) < 2:
        return None

    def rows(first: int, last: int) -> list[list[str]]:
        out: list[list[str]] = []
        for line in lines[first:last]:
            if not line.strip():
                continue
            cells = [_ROLE.sub(_role, line[a:b]).strip() for a, b in zip(columns, [*columns[1:], None])]
            if out and not cells[0]:
                out[-1] = [f"{old} {new}".strip() for old, new in zip(out[-1], cells)]
            else:
                out.append(cells)
        return [[cell.replace("|", "\\|") for cell in row] for row in out]

    indent = border[: _indent(border)]
    header = rows(borders[0] + 1, borders[1]) if len(borders) == 3 else [[""] * len(columns)]
    body = rows(borders[-2] + 1, borders[-1]) if len(borders) == 3 else rows(borders[0] + 1, borders[1])
    table = [header[0], ["---"] * len(columns), *body]
    return ["", *[indent + "| " + " | ".join(row) + " |" for row in table], ""], borders[-1] + 1


def to_markdown(text: str) -> str:
    """The docstring ``text`` with the rewrites of this module's docstring applied."""
    raw = text.splitlines()
    lines = _ROLE.sub(_role, text).splitlines()
    out: list[str] = []
    i = 0
    in_section_at: int | None = None  # indentation of the current section header, if any
    in_params = False  # the current section lists parameters (Args:, Attributes: ...)
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if stripped and in_section_at is not None and _indent(line) <= in_section_at:
            in_section_at = None
        if (match := _EXAMPLE.match(line)) is not None:
            out.append(f"{match['indent']}Examples:")
            if match["note"]:
                out.append(f"{match['indent']}    {match['note'][0].upper()}{match['note'][1:]}:")
            in_section_at = len(match["indent"])
            i += 1
            continue
        if re.match(r"^\s*[A-Z][\w ]*:\s*$", line):  # a Google-style section header (Args:, Raises: ...)
            in_section_at = _indent(line)
            in_params = stripped[:-1] in ("Args", "Arguments", "Parameters", "Attributes", "Keyword Args")
            out.append(line)
            i += 1
            continue
        if _TABLE_BORDER.match(line) and (table := _simple_table(raw, i)) is not None:
            out += table[0]
            i = table[1]
            continue
        if (match := _CODE_BLOCK.match(line)) is not None:
            j = i + 1
            while j < len(lines) and not lines[j].strip():
                j += 1
            block, i = _indented_block(lines, j, _indent(line))
            out += _fence(block, match["indent"], match["lang"])
            continue
        if (match := _LITERAL.match(line)) is not None and not stripped.startswith(".."):
            j = i + 1
            while j < len(lines) and not lines[j].strip():
                j += 1
            if j < len(lines) and _indent(lines[j]) > _indent(line):
                block, end = _indented_block(lines, j, _indent(line))
                out += [f"{match['indent']}{match['text']}:", "", *_fence(block, match["indent"], "")]
                i = end
                continue
        if stripped.startswith(">>>") and in_section_at is None:
            j = i
            while j < len(lines) and lines[j].strip():
                j += 1
            out += _fence(lines[i:j], line[: _indent(line)], "pycon")
            i = j
            continue
        if (
            in_section_at is not None
            and in_params
            and (names := _NAMES.match(line)) is not None
            and _indent(line) > in_section_at
        ):  # "a, b: text": one item per name, so that each finds its parameter (type, default)
            block, end = _indented_block(lines, i + 1, _indent(line))
            first, *others = [n.strip() for n in names["names"].split(",")]
            out += [f"{names['indent']}{first}: {names['text']}", *block]
            for name in others:  # a shared "as for X" is repeated; another description is pointed to
                shared = names["text"].startswith("as for ")
                out += [f"{names['indent']}{name}: {names['text']}", *block] if shared else [
                    f"{names['indent']}{name}: as for `{first}`."]
            i = end
            continue
        if (
            in_section_at is not None
            and stripped.endswith(",")
            and ":" not in stripped
            and i + 1 < len(lines)
            and _indent(lines[i + 1]) > _indent(line)
            and ":" in lines[i + 1]
        ):  # an Args item whose names wrap: join the two lines, then read the item again
            lines[i + 1] = line.rstrip() + " " + lines[i + 1].strip()
            i += 1
            continue
        out.append(line)
        i += 1
    return "\n".join(out)


class DocstringsAsMarkdown(griffe.Extension):
    """Rewrites every loaded docstring with :func:`to_markdown` once the object tree is built."""

    def on_object(self, *, obj: Any, **kwargs: Any) -> None:
        docstring = getattr(obj, "docstring", None)
        if docstring is not None and not getattr(obj, "is_alias", False):
            docstring.value = to_markdown(docstring.value)
            if _fields_class(obj):  # its Args are fields with defaults griffe cannot see: no "required" column
                docstring.value = re.sub(r"^(\s*)Args:\s*$", r"\1Attributes:", docstring.value, flags=re.M)
            elif (names := _signature_names(obj)) is not None:
                docstring.value = _keyword_options_apart(docstring.value, names)


def _signature_names(obj: Any) -> set[str] | None:
    """The parameter names of a function, or of a class's own ``__init__``, when it also takes ``**options``."""
    function = obj.members.get("__init__") if getattr(obj, "is_class", False) else obj
    parameters = getattr(function, "parameters", None)
    if parameters is None or not any(str(p.kind.value) == "variadic keyword" for p in parameters):
        return None
    return {p.name for p in parameters}


def _keyword_options_apart(text: str, names: set[str]) -> str:
    """The ``Args:`` items that are not in the signature (options passed through ``**options``, whose defaults
    the signature does not show) moved to an ``Other Parameters:`` section after it, which has no default column."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == "Args:"), None)
    if start is None:
        return text
    base = _indent(lines[start])
    block, end = _indented_block(lines, start + 1, base)
    item_indent = min((_indent(x) for x in block if x.strip()), default=base + 4)
    kept: list[str] = []
    moved: list[str] = []
    target = kept
    for line in block:
        if line.strip() and _indent(line) == item_indent:
            name = line.strip().split(":", 1)[0].strip().lstrip("*")
            target = kept if name in names else moved
        target.append(line)
    if not moved:
        return text
    other = [" " * base + "Other Parameters:", *moved]
    return "\n".join([*lines[: start + 1], *kept, "", *other, *lines[end:]])


def _fields_class(obj: Any) -> bool:
    """A pydantic model: its constructor takes its fields, whose defaults griffe does not read."""
    if not getattr(obj, "is_class", False) or "dataclass" in getattr(obj, "labels", ()):
        return False
    return "model_config" in {m for base in obj.mro() for m in base.members} | set(obj.members)
