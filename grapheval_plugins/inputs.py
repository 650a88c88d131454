"""Validation of the caller's context and output, with errors that name the field."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Union

from .exceptions import InputError

__all__ = ["PASSAGE_SEPARATOR", "ContextLike", "Sample", "normalize_context", "normalize_output", "normalize_passages", "to_sample"]

ContextLike = Union[str, Any, Sequence[Any]]
"""A string, a ``Document`` (anything with a ``page_content`` string), a mapping with one, or a list of those."""

PASSAGE_SEPARATOR = "\n\n"

_ACCEPTED = "a string, a Document, a mapping with a 'page_content' string, or a list of those"


def _passage_text(item: Any, field: str) -> str:
    if isinstance(item, str):
        return item
    content = getattr(item, "page_content", None)
    if isinstance(content, str):
        return content
    if not isinstance(item, Mapping):
        raise InputError(field, f"expected {_ACCEPTED}; got {type(item).__name__}", reason="type")
    if isinstance(item.get("page_content"), str):
        return str(item["page_content"])
    raise InputError(field, f"a mapping passage needs a 'page_content' string; got keys {sorted(map(str, item))[:5]}")


def normalize_passages(context: Any, field: str = "context") -> tuple[str, ...]:
    """The context's passages (each chunked and scored on its own), stripped, empty ones dropped.

    >>> from langchain_core.documents import Document
    >>> normalize_passages([Document(page_content="First."), {"page_content": "Second."}, "  ", "Third."])
    ('First.', 'Second.', 'Third.')
    >>> normalize_passages({"text": "no page_content"})
    Traceback (most recent call last):
    ...
    grapheval_plugins.exceptions.InputError: context: a mapping passage needs a 'page_content' string; got keys ['text']
    """
    if context is None:
        raise InputError(field, "is missing (None)", reason="missing")
    if isinstance(context, (bytes, bytearray)):
        raise InputError(field, "expected text, got bytes; decode it first", reason="type")
    if isinstance(context, (Sequence, Iterator)) and not isinstance(context, str) and not isinstance(
            getattr(context, "page_content", None), str):
        passages = [_passage_text(item, f"{field}[{i}]") for i, item in enumerate(context)]
    else:
        passages = [_passage_text(context, field)]
    kept = tuple(p.strip() for p in passages if p.strip())
    if not kept:
        raise InputError(field, "is empty", reason="empty")
    return kept


def normalize_context(context: Any, field: str = "context") -> str:
    """The context as one string: its passages (see :func:`normalize_passages`) joined by a blank line.

    >>> normalize_context(["First passage.", "", "Second passage."])
    'First passage.\\n\\nSecond passage.'
    >>> normalize_context("   ")
    Traceback (most recent call last):
    ...
    grapheval_plugins.exceptions.InputError: context: is empty
    """
    return PASSAGE_SEPARATOR.join(normalize_passages(context, field))


def normalize_output(output: Any, field: str = "output") -> str:
    """The output to check, as a stripped non-empty string.

    >>> normalize_output("  An answer. ")
    'An answer.'
    """
    if output is None:
        raise InputError(field, "is missing (None)", reason="missing")
    content = getattr(output, "content", None)  # an AIMessage
    if isinstance(content, str):
        output = content
    if not isinstance(output, str):
        raise InputError(field, f"expected a string, got {type(output).__name__}", reason="type")
    if not output.strip():
        raise InputError(field, "is empty", reason="empty")
    return output.strip()


@dataclass(frozen=True)
class Sample:
    """A validated ``(context, output)`` pair with an optional id; ``context`` is the ``passages`` joined by a blank
    line (a string alone is one passage).

    >>> Sample("A.\\n\\nB.", "out").passages
    ('A.\\n\\nB.',)
    """

    context: str
    output: str
    id: str | None = None
    passages: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.passages:
            object.__setattr__(self, "passages", (self.context,))

    @classmethod
    def of(cls, context: Any, output: Any, id: str | None = None, *, field: str = "context",
           output_field: str = "output") -> Sample:
        """A sample from a raw context (any :data:`ContextLike`) and output, validated."""
        passages = normalize_passages(context, field)
        return cls(PASSAGE_SEPARATOR.join(passages), normalize_output(output, output_field), id, passages)


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
        return Sample.of(row[context_key], row[output_key], None if rid is None else str(rid),
                         field=f"{where}.{context_key}", output_field=f"{where}.{output_key}")
    if isinstance(row, (tuple, list)) and len(row) == 2:
        return Sample.of(row[0], row[1], field=f"{where}.context", output_field=f"{where}.output")
    raise InputError(where, f"expected a mapping with {context_key!r}/{output_key!r} or a (context, output) pair")
