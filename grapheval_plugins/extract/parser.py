"""Safe parsing of a chat model's knowledge-graph answer into triples.

The answer should be a Python/JSON list of ``["entity 1", "relation", "entity 2"]`` lists inside
``<python></python>`` tags. Real answers come with code fences, missing tags, smart quotes, trailing commas, a
last triple cut off at ``max_tokens``, or prose around the list. Nothing here ever evaluates the text as code:
only :func:`ast.literal_eval` (literals only) and :func:`json.loads` are used, on bounded input.

>>> parse_triples('<python>[["Paris", "capital of", "France"]]</python>').triples[0].as_list()
['Paris', 'capital of', 'France']
>>> parse_triples('Sure! [["a", "b", "c"], ["d", "e"').triples[0].as_list()
['a', 'b', 'c']
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from typing import Any

from ..types import Triple

__all__ = ["PARSER_VERSION", "ParseResult", "parse_single_triple", "parse_triples"]

PARSER_VERSION = "kg-parser/2"
"""Enters the knowledge-graph cache key: change it whenever :func:`parse_triples` reads an answer differently."""

MAX_ANSWER_CHARS = 200_000
"""Longer answers are cut before parsing, so a runaway generation cannot stall the parser."""

_SMART = str.maketrans({"\u201c": '"', "\u201d": '"', "\u201e": '"', "\u2018": "'", "\u2019": "'", "\u00ab": '"', "\u00bb": '"'})
_TAG_BLOCK = re.compile(r"<python>(.*?)(?:</python>|$)", re.S | re.I)
_FENCE = re.compile(r"```[a-zA-Z]*\s*(.*?)(?:```|$)", re.S)
_STR = r"(?:\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*')"
_INNER = re.compile(r"[\[(]\s*(" + _STR + r"(?:\s*,\s*" + _STR + r")*)\s*,?\s*[\])]")
_TRAILING_COMMA = re.compile(r",\s*([\]\)])")


@dataclass
class ParseResult:
    """Triples read from one answer, and notes on what was repaired or dropped."""

    triples: list[Triple] = field(default_factory=list)
    issues: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.triples)


def _candidate_body(text: str) -> tuple[str, list[str]]:
    blocks = [b for b in _TAG_BLOCK.findall(text) if "[" in b]
    if blocks:
        return "\n".join(blocks), [] if "</python>" in text.lower() else ["missing closing </python> tag"]
    fences = [b for b in _FENCE.findall(text) if "[" in b]
    if fences:
        return "\n".join(fences), ["no <python> tags", "code fence used"]
    return text, ["no <python> tags"]


def _literal(text: str) -> Any:
    """Parse a literal with json, then ast.literal_eval. Returns None when neither reads it."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def _as_triple(item: Any) -> Triple | None:
    """Three non-empty strings; a longer list of strings keeps its extra items as part of the object."""
    if not isinstance(item, (list, tuple)) or len(item) < 3 or not all(isinstance(p, str) for p in item):
        return None
    parts = [" ".join(part.split()) for part in item]
    if not all(parts[:3]):
        return None
    if len(parts) > 3:
        parts = [parts[0], parts[1], " ".join(p for p in parts[2:] if p)]
    return Triple.from_list(parts)


def _pair_as_triple(item: Any) -> Triple | None:
    """A ``[subject, "predicate phrase"]`` pair as the triple ``[subject, first word, rest]``.

    >>> _pair_as_triple(["Jesper Blomqvist", "helped coach youngsters"]).as_list()
    ['Jesper Blomqvist', 'helped', 'coach youngsters']
    """
    if not isinstance(item, (list, tuple)) or len(item) != 2 or not all(isinstance(p, str) for p in item):
        return None
    subject, predicate = (" ".join(part.split()) for part in item)
    if not subject or not predicate:
        return None
    words = predicate.split(" ", 1)
    return Triple.from_list([subject, words[0], words[1]] if len(words) == 2 else [subject, "is", predicate])


def _flat_triples(value: list[Any]) -> list[Any]:
    """A flat list of 3k strings (``["a", "r", "b", "c", "s", "d"]``) read as k triples; anything else as is."""
    if len(value) > 3 and len(value) % 3 == 0 and all(isinstance(v, str) for v in value):
        return [value[i : i + 3] for i in range(0, len(value), 3)]
    return value


def _collect(items: list[Any], result: ParseResult, pairs: bool) -> None:
    # Pairs count only in an answer with no whole triple: a stray pair among triples is a fragment of one.
    pairs = pairs and not any(_as_triple(item) is not None for item in items)
    seen = {tuple(p.casefold() for p in t.as_list()) for t in result.triples}
    dropped = 0
    for item in items:
        triple = _as_triple(item) or (_pair_as_triple(item) if pairs else None)
        if triple is None:
            dropped += 1
            continue
        key = tuple(p.casefold() for p in triple.as_list())
        if key in seen:
            result.issues.append("duplicate triple removed")
            continue
        seen.add(key)
        result.triples.append(triple)
    if dropped:
        result.issues.append(f"{dropped} malformed item(s) dropped")


def parse_triples(text: str, *, pairs: bool = True) -> ParseResult:
    """Read the triples in a chat model's answer; never raises on a string, never executes code. Items of three or
    more strings, de-duplicated case-insensitively; an answer of ``[subject, predicate]`` pairs only is read pair by
    pair (unless ``pairs=False``), a flat list of 3k strings as k triples.

    >>> [t.as_list() for t in parse_triples('<python>[["Sofia", "revealed she was bullied"]]</python>').triples]
    [['Sofia', 'revealed', 'she was bullied']]
    """
    result = ParseResult()
    if not isinstance(text, str) or not text.strip():
        result.issues.append("empty answer")
        return result
    if len(text) > MAX_ANSWER_CHARS:
        text = text[:MAX_ANSWER_CHARS]
        result.issues.append("answer truncated before parsing")
    body, notes = _candidate_body(text.translate(_SMART))
    result.issues.extend(notes)

    start = body.find("[")
    if start >= 0:
        end = body.rfind("]")
        whole = body[start : end + 1] if end > start else ""
        value = _literal(whole) if whole else None
        if value is None and whole:
            value = _literal(_TRAILING_COMMA.sub(r"\1", whole))
            if value is not None:
                result.issues.append("trailing comma repaired")
        if isinstance(value, (list, tuple)):
            value = _flat_triples(list(value))
            if len(value) >= 2 and all(isinstance(v, str) for v in value):
                value = [value]  # a single bare triple (or pair)
            _collect(list(value), result, pairs)
            if result.triples:
                return result

    # Fallback: read each inner ["a", "b", "c"] on its own (handles truncation, prose, missing outer brackets).
    found = (_literal(f"[{match.group(1)}]") for match in _INNER.finditer(body))
    items = [value for value in found if isinstance(value, list)]
    if items:
        result.issues.append("list recovered item by item")
        _collect(items, result, pairs)
    if not result.triples:
        result.issues.append("no triple could be parsed")
    return result


def parse_single_triple(text: str) -> Triple | None:
    """Read one triple from an answer (GraphCorrect's step 1). The first valid triple, or ``None``.

    >>> parse_single_triple('<triple>["Paris", "capital of", "France"]</triple>').as_list()
    ['Paris', 'capital of', 'France']
    """
    parsed = parse_triples(text, pairs=False)
    return parsed.triples[0] if parsed.triples else None
