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

Third-party errors are translated at the boundary where they occur with ``raise ... from``, so the original
traceback stays attached.
"""

from __future__ import annotations

__all__ = [
    "CorrectionError",
    "ExtractionError",
    "GraphEvalError",
    "InputError",
    "MissingDependencyError",
    "ModelLoadError",
    "ScoringError",
    "WeightsIntegrityError",
]


class GraphEvalError(Exception):
    """Root of every error raised by grapheval-plugins."""


class InputError(GraphEvalError, ValueError):
    """The caller passed an unusable value.

    ``field`` names the offending argument (``"context"``, ``"output"``, ``"rows[3].context"`` …).
    """

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


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
