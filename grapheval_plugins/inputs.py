"""Validation of the caller's context and output, with errors that name the field."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Union

from .exceptions import InputError

__all__ = ["ContextLike", "Sample", "normalize_context", "normalize_output", "to_sample"]

ContextLike = Union[str, Sequence[Any]]
"""A grounding context: a string, or a list of strings / LangChain ``Document``s (anything with ``page_content``)."""

PASSAGE_SEPARATOR = "\n\n"


def _passage_text(item: Any, field: str) -> str:
    if isinstance(item, str):
        return item
    content = getattr(item, "page_content", None)
    if isinstance(content, str):
        return content
    if isinstance(item, Mapping) and isinstance(item.get("page_content"), str):
        return str(item["page_content"])
    raise InputError(field, f"expected a string or a Document, got {type(item).__name__}")


def normalize_context(context: Any, field: str = "context") -> str:
    """The context as one string; passages of a list are joined by a blank line.

    Empty passages in a list are skipped; a context with no text at all is an error.

    >>> normalize_context(["First passage.", "", "Second passage."])
    'First passage.\\n\\nSecond passage.'
    >>> normalize_context("   ")
    Traceback (most recent call last):
    ...
    grapheval_plugins.exceptions.InputError: context: is empty
    """
    if context is None:
        raise InputError(field, "is missing (None)")
    if isinstance(context, str):
        text = context
    elif isinstance(context, (bytes, bytearray)):
        raise InputError(field, "expected text, got bytes; decode it first")
    elif isinstance(context, Sequence) or hasattr(context, "__iter__"):
        passages = [_passage_text(item, f"{field}[{i}]") for i, item in enumerate(context)]
        text = PASSAGE_SEPARATOR.join(p.strip() for p in passages if p.strip())
    else:
        text = _passage_text(context, field)
    if not text.strip():
        raise InputError(field, "is empty")
    return text.strip()


def normalize_output(output: Any, field: str = "output") -> str:
    """The output to check, as a stripped non-empty string.

    >>> normalize_output("  An answer. ")
    'An answer.'
    """
    if output is None:
        raise InputError(field, "is missing (None)")
    content = getattr(output, "content", None)  # an AIMessage
    if isinstance(content, str):
        output = content
    if not isinstance(output, str):
        raise InputError(field, f"expected a string, got {type(output).__name__}")
    if not output.strip():
        raise InputError(field, "is empty")
    return output.strip()


@dataclass(frozen=True)
class Sample:
    """A validated ``(context, output)`` pair with an optional id."""

    context: str
    output: str
    id: str | None = None


def to_sample(
    row: Any, index: int, context_key: str = "context", output_key: str = "output", id_key: str = "id"
) -> Sample:
    """Read one row of a batch: a mapping with the given keys, or a ``(context, output)`` pair."""
    where = f"rows[{index}]"
    if isinstance(row, Sample):
        return row
    if isinstance(row, Mapping):
        for key in (context_key, output_key):
            if key not in row:
                raise InputError(f"{where}.{key}", "is missing")
        rid = row.get(id_key)
        return Sample(
            context=normalize_context(row[context_key], f"{where}.{context_key}"),
            output=normalize_output(row[output_key], f"{where}.{output_key}"),
            id=None if rid is None else str(rid),
        )
    if isinstance(row, (tuple, list)) and len(row) == 2:
        return Sample(normalize_context(row[0], f"{where}.context"), normalize_output(row[1], f"{where}.output"))
    raise InputError(where, f"expected a mapping with {context_key!r}/{output_key!r} or a (context, output) pair")
