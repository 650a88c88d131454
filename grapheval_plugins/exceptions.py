"""The exceptions grapheval-plugins raises.

Hierarchy::

    GraphEvalError                    root: catch this to catch everything raised here
    ├── InputError (ValueError)       bad context / output given by the caller; names the field
    ├── ExtractionError               the chat model's knowledge-graph answer could not be obtained or parsed
    ├── ScoringError                  a scorer (NLI model, LLM judge) failed on a batch
    ├── CorrectionError               GraphCorrect could not produce or apply a correction
    ├── ModelLoadError                a model name could not be resolved, downloaded, assembled or loaded
    │   └── WeightsIntegrityError     assembled weights do not match the pinned digest
    └── MissingDependencyError (ImportError)
                                      an optional extra is not installed; the message names it
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

__all__ = ["INPUT_ERROR_REASONS", "CorrectionError", "ExtractionError", "GraphEvalError", "InputError",
    "MissingDependencyError", "ModelLoadError", "ScoringError", "WeightsIntegrityError"]


class GraphEvalError(Exception):
    """Root of every error raised by grapheval-plugins."""


INPUT_ERROR_REASONS = ("missing", "empty", "type", "too_long", "invalid")
"""The values of :attr:`InputError.reason`."""


class InputError(GraphEvalError, ValueError):
    """The caller passed an unusable value: ``field`` names it (``"rows[3].context"`` …), ``reason`` says what is
    wrong: ``"missing"`` (``None``), ``"empty"`` (blank), ``"type"``, ``"too_long"`` (over a model's context window)
    or ``"invalid"`` (anything else, the default).

    >>> err = InputError("context", "is empty", reason="empty")
    >>> err.field, err.reason, str(err)
    ('context', 'empty', 'context: is empty')
    """

    default_reason = "invalid"

    def __init__(self, field: str, message: str, *, reason: str | None = None) -> None:
        reason = reason or self.default_reason
        if reason not in INPUT_ERROR_REASONS:
            raise ValueError(f"unknown InputError reason {reason!r}; one of {INPUT_ERROR_REASONS}")
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {message}")

    def __reduce__(self) -> tuple[object, ...]:  # picklable (Ray, multiprocessing), its reason in __dict__
        return type(self), (self.field, str(self).removeprefix(f"{self.field}: ")), self.__dict__


class ExtractionError(GraphEvalError):
    """The knowledge-graph extraction failed (LLM call raised, or no answer could be parsed)."""


class ScoringError(GraphEvalError):
    """A scorer failed while scoring claims against a context."""


class CorrectionError(GraphEvalError):
    """GraphCorrect could not produce or apply a correction."""


class ModelLoadError(GraphEvalError):
    """A model specification could not be resolved or the model could not be loaded."""


class WeightsIntegrityError(ModelLoadError):
    """Assembled model weights do not match their pinned sha256 digest."""


class MissingDependencyError(GraphEvalError, ImportError):
    """An optional dependency is missing. The message says which extra installs it."""

    def __init__(self, package: str, extra: str, purpose: str = "") -> None:
        self.package = package
        self.extra = extra
        what = f" (needed for {purpose})" if purpose else ""
        super().__init__(
            f"The optional dependency {package!r} is not installed{what}. "
            f"Install it with: pip install 'grapheval-plugins[{extra}]'"
        )


def renamed(owner: str, old_name: str, old: Any, new_name: str, new: Any, *, note: str = "",
            same: Callable[[Any, Any], bool] = lambda old, new: bool(old == new), stacklevel: int = 3) -> Any:
    """``new``, or ``old``, given as ``old_name=``, its deprecated old name (warns, at the caller of the function
    calling this for ``stacklevel=3``); :class:`InputError` when both are given and not ``same``."""
    if old is None:
        return new
    warnings.warn(f"{owner}({old_name}=...) is deprecated: pass {new_name}=...{note}", DeprecationWarning,
                  stacklevel=stacklevel)
    if new is not None and not same(old, new):
        raise InputError(old_name, f"give {new_name}= ({old_name}= is its deprecated old name), not both")
    return old
