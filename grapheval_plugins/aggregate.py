"""Stage 3: pure decision rules over the claims' P(unsupported).

The paper's rule: an output is a hallucination iff some claim's P(unsupported) exceeds the *hallucination
threshold* (0.5): the one threshold concept of the core, ``GraphEval(hallucination_threshold=...)``. The score
reported to host frameworks (1 = faithful) is ``1 − max P(unsupported)``; a host whose threshold is a minimum
score (DeepEval) is translated with :func:`threshold_for_min_score`, so that ``score >= min_score`` is exactly "not a
hallucination" at the translated threshold.

>>> any_above([0.1, 0.7], 0.5)
True
>>> faithfulness_score([0.1, 0.7])
0.30000000000000004
"""

from __future__ import annotations

from collections.abc import Sequence

from .exceptions import InputError

__all__ = ["any_above", "check_threshold", "faithfulness_score", "max_unsupported", "threshold_for_min_score"]

DEFAULT_THRESHOLD = 0.5
"""The paper's hallucination threshold."""


def max_unsupported(p_unsupported: Sequence[float]) -> float:
    """The largest P(unsupported); 0.0 for no claims."""
    return max(p_unsupported, default=0.0)


def any_above(p_unsupported: Sequence[float], threshold: float = 0.5) -> bool:
    """The paper's rule: True iff some claim's P(unsupported) is strictly above ``threshold``."""
    return any(p > threshold for p in p_unsupported)


def faithfulness_score(p_unsupported: Sequence[float]) -> float:
    """``1 − max P(unsupported)``: 1 = every claim supported, 0 = some claim certainly unsupported."""
    return 1.0 - max_unsupported(p_unsupported)


def check_threshold(value: object, field: str = "hallucination_threshold") -> float:
    """A hallucination threshold as a float in [0, 1], or :class:`~grapheval_plugins.InputError` naming ``field``.

    >>> check_threshold(1)
    1.0
    >>> check_threshold(1.5, "threshold")
    Traceback (most recent call last):
    ...
    grapheval_plugins.exceptions.InputError: threshold: must be a number in [0, 1], got 1.5
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise InputError(field, f"must be a number in [0, 1], got {value!r}")
    return float(value)


def threshold_for_min_score(min_score: float) -> float:
    """The hallucination threshold at which "not a hallucination" is exactly ``score >= min_score``.

    ``score = 1 − max P(unsupported)``, so the threshold is ``1 − min_score``, rounded to 12 decimals so that the
    boundary case agrees in floating point too (a claim at P(unsupported) = 0.2 passes a minimum score of 0.8).

    >>> threshold_for_min_score(0.8)
    0.2
    >>> score = faithfulness_score([0.2])
    >>> score >= 0.8, any_above([0.2], threshold_for_min_score(0.8))
    (True, False)
    """
    return round(1.0 - check_threshold(min_score, "threshold"), 12)
