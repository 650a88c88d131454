"""Stage 3: pure decision rules over the claims' P(unsupported).

The paper's rule: an output is a hallucination iff some claim's P(unsupported) exceeds the threshold (0.5).
The score reported to host frameworks (1 = faithful) is ``1 − max P(unsupported)``, so ``score >= threshold``
is exactly "not a hallucination" at the same threshold.

>>> any_above([0.1, 0.7], 0.5)
True
>>> faithfulness_score([0.1, 0.7])
0.30000000000000004
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["any_above", "faithfulness_score", "max_unsupported"]


def max_unsupported(p_unsupported: Sequence[float]) -> float:
    """The largest P(unsupported); 0.0 for no claims."""
    return max(p_unsupported, default=0.0)


def any_above(p_unsupported: Sequence[float], threshold: float = 0.5) -> bool:
    """The paper's rule: True iff some claim's P(unsupported) is strictly above ``threshold``."""
    return any(p > threshold for p in p_unsupported)


def faithfulness_score(p_unsupported: Sequence[float]) -> float:
    """``1 − max P(unsupported)``: 1 = every claim supported, 0 = some claim certainly unsupported."""
    return 1.0 - max_unsupported(p_unsupported)
